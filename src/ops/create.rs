//! Create a branch: clone the baseline, start a server, wait until it answers. Idempotent:
//! an existing branch is started if needed and returned with the same port.

use crate::branch::{resolve, ExpiryRequest};
use crate::branch::{
    BranchName, BranchRecord, BranchRef, DatabaseName, Generation, Label, Parent, Phase,
};
use crate::config::Profile;
use crate::error::{usage, Error, Kind};
use crate::host::Host;
use crate::ops::branch::budget::{admit, admit_locked};
use crate::ops::branch::capture::{capture, Captured};
use crate::ops::branch::discard::discard;
use crate::ops::branch::fit::{check_server_for, generation_server};
use crate::ops::branch::record::persist;
use crate::ops::branch::{
    launch::{self},
    unit::launch,
};
use crate::ports;
use crate::store::{records, stats};
use crate::undo::Undo;
use crate::values::ByteSize;
use anyhow::Result;

#[derive(Debug, Clone)]
pub struct CreateOptions {
    pub name: BranchName,
    /// Generation to clone; None: the newest.
    pub baseline: Option<Generation>,
    /// None: `mysqld.buffer_pool`.
    pub buffer_pool: Option<ByteSize>,
    pub expiry: ExpiryRequest,
    pub labels: Vec<Label>,
    /// None: the invoking user.
    pub owner: Option<String>,
    /// None: `mysqld.profile`.
    pub profile: Option<Profile>,
    /// Option-file lines for this branch only (migrate-check's instrumentation).
    pub server_options: Vec<String>,
    /// Made from another branch's state now, or from one of its checkpoints.
    pub from: Option<BranchRef>,
    /// `--clean`: stop the source for a clean copy (else crash-consistent, no downtime).
    pub clean: bool,
    /// `--database`: the application database clients are pointed at (checked against
    /// what the branch's data holds).
    pub database: Option<DatabaseName>,
    /// A follower's seed (`baseline follow`): the branch's datadir is the unsealed
    /// workspace of this generation number, baked by that server, not a clone.
    pub seed: Option<(Generation, crate::flavour::Flavour)>,
    /// The source a follower replicates (recorded as `follows`).
    pub follows: Option<String>,
    /// A dense pool's server: the slots it will hold, which the memory guard counts.
    pub dense_slots: Option<u32>,
}

impl CreateOptions {
    pub fn named(name: BranchName) -> Self {
        CreateOptions {
            name,
            baseline: None,
            buffer_pool: None,
            expiry: ExpiryRequest::Unset,
            labels: Vec::new(),
            owner: None,
            profile: None,
            server_options: Vec::new(),
            from: None,
            clean: false,
            database: None,
            seed: None,
            follows: None,
            dense_slots: None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Created {
    /// The branch existed already (an idempotent re-run).
    pub existed: bool,
    /// An earlier create of this name died half-way and was cleaned up first.
    pub cleaned_up: bool,
    pub record: BranchRecord,
    /// How the source was taken (`--from` a running or stopped branch).
    pub captured: Option<Captured>,
}

pub fn create(host: &Host, opts: &CreateOptions) -> Result<Created> {
    let started = std::time::Instant::now();
    let created = create_timed(host, opts)?;
    if !created.existed {
        stats::observe(&host.layout, stats::Operation::Create, started.elapsed());
    }
    Ok(created)
}

fn create_timed(host: &Host, opts: &CreateOptions) -> Result<Created> {
    // Bad input is refused before anything is touched.
    let now = host.clock.now();
    let expires_at = resolve(now, opts.expiry, Some(host.config.lifecycle.default_ttl))?;
    host.storage.open()?;
    let name = &opts.name;
    let _lock = host.branch_lock(name)?;
    let mut cleaned_up = false;
    match records::load(&host.layout, name)? {
        Some(existing) if existing.phase == Phase::Ready => {
            return existing_branch(host, opts, existing);
        }
        Some(_) => {
            // We hold the branch lock, so the create that wrote this record is gone.
            host.printer.note(format!(
                "cleaning up an earlier create of {name} that did not finish"
            ));
            discard(host, name)?;
            cleaned_up = true;
        }
        None if host.storage.branch_exists(name)? => {
            return Err(Error::new(
                Kind::Usage,
                format!(
                    "storage for branch {name} exists at {} but db-branch has no record of it \
                     (left by a crash or by hand)",
                    host.storage.branch_datadir(name).display()
                ),
            )
            .hint(format!(
                "remove it with `db-branch delete {name} --yes`, then create the branch again"
            ))
            .hint("or let `db-branch doctor --repair` rebuild or remove it")
            .into());
        }
        None => {}
    }
    host.check_socket_path(name)?;
    let (baseline, made_by, database) = match (&opts.from, opts.seed) {
        (_, Some((_, flavour))) => (Generation::NONE, Some(flavour), None),
        (Some(from), None) => {
            let source = source_of(host, from)?;
            let made_by = source
                .server
                .or_else(|| generation_server(host, source.baseline));
            check_server_for(host, &format!("branch {}", from.name), made_by)?;
            if let Some(d) = &opts.database {
                // What the source holds now (a checkpoint may hold less; the server says so
                // when the client connects).
                let held =
                    crate::server::databases::in_datadir(&host.storage.branch_datadir(&from.name))
                        .ok();
                crate::ops::branch::database::check_in(
                    d,
                    held.as_deref(),
                    &format!("branch {}", from.name),
                )?;
            }
            let database = opts.database.clone().or(source.database.clone());
            (source.baseline, made_by, database)
        }
        (None, None) => {
            let baseline = resolve_generation(host, opts.baseline)?;
            let made_by = generation_server(host, baseline);
            check_server_for(host, &format!("baseline {baseline}"), made_by)?;
            if let Some(d) = &opts.database {
                crate::ops::branch::database::check_requested(host, baseline, d)?;
            }
            (baseline, made_by, opts.database.clone())
        }
    };
    crate::ops::trash::ensure_space(host)?;
    let mut record = BranchRecord::new(
        name.clone(),
        baseline,
        opts.buffer_pool.unwrap_or(host.config.mysqld.buffer_pool),
        now,
    );
    record.owner = opts.owner.clone().unwrap_or_else(|| {
        // Through db-branchd, the caller; as root, the sudo caller or root.
        if host.caller.is_root() {
            invoking_user()
        } else {
            host.caller.name.clone()
        }
    });
    record.owner_uid = if host.caller.is_root() || opts.owner.is_some() {
        crate::store::secrets::uid_of(&record.owner)
    } else {
        Some(host.caller.uid)
    };
    record.profile = opts.profile.unwrap_or(host.config.mysqld.profile);
    record.server_options = opts.server_options.clone();
    record.server = made_by;
    record.labels = opts
        .labels
        .iter()
        .map(|l| (l.key.clone(), l.value.clone()))
        .collect();
    record.expires_at = expires_at;
    record.database = database;
    record.follows = opts.follows.clone();
    record.dense_slots = opts.dense_slots;
    record.parent = opts.from.as_ref().map(|f| Parent::Branch {
        name: f.name.clone(),
        checkpoint: f.checkpoint.clone(),
        clean: opts.clean,
    });

    let mut undo = Undo::new();
    match apply(host, &mut record, &mut undo, opts) {
        Ok(captured) => {
            undo.commit();
            Ok(Created {
                existed: false,
                cleaned_up,
                record,
                captured,
            })
        }
        Err(e) => Err(undo.unwind(e)),
    }
}

fn apply<'a>(
    host: &'a Host,
    record: &mut BranchRecord,
    undo: &mut Undo<'a>,
    opts: &CreateOptions,
) -> Result<Option<Captured>> {
    let name = record.name.clone();
    let reservation = {
        let _host = host.host_lock()?;
        let reservation = admit_locked(host, record, 0)?;
        let held = records::held_ports(&host.layout)?;
        record.port = ports::allocate(
            host.config.ports,
            host.config.bind_address,
            &held,
            host.ports.as_ref(),
        )?;
        // The record holds the port for us from here on, even if we crash. (The server's
        // `run/` is made with its option file, at every start.)
        let n = name.clone();
        undo.push("remove the branch's record and directory", move || {
            records::remove_dir(&host.layout, &n)
        });
        // Secrets under this name are no one's now (no record, and we hold its lock): left
        // by a create that failed before its undo ran. Never reused: this branch gets its
        // own, and a failed create takes them away again.
        crate::store::secrets::remove(&host.layout, &name)?;
        let n = name.clone();
        undo.push("remove the branch's password", move || {
            crate::store::secrets::remove(&host.layout, &n)
        });
        records::save(&host.layout, record)?;
        crate::failpoint::hit("create:after-record");
        reservation
    };

    let captured = match &opts.from {
        None if let Some((workspace, _)) = opts.seed => {
            host.storage.branch_from_workspace(workspace, &name)?;
            None
        }
        None => {
            host.storage.clone_branch(record.baseline, &name)?;
            None
        }
        Some(from) => {
            // The source holds still (no reset, delete or checkpoint) while it is copied.
            let _source_lock = host.branch_lock(&from.name)?;
            let mut source = source_of(host, from)?;
            match &from.checkpoint {
                Some(tag) => {
                    host.storage
                        .clone_from_branch(&from.name, Some(tag), &name)?;
                    let clean = source.checkpoints.iter().any(|c| &c.tag == tag && c.clean);
                    Some(Captured {
                        clean,
                        downtime_seconds: None,
                    })
                }
                None => Some(capture(host, &mut source, opts.clean, || {
                    host.storage
                        .clone_from_branch(&from.name, None, &name)
                        .map(|_| ())
                })?),
            }
        }
    };
    if let (Some(Parent::Branch { clean, .. }), Some(c)) = (record.parent.as_mut(), &captured) {
        *clean = c.clean;
    }
    crate::failpoint::hit("create:after-clone");
    let n = name.clone();
    undo.push("destroy the branch's snapshots", move || {
        host.storage.destroy_branch(&n)
    });

    let n = name.clone();
    undo.push("stop the branch's server", move || {
        let l = launch(host, &n);
        host.services.kill(&l)?;
        host.services.forget(&l)
    });
    launch::write_options(host, record)?;
    crate::failpoint::hit("create:after-options");
    launch::start(host, record)?;
    crate::failpoint::hit("create:after-start");
    launch::wait_ready(host, record)?;
    crate::failpoint::hit("create:after-ready");

    record.phase = Phase::Ready;
    persist(host, record)?;
    drop(reservation);
    Ok(captured)
}

/// A follower holds the source's unmasked data: nothing is made from it but masked
/// generations (`baseline cut`).
pub fn refuse_follower(record: &BranchRecord, what: &str) -> Result<()> {
    match &record.follows {
        Some(source) => Err(Error::new(
            Kind::Usage,
            format!(
                "branch {} follows {source} and holds its data unmasked: {what} cannot be made from it",
                record.name
            ),
        )
        .hint("cut a masked generation with `db-branch baseline cut`, and branch from that")
        .into()),
        None => Ok(()),
    }
}

/// The branch (and checkpoint) a new branch is made from, or a not-found error.
fn source_of(host: &Host, from: &BranchRef) -> Result<BranchRecord> {
    let source = crate::ops::branch::record::require(host, &from.name)?;
    refuse_follower(&source, "a branch")?;
    if source.phase != Phase::Ready {
        return Err(usage(format!(
            "branch {} was never finished (its create was interrupted)",
            from.name
        )));
    }
    if let Some(tag) = &from.checkpoint {
        if !source.checkpoints.iter().any(|c| &c.tag == tag) {
            return Err(Error::new(
                Kind::NotFound,
                format!("branch {} has no checkpoint {tag}", from.name),
            )
            .hint(format!("see `db-branch checkpoints {}`", from.name))
            .into());
        }
    }
    Ok(source)
}

fn existing_branch(host: &Host, opts: &CreateOptions, mut record: BranchRecord) -> Result<Created> {
    let name = &record.name;
    let delete_first = |what: String| -> anyhow::Error {
        Error::new(Kind::Usage, format!("branch {name} already exists {what}"))
            .hint(format!(
                "delete it first (`db-branch delete {name}`) to create it anew"
            ))
            .into()
    };
    if let Some(gen) = opts.baseline.filter(|g| *g != record.baseline) {
        return Err(delete_first(format!(
            "cloned from {} (not {gen})",
            record.baseline
        )));
    }
    if let Some(from) = &opts.from {
        let same = matches!(&record.parent, Some(Parent::Branch { name: n, checkpoint: c, .. })
            if *n == from.name && *c == from.checkpoint);
        if !same {
            return Err(delete_first(format!("(not made from {from})")));
        }
    }
    if let Some(p) = opts.profile.filter(|p| *p != record.profile) {
        return Err(delete_first(format!(
            "with the {} profile (not {p})",
            record.profile
        )));
    }
    if let Some(bp) = opts.buffer_pool.filter(|b| *b != record.buffer_pool) {
        return Err(delete_first(format!(
            "with a {} buffer pool (not {bp})",
            record.buffer_pool
        )));
    }
    // A re-run from CI on a new push renews the expiry it asks for; labels asked for are
    // added. Nothing else about an existing branch changes.
    let asked = match opts.expiry {
        ExpiryRequest::Unset => None,
        req => resolve(host.clock.now(), req, None)?,
    };
    let mut changed = false;
    if asked.is_some() && asked != record.expires_at {
        record.expires_at = asked;
        changed = true;
    }
    for l in &opts.labels {
        if record.labels.get(&l.key) != Some(&l.value) {
            record.labels.insert(l.key.clone(), l.value.clone());
            changed = true;
        }
    }
    // The database clients are pointed at is only a setting: a re-run may choose it.
    if let Some(d) = opts
        .database
        .as_ref()
        .filter(|d| record.database.as_ref() != Some(*d))
    {
        let held = crate::server::databases::in_datadir(&host.storage.branch_datadir(name)).ok();
        crate::ops::branch::database::check_in(d, held.as_deref(), &format!("branch {name}"))?;
        record.database = Some(d.clone());
        changed = true;
    }
    if changed {
        persist(host, &record)?;
    }
    if !crate::ops::branch::unit::is_up(host, name) {
        crate::ops::branch::fit::check_server(host, &record)?;
        let _reservation = admit(host, &record, 0)?;
        launch::start_and_wait(host, &mut record)?;
        records::save(&host.layout, &record)?;
    }
    Ok(Created {
        existed: true,
        cleaned_up: false,
        record,
        captured: None,
    })
}

/// The generation asked for, or the newest.
pub fn resolve_generation(host: &Host, wanted: Option<Generation>) -> Result<Generation> {
    let gens = host.storage.baselines()?;
    let list = || {
        if gens.is_empty() {
            "none".to_string()
        } else {
            gens.iter()
                .map(|g| g.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    match wanted {
        Some(g) if gens.contains(&g) => Ok(g),
        Some(g) => Err(Error::new(
            Kind::NotFound,
            format!("baseline {g} does not exist; available: {}", list()),
        )
        .hint("see `db-branch baseline list`")
        .into()),
        None => gens.last().copied().ok_or_else(|| {
            usage("there is no baseline yet; make one with `db-branch baseline create --empty` (or --from-datadir DIR, or `db-branch bake`)")
        }),
    }
}

/// The user a new branch belongs to: the sudo caller under sudo, else the effective user.
pub fn invoking_user() -> String {
    if let Ok(u) = std::env::var("SUDO_USER") {
        if !u.is_empty() {
            return u;
        }
    }
    nix::unistd::User::from_uid(nix::unistd::geteuid())
        .ok()
        .flatten()
        .map_or_else(|| nix::unistd::geteuid().to_string(), |u| u.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::branch::ExpiryRequest;
    use crate::error::{EXIT_REFUSED, EXIT_USAGE};
    use crate::ops::testing::{name, sim_host};
    use crate::report::exit_code;
    use crate::supervisor::ServiceState;

    fn args(n: &str) -> CreateOptions {
        CreateOptions::named(name(n))
    }
    fn state(sim: &crate::ops::testing::SimHost, n: &str) -> ServiceState {
        sim.services.with_state(|s| s.units[&name(n)])
    }

    #[test]
    fn creates_then_reports_the_same_branch() {
        let sim = sim_host();
        let first = create(&sim.host, &args("a")).unwrap();
        assert!(!first.existed);
        assert_eq!(state(&sim, "a"), ServiceState::Running);
        let again = create(&sim.host, &args("a")).unwrap();
        assert!(again.existed);
        assert_eq!(again.record.port, first.record.port);
        assert_eq!(sim.services.with_state(|s| s.starts), 1);
    }

    #[test]
    fn rerun_starts_a_stopped_branch() {
        let sim = sim_host();
        create(&sim.host, &args("a")).unwrap();
        sim.services.with_state(|s| s.units.clear());
        let again = create(&sim.host, &args("a")).unwrap();
        assert!(again.existed);
        assert_eq!(state(&sim, "a"), ServiceState::Running);
        assert_eq!(sim.services.with_state(|s| s.starts), 2);
    }

    #[test]
    fn branches_get_distinct_ports() {
        let sim = sim_host();
        let a = create(&sim.host, &args("a")).unwrap();
        let b = create(&sim.host, &args("b")).unwrap();
        assert_ne!(a.record.port, b.record.port);
        assert_eq!(a.record.baseline, Generation(1));
    }

    #[test]
    fn memory_refusal_leaves_nothing() {
        let sim = sim_host();
        sim.memory.set_available(100 << 20);
        let e = create(&sim.host, &args("a")).unwrap_err();
        assert_eq!(exit_code(&e), EXIT_REFUSED);
        assert!(records::list(&sim.host.layout).unwrap().is_empty());
        assert!(sim.storage.with_state(|s| s.branches.is_empty()));
        assert!(!sim.host.layout.branch_dir(&name("a")).exists());
    }

    #[test]
    fn failed_start_undoes_everything() {
        let sim = sim_host();
        sim.services.with_state(|s| s.fail_start = true);
        let e = create(&sim.host, &args("a")).unwrap_err();
        assert!(format!("{e:#}").contains("simulated start failure"));
        assert!(sim.storage.with_state(|s| s.branches.is_empty()));
        assert!(!sim.host.layout.branch_dir(&name("a")).exists());
        assert!(sim.services.with_state(|s| s.units.is_empty()));
        // Its password went with it: the next creator of the name never inherits it.
        assert!(!sim.host.layout.secrets_dir(&name("a")).exists());
    }

    #[test]
    fn a_password_left_under_the_name_is_not_reused() {
        let sim = sim_host();
        let dir = sim.host.layout.secrets_dir(&name("a"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("password"), "LeftByAnEarlierCreateLeftByAnEar\n").unwrap();
        create(&sim.host, &args("a")).unwrap();
        let now = crate::store::secrets::password(&sim.host.layout, &name("a"))
            .unwrap()
            .unwrap();
        assert_ne!(now, "LeftByAnEarlierCreateLeftByAnEar");
    }

    #[test]
    fn server_that_never_answers_is_undone() {
        let sim = sim_host();
        *sim.server.fail_ready.lock().unwrap() = true;
        assert!(create(&sim.host, &args("a")).is_err());
        assert!(sim.storage.with_state(|s| s.branches.is_empty()));
        assert!(sim.services.with_state(|s| s.units.is_empty()));
    }

    #[test]
    fn failed_clone_undoes_record() {
        let sim = sim_host();
        sim.storage.fail_once("clone_branch");
        assert!(create(&sim.host, &args("a")).is_err());
        assert!(!sim.host.layout.branch_dir(&name("a")).exists());
    }

    #[test]
    fn half_made_create_is_cleaned_up_by_the_next() {
        let sim = sim_host();
        create(&sim.host, &args("a")).unwrap();
        let mut r = records::load(&sim.host.layout, &name("a"))
            .unwrap()
            .unwrap();
        r.phase = Phase::Creating;
        records::save(&sim.host.layout, &r).unwrap();
        let again = create(&sim.host, &args("a")).unwrap();
        assert!(!again.existed);
        assert_eq!(again.record.phase, Phase::Ready);
    }

    #[test]
    fn orphan_storage_is_refused_with_advice() {
        let sim = sim_host();
        sim.storage
            .with_state(|s| s.branches.insert(name("a"), (Generation(1), false)));
        let e = create(&sim.host, &args("a")).unwrap_err();
        assert!(crate::report::render(&e).contains("delete a --yes"), "{e}");
    }

    #[test]
    fn missing_or_mismatched_baseline_is_a_usage_error() {
        let sim = sim_host();
        let mut a = args("a");
        a.baseline = Some(Generation(9));
        let e = create(&sim.host, &a).unwrap_err();
        assert_eq!(exit_code(&e), EXIT_USAGE);
        assert!(e.to_string().contains("gen-000001"), "{e}");
        create(&sim.host, &args("a")).unwrap();
        sim.storage
            .with_state(|s| s.generations.insert(Generation(2)));
        let mut b = args("a");
        b.baseline = Some(Generation(2));
        let e = create(&sim.host, &b).unwrap_err();
        assert!(crate::report::render(&e).contains("delete it first"), "{e}");
    }

    #[test]
    fn no_baseline_says_how_to_make_one() {
        let sim = sim_host();
        sim.storage.with_state(|s| s.generations.clear());
        let e = create(&sim.host, &args("a")).unwrap_err();
        assert!(e.to_string().contains("baseline create --empty"));
    }

    #[test]
    fn labels_owner_and_expiry_are_recorded_and_renewed_by_a_rerun() {
        let sim = sim_host();
        let mut a = args("a");
        a.labels = vec!["pr=7".parse().unwrap()];
        a.owner = Some("ci".into());
        a.expiry = ExpiryRequest::Ttl("1d".parse().unwrap());
        let r = create(&sim.host, &a).unwrap();
        let now = sim.host.clock.now();
        assert_eq!(r.record.owner, "ci");
        assert_eq!(r.record.labels["pr"], "7");
        assert_eq!(r.record.expires_at, Some(now + chrono::Duration::days(1)));
        a.expiry = ExpiryRequest::Ttl("7d".parse().unwrap());
        let again = create(&sim.host, &a).unwrap();
        assert!(again.existed);
        assert_eq!(
            again.record.expires_at,
            Some(now + chrono::Duration::days(7))
        );
        // Without --ttl a re-run keeps the expiry.
        let again = create(&sim.host, &args("a")).unwrap();
        assert_eq!(
            again.record.expires_at,
            Some(now + chrono::Duration::days(7))
        );
    }

    #[test]
    fn default_ttl_applies_to_new_branches() {
        let mut sim = sim_host();
        sim.host.config.lifecycle.default_ttl = "2h".parse().unwrap();
        let r = create(&sim.host, &args("a")).unwrap();
        assert_eq!(
            r.record.expires_at,
            Some(sim.host.clock.now() + chrono::Duration::hours(2))
        );
    }

    #[test]
    fn newest_generation_is_the_default() {
        let sim = sim_host();
        sim.storage
            .with_state(|s| s.generations.insert(Generation(3)));
        let r = create(&sim.host, &args("a")).unwrap();
        assert_eq!(r.record.baseline, Generation(3));
    }
}
