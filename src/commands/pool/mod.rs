//! `pool …`: one file per subcommand.

pub mod claim;
pub mod create;
pub mod delete;
pub mod list;
pub mod recycle;
pub mod release;
pub mod resize;
pub mod run;
pub mod status;

use crate::cli::PoolCommand;
use crate::host::Host;
use anyhow::Result;

pub fn dispatch(host: &Host, command: &PoolCommand) -> Result<()> {
    match command {
        PoolCommand::Create(a) => create::run(host, a),
        PoolCommand::List => list::run(host),
        PoolCommand::Status(a) => status::run(host, a),
        PoolCommand::Resize(a) => resize::run(host, a),
        PoolCommand::Delete(a) => delete::run(host, a),
        PoolCommand::Claim(a) => claim::run(host, a),
        PoolCommand::Release(a) => release::run(host, a),
        PoolCommand::Run(a) => run::run(host, a),
        PoolCommand::Recycle(a) => recycle::run(host, a),
    }
}
