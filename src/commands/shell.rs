use crate::cli::ShellArgs;
use crate::commands::env::{mycnf, Target};
use crate::handoff::{become_program, branch_variables, private_file};
use anyhow::Result;
use std::ffi::OsString;
use std::path::Path;

/// `shell NAME [-- ARGS]`: the server's own client on the branch, its login in an option
/// file only it reads (`--defaults-file`, so no other option file overrides the branch's
/// login), never in argv or the environment.
pub fn run(globals: &[OsString], args: &ShellArgs) -> Result<()> {
    let vars = branch_variables(globals, &args.name)?;
    let get = |key: &str| vars.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
    let options = mycnf(&Target::from_lookup(get), args.name.as_str());
    let (_fd, path) = private_file(&options)?;
    let program = client_program(get("DB_BRANCH_CLIENT").as_deref());
    let mut argv: Vec<OsString> = vec![format!("--defaults-file={path}").into()];
    argv.extend(args.args.iter().cloned());
    // None of the variables: several carry the password (DATABASE_URL, MYSQL_PWD), and
    // the option file says all the client needs.
    let keep = [("DB_BRANCH_NAME".to_string(), args.name.to_string())];
    Err(become_program(program.as_os_str(), &argv, &keep))
}

/// The branch's host names its server's client; from another host (`--host`) that path
/// may not exist here, and the client of the same name on PATH serves.
fn client_program(named: Option<&str>) -> std::path::PathBuf {
    match named {
        Some(p) if Path::new(p).is_file() => p.into(),
        Some(p) => Path::new(p)
            .file_name()
            .map_or_else(|| "mysql".into(), Into::into),
        None => "mysql".into(),
    }
}
