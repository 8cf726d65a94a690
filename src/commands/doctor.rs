use crate::check::Level;
use crate::cli::DoctorArgs;
use crate::host::Host;
use crate::ops::doctor::{doctor, Repair};
use anyhow::{anyhow, Result};

pub fn run(host: &Host, args: &DoctorArgs, config_note: &str) -> Result<()> {
    let report = doctor(host, config_note, args.repair);
    host.printer.emit(&report)?;
    let failed = report
        .checks
        .iter()
        .filter(|c| c.level == Level::Fail)
        .count();
    if failed > 0 {
        return Err(anyhow!("{failed} check(s) failed; see the table above"));
    }
    let open = report
        .findings
        .iter()
        .filter(|f| f.action != Repair::Repaired)
        .count();
    if open > 0 {
        return Err(anyhow!(
            "{open} thing(s) left behind by crashes{}",
            if args.repair {
                " could not be repaired; see the table above"
            } else {
                "; `db-branch doctor --repair` removes them"
            }
        ));
    }
    Ok(())
}
