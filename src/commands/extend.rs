use crate::cli::ExtendArgs;
use crate::host::Host;
use crate::ops::branch::expiry::extend;
use anyhow::Result;

pub fn run(host: &Host, args: &ExtendArgs) -> Result<()> {
    let record = extend(host, &args.name, args.expiry.request())?;
    if let Some(t) = record.expires_at {
        host.printer.note(format!(
            "branch {} now expires at {}",
            args.name,
            t.to_rfc3339()
        ));
    }
    host.printer
        .emit(&crate::ops::inspect::branch(host, &record))
}
