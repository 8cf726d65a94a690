use crate::bake::BakeSource;
use crate::cli::BakeArgs;
use crate::host::Host;
use crate::ops::bake::{bake, BakeOptions};
use crate::view::bake::BakeReport;
use anyhow::Result;
use std::time::Instant;

pub fn run(host: &Host, args: &BakeArgs) -> Result<()> {
    let started = Instant::now();
    // Files named by a user of db-branchd are read only where they could read them.
    for path in [
        args.from.strip_prefix("file:"),
        args.from.strip_prefix("datadir:"),
    ]
    .into_iter()
    .flatten()
    .map(std::path::Path::new)
    .chain(args.mask_sql.as_deref())
    {
        crate::access::check_readable(&host.caller, path)?;
    }
    let opts = BakeOptions {
        source: BakeSource::parse(&args.from, args.via())?.with_password(password(
            host,
            &args.from,
            args.password_file.as_deref(),
            args.ask_password,
        )?)?,
        databases: args.databases.clone(),
        mask_sql: args.mask_sql.clone(),
        verify: args.verify,
        jobs: args.jobs,
        with_users: args.with_users,
        into: args.into.clone(),
    };
    let baked = bake(host, &opts)?;
    host.printer.emit(&BakeReport {
        generation: baked.generation,
        seconds: started.elapsed().as_secs_f64(),
        summary: baked.summary,
    })
}

/// The source's password when it is not in the URL: `--password-file`, `MYSQL_PWD` (for a
/// caller of db-branchd: the file the service put it in), or `--password` at a prompt.
pub fn password(
    host: &Host,
    from: &str,
    password_file: Option<&std::path::Path>,
    ask: bool,
) -> Result<Option<String>> {
    if let Some(file) = password_file {
        let bytes = crate::access::read_as_caller(&host.caller, file).map_err(|e| {
            crate::error::usage(format!(
                "cannot read --password-file {}: {e:#}",
                file.display()
            ))
        })?;
        let text = String::from_utf8_lossy(&bytes);
        return Ok(Some(text.lines().next().unwrap_or_default().to_string()));
    }
    if ask {
        let p = dialoguer::Password::new()
            .with_prompt("Password of the source")
            .allow_empty_password(true)
            .interact()
            .map_err(|e| {
                crate::error::usage(format!("--password: cannot ask on the terminal: {e}"))
            })?;
        return Ok(Some(p));
    }
    let in_url = from
        .split_once("://")
        .and_then(|(_, rest)| rest.split_once('@'))
        .is_some_and(|(creds, _)| creds.contains(':'));
    if !from.starts_with("mysql://") || in_url {
        return Ok(None);
    }
    if let Some(file) = std::env::var_os(crate::service::daemon::SECRET_FILE_ENV) {
        // Handed over by db-branchd (never in the unit's environment): read once, removed.
        let text = std::fs::read_to_string(&file).map_err(|e| {
            crate::error::usage(format!("cannot read the password db-branchd passed: {e}"))
        })?;
        let _ = std::fs::remove_file(&file);
        return Ok(Some(text));
    }
    Ok(std::env::var("MYSQL_PWD").ok())
}
