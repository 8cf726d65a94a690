use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = db_branch::cli::Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("DB_BRANCH_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    match db_branch::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("db-branch: error: {err:#}");
            db_branch::error::to_exit_code(db_branch::error::exit_code(&err))
        }
    }
}
