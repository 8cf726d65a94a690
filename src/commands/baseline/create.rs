use crate::cli::BaselineCreateArgs;
use crate::host::Host;
use crate::ops::baseline::{create, CreateBaselineOptions};
use crate::view::baseline::BaselineCreated;
use anyhow::Result;
use std::time::Instant;

pub fn run(host: &Host, args: &BaselineCreateArgs) -> Result<()> {
    let started = Instant::now();
    if let Some(branch) = &args.from_branch {
        for path in &args.sql {
            crate::access::check_readable(&host.caller, path)?;
        }
        let (generation, downtime) = crate::ops::baseline::promote(host, branch, &args.sql)?;
        host.printer.note(format!(
            "baseline {generation} is branch {branch}'s data{}; create a branch with `db-branch create NAME`",
            downtime.map_or(String::new(), |d| format!(" ({branch} was down {d:.2} s)"))
        ));
        return host.printer.emit(&BaselineCreated {
            generation,
            seconds: started.elapsed().as_secs_f64(),
        });
    }
    // Files named by a user of db-branchd are read only where they could read them.
    for path in args.from_datadir.iter().chain(&args.sql) {
        crate::access::check_readable(&host.caller, path)?;
    }
    let generation = create(
        host,
        &CreateBaselineOptions {
            empty: args.empty,
            from_datadir: args.from_datadir.clone(),
            sql: args.sql.clone(),
        },
    )?;
    host.printer.note(format!(
        "baseline {generation} is ready; create a branch with `db-branch create NAME`"
    ));
    host.printer.emit(&BaselineCreated {
        generation,
        seconds: started.elapsed().as_secs_f64(),
    })
}
