//! Baselines that follow a primary (`baseline follow`, `baseline cut`, `baseline unfollow`):
//! a follower is a branch whose datadir was baked from the source at a GTID position and
//! whose server replicates from it ever after. A cut pauses its applier, snapshots its
//! datadir (crash-consistent, the pause as long as a snapshot), resumes it, and makes the
//! snapshot a masked generation off the critical path. The follower itself is never
//! branched from, checkpointed or reset: its data is the source's, unmasked.

use crate::bake::{BakeRequest, BakeSource};
use crate::branch::{BranchName, ExpiryRequest, Generation};
use crate::config::Profile;
use crate::error::{usage, Error, Kind};
use crate::flavour::Family;
use crate::host::Host;
use crate::ops::create::{create, CreateOptions};
use crate::replication::{Cut, ReplicaSource, ReplicaStatus};
use crate::server::Preparation;
use crate::store::files;
use crate::undo::Undo;
use anyhow::{Context, Result};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Instant;

/// What is followed: kept in `ROOT/follow.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Following {
    /// The follower's branch.
    pub branch: BranchName,
    /// The source, password left out.
    pub source: String,
    pub family: Family,
    /// The follower's own server id (the source's differs).
    pub server_id: u32,
    pub seeded_at: DateTime<Utc>,
    /// The bake path that seeded it (`tablespace` or `logical`).
    pub seed_path: String,
    /// The GTIDs the seed held.
    pub seed_gtid: String,
    /// Where the masking SQL came from (None: `--no-mask`, the source holds nothing to
    /// mask). Cuts run the copy taken then (`Layout::follow_mask_file`).
    pub mask_sql: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_cut: Option<LastCut>,
    /// `--every`: how often the timer cuts (None: by hand).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every: Option<crate::values::Duration>,
    /// The timer unit that runs the cuts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timer: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LastCut {
    pub generation: Generation,
    pub at: DateTime<Utc>,
    pub gtid: String,
}

#[derive(Debug, Clone)]
pub struct FollowOptions {
    /// A live source, password already in the URL.
    pub source: BakeSource,
    pub name: BranchName,
    pub mask_sql: Option<PathBuf>,
    /// `--no-mask`: cuts run no masking SQL.
    pub no_mask: bool,
    pub jobs: Option<usize>,
    /// `--every`: cut on a timer this often.
    pub every: Option<crate::values::Duration>,
}

/// What `baseline follow` reports.
#[derive(Debug, Clone, Serialize)]
pub struct Followed {
    /// It was followed already (an idempotent re-run): nothing was seeded.
    pub existed: bool,
    pub following: Following,
    pub port: u16,
    pub status: ReplicaStatus,
    pub seconds: f64,
}

fn load(host: &Host) -> Result<Option<Following>> {
    files::read_json(&host.layout.follow_file(), "the follow state")
}

fn save(host: &Host, following: &Following) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(following)?;
    files::write_atomic(&host.layout.follow_file(), &bytes, 0o600)
}

/// How the follower logs in to its source: kept by db-branch (`Layout::follow_secret_file`)
/// and given to the server only to start replicating (MySQL stores no password of it).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Login {
    host: String,
    port: u16,
    user: String,
    password: String,
}

fn replica_source(host: &Host, following: &Following) -> Result<ReplicaSource> {
    let path = host.layout.follow_secret_file();
    let login: Login = files::read_json(&path, "the follower's login")?.ok_or_else(|| {
        Error::new(
            Kind::Failed,
            format!(
                "{} is missing: the follower's login to its source",
                path.display()
            ),
        )
        .hint("`db-branch baseline unfollow`, then `baseline follow` again")
    })?;
    Ok(ReplicaSource {
        family: following.family,
        host: login.host,
        port: login.port,
        user: login.user,
        password: login.password,
        position: following.seed_gtid.clone(),
    })
}

/// After the server of `record` started: a follower's replication starts again, with the
/// login db-branch keeps (a no-op for any other branch).
pub fn after_start(host: &Host, record: &crate::branch::BranchRecord) -> Result<()> {
    if record.follows.is_none() {
        return Ok(());
    }
    let Some(following) = load(host)?.filter(|f| f.branch == record.name) else {
        return Ok(());
    };
    let source = replica_source(host, &following)?;
    host.server
        .start_replication(&socket(host, &following), &source)
        .with_context(|| format!("follower {} started, but not its replication", record.name))
}

/// Keeps the masking SQL cuts will run: read now, as whoever asked could read it.
fn keep_mask(host: &Host, mask: &std::path::Path) -> Result<()> {
    let sql = std::fs::read(mask).with_context(|| format!("reading {}", mask.display()))?;
    files::write_atomic(&host.layout.follow_mask_file(), &sql, 0o600)
}

fn nothing_followed() -> anyhow::Error {
    Error::new(Kind::NotFound, "nothing is followed here")
        .hint("start with `db-branch baseline follow mysql://USER@HOST:PORT --mask-sql FILE`")
        .into()
}

fn socket(host: &Host, following: &Following) -> PathBuf {
    host.layout.socket(&following.branch)
}

/// `baseline follow SOURCE`: seeds a follower from the source at a GTID position and
/// starts it replicating. Re-run with the same source: reports the follower as it is.
pub fn follow(host: &Host, opts: &FollowOptions) -> Result<Followed> {
    let started = Instant::now();
    let BakeSource::Live { url, .. } = &opts.source else {
        return Err(usage(
            "baseline follow takes a live source: mysql://USER:PASSWORD@HOST:PORT",
        ));
    };
    let shown = crate::bake::redact(url);
    match (&opts.mask_sql, opts.no_mask) {
        (None, false) => return Err(Error::new(
            Kind::Usage,
            "a follower's generations are masked before any branch is made of them: \
                 name the masking SQL",
        )
        .hint(
            "--mask-sql FILE (run by every cut), or --no-mask if the source holds nothing to mask",
        )
        .into()),
        (Some(_), true) => return Err(usage("--mask-sql and --no-mask exclude each other")),
        (Some(mask), false) if !mask.is_file() => {
            return Err(crate::error::not_found(format!(
                "masking SQL file {} does not exist",
                mask.display()
            )))
        }
        _ => {}
    }
    if opts.jobs == Some(0) {
        return Err(usage("--jobs must be at least 1"));
    }
    if let Some(every) = opts.every {
        if every.0.as_secs() < 60 && !cfg!(feature = "testing") {
            return Err(usage(format!(
                "--every {every} is too often: a cut takes a snapshot and a server start; \
                 give a minute or more"
            )));
        }
        if every.0.is_zero() {
            return Err(usage("--every must be longer than 0s"));
        }
        if host.services.kind() == "process" {
            // The built-in supervisor has no timers: refused before anything is seeded.
            host.services.schedule_cuts(Some(every.0))?;
        }
    }
    if host.config.backend == crate::config::Backend::Zfs {
        // A cut is a generation made from a running branch, which only btrfs builds here.
        return Err(Error::new(
            Kind::Usage,
            "baseline follow needs the btrfs backend: on ZFS a generation cannot be made from \
             a running branch yet",
        )
        .hint("follow from a host whose pool is btrfs, and `baseline push` its generations")
        .into());
    }
    let (source_host, source_port, user, password) = crate::bake::source::endpoint(url)?;
    host.storage.open()?;
    if let Some(existing) = load(host)? {
        if existing.source != shown {
            return Err(Error::new(
                Kind::Usage,
                format!("this host follows {} already", existing.source),
            )
            .hint("one source per host: `db-branch baseline unfollow` first")
            .into());
        }
        let mut existing = existing;
        if let Some(mask) = &opts.mask_sql {
            // New masking for the cuts to come; nothing is seeded again.
            let _lock = host.baseline_lock()?;
            keep_mask(host, mask)?;
            if existing.mask_sql.as_ref() != Some(mask) {
                existing.mask_sql = Some(mask.clone());
                save(host, &existing)?;
            }
        }
        if opts.every.is_some() && opts.every != existing.every {
            // Only the schedule changes: nothing is seeded again.
            let _lock = host.baseline_lock()?;
            existing.timer = host.services.schedule_cuts(opts.every.map(|d| d.0))?;
            existing.every = opts.every;
            save(host, &existing)?;
        }
        let record = crate::ops::branch::record::require(host, &existing.branch)?;
        let status = host.server.replica_status(&socket(host, &existing))?;
        return Ok(Followed {
            existed: true,
            port: record.port,
            following: existing,
            status,
            seconds: started.elapsed().as_secs_f64(),
        });
    }
    if crate::store::records::load(&host.layout, &opts.name)?.is_some() {
        return Err(Error::new(
            Kind::Usage,
            format!(
                "a branch named {} exists; the follower needs its own name",
                opts.name
            ),
        )
        .hint("choose another with --name")
        .into());
    }
    let facts = host.baker.follow_source(url)?;
    let ours = host.server.flavour()?;
    if facts.flavour.family != ours.family {
        return Err(Error::new(
            Kind::Usage,
            format!(
                "the source {shown} is {}, and this host's server is {ours}: a follower \
                 replicates within one family (their GTIDs and replication differ)",
                facts.flavour
            ),
        )
        .hint("set mysqld.binary to a server of the source's family")
        .into());
    }
    if let Some(why) = &facts.refusal {
        return Err(usage(format!(
            "the source {shown} cannot be followed: {why}"
        )));
    }
    let server_id = follower_server_id(facts.server_id, host.clock.now());

    let progress = host.printer.progress().labelled("follow");
    let cancel = crate::ops::bake::cancel_on_signals()?;
    let _lock = host.baseline_lock()?;
    crate::ops::trash::ensure_space(host)?;
    // The seed is baked in the workspace the next generation would use, and becomes the
    // follower's datadir without ever being sealed.
    let gen = host
        .storage
        .baselines()?
        .last()
        .map_or(Generation(1), |g| g.next());
    let mut undo = Undo::new();
    let result = (|| -> Result<Followed> {
        undo.push("remove the unfinished seed", move || {
            host.storage.abandon_baseline(gen)
        });
        let workspace = host.storage.begin_baseline(gen)?;
        let work = host.layout.work_dir().join(gen.dir_name());
        progress.note(&format!("seeding a follower of {shown}..."));
        let req = BakeRequest {
            source: opts.source.clone(),
            databases: Vec::new(),
            mask_sql: None,
            verify: false,
            jobs: opts
                .jobs
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get())),
            datadir: &workspace,
            work: &work,
            cancel: &cancel,
            with_users: false,
            into: None,
            for_follower: true,
        };
        let summary = host.baker.bake(&req, &progress);
        progress.finish();
        let summary = summary?;
        crate::bake::check_cancel(&cancel)?;
        let seed_gtid = summary.source_gtid.clone().ok_or_else(|| {
            anyhow::anyhow!(
                "the seed of {shown} has no GTID position (the bake could not hold the source \
                 still while it read it: the source user needs RELOAD)"
            )
        })?;
        let made_by = summary.server.unwrap_or(ours);
        // MySQL refuses a replica whose server_uuid is its source's, and a seed's datadir
        // starts from the same template as any other: the follower makes its own.
        files::remove_file(&workspace.join("auto.cnf"))?;

        let mut create_opts = CreateOptions::named(opts.name.clone());
        create_opts.seed = Some((gen, made_by));
        create_opts.follows = Some(shown.clone());
        create_opts.server_options = crate::replication::follower_options(ours.family, server_id);
        // It must survive the host's crash as well as its own: it is not reset.
        create_opts.profile = Some(Profile::Durable);
        create_opts.expiry = ExpiryRequest::Ttl(crate::values::Duration(std::time::Duration::ZERO));
        let created = create(host, &create_opts)?;
        let name = opts.name.clone();
        undo.push("remove the follower", move || {
            let _lock = host.branch_lock_for_host(&name)?;
            crate::ops::branch::discard::discard(host, &name)
        });
        let timer = host.services.schedule_cuts(opts.every.map(|d| d.0))?;
        if timer.is_some() {
            undo.push("remove the cut timer", move || {
                host.services.schedule_cuts(None).map(|_| ())
            });
        }
        if let Some(mask) = &opts.mask_sql {
            keep_mask(host, mask)?;
            undo.push("remove the kept masking SQL", move || {
                files::remove_file(&host.layout.follow_mask_file())
            });
        }
        let following = Following {
            branch: opts.name.clone(),
            source: shown.clone(),
            family: ours.family,
            server_id,
            seeded_at: host.clock.now(),
            seed_path: summary.path.clone(),
            seed_gtid: seed_gtid.clone(),
            mask_sql: opts.mask_sql.clone(),
            last_cut: None,
            every: opts.every,
            timer,
        };
        let login = Login {
            host: source_host,
            port: source_port,
            user,
            password,
        };
        files::write_atomic(
            &host.layout.follow_secret_file(),
            &serde_json::to_vec(&login)?,
            0o600,
        )?;
        undo.push("remove the follower's login", move || {
            files::remove_file(&host.layout.follow_secret_file())
        });
        host.server.follow(
            &socket(host, &following),
            &ReplicaSource {
                family: ours.family,
                host: login.host,
                port: login.port,
                user: login.user,
                password: login.password,
                position: seed_gtid,
            },
        )?;
        save(host, &following)?;
        let status = host.server.replica_status(&socket(host, &following))?;
        Ok(Followed {
            existed: false,
            port: created.record.port,
            following,
            status,
            seconds: started.elapsed().as_secs_f64(),
        })
    })();
    match result {
        Ok(done) => {
            undo.commit();
            Ok(done)
        }
        Err(e) => Err(undo.unwind(e.context(format!("following {shown}")))),
    }
}

/// A server id for the follower: not the source's, never 0, different on each seeding
/// (two hosts following one source must not share one).
fn follower_server_id(source: u32, now: DateTime<Utc>) -> u32 {
    let nanos = now.timestamp_nanos_opt().unwrap_or_default() as u64;
    let mut id = ((nanos / 1000) % 0x7fff_0000) as u32 + 1000;
    if id == source {
        id += 1;
    }
    id
}

/// What `baseline follower` shows.
#[derive(Debug, Clone, Serialize)]
pub struct FollowerView {
    pub following: Following,
    pub port: u16,
    /// The follower's server: running, stopped, failed.
    pub state: String,
    pub status: Option<ReplicaStatus>,
    /// Why the status could not be read (its server is down).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_error: Option<String>,
}

pub fn status(host: &Host) -> Result<Option<FollowerView>> {
    let Some(following) = load(host)? else {
        return Ok(None);
    };
    let record = crate::ops::branch::record::require(host, &following.branch)?;
    let l = crate::ops::branch::unit::launch(host, &following.branch);
    let state = host.services.state(&l)?;
    let (status, status_error) = if state.is_up() {
        match host.server.replica_status(&socket(host, &following)) {
            Ok(s) => (Some(s), None),
            Err(e) => (None, Some(format!("{e:#}"))),
        }
    } else {
        (
            None,
            Some(format!(
                "the follower's server is {state}; start it with `db-branch start {}`",
                following.branch
            )),
        )
    };
    Ok(Some(FollowerView {
        port: record.port,
        state: state.to_string(),
        following,
        status,
        status_error,
    }))
}

#[derive(Debug, Clone, Default)]
pub struct CutOptions {
    /// Instead of the masking SQL `baseline follow` was given.
    pub mask_sql: Option<PathBuf>,
}

/// What `baseline cut` reports.
#[derive(Debug, Clone, Serialize)]
pub struct CutDone {
    pub generation: Generation,
    #[serde(flatten)]
    pub cut: Cut,
    pub masked: bool,
    pub seconds: f64,
}

/// `baseline cut`: the follower's data now, as the next generation, masked.
pub fn cut(host: &Host, opts: &CutOptions) -> Result<CutDone> {
    let started = Instant::now();
    host.storage.open()?;
    let mut following = load(host)?.ok_or_else(nothing_followed)?;
    let mask = opts.mask_sql.clone().or_else(|| {
        following
            .mask_sql
            .as_ref()
            .map(|_| host.layout.follow_mask_file())
    });
    if let Some(m) = &mask {
        if !m.is_file() {
            return Err(crate::error::not_found(format!(
                "masking SQL file {} does not exist; no generation was made",
                m.display()
            )));
        }
    }
    let name = following.branch.clone();
    let state = host
        .services
        .state(&crate::ops::branch::unit::launch(host, &name))?;
    if !state.is_up() {
        // After a reboot, say: its unit is not started with the host.
        return Err(Error::new(
            Kind::Failed,
            format!(
                "follower {name} is {state}, so it is not replicating {}; no generation was made",
                following.source
            ),
        )
        .hint(format!(
            "start it with `db-branch start {name}`: it resumes from the position it had \
             applied, then cut again"
        ))
        .into());
    }
    let sock = socket(host, &following);
    let progress = host.printer.progress().labelled("cut");
    let (generation, cut) =
        crate::ops::baseline::build_in(host, "baseline", |work, generation| {
            let _lock = host.branch_lock(&name)?;
            let status = host
                .server
                .replica_status(&sock)
                .with_context(|| format!("reading the replication status of follower {name}"))?;
            if !status.healthy() {
                return Err(broken(&following, &status));
            }
            progress.phase("pause the applier, snapshot, resume", 0);
            let paused = Instant::now();
            let gtid = host.server.pause_applier(&sock)?;
            let taken = (|| -> Result<PathBuf> {
                host.server
                    .flush_logs(&sock)
                    .with_context(|| format!("flushing the redo log of follower {name}"))?;
                host.storage.begin_baseline_from_branch(generation, &name)
            })();
            // The follower goes on replicating whatever happened to the snapshot.
            let resumed = host.server.resume_applier(&sock);
            let pause_seconds = paused.elapsed().as_secs_f64();
            let workspace = taken?;
            resumed?;
            let prep = Preparation {
                initialize: false,
                create_client_user: false,
                sql_files: mask.iter().cloned().collect(),
                from_follower: true,
            };
            let made = host
                .server
                .prepare_baseline(&workspace, work, &prep, &progress)
                .with_context(|| format!("preparing baseline {generation} from follower {name}"));
            progress.finish();
            let cut = Cut {
                source: following.source.clone(),
                gtid,
                lag_seconds: status.lag_seconds,
                pause_seconds,
            };
            Ok((
                workspace,
                made?,
                format!("follow {}", following.source),
                Some(cut.clone()),
                cut,
            ))
        })?;
    following.last_cut = Some(LastCut {
        generation,
        at: host.clock.now(),
        gtid: cut.gtid.clone(),
    });
    save(host, &following)?;
    Ok(CutDone {
        generation,
        cut,
        masked: mask.is_some(),
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// A follower that is not replicating makes no generation: what it holds is of a moment
/// nobody chose, and may never catch up.
fn broken(following: &Following, status: &ReplicaStatus) -> anyhow::Error {
    let why = status.trouble();
    Error::new(
        Kind::Failed,
        format!(
            "follower {} is not replicating {} ({why}); no generation was made",
            following.branch, following.source
        ),
    )
    .hint("if the source is back, replication resumes by itself; see `db-branch baseline follower`")
    .hint(
        "if the source purged binary logs the follower still needs, or the data diverged: \
         `db-branch baseline unfollow`, then `baseline follow` again to seed it anew",
    )
    .into()
}

/// `baseline unfollow`: stops following and destroys the follower (its data is unmasked:
/// it never goes to the trash). Generations already cut stay.
pub fn unfollow(host: &Host) -> Result<Following> {
    host.storage.open()?;
    let following = load(host)?.ok_or_else(nothing_followed)?;
    if following.timer.is_some() {
        // First, so no cut starts on a follower on its way out.
        host.services.schedule_cuts(None)?;
    }
    let _lock = host.branch_lock(&following.branch)?;
    crate::ops::branch::discard::discard(host, &following.branch)?;
    files::remove_file(&host.layout.follow_mask_file())?;
    files::remove_file(&host.layout.follow_secret_file())?;
    files::remove_file(&host.layout.follow_file())?;
    Ok(following)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::{name, sim_host};
    use crate::server::Server;
    use crate::storage::Storage;

    fn opts(mask: Option<PathBuf>) -> FollowOptions {
        FollowOptions {
            source: BakeSource::parse("mysql://repl:pw@127.0.0.1:3999", None).unwrap(),
            name: name("follower"),
            no_mask: mask.is_none(),
            mask_sql: mask,
            jobs: None,
            every: None,
        }
    }

    #[test]
    fn cuts_run_the_masking_sql_as_it_was_when_given() {
        let sim = sim_host();
        let dir = tempfile::tempdir().unwrap();
        let mask = dir.path().join("mask.sql");
        std::fs::write(&mask, "UPDATE t SET email = 'x';").unwrap();
        follow(&sim.host, &opts(Some(mask.clone()))).unwrap();
        let kept = sim.host.layout.follow_mask_file();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&kept).unwrap().permissions().mode() & 0o777,
            0o600
        );
        // Swapped under the follower: the cuts still run what was given.
        std::fs::write(&mask, "DROP DATABASE mysql;").unwrap();
        cut(&sim.host, &CutOptions::default()).unwrap();
        assert_eq!(
            std::fs::read_to_string(&kept).unwrap(),
            "UPDATE t SET email = 'x';"
        );
        // Given again: the new text is kept.
        follow(&sim.host, &opts(Some(mask.clone()))).unwrap();
        assert_eq!(
            std::fs::read_to_string(&kept).unwrap(),
            "DROP DATABASE mysql;"
        );
        unfollow(&sim.host).unwrap();
        assert!(!kept.exists());
    }

    #[test]
    fn every_puts_cuts_on_a_timer_and_unfollow_takes_it_off() {
        let sim = sim_host();
        let mut o = opts(None);
        o.every = Some("6h".parse().unwrap());
        let f = follow(&sim.host, &o).unwrap();
        assert_eq!(f.following.timer.as_deref(), Some("sim-cut.timer"));
        let six_hours = std::time::Duration::from_secs(6 * 3600);
        assert_eq!(sim.services.with_state(|s| s.cut_every), Some(six_hours));
        // Again with another interval: only the schedule changes.
        o.every = Some("1h".parse().unwrap());
        let again = follow(&sim.host, &o).unwrap();
        assert!(again.existed);
        assert_eq!(
            sim.services.with_state(|s| s.cut_every),
            Some(std::time::Duration::from_secs(3600))
        );
        assert_eq!(load(&sim.host).unwrap().unwrap().every, o.every);
        unfollow(&sim.host).unwrap();
        assert_eq!(sim.services.with_state(|s| s.cut_every), None);
    }

    #[test]
    fn a_follower_is_seeded_started_and_never_a_generation() {
        let sim = sim_host();
        let f = follow(&sim.host, &opts(None)).unwrap();
        assert!(!f.existed);
        assert_eq!(f.following.seed_gtid, "0-1-42");
        assert!(f.status.healthy());
        // The seed became the follower's datadir; no generation was sealed for it.
        assert_eq!(sim.storage.baselines().unwrap(), vec![Generation(1)]);
        assert!(sim.storage.with_state(|s| s.workspaces.is_empty()));
        let record = crate::store::records::load(&sim.host.layout, &name("follower"))
            .unwrap()
            .unwrap();
        assert_eq!(
            record.follows.as_deref(),
            Some("mysql://repl:***@127.0.0.1:3999")
        );
        assert_eq!(record.expires_at, None);
        assert!(record
            .server_options
            .iter()
            .any(|o| o == "skip-slave-start=0"));
        // Again with the same source: reported, nothing seeded.
        assert!(follow(&sim.host, &opts(None)).unwrap().existed);
        assert_eq!(sim.baker.baked.lock().unwrap().len(), 1);
    }

    #[test]
    fn nothing_is_made_from_a_follower_but_cut_generations() {
        let sim = sim_host();
        follow(&sim.host, &opts(None)).unwrap();
        let mut c = CreateOptions::named(name("b"));
        c.from = Some("follower".parse().unwrap());
        assert!(create(&sim.host, &c)
            .unwrap_err()
            .to_string()
            .contains("unmasked"));
        assert!(crate::ops::checkpoint::make(&sim.host, &name("follower"), None, false).is_err());
        let reset = crate::ops::reset::ResetOptions::named(name("follower"));
        assert!(crate::ops::reset::reset(&sim.host, &reset).is_err());
        let del = crate::ops::delete::delete(
            &sim.host,
            &name("follower"),
            true,
            crate::store::trash::Reason::Delete,
        );
        let e = del.unwrap_err();
        assert!(e.to_string().contains("follows"), "{e:#}");
        let done = cut(&sim.host, &CutOptions::default()).unwrap();
        assert_eq!(done.generation, Generation(2));
        assert_eq!(done.cut.gtid, "0-1-42");
        let info = sim.storage.generation_info(Generation(2)).unwrap().unwrap();
        assert_eq!(info.followed.unwrap().gtid, "0-1-42");
        assert_eq!(*sim.server.pauses.lock().unwrap(), 1);
        // The applier runs again after the cut.
        assert!(
            sim.server
                .replica_status(&sim.host.layout.socket(&name("follower")))
                .unwrap()
                .applying
        );
        unfollow(&sim.host).unwrap();
        assert!(!sim.host.layout.follow_file().exists());
        assert!(sim
            .storage
            .with_state(|s| !s.branches.contains_key(&name("follower"))));
    }

    fn follower_check(host: &Host) -> crate::check::Check {
        crate::ops::doctor::report(host, "")
            .checks
            .into_iter()
            .find(|c| c.name == "follower")
            .expect("doctor shows the follower")
    }

    #[test]
    fn a_started_follower_replicates_again_with_the_login_kept_outside_its_datadir() {
        let sim = sim_host();
        follow(&sim.host, &opts(None)).unwrap();
        let secret = sim.host.layout.follow_secret_file();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&secret).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert!(std::fs::read_to_string(&secret).unwrap().contains("\"pw\""));
        crate::ops::power::stop(&sim.host, &name("follower")).unwrap();
        let sock = sim.host.layout.socket(&name("follower"));
        sim.server
            .replicas
            .lock()
            .unwrap()
            .get_mut(&sock)
            .unwrap()
            .receiving = false;
        crate::ops::power::start(&sim.host, &name("follower")).unwrap();
        assert!(sim.server.replica_status(&sock).unwrap().receiving);
        unfollow(&sim.host).unwrap();
        assert!(!secret.exists());
    }

    #[test]
    fn a_stopped_follower_makes_no_generation_and_says_how_to_start_it() {
        let sim = sim_host();
        follow(&sim.host, &opts(None)).unwrap();
        sim.services.with_state(|s| {
            s.units
                .insert(name("follower"), crate::supervisor::ServiceState::Stopped)
        });
        let e = cut(&sim.host, &CutOptions::default()).unwrap_err();
        let text = crate::report::chain_text(&e);
        assert!(text.contains("no generation was made"), "{text}");
        assert_eq!(sim.storage.baselines().unwrap(), vec![Generation(1)]);
    }

    #[test]
    fn a_broken_stream_makes_no_generation() {
        let sim = sim_host();
        follow(&sim.host, &opts(None)).unwrap();
        assert_eq!(follower_check(&sim.host).level, crate::check::Level::Ok);
        let metrics =
            crate::ops::metrics::exposition(&crate::ops::metrics::gather(&sim.host).unwrap())
                .unwrap();
        assert!(
            metrics.contains(
                "db_branch_follower_replicating{source=\"mysql://repl:***@127.0.0.1:3999\"} 1"
            ),
            "{metrics}"
        );
        let sock = sim.host.layout.socket(&name("follower"));
        sim.server
            .replicas
            .lock()
            .unwrap()
            .get_mut(&sock)
            .unwrap()
            .last_error = Some("receiver: error reconnecting to master".into());
        let e = cut(&sim.host, &CutOptions::default()).unwrap_err();
        assert!(format!("{e:#}").contains("no generation was made"), "{e:#}");
        assert_eq!(sim.storage.baselines().unwrap(), vec![Generation(1)]);
        assert_eq!(*sim.server.pauses.lock().unwrap(), 0);
        let check = follower_check(&sim.host);
        assert_eq!(check.level, crate::check::Level::Warn);
        assert!(
            check.detail.contains("error reconnecting"),
            "{}",
            check.detail
        );
        let m = crate::ops::metrics::gather(&sim.host).unwrap();
        assert!(!m.follower.unwrap().replicating);
    }

    #[test]
    fn bad_sources_and_flags_are_refused_before_anything() {
        let sim = sim_host();
        let mut o = opts(None);
        o.no_mask = false;
        assert!(follow(&sim.host, &o)
            .unwrap_err()
            .to_string()
            .contains("mask"));
        *sim.baker.source.lock().unwrap() = Some(crate::bake::source::SourceFacts {
            flavour: crate::flavour::Flavour::new(Family::Mysql, 9, 7, 4),
            server_id: 1,
            refusal: None,
        });
        let e = follow(&sim.host, &opts(None)).unwrap_err();
        assert!(e.to_string().contains("one family"), "{e}");
        *sim.baker.source.lock().unwrap() = Some(crate::bake::source::SourceFacts {
            flavour: crate::flavour::Flavour::new(Family::Mariadb, 10, 11, 19),
            server_id: 1,
            refusal: Some("its binary log is off".into()),
        });
        assert!(follow(&sim.host, &opts(None))
            .unwrap_err()
            .to_string()
            .contains("binary log"));
        assert!(sim.baker.baked.lock().unwrap().is_empty());
        assert!(!sim.host.layout.follow_file().exists());
    }

    #[test]
    fn a_failed_start_leaves_no_follower() {
        let sim = sim_host();
        *sim.server.follow_refusal.lock().unwrap() = Some("Access denied".into());
        let r = follow(&sim.host, &opts(None));
        assert!(r.is_err());
        assert!(
            crate::store::records::load(&sim.host.layout, &name("follower"))
                .unwrap()
                .is_none()
        );
        assert!(sim
            .storage
            .with_state(|s| s.branches.is_empty() && s.workspaces.is_empty()));
        assert!(!sim.host.layout.follow_file().exists());
    }
}
