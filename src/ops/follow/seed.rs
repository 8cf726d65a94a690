//! `baseline follow`: the seed, the follower, its replication and its schedule.

use super::state::{keep_mask, load, save, save_login, socket, Following, Login};
use crate::bake::{BakeRequest, BakeSource};
use crate::branch::{BranchName, ExpiryRequest};
use crate::config::Profile;
use crate::error::{usage, Error, Kind};
use crate::host::Host;
use crate::ops::create::{create, CreateOptions};
use crate::replication::ReplicaStatus;
use crate::store::files;
use crate::undo::Undo;
use anyhow::Result;
use chrono::{DateTime, Utc};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Instant;

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
    let leftover = crate::store::records::load(&host.layout, &opts.name)?;
    if leftover.as_ref().is_some_and(|r| r.follows.is_some()) {
        // A follower no follow.json names: left by a `baseline follow` that was killed
        // before it recorded what it follows. Nothing else can remove it (delete refuses a
        // follower, unfollow knows of none), and following again replaces it.
        host.printer.note(format!(
            "removing follower {} left by an interrupted `baseline follow`",
            opts.name
        ));
        let _lock = host.branch_lock_for_host(&opts.name)?;
        crate::ops::branch::discard::discard(host, &opts.name)?;
    } else if leftover.is_some() {
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
    let gen = crate::ops::baseline::next_generation(host)?;
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
        save_login(host, &login)?;
        undo.push("remove the follower's login", move || {
            files::remove_file(&host.layout.follow_secret_file())
        });
        host.server.follow(
            &socket(host, &following),
            &login.source(ours.family, seed_gtid),
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
