use crate::cli::ProtectArgs;
use crate::host::Host;
use crate::ops::branch::expiry::protect;
use anyhow::Result;

pub fn run(host: &Host, args: &ProtectArgs) -> Result<()> {
    let record = protect(host, &args.name, args.duration)?;
    let until = record.protection.as_ref().and_then(|p| p.until);
    host.printer.note(match until {
        Some(u) => format!("branch {} is protected until {}", args.name, u.to_rfc3339()),
        None => format!(
            "branch {} is protected until `db-branch unprotect`",
            args.name
        ),
    });
    host.printer
        .emit(&crate::ops::inspect::branch(host, &record))
}
