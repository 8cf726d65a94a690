use crate::cli::ExecArgs;
use crate::handoff::{become_program, branch_variables};
use anyhow::Result;
use std::ffi::OsString;

/// `exec NAME -- CMD…`: CMD with the branch's variables; CMD's exit code is ours.
pub fn run(globals: &[OsString], args: &ExecArgs) -> Result<()> {
    let vars = branch_variables(globals, &args.name)?;
    let (program, rest) = args
        .command
        .split_first()
        .expect("clap requires the command");
    Err(become_program(program, rest, &vars))
}
