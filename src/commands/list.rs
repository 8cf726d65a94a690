//! `list` and `status NAME`.

use super::view::{BranchView, LIST_HEADER};
use super::{launch, require_record};
use crate::cli::{ListArgs, NameArg};
use crate::host::Host;
use crate::output::{table, Human, Output};
use crate::state;
use anyhow::Result;
use serde::Serialize;
use std::path::PathBuf;

#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct BranchList(pub Vec<BranchView>);

impl Human for BranchList {
    fn human(&self) -> String {
        if self.0.is_empty() {
            return "no branches; create one with `db-branch create NAME`".into();
        }
        table(&LIST_HEADER, self.0.iter().map(BranchView::row).collect())
    }
}

pub fn list(host: &Host, args: &ListArgs, out: &Output) -> Result<()> {
    host.storage.prepare(false)?;
    let views = state::list_records(&host.layout)?
        .iter()
        .filter(|r| r.has_labels(&args.labels))
        .map(|r| BranchView::of(host, r))
        .collect();
    out.emit(&BranchList(views))
}

#[derive(Debug, Serialize)]
pub struct Status {
    #[serde(flatten)]
    pub branch: BranchView,
    pub datadir: PathBuf,
    pub option_file: PathBuf,
    pub error_log: PathBuf,
    pub service_manager: String,
    pub main_pid: Option<u32>,
    pub pool: Option<crate::storage::PoolInfo>,
    /// ZFS: used, referenced and written bytes of the branch's dataset.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub space: std::collections::BTreeMap<String, u64>,
}

impl Human for Status {
    fn human(&self) -> String {
        format!(
            "{}datadir:  {}\noptions:  {}\nlog:      {}\nmanager:  {}\npid:      {}\nspace:    {}\npool:     {}\n",
            self.branch.human(),
            self.datadir.display(),
            self.option_file.display(),
            self.error_log.display(),
            self.service_manager,
            self.main_pid.map_or("-".into(), |p| p.to_string()),
            if self.space.is_empty() {
                String::new()
            } else {
                self.space
                    .iter()
                    .map(|(k, v)| format!("{k} {}", crate::values::ByteSize(*v)))
                    .collect::<Vec<_>>()
                    .join(", ")
            },
            self.pool.as_ref().map_or("-".into(), |p| {
                let ram = match (p.ram_backed, p.ram_bytes) {
                    (true, Some(b)) => format!(", in RAM: holds {}", crate::values::ByteSize(b)),
                    (true, None) => ", in RAM".into(),
                    _ => String::new(),
                };
                format!(
                    "{} {} ({} free of {}{ram})",
                    p.kind,
                    p.path.display(),
                    crate::values::ByteSize(p.free_bytes),
                    crate::values::ByteSize(p.total_bytes)
                )
            }),
        )
    }
}

pub fn status(host: &Host, args: &NameArg, out: &Output) -> Result<()> {
    host.storage.prepare(false)?;
    let name = &args.name;
    let record = require_record(host, name)?;
    out.emit(&Status {
        branch: BranchView::of(host, &record),
        datadir: host.storage.branch_datadir(name),
        option_file: host.layout.option_file(name),
        error_log: host.layout.error_log(name),
        service_manager: host.services.kind().into(),
        main_pid: host.services.main_pid(&launch(host, name))?,
        pool: host.storage.info().ok(),
        space: host.storage.branch_space(name).unwrap_or_default(),
    })
}
