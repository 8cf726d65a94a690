//! `create NAME`: clone the baseline, start a server, wait until it answers. Idempotent: an
//! existing branch is started if needed and reported with the same port.

use super::view::BranchView;
use super::{
    admit, admit_locked, branch_lock, expiry, host_lock, invoking_user, launch, start_and_wait,
};
use crate::branch::{BranchRecord, Generation, Phase};
use crate::cli::CreateArgs;
use crate::error::usage;
use crate::host::Host;
use crate::output::{Human, Output};
use crate::ports;
use crate::state;
use crate::undo::Undo;
use anyhow::{Context, Result};
use serde::Serialize;
use std::collections::BTreeSet;

#[derive(Debug, Serialize)]
pub struct CreateReport {
    /// true when the branch already existed (an idempotent re-run changed nothing).
    pub existed: bool,
    #[serde(flatten)]
    pub branch: BranchView,
}

impl Human for CreateReport {
    fn human(&self) -> String {
        self.branch.human()
    }
}

pub fn run(host: &Host, args: &CreateArgs, out: &Output) -> Result<()> {
    let report = create(host, args, out)?;
    if !report.existed {
        out.note(format!("created branch {}", report.branch.name));
    } else {
        out.note(format!("branch {} already exists", report.branch.name));
    }
    out.emit(&report)
}

pub fn create(host: &Host, args: &CreateArgs, out: &Output) -> Result<CreateReport> {
    host.storage.prepare(false)?;
    let name = &args.name;
    let _lock = branch_lock(host, name)?;
    match state::load_record(&host.layout, name)? {
        Some(existing) if existing.phase == Phase::Ready => {
            return existing_branch(host, args, existing);
        }
        Some(_) => {
            // We hold the branch lock, so the create that wrote this record is gone.
            out.note(format!(
                "cleaning up an earlier create of {name} that did not finish"
            ));
            super::delete::discard(host, name)?;
        }
        None if host.storage.branch_exists(name)? => {
            return Err(usage(format!(
                "storage for branch {name} exists at {} but db-branch has no record of it \
                 (left by a crash or by hand); remove it with `db-branch delete {name} --yes`, \
                 then create the branch again",
                host.storage.branch_datadir(name).display()
            )));
        }
        None => {}
    }
    let baseline = resolve_generation(host, args.baseline)?;
    super::check_free_space(host)?;
    let now = host.clock.now();
    let mut record = BranchRecord::new(
        name.clone(),
        baseline,
        args.buffer_pool.unwrap_or(host.config.mysqld.buffer_pool),
        now,
    );
    record.owner = args.owner.clone().unwrap_or_else(invoking_user);
    record.profile = args.profile.unwrap_or(host.config.mysqld.profile);
    record.server_options = args.server_options.clone();
    record.labels = args
        .labels
        .iter()
        .map(|l| (l.key.clone(), l.value.clone()))
        .collect();
    record.expires_at = expiry(now, &args.expiry, Some(host.config.lifecycle.default_ttl));

    let mut undo = Undo::new();
    match apply(host, &mut record, &mut undo) {
        Ok(()) => {
            undo.commit();
            Ok(CreateReport {
                existed: false,
                branch: BranchView::of(host, &record),
            })
        }
        Err(e) => Err(undo.unwind(e)),
    }
}

fn apply<'a>(host: &'a Host, record: &mut BranchRecord, undo: &mut Undo<'a>) -> Result<()> {
    let name = record.name.clone();
    let reservation = {
        let _host = host_lock(host)?;
        let reservation = admit_locked(host, record, 0)?;
        let held: BTreeSet<u16> = state::list_records(&host.layout)?
            .iter()
            .map(|r| r.port)
            .collect();
        record.port = ports::allocate(
            host.config.ports,
            host.config.bind_address,
            &held,
            host.ports.as_ref(),
        )?;
        // The record holds the port for us from here on, even if we crash.
        host.server
            .prepare_runtime_dir(&host.layout.branch_dir(&name))?;
        let n = name.clone();
        undo.push("remove the branch's record and directory", move || {
            state::remove_branch_dir(&host.layout, &n)
        });
        state::save_record(&host.layout, record)?;
        crate::failpoint::hit("create:after-record");
        reservation
    };

    host.storage.clone_branch(record.baseline, &name)?;
    crate::failpoint::hit("create:after-clone");
    let n = name.clone();
    undo.push("destroy the branch's snapshots", move || {
        host.storage.destroy_branch(&n)
    });
    host.storage
        .set_branch_metadata(&name, &storage_metadata(record))
        .context("keeping the branch's metadata with its storage")?;

    let n = name.clone();
    undo.push("stop the branch's server", move || {
        let l = launch(host, &n);
        host.services.kill(&l)?;
        host.services.forget(&l)
    });
    start_and_wait(host, record)?;
    crate::failpoint::hit("create:after-ready");

    record.phase = Phase::Ready;
    state::save_record(&host.layout, record)?;
    drop(reservation);
    Ok(())
}

/// What the storage keeps of a branch (ZFS user properties), enough to rebuild its record.
pub fn storage_metadata(record: &BranchRecord) -> std::collections::BTreeMap<String, String> {
    let mut m = std::collections::BTreeMap::new();
    m.insert("port".into(), record.port.to_string());
    m.insert("created".into(), record.created.to_rfc3339());
    m.insert("baseline".into(), record.baseline.0.to_string());
    m.insert("buffer_pool".into(), record.buffer_pool.exact());
    m.insert("profile".into(), record.profile.to_string());
    m.insert("owner".into(), record.owner.clone());
    m.insert(
        "labels".into(),
        record
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(","),
    );
    m
}

/// A record rebuilt from storage metadata (the pool alone); None when it lacks the basics.
pub fn record_from_metadata(
    name: &crate::branch::BranchName,
    m: &std::collections::BTreeMap<String, String>,
) -> Option<BranchRecord> {
    let created = chrono::DateTime::parse_from_rfc3339(m.get("created")?).ok()?;
    let mut r = BranchRecord::new(
        name.clone(),
        Generation(m.get("baseline")?.parse().ok()?),
        m.get("buffer_pool")?.parse().ok()?,
        created.with_timezone(&chrono::Utc),
    );
    r.port = m.get("port")?.parse().ok()?;
    r.phase = Phase::Ready;
    r.owner = m.get("owner").cloned().unwrap_or_default();
    r.profile = match m.get("profile").map(String::as_str) {
        Some("durable") => crate::config::Profile::Durable,
        _ => crate::config::Profile::Test,
    };
    r.labels = m
        .get("labels")
        .map(|l| {
            l.split(',')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .unwrap_or_default();
    Some(r)
}

fn existing_branch(
    host: &Host,
    args: &CreateArgs,
    mut record: BranchRecord,
) -> Result<CreateReport> {
    let name = &record.name;
    if let Some(gen) = args.baseline.filter(|g| *g != record.baseline) {
        return Err(usage(format!(
            "branch {name} already exists, cloned from {} (not {gen}); delete it first to \
             create it from {gen}",
            record.baseline
        )));
    }
    if let Some(p) = args.profile.filter(|p| *p != record.profile) {
        return Err(usage(format!(
            "branch {name} already exists with the {} profile (not {p}); delete it first to \
             create it with another profile",
            record.profile
        )));
    }
    if let Some(bp) = args.buffer_pool.filter(|b| *b != record.buffer_pool) {
        return Err(usage(format!(
            "branch {name} already exists with a {} buffer pool (not {bp}); delete it first \
             to create it with another size",
            record.buffer_pool
        )));
    }
    // A re-run from CI on a new push renews the expiry it asks for; labels asked for are
    // added. Nothing else about an existing branch changes.
    let asked = expiry(host.clock.now(), &args.expiry, None);
    let mut changed = false;
    if asked.is_some() && asked != record.expires_at {
        record.expires_at = asked;
        changed = true;
    }
    for l in &args.labels {
        if record.labels.get(&l.key) != Some(&l.value) {
            record.labels.insert(l.key.clone(), l.value.clone());
            changed = true;
        }
    }
    if changed {
        state::save_record(&host.layout, &record)?;
    }
    if !host.services.state(&launch(host, &record.name))?.is_up() {
        let _reservation = admit(host, &record, 0)?;
        start_and_wait(host, &mut record)?;
    }
    Ok(CreateReport {
        existed: true,
        branch: BranchView::of(host, &record),
    })
}

fn resolve_generation(host: &Host, wanted: Option<Generation>) -> Result<Generation> {
    let gens = host.storage.baselines()?;
    let list = || {
        gens.iter()
            .map(|g| g.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match wanted {
        Some(g) if gens.contains(&g) => Ok(g),
        Some(g) => Err(usage(format!(
            "baseline {g} does not exist; available: {}",
            if gens.is_empty() {
                "none".into()
            } else {
                list()
            }
        ))),
        None => gens.last().copied().ok_or_else(|| {
            usage(
                "there is no baseline yet; make one with `db-branch baseline create --empty` \
                 (or --from-datadir DIR)",
            )
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::testing::{name, sim_host, OUT};
    use crate::error::{exit_code, EXIT_REFUSED, EXIT_USAGE};
    use crate::service::ServiceState;

    fn args(n: &str) -> CreateArgs {
        CreateArgs::named(name(n))
    }

    #[test]
    fn creates_then_reports_the_same_branch() {
        let sim = sim_host();
        let first = create(&sim.host, &args("a"), &OUT).unwrap();
        assert!(!first.existed);
        assert_eq!(first.branch.state, ServiceState::Running);
        let again = create(&sim.host, &args("a"), &OUT).unwrap();
        assert!(again.existed);
        assert_eq!(again.branch.port, first.branch.port);
        assert_eq!(sim.services.with_state(|s| s.starts), 1);
    }

    #[test]
    fn rerun_starts_a_stopped_branch() {
        let sim = sim_host();
        create(&sim.host, &args("a"), &OUT).unwrap();
        sim.services.with_state(|s| s.units.clear());
        let again = create(&sim.host, &args("a"), &OUT).unwrap();
        assert_eq!(again.branch.state, ServiceState::Running);
        assert_eq!(sim.services.with_state(|s| s.starts), 2);
    }

    #[test]
    fn branches_get_distinct_ports() {
        let sim = sim_host();
        let a = create(&sim.host, &args("a"), &OUT).unwrap();
        let b = create(&sim.host, &args("b"), &OUT).unwrap();
        assert_ne!(a.branch.port, b.branch.port);
        assert_eq!(a.branch.baseline, Generation(1));
    }

    #[test]
    fn memory_refusal_leaves_nothing() {
        let sim = sim_host();
        sim.memory
            .0
            .store(100 << 20, std::sync::atomic::Ordering::SeqCst);
        let e = create(&sim.host, &args("a"), &OUT).unwrap_err();
        assert_eq!(exit_code(&e), EXIT_REFUSED);
        assert!(state::list_records(&sim.host.layout).unwrap().is_empty());
        assert!(sim.storage.with_state(|s| s.branches.is_empty()));
        assert!(!sim.host.layout.branch_dir(&name("a")).exists());
    }

    #[test]
    fn failed_start_undoes_everything() {
        let sim = sim_host();
        sim.services.with_state(|s| s.fail_start = true);
        let e = create(&sim.host, &args("a"), &OUT).unwrap_err();
        assert!(format!("{e:#}").contains("simulated start failure"));
        assert!(sim.storage.with_state(|s| s.branches.is_empty()));
        assert!(!sim.host.layout.branch_dir(&name("a")).exists());
        assert!(sim.services.with_state(|s| s.units.is_empty()));
    }

    #[test]
    fn server_that_never_answers_is_undone() {
        let sim = sim_host();
        *sim.server.fail_ready.lock().unwrap() = true;
        assert!(create(&sim.host, &args("a"), &OUT).is_err());
        assert!(sim.storage.with_state(|s| s.branches.is_empty()));
        assert!(sim.services.with_state(|s| s.units.is_empty()));
    }

    #[test]
    fn failed_clone_undoes_record() {
        let sim = sim_host();
        sim.storage.fail_once("clone_branch");
        assert!(create(&sim.host, &args("a"), &OUT).is_err());
        assert!(!sim.host.layout.branch_dir(&name("a")).exists());
    }

    #[test]
    fn half_made_create_is_cleaned_up_by_the_next() {
        let sim = sim_host();
        create(&sim.host, &args("a"), &OUT).unwrap();
        let mut r = state::load_record(&sim.host.layout, &name("a"))
            .unwrap()
            .unwrap();
        r.phase = Phase::Creating;
        state::save_record(&sim.host.layout, &r).unwrap();
        let again = create(&sim.host, &args("a"), &OUT).unwrap();
        assert!(!again.existed);
        assert_eq!(again.branch.phase, Phase::Ready);
    }

    #[test]
    fn orphan_storage_is_refused_with_advice() {
        let sim = sim_host();
        sim.storage
            .with_state(|s| s.branches.insert(name("a"), (Generation(1), false)));
        let e = create(&sim.host, &args("a"), &OUT).unwrap_err();
        assert!(e.to_string().contains("delete a --yes"), "{e}");
    }

    #[test]
    fn missing_or_mismatched_baseline_is_a_usage_error() {
        let sim = sim_host();
        let mut a = args("a");
        a.baseline = Some(Generation(9));
        let e = create(&sim.host, &a, &OUT).unwrap_err();
        assert_eq!(exit_code(&e), EXIT_USAGE);
        assert!(e.to_string().contains("gen-000001"), "{e}");
        create(&sim.host, &args("a"), &OUT).unwrap();
        sim.storage
            .with_state(|s| s.generations.insert(Generation(2)));
        let mut b = args("a");
        b.baseline = Some(Generation(2));
        let e = create(&sim.host, &b, &OUT).unwrap_err();
        assert!(e.to_string().contains("delete it first"), "{e}");
    }

    #[test]
    fn no_baseline_says_how_to_make_one() {
        let sim = sim_host();
        sim.storage.with_state(|s| s.generations.clear());
        let e = create(&sim.host, &args("a"), &OUT).unwrap_err();
        assert!(e.to_string().contains("baseline create --empty"));
    }

    #[test]
    fn labels_owner_and_expiry_are_recorded_and_renewed_by_a_rerun() {
        let sim = sim_host();
        let mut a = args("a");
        a.labels = vec!["pr=7".parse().unwrap()];
        a.owner = Some("ci".into());
        a.expiry.ttl = Some("1d".parse().unwrap());
        let r = create(&sim.host, &a, &OUT).unwrap();
        let now = sim.host.clock.now();
        assert_eq!(r.branch.owner, "ci");
        assert_eq!(r.branch.labels["pr"], "7");
        assert_eq!(r.branch.expires_at, Some(now + chrono::Duration::days(1)));
        a.expiry.ttl = Some("7d".parse().unwrap());
        let again = create(&sim.host, &a, &OUT).unwrap();
        assert!(again.existed);
        assert_eq!(
            again.branch.expires_at,
            Some(now + chrono::Duration::days(7))
        );
        // Without --ttl a re-run keeps the expiry.
        let again = create(&sim.host, &args("a"), &OUT).unwrap();
        assert_eq!(
            again.branch.expires_at,
            Some(now + chrono::Duration::days(7))
        );
    }

    #[test]
    fn default_ttl_applies_to_new_branches() {
        let mut sim = sim_host();
        sim.host.config.lifecycle.default_ttl = "2h".parse().unwrap();
        let r = create(&sim.host, &args("a"), &OUT).unwrap();
        assert_eq!(
            r.branch.expires_at,
            Some(sim.host.clock.now() + chrono::Duration::hours(2))
        );
    }

    #[test]
    fn storage_metadata_rebuilds_the_record() {
        let sim = sim_host();
        let mut a = args("a");
        a.labels = vec!["pr=7".parse().unwrap(), "repo=web".parse().unwrap()];
        let made = create(&sim.host, &a, &OUT).unwrap();
        let r = state::load_record(&sim.host.layout, &name("a"))
            .unwrap()
            .unwrap();
        let back = record_from_metadata(&r.name, &storage_metadata(&r)).unwrap();
        assert_eq!(back.port, made.branch.port);
        assert_eq!(back.labels, r.labels);
        assert_eq!(back.buffer_pool, r.buffer_pool);
        assert_eq!(back.created.timestamp(), r.created.timestamp());
        assert!(record_from_metadata(&r.name, &Default::default()).is_none());
    }

    #[test]
    fn newest_generation_is_the_default() {
        let sim = sim_host();
        sim.storage
            .with_state(|s| s.generations.insert(Generation(3)));
        let r = create(&sim.host, &args("a"), &OUT).unwrap();
        assert_eq!(r.branch.baseline, Generation(3));
    }
}
