//! Starting a branch's server: what the supervisor needs (`Launch`), the option file the
//! server reads, the start itself and the wait until it answers.

use super::unit::{is_up, launch};
use crate::branch::{Activity, BranchRecord};
use crate::host::Host;
use crate::server::options::{render, ServerSpec};
use crate::server::preload;
use crate::store::files::write_atomic;
use crate::store::secrets;
use crate::supervisor::Launch;
use anyhow::{Context, Result};

/// `launch` with the memory limits the guard counted (`budget::Ceiling::limits`) and the
/// environment of the branch's profile and server (`server::preload`).
pub fn launch_for(host: &Host, record: &BranchRecord) -> Result<Launch> {
    let mut l = launch(host, &record.name);
    (l.memory_high, l.memory_max) = crate::ops::branch::budget::ceiling(host, record).limits();
    l.environment = preload::environment(
        host.server.flavour().ok(),
        record.profile,
        host.config.mysqld.skip_fsync,
        host.server.fsync_free_library().as_deref(),
        host.server.ticks_shim()?.as_deref(),
    );
    Ok(l)
}

pub fn server_spec(host: &Host, record: &BranchRecord) -> Result<ServerSpec> {
    let name = &record.name;
    let tmpdir = host.layout.branch_tmp(name);
    Ok(ServerSpec {
        // The options are for the program that will read them.
        flavour: host.server.flavour()?,
        datadir: host.storage.branch_datadir(name),
        network: Some((host.config.bind_address, record.port)),
        socket: host.layout.socket(name),
        pid_file: host.layout.pid_file(name),
        error_log: host.layout.error_log(name),
        secure_file_priv: tmpdir.clone(),
        tmpdir,
        buffer_pool: record.buffer_pool,
        user: host.config.mysqld.user.clone(),
        extra_args: host.config.mysqld.extra_args.clone(),
        profile: record.profile,
        branch_options: record.server_options.clone(),
        init_file: Some(host.layout.init_sql(name)),
        // Filled in by `write_options`, which makes the certificate.
        tls: None,
        tls_required: false,
    })
}

/// Writes the per-branch settings the unit (or the built-in supervisor) reads at start:
/// the option file, and the start-up SQL that gives the client account the branch's own
/// password (made the first time; kept for the branch's life).
pub fn write_options(host: &Host, record: &BranchRecord) -> Result<()> {
    let mut spec = server_spec(host, record)?;
    // Branches made before `run/` existed: their directory becomes root's, the server's
    // files move to `run/` with this start.
    crate::store::records::claim_branch_dir(&host.layout, &record.name)?;
    host.server
        .prepare_runtime_dir(&host.layout.run_dir(&record.name))?;
    let password = secrets::ensure_password(
        &host.layout,
        &record.name,
        record.owner_uid.or_else(|| secrets::uid_of(&record.owner)),
    )?;
    let user = &host.config.client.user;
    let remote = crate::store::tls::needed(host.config.bind_address);
    let mut statements = spec.flavour.client_account_sql(user, &password);
    if remote {
        statements.extend(spec.flavour.remote_client_account_sql(user, &password));
    }
    let server_gid = secrets::gid_of(&host.config.mysqld.user);
    secrets::write_init_sql(&host.layout, &record.name, &statements, server_gid)?;
    if remote || spec.flavour.makes_certificate_at_start() {
        spec.tls_required = remote;
        spec.tls = Some(crate::store::tls::branch_files(
            &host.layout,
            &record.name,
            host.config.bind_address,
            &host.config.advertise_address,
            server_gid,
        )?);
    }
    let path = host.layout.option_file(&record.name);
    write_atomic(&path, render(&spec).as_bytes(), 0o644)
}

/// Hands the server to the supervisor (the caller has admitted it and written its
/// options); returns once the supervisor has started it.
pub fn start(host: &Host, record: &BranchRecord) -> Result<()> {
    if !is_up(host, &record.name) {
        // MySQL refuses to start while its socket's lock file names a process that still
        // exists, and a server just killed can linger as a zombie until its parent reaps
        // it. Ours is gone: its lock is stale.
        let lock = host.layout.socket(&record.name).with_extension("sock.lock");
        match std::fs::remove_file(&lock) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("removing {}", lock.display()));
            }
            _ => {}
        }
    }
    // Cheap when right (one stat); a branch of a generation received from a host where
    // the server's user has another uid is given to this host's user.
    host.server
        .adopt_datadir(&host.storage.branch_datadir(&record.name))?;
    host.services
        .start(&launch_for(host, record)?)
        .with_context(|| format!("starting the server of branch {}", record.name))
}

/// Waits until the server answers, then records the start as activity: a branch someone
/// just started is not idle.
pub fn wait_ready(host: &Host, record: &mut BranchRecord) -> Result<()> {
    let l = launch(host, &record.name);
    let alive = || host.services.state(&l).is_ok_and(|s| s.is_up());
    host.server
        .wait_ready(
            &host.layout.socket(&record.name),
            &l.error_log,
            host.config.mysqld.start_timeout.0,
            &alive,
        )
        .with_context(|| format!("waiting for the server of branch {} to answer", record.name))?;
    record.activity = Activity::started(host.clock.now());
    record.stopped_idle = false;
    Ok(())
}

/// Options, start, wait: for a branch whose record is already final (start, reset, wake).
pub fn start_and_wait(host: &Host, record: &mut BranchRecord) -> Result<()> {
    write_options(host, record)?;
    start(host, record)?;
    wait_ready(host, record)
}
