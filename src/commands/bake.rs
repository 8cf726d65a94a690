use crate::bake::BakeSource;
use crate::cli::BakeArgs;
use crate::host::Host;
use crate::ops::bake::{bake, BakeOptions};
use crate::view::bake::BakeReport;
use anyhow::Result;
use std::time::Instant;

pub fn run(host: &Host, args: &BakeArgs) -> Result<()> {
    let started = Instant::now();
    let opts = BakeOptions {
        source: BakeSource::parse(&args.from, args.via())?.with_password(password(args)?)?,
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

/// The source's password when it is not in the URL: `--password-file`, else `MYSQL_PWD`
/// (for mysql:// sources without one, as the mysql client reads it).
fn password(args: &BakeArgs) -> Result<Option<String>> {
    if let Some(file) = &args.password_file {
        let text = std::fs::read_to_string(file).map_err(|e| {
            crate::error::usage(format!(
                "cannot read --password-file {}: {e}",
                file.display()
            ))
        })?;
        return Ok(Some(text.lines().next().unwrap_or_default().to_string()));
    }
    let in_url = args
        .from
        .split_once("://")
        .and_then(|(_, rest)| rest.split_once('@'))
        .is_some_and(|(creds, _)| creds.contains(':'));
    Ok(std::env::var("MYSQL_PWD")
        .ok()
        .filter(|_| args.from.starts_with("mysql://") && !in_url))
}
