//! Command-line definition (clap types only). Values are parsed into validated types here,
//! so a bad name or size is refused before anything happens.

use crate::branch::{BranchName, Generation};
use crate::values::ByteSize;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "db-branch",
    version,
    about = "A real MySQL/MariaDB server per developer, branch and pull request, \
             cloned in about a second from a copy-on-write baseline.",
    max_term_width = 80,
    after_help = "Exit codes: 0 ok, 1 failure, 2 usage error, 75 refused (not enough memory, \
                  or another db-branch holds a lock)."
)]
pub struct Cli {
    /// Config file [default: $DB_BRANCH_CONFIG, else /etc/db-branch/config.toml]
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Print results as JSON on stdout
    #[arg(long, global = true)]
    pub json: bool,
    /// Do not ask for confirmation before destroying data
    #[arg(short = 'y', long, global = true)]
    pub yes: bool,
    /// Print only errors and requested data
    #[arg(short, long, global = true)]
    pub quiet: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Prepare this host: the storage pool (embedded image or btrfs.path) and the unit template
    Init,
    /// Manage baselines: read-only generations that branches are cloned from
    #[command(subcommand)]
    Baseline(BaselineCommand),
    /// Create a branch (idempotent: an existing branch is started and reported)
    Create(CreateArgs),
    /// Throw away a branch's changes: SIGKILL, roll back to its clean snapshot, start
    Reset(NameArg),
    /// Delete a branch and its data (asks first; --yes without a terminal)
    Delete(NameArg),
    /// Start a stopped branch's server
    Start(NameArg),
    /// Stop a branch's server gracefully; its data is kept
    Stop(NameArg),
    /// List branches with state, port, baseline, disk and memory use
    List,
    /// Show one branch in detail
    Status(NameArg),
    /// Print a branch's connection details
    Env(EnvArgs),
    /// Check this host: root, tools, server, service manager, pool, memory, ports
    Doctor,
    /// Print a shell completion script
    Completions {
        /// bash, zsh, fish, elvish or powershell
        shell: clap_complete::Shell,
    },
}

#[derive(Debug, Subcommand)]
pub enum BaselineCommand {
    /// Build a new baseline generation
    Create(BaselineCreateArgs),
    /// List baseline generations
    List,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["empty", "from_datadir"])))]
pub struct BaselineCreateArgs {
    /// Start from the server's own initialiser (an empty server)
    #[arg(long)]
    pub empty: bool,
    /// Copy a datadir that was shut down cleanly
    #[arg(long, value_name = "DIR")]
    pub from_datadir: Option<PathBuf>,
    /// SQL file to run before the baseline is frozen (seed data, masking); repeatable
    #[arg(long = "sql", value_name = "FILE")]
    pub sql: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    /// Branch name: lowercase letters, digits, '-', '_', '.'
    pub name: BranchName,
    /// Baseline generation to clone [default: the newest]
    #[arg(long, value_name = "GEN")]
    pub baseline: Option<Generation>,
    /// InnoDB buffer pool for this branch [default: mysqld.buffer_pool]
    #[arg(long, value_name = "SIZE")]
    pub buffer_pool: Option<ByteSize>,
}

#[derive(Debug, Args)]
pub struct NameArg {
    /// Branch name
    pub name: BranchName,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum EnvFormat {
    /// KEY=value lines for `source` or a CI step's env file
    Dotenv,
    /// A JSON object
    Json,
    /// Just the mysql:// URL
    Url,
}

#[derive(Debug, Args)]
pub struct EnvArgs {
    /// Branch name
    pub name: BranchName,
    #[arg(long, value_enum, default_value_t = EnvFormat::Dotenv)]
    pub format: EnvFormat,
}
