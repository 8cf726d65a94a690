//! The follow operations on the in-memory host.

use super::state::load;
use super::*;
use crate::bake::BakeSource;
use crate::branch::Generation;
use crate::flavour::Family;
use crate::host::Host;
use crate::ops::create::{create, CreateOptions};
use crate::ops::testing::{name, sim_host};
use crate::server::Server;
use crate::storage::Storage;
use std::path::PathBuf;

/// The permission bits of the file at `path`.
fn mode(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

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
    assert_eq!(mode(&kept), 0o600);
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
    assert_eq!(mode(&secret), 0o600);
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
        crate::ops::metrics::exposition(&crate::ops::metrics::gather(&sim.host).unwrap()).unwrap();
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

#[test]
fn a_follower_left_by_an_interrupted_follow_is_replaced_by_the_next() {
    let sim = sim_host();
    follow(&sim.host, &opts(None)).unwrap();
    // Killed after the follower was made, before follow.json was written.
    std::fs::remove_file(sim.host.layout.follow_file()).unwrap();
    let again = follow(&sim.host, &opts(None)).unwrap();
    assert!(!again.existed);
    assert!(sim.host.layout.follow_file().exists());
    // A branch of another kind by that name is still refused.
    unfollow(&sim.host).unwrap();
    crate::ops::create::create(&sim.host, &CreateOptions::named(name("follower"))).unwrap();
    let e = follow(&sim.host, &opts(None)).unwrap_err();
    assert!(e.to_string().contains("needs its own name"), "{e}");
}
