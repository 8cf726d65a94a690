use crate::printer::Printer;
use anyhow::Result;

/// Completion scripts are built in memory first: `clap_complete::generate` panics when
/// stdout is a closed pipe (`| head`).
pub fn script(shell: clap_complete::Shell) -> Vec<u8> {
    use clap::CommandFactory;
    let mut buf = Vec::new();
    clap_complete::generate(
        shell,
        &mut crate::cli::Cli::command(),
        "db-branch",
        &mut buf,
    );
    buf
}

pub fn run(printer: &Printer, shell: clap_complete::Shell) -> Result<()> {
    printer.data(&String::from_utf8_lossy(&script(shell)))
}
