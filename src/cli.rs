//! Command-line definition (clap types only). Values are parsed into validated types here,
//! so a bad name or size is refused before anything happens.

use crate::branch::{BranchName, Generation, Label};
use crate::values::{ByteSize, Duration, Timestamp};
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
    /// Run the command on another host over ssh, with the same output and exit code (its
    /// db-branch runs as fleet.remote_command; paths in arguments are that host's)
    #[arg(
        long,
        global = true,
        env = "DB_BRANCH_HOST",
        value_name = "ssh://[USER@]HOST[:PORT]"
    )]
    pub host: Option<crate::transfer::endpoint::SshTarget>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Prepare this host: the storage pool (embedded image or btrfs.path) and the units
    Init(InitArgs),
    /// Manage baselines: read-only generations that branches are cloned from
    #[command(subcommand)]
    Baseline(BaselineCommand),
    /// Create a branch (idempotent: an existing branch is started and reported)
    Create(CreateArgs),
    /// Throw away a branch's changes: SIGKILL, roll back to its clean snapshot, start
    Reset(ResetArgs),
    /// Delete a branch and its data (asks first; --yes without a terminal)
    Delete(DeleteArgs),
    /// Start a stopped branch's server
    Start(NameArg),
    /// Stop a branch's server gracefully; its data is kept
    Stop(NameArg),
    /// List branches with state, port, baseline, disk and memory use
    List(ListArgs),
    /// Show one branch in detail
    Status(NameArg),
    /// Print a branch's connection details
    Env(EnvArgs),
    /// Run a command with a branch's connection variables (those of `env`) set; exits
    /// with the command's exit code
    Exec(ExecArgs),
    /// Open the server's own client (mysql or mariadb) on a branch; its password goes in
    /// a private option file, never on the command line
    Shell(ShellArgs),
    /// Check this host (root, tools, server, service manager, pool, memory, ports) and find
    /// what crashes left behind; --repair removes it
    Doctor(DoctorArgs),
    /// Stop the servers of branches idle for a while; their data is kept
    StopIdle(StopIdleArgs),
    /// Delete expired branches (and, with selectors, old or idle ones); never protected ones
    Gc(GcArgs),
    /// Set a branch's expiry anew
    Extend(ExtendArgs),
    /// Protect a branch from delete (without --force) and gc
    Protect(ProtectArgs),
    /// Remove a branch's protection
    Unprotect(NameArg),
    /// Run migrations on a full-size branch and report what each statement costs
    MigrateCheck(MigrateCheckArgs),
    /// Build a new baseline generation from a live server, a SQL dump or a datadir
    Bake(BakeArgs),
    /// Pools of pristine branches that parallel test workers claim in milliseconds
    #[command(subcommand)]
    Pool(PoolCommand),
    /// Take a read-only snapshot of a branch to reset to (`reset NAME --to TAG`);
    /// `checkpoint delete NAME TAG` removes one
    Checkpoint(CheckpointArgs),
    /// List a branch's checkpoints with their age and own disk use
    Checkpoints(NameArg),
    /// List deleted branches kept for `restore` (lifecycle.keep_deleted); `trash purge`
    /// destroys them for good
    Trash(TrashArgs),
    /// Bring a deleted branch back from the trash: its data, checkpoints, password and
    /// (when free) port, so its connection string is the same; then start it
    Restore(RestoreArgs),
    /// Print the host's figures in the Prometheus text format (branches by state, owner and
    /// pool; memory the guard counts; pool slots; the trash; baselines; create, reset and
    /// claim latency; gc's and stop-idle's last runs), write them for node_exporter's
    /// textfile collector, or serve them to Prometheus
    Metrics(MetricsArgs),
    /// Compare two branches, checkpoints or generations: schema (tables, columns, indexes,
    /// foreign keys, views, routines, triggers, events), with --data row counts and
    /// checksums; exit 1 when they differ
    Diff(DiffArgs),
    /// Print a shell completion script
    Completions {
        /// bash, zsh, fish, elvish or powershell
        shell: clap_complete::Shell,
    },
    /// Serve io.dbbranch.Manager1 on the system bus for users without root (what
    /// db-branchd.service runs; see docs/security.md)
    #[command(hide = true)]
    Daemon,
}

impl Command {
    /// The command's name as people type it (`create`, `baseline create`), for lock notes.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Init(_) => "init",
            Command::Baseline(b) => match b {
                BaselineCommand::Create(_) => "baseline create",
                BaselineCommand::List => "baseline list",
                BaselineCommand::Prune => "baseline prune",
                BaselineCommand::Push(_) => "baseline push",
                BaselineCommand::Pull(_) => "baseline pull",
                BaselineCommand::Receive(_) => "baseline receive",
                BaselineCommand::Send(_) => "baseline send",
                BaselineCommand::Follow(_) => "baseline follow",
                BaselineCommand::Cut(_) => "baseline cut",
                BaselineCommand::Follower => "baseline follower",
                BaselineCommand::Unfollow => "baseline unfollow",
            },
            Command::Create(_) => "create",
            Command::Reset(_) => "reset",
            Command::Delete(_) => "delete",
            Command::Start(_) => "start",
            Command::Stop(_) => "stop",
            Command::List(_) => "list",
            Command::Status(_) => "status",
            Command::Env(_) => "env",
            Command::Exec(_) => "exec",
            Command::Shell(_) => "shell",
            Command::Doctor(_) => "doctor",
            Command::StopIdle(_) => "stop-idle",
            Command::Gc(_) => "gc",
            Command::Extend(_) => "extend",
            Command::Protect(_) => "protect",
            Command::Unprotect(_) => "unprotect",
            Command::MigrateCheck(_) => "migrate-check",
            Command::Bake(_) => "bake",
            Command::Pool(p) => match p {
                PoolCommand::Create(_) => "pool create",
                PoolCommand::List => "pool list",
                PoolCommand::Status(_) => "pool status",
                PoolCommand::Resize(_) => "pool resize",
                PoolCommand::Delete(_) => "pool delete",
                PoolCommand::Claim(_) => "pool claim",
                PoolCommand::Release(_) => "pool release",
                PoolCommand::Run(_) => "pool run",
                PoolCommand::Recycle(_) => "pool recycle",
            },
            Command::Checkpoint(_) => "checkpoint",
            Command::Checkpoints(_) => "checkpoints",
            Command::Trash(a) => match a.command {
                Some(TrashCommand::Purge(_)) => "trash purge",
                None => "trash",
            },
            Command::Restore(_) => "restore",
            Command::Metrics(_) => "metrics",
            Command::Diff(_) => "diff",
            Command::Completions { .. } => "completions",
            Command::Daemon => "daemon",
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum BaselineCommand {
    /// Build a new baseline generation
    Create(BaselineCreateArgs),
    /// List baseline generations and how many branches use each
    List,
    /// Remove generations no branch uses (the newest is always kept)
    Prune,
    /// Send a generation (default: the newest) to another host or a stream directory, as
    /// an increment on the newest generation both hold, else in full
    Push(BaselinePushArgs),
    /// Fetch a generation (default: the newest there) from another host or a stream
    /// directory, as an increment on what this host holds, else in full
    Pull(BaselinePullArgs),
    /// Take a generation's stream on stdin and keep it once verified (what `push` runs on
    /// the far side)
    #[command(hide = true)]
    Receive(BaselineReceiveArgs),
    /// Write a generation's stream to stdout (what `pull` runs on the far side)
    #[command(hide = true)]
    Send(BaselineSendArgs),
    /// Follow a primary by replication: seed a follower from it at a GTID position (the
    /// fastest bake path that applies), then keep it replicating; `baseline cut` makes
    /// masked generations of it
    Follow(BaselineFollowArgs),
    /// The follower's data now as the next generation: its applier paused for a snapshot,
    /// then recovered, masked and sealed off the critical path
    Cut(BaselineCutArgs),
    /// Show what is followed: the follower's replication threads, lag, position and last
    /// error, and the last cut
    Follower,
    /// Stop following and destroy the follower (generations already cut stay; asks first)
    Unfollow,
}

#[derive(Debug, Args)]
pub struct BaselineFollowArgs {
    /// mysql://user[:pass]@host:port of the primary (or a replica) to follow: binary log on,
    /// and on MySQL gtid_mode = ON. The user needs REPLICATION SLAVE and REPLICATION CLIENT
    /// beside what `bake` reads with (SELECT, RELOAD, LOCK TABLES, SHOW VIEW)
    #[arg(value_name = "SOURCE")]
    pub source: String,
    /// The follower's branch name
    #[arg(long, default_value = "follower", value_name = "NAME")]
    pub name: BranchName,
    /// SQL every cut runs on its copy before sealing it: the place for PII masking. Read
    /// now and kept (cuts run what it held then); given again, the new text is kept
    #[arg(long, value_name = "FILE")]
    pub mask_sql: Option<PathBuf>,
    /// Cuts run no masking SQL: the source holds nothing to mask
    #[arg(long, conflicts_with = "mask_sql")]
    pub no_mask: bool,
    /// Also cut on a timer this often, e.g. 6h (systemd; without it run `baseline cut`
    /// from cron). Given again, only the schedule changes
    #[arg(long, value_name = "DURATION")]
    pub every: Option<crate::values::Duration>,
    /// Parallel readers of the seed's bake [default: the number of CPUs]
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
    /// Read the source's password from this file (its first line) instead of the URL;
    /// `MYSQL_PWD` works too
    #[arg(long, value_name = "FILE")]
    pub password_file: Option<PathBuf>,
    /// Ask for the source's password on the terminal
    #[arg(short = 'p', long = "password", conflicts_with = "password_file")]
    pub ask_password: bool,
}

#[derive(Debug, Args)]
pub struct BaselineCutArgs {
    /// Run this masking SQL instead of the one `baseline follow` was given
    #[arg(long, value_name = "FILE")]
    pub mask_sql: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct BaselinePushArgs {
    /// ssh://[USER@]HOST[:PORT] (its db-branch receives) or file:DIR (stream files and a
    /// manifest, e.g. on a shared mount)
    #[arg(value_name = "DEST")]
    pub dest: crate::transfer::endpoint::Endpoint,
    /// The generation (3 or gen-000003); default: the newest
    #[arg(value_name = "GEN")]
    pub generation: Option<Generation>,
    /// Send a file-level copy of its datadir (compressed) instead of a send stream: for a
    /// stream directory that hosts of the other backend pull from (a push to a host of the
    /// other backend does this by itself)
    #[arg(long)]
    pub as_files: bool,
}

#[derive(Debug, Args)]
pub struct BaselineReceiveArgs {
    /// Only say which stream format this host's pool receives
    #[arg(long)]
    pub probe: bool,
}

#[derive(Debug, Args)]
pub struct BaselinePullArgs {
    /// ssh://[USER@]HOST[:PORT] or file:DIR
    #[arg(value_name = "SRC")]
    pub src: crate::transfer::endpoint::Endpoint,
    /// The generation (3 or gen-000003); default: the newest there
    #[arg(value_name = "GEN")]
    pub generation: Option<Generation>,
}

#[derive(Debug, Args)]
pub struct BaselineSendArgs {
    pub generation: Generation,
    /// Send it as an increment on this generation
    #[arg(long, conflicts_with = "as_files")]
    pub parent: Option<Generation>,
    /// Send a file-level copy
    #[arg(long)]
    pub as_files: bool,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["empty", "from_datadir", "from_branch"])))]
#[command(
    override_usage = "db-branch baseline create --empty [OPTIONS]\n       \
    db-branch baseline create --from-datadir <DIR> [OPTIONS]\n       \
    db-branch baseline create --from-branch <BRANCH> [OPTIONS]"
)]
pub struct BaselineCreateArgs {
    /// Start from the server's own initialiser (an empty server)
    #[arg(long)]
    pub empty: bool,
    /// Copy a datadir that was shut down cleanly
    #[arg(long, value_name = "DIR")]
    pub from_datadir: Option<PathBuf>,
    /// Promote a branch: its data as the next generation, without a copy (its server is
    /// stopped cleanly for the snapshot and started again); --sql runs on the copy only
    #[arg(long, value_name = "BRANCH")]
    pub from_branch: Option<BranchName>,
    /// SQL file to run before the baseline is frozen (seed data, masking); repeatable
    #[arg(long = "sql", value_name = "FILE")]
    pub sql: Vec<PathBuf>,
}

#[derive(Debug, Args, Default)]
pub struct DoctorArgs {
    /// Remove orphans: half-made branches, snapshots or servers without a record, records
    /// without storage, stale memory reservations and unfinished baselines
    #[arg(long)]
    pub repair: bool,
}

#[derive(Debug, Args, Default)]
pub struct InitArgs {
    /// Also enable and start the stop-idle and gc timers (systemd)
    #[arg(long)]
    pub enable_timers: bool,
}

#[derive(Debug, Args, Clone, Default)]
#[group(multiple = false)]
pub struct Expiry {
    /// Expire this long from now (gc deletes expired branches), e.g. 7d
    #[arg(long, value_name = "DURATION")]
    pub ttl: Option<Duration>,
    /// Expire at this time (UTC), e.g. 2026-12-24T18:00:00Z
    #[arg(long, value_name = "TIME")]
    pub expires_at: Option<Timestamp>,
}

impl Expiry {
    /// What the flags ask for.
    pub fn request(&self) -> crate::branch::ExpiryRequest {
        use crate::branch::ExpiryRequest;
        match (self.ttl, self.expires_at) {
            (_, Some(t)) => ExpiryRequest::At(t.0),
            (Some(d), None) => ExpiryRequest::Ttl(d),
            (None, None) => ExpiryRequest::Unset,
        }
    }
}

/// A buffer pool size InnoDB accepts (the same floor as `mysqld.buffer_pool`).
fn buffer_pool(s: &str) -> Result<ByteSize, String> {
    let size: ByteSize = s.parse()?;
    crate::config::check_buffer_pool(size).map_err(|e| e.replace("mysqld.buffer_pool = ", ""))?;
    Ok(size)
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    /// Branch name: lowercase letters, digits, '-', '_', '.'
    pub name: BranchName,
    /// Baseline generation to clone [default: the newest]
    #[arg(long, value_name = "GEN")]
    pub baseline: Option<Generation>,
    /// InnoDB buffer pool for this branch [default: mysqld.buffer_pool]
    #[arg(long, value_name = "SIZE", value_parser = buffer_pool)]
    pub buffer_pool: Option<ByteSize>,
    #[command(flatten)]
    pub expiry: Expiry,
    /// A label, e.g. pr=123 (repeatable)
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub labels: Vec<Label>,
    /// Owner [default: the invoking user, the sudo caller under sudo]
    #[arg(long, value_name = "NAME")]
    pub owner: Option<String>,
    /// Server profile [default: mysqld.profile]: test (fast) or durable (crash-safe)
    #[arg(long, value_enum)]
    pub profile: Option<crate::config::Profile>,
    /// Make it from another branch as it is now (BRANCH), or from one of its checkpoints
    /// (BRANCH@TAG), instead of a baseline. A running source keeps serving: the copy is
    /// crash-consistent and the new branch starts with InnoDB crash recovery
    #[arg(long, value_name = "BRANCH[@TAG]", conflicts_with = "baseline")]
    pub from: Option<crate::branch::BranchRef>,
    /// With --from: stop the source briefly for a clean copy (no crash recovery), then
    /// start it again
    #[arg(long, requires = "from")]
    pub clean: bool,
    /// The application database clients are pointed at (DATABASE_URL's path,
    /// DB_DATABASE) [default: client.database, else the baseline's only database]
    #[arg(long, value_name = "NAME")]
    pub database: Option<crate::branch::DatabaseName>,
}

#[derive(Debug, Args)]
pub struct ResetArgs {
    /// Branch name
    pub name: BranchName,
    /// Also set the expiry to this long from now (keeps the old one otherwise)
    #[arg(long, value_name = "DURATION")]
    pub ttl: Option<Duration>,
    /// Back to this checkpoint (see `checkpoints NAME`) instead of the branch's start
    #[arg(long, value_name = "TAG")]
    pub to: Option<crate::branch::CheckpointTag>,
    /// Keep the state being thrown away as checkpoint `before-reset-N` (for
    /// lifecycle.keep_deleted; `reset NAME --to before-reset-N` brings it back)
    /// [default: lifecycle.keep_before_reset]
    #[arg(long, overrides_with = "no_keep")]
    pub keep: bool,
    /// Do not keep it, whatever lifecycle.keep_before_reset says
    #[arg(long, overrides_with = "keep")]
    pub no_keep: bool,
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct CheckpointArgs {
    #[command(subcommand)]
    pub command: Option<CheckpointCommand>,
    /// Branch name
    #[arg(required = true)]
    pub name: Option<BranchName>,
    /// Tag of the checkpoint [default: c1, c2, … the next free one]
    pub tag: Option<crate::branch::CheckpointTag>,
    /// Stop the server briefly for a clean snapshot (a reset to it needs no crash
    /// recovery), then start it again [default: crash-consistent, no downtime]
    #[arg(long)]
    pub clean: bool,
}

#[derive(Debug, Subcommand)]
pub enum CheckpointCommand {
    /// Delete a checkpoint
    Delete {
        /// Branch name
        name: BranchName,
        /// Tag of the checkpoint
        tag: crate::branch::CheckpointTag,
    },
}

#[derive(Debug, Args)]
pub struct TrashArgs {
    #[command(subcommand)]
    pub command: Option<TrashCommand>,
}

#[derive(Debug, Subcommand)]
pub enum TrashCommand {
    /// Destroy trash entries for good (asks first; --yes without a terminal)
    Purge(TrashPurgeArgs),
}

#[derive(Debug, Args)]
pub struct TrashPurgeArgs {
    /// A branch name (all its entries) or one entry's id (`db-branch trash` shows both)
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub what: Option<String>,
    /// Every entry (an admin's: all of them; a user's: all of theirs)
    #[arg(long)]
    pub all: bool,
}

#[derive(Debug, Args)]
pub struct MetricsArgs {
    /// Serve the figures over HTTP at /metrics on ADDR until stopped, for Prometheus to
    /// scrape (without ADDR: `metrics.listen`, loopback by default); root only
    #[arg(long, value_name = "ADDR", num_args = 0..=1, conflicts_with = "textfile")]
    pub listen: Option<Option<std::net::SocketAddr>>,
    /// Write them to PATH (a `.prom` file in node_exporter's textfile directory), replacing
    /// it whole so the collector never reads half of it; root only
    #[arg(long, value_name = "PATH")]
    pub textfile: Option<std::path::PathBuf>,
}

#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The deleted branch's name (its newest entry), or an entry's id from `db-branch trash`
    pub what: String,
    /// Restore it under this name instead (the old one is taken, or both are wanted)
    #[arg(long = "as", value_name = "NAME")]
    pub as_name: Option<BranchName>,
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// A branch, BRANCH@TAG (a checkpoint) or gen-N (a baseline generation)
    pub a: String,
    /// The other one
    pub b: String,
    /// Also compare every table's row count and checksum
    #[arg(long)]
    pub data: bool,
}

#[derive(Debug, Args)]
pub struct DeleteArgs {
    /// Branch name
    pub name: BranchName,
    /// Delete even a protected branch
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args, Default)]
pub struct ListArgs {
    /// Only branches with this label (repeatable: all must match)
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub labels: Vec<Label>,
    /// Show lineage: each baseline generation with the branches made from it, and the
    /// branches made from those
    #[arg(long)]
    pub tree: bool,
}

#[derive(Debug, Args, Default)]
pub struct StopIdleArgs {
    /// Idle threshold [default: lifecycle.stop_idle_after]
    #[arg(long, value_name = "DURATION")]
    pub idle_for: Option<Duration>,
    /// Say what would be stopped, stop nothing
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Args, Default)]
pub struct GcArgs {
    /// Say what would be deleted, delete nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Also delete branches created longer ago than this
    #[arg(long, value_name = "DURATION")]
    pub older_than: Option<Duration>,
    /// Also delete branches without client activity for this long
    #[arg(long, value_name = "DURATION")]
    pub idle_for: Option<Duration>,
    /// Only branches with this label (repeatable: all must match)
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub labels: Vec<Label>,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("when").required(true).args(["ttl", "expires_at"])))]
pub struct ExtendArgs {
    /// Branch name
    pub name: BranchName,
    #[command(flatten)]
    pub expiry: Expiry,
}

#[derive(Debug, Args)]
pub struct ProtectArgs {
    /// Branch name
    pub name: BranchName,
    /// Protection lapses after this long [default: until unprotect]
    #[arg(long = "for", value_name = "DURATION")]
    pub duration: Option<Duration>,
}

#[derive(Debug, Args)]
pub struct NameArg {
    /// Branch name
    pub name: BranchName,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum EnvFormat {
    /// `export KEY=value` lines for `eval "$(db-branch env NAME)"` or `source`
    Shell,
    /// KEY=value lines for a CI step's env file or a .env file
    Dotenv,
    /// A JSON object
    Json,
    /// Just the mysql:// URL
    Url,
    /// A Connector/J URL (jdbc:mysql://…, user and password as properties)
    Jdbc,
    /// A go-sql-driver/mysql DSN for database/sql (user:pass@tcp(host:port)/db)
    Go,
    /// An option file for the mysql/mariadb clients (--defaults-file); MySQL 8+'s client
    /// ignores MYSQL_PWD
    Mycnf,
    /// A Laravel .env block (DB_CONNECTION, DB_HOST, … DB_PASSWORD)
    Laravel,
    /// DATABASE_URL as Rails reads it (mysql2://…)
    Rails,
    /// An SQLAlchemy URL for PyMySQL (mysql+pymysql://…)
    Sqlalchemy,
}

#[derive(Debug, Args)]
pub struct EnvArgs {
    /// Branch name
    pub name: BranchName,
    #[arg(long, value_enum, default_value_t = EnvFormat::Shell)]
    pub format: EnvFormat,
}

#[derive(Debug, Args)]
pub struct ExecArgs {
    /// Branch name
    pub name: BranchName,
    /// The command and its arguments, after `--`
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<std::ffi::OsString>,
}

#[derive(Debug, Args)]
pub struct ShellArgs {
    /// Branch name
    pub name: BranchName,
    /// Arguments for the client, after `--` (e.g. -e 'SHOW TABLES')
    #[arg(last = true, value_name = "ARGS")]
    pub args: Vec<std::ffi::OsString>,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum ReportFormat {
    /// A table for people
    Table,
    /// JSON for scripts (same as --json)
    Json,
    /// Markdown, ready to paste into a pull-request comment
    Markdown,
}

#[derive(Debug, Args)]
pub struct MigrateCheckArgs {
    /// Use this branch: created (and deleted afterwards unless --keep) if it does not exist,
    /// reset first if it does (and then kept) [default: a throw-away branch]
    #[arg(long, value_name = "NAME")]
    pub branch: Option<BranchName>,
    /// Baseline generation for a branch made for the check [default: the newest]
    #[arg(long, value_name = "GEN")]
    pub baseline: Option<Generation>,
    /// Fail when a statement runs longer than this, e.g. 5s
    #[arg(long, value_name = "DURATION")]
    pub max_statement: Option<Duration>,
    /// Fail when a statement holds or waits for table locks longer than this
    #[arg(long, value_name = "DURATION")]
    pub max_lock: Option<Duration>,
    #[arg(long, value_enum, default_value_t = ReportFormat::Table)]
    pub format: ReportFormat,
    /// Keep the branch afterwards
    #[arg(long)]
    pub keep: bool,
    /// The migration command, after `--`, with the branch's connection details in its
    /// environment (DATABASE_URL, MYSQL_HOST, MYSQL_PORT, …)
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct BakeArgs {
    /// mysql://user:pass@host:port (a running server), file:PATH (a SQL dump, plain, .gz or
    /// .zst) or datadir:PATH (a cleanly shut down datadir)
    #[arg(long, value_name = "SOURCE")]
    pub from: String,
    /// Only these databases (comma-separated) [default: every user database]
    #[arg(long, value_delimiter = ',', value_name = "DB,…")]
    pub databases: Vec<String>,
    /// SQL run against the baked copy before it is frozen: the place for PII masking
    #[arg(long, value_name = "FILE")]
    pub mask_sql: Option<PathBuf>,
    /// Compare every table with the source (CHECKSUM TABLE, or row counts) and fail on a
    /// difference (mysql:// sources)
    #[arg(long)]
    pub verify: bool,
    /// Parallel readers and index builders [default: the number of CPUs]
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
    /// Copy rows even when the server's table files could be imported (mysql:// sources);
    /// the same as --via logical
    #[arg(long, conflicts_with = "via")]
    pub logical: bool,
    /// How rows come from a mysql:// source: clone (MySQL's CLONE INSTANCE), tablespace
    /// (its table files, on this host) or logical (parallel row copy) [default: the fastest
    /// that applies, said in the summary]
    #[arg(long, value_enum, value_name = "PATH")]
    pub via: Option<crate::bake::Via>,
    /// Keep the source's accounts and their grants in the baseline [default: none are
    /// carried; branches have their own]
    #[arg(long)]
    pub with_users: bool,
    /// Read the mysql:// source's password from this file (its first line) instead of the
    /// URL, where `ps` would show it; `MYSQL_PWD` works too
    #[arg(long, value_name = "FILE")]
    pub password_file: Option<PathBuf>,
    /// Ask for the mysql:// source's password on the terminal (like `mysql -p`)
    #[arg(short = 'p', long = "password", conflicts_with = "password_file")]
    pub ask_password: bool,
    /// The database a single-database dump (one with no `CREATE DATABASE`/`USE`, as
    /// `mysqldump DB > file` writes) is loaded into (file: sources)
    #[arg(long, value_name = "DB")]
    pub into: Option<String>,
}

impl BakeArgs {
    /// `--via`, or `--logical`'s older spelling of it.
    pub fn via(&self) -> Option<crate::bake::Via> {
        if self.logical {
            Some(crate::bake::Via::Logical)
        } else {
            self.via
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum PoolCommand {
    /// Make a pool of ready branches (idempotent; slots the memory guard refuses are
    /// reported)
    Create(PoolCreateArgs),
    /// List pools: slots ready, claimed and being recycled
    List,
    /// Show a pool's slots and who holds the claimed ones
    Status(PoolNameArg),
    /// Change a pool's number of slots
    Resize(PoolResizeArgs),
    /// Delete a pool and every slot, claimed ones too (asks first; --yes without a terminal)
    Delete(PoolNameArg),
    /// Claim a pristine slot and print its connection details; it is yours until you
    /// release it or the claiming process exits
    Claim(PoolClaimArgs),
    /// Give a claimed slot back: it is reset in the background and ready again
    Release(PoolReleaseArgs),
    /// Claim a slot, run COMMAND with its connection details in the environment, release
    /// it; exits with COMMAND's status
    Run(PoolRunArgs),
    /// Run a pool's recycler (started by the other pool commands when none runs)
    #[command(hide = true)]
    Recycle(PoolNameArg),
}

#[derive(Debug, Args)]
pub struct PoolNameArg {
    /// Pool name
    pub name: crate::names::PoolName,
}

#[derive(Debug, Args)]
pub struct PoolCreateArgs {
    /// Pool name (its slots are branches NAME-1, NAME-2, …)
    pub name: crate::names::PoolName,
    /// Number of slots
    #[arg(long, value_name = "N")]
    pub size: usize,
    /// Baseline generation of every slot [default: the newest when each slot is made]
    #[arg(long, value_name = "GEN")]
    pub baseline: Option<Generation>,
    /// InnoDB buffer pool of each slot [default: mysqld.buffer_pool]
    #[arg(long, value_name = "SIZE", value_parser = buffer_pool)]
    pub buffer_pool: Option<ByteSize>,
    /// test (fast, the default) or durable
    #[arg(long, value_enum)]
    pub profile: Option<crate::config::Profile>,
    /// Dense slots: each a copy of the generation's application database, with an account
    /// of its own, inside servers shared by --per-server slots (branches NAME-s1, NAME-s2, …)
    #[arg(long)]
    pub dense: bool,
    /// Slots per server of a dense pool [default: 16]
    #[arg(long, value_name = "K", requires = "dense")]
    pub per_server: Option<usize>,
}

#[derive(Debug, Args)]
pub struct PoolResizeArgs {
    /// Pool name
    pub name: crate::names::PoolName,
    /// The new number of slots
    #[arg(long, value_name = "N")]
    pub size: usize,
}

#[derive(Debug, Args)]
pub struct PoolClaimArgs {
    /// Pool name
    pub name: crate::names::PoolName,
    /// Wait this long for a slot when none is ready [default: do not wait; exit 75]
    #[arg(long, value_name = "DURATION")]
    pub wait: Option<Duration>,
    /// The process whose exit ends the claim [default: the one that ran this command]
    #[arg(long, value_name = "PID")]
    pub pid: Option<u32>,
    /// How to print the connection details
    #[arg(long, value_enum, default_value_t = EnvFormat::Shell)]
    pub format: EnvFormat,
}

#[derive(Debug, Args)]
pub struct PoolReleaseArgs {
    /// Pool name
    pub name: crate::names::PoolName,
    /// The slot number `claim` printed (DB_BRANCH_POOL_SLOT)
    pub slot: usize,
}

#[derive(Debug, Args)]
pub struct PoolRunArgs {
    /// Pool name
    pub name: crate::names::PoolName,
    /// Wait this long for a slot when none is ready [default: do not wait; exit 75]
    #[arg(long, value_name = "DURATION")]
    pub wait: Option<Duration>,
    /// The command, after `--`, with the slot's connection details in its environment
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}
