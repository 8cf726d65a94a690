use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    db_branch::access::enter_caller_directory();
    let cli = db_branch::cli::Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("DB_BRANCH_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let printer = db_branch::printer::Printer::new(cli.json, cli.quiet);
    match db_branch::run(cli, printer.clone()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            let (code, text) = db_branch::report::outcome(&err);
            if !text.is_empty() {
                printer.error(&text);
            }
            ExitCode::from(code)
        }
    }
}
