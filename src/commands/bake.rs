use crate::bake::BakeSource;
use crate::cli::BakeArgs;
use crate::host::Host;
use crate::ops::bake::{bake, BakeOptions};
use crate::view::bake::BakeReport;
use anyhow::Result;
use std::time::Instant;

pub fn run(host: &Host, args: &BakeArgs) -> Result<()> {
    let started = Instant::now();
    let opts = BakeOptions {
        source: BakeSource::parse(&args.from, args.via())?,
        databases: args.databases.clone(),
        mask_sql: args.mask_sql.clone(),
        verify: args.verify,
        jobs: args.jobs,
        with_users: args.with_users,
        into: args.into.clone(),
    };
    let baked = bake(host, &opts)?;
    host.printer.emit(&BakeReport {
        generation: baked.generation,
        seconds: started.elapsed().as_secs_f64(),
        summary: baked.summary,
    })
}
