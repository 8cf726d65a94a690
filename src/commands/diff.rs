use crate::cli::DiffArgs;
use crate::error::{usage, Error, Kind};
use crate::host::Host;
use crate::ops::diff::{diff, Target};
use anyhow::Result;

/// Prints the report; exit 1 when the two differ (a CI step asserts "no difference").
pub fn run(host: &Host, args: &DiffArgs) -> Result<()> {
    let parse = |s: &str| -> Result<Target> {
        s.parse()
            .map_err(|e| usage(format!("{s:?} is not a branch, BRANCH@TAG or gen-N: {e}")))
    };
    let report = diff(host, &parse(&args.a)?, &parse(&args.b)?, args.data)?;
    host.printer.emit(&report)?;
    if report.same {
        Ok(())
    } else {
        Err(Error::new(Kind::Exited(1), "").into())
    }
}
