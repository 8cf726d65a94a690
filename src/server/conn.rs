//! db-branch's own connections to a server: as the OS root user over the server's socket
//! (socket authentication), and the wait until a starting server answers.

use anyhow::{anyhow, Context, Result};
use mysql::prelude::Queryable;
use std::path::Path;
use std::time::{Duration, Instant};

/// A connection as the OS root user over the socket. The packet size is given and socket
/// discovery is off, so the driver sends no `SELECT @@max_allowed_packet` or `SELECT
/// @@socket`: our probes must stay out of the statement counters that measure activity.
pub fn socket_conn(socket: &Path) -> mysql::Result<mysql::Conn> {
    let opts = mysql::OptsBuilder::new()
        .socket(Some(socket.to_string_lossy().into_owned()))
        .user(Some("root"))
        .prefer_socket(false)
        .max_allowed_packet(Some(16 << 20));
    mysql::Conn::new(opts)
}

/// `socket_conn` with an error that names the socket.
pub fn admin(socket: &Path) -> Result<mysql::Conn> {
    socket_conn(socket).with_context(|| format!("connecting as root to {}", socket.display()))
}

/// The last lines of a server's error log, for messages.
pub fn log_tail(log: &Path) -> String {
    read_no_follow(log)
        .map(|b| crate::exec::tail(&b))
        .unwrap_or_else(|e| format!("(no log at {}: {e})", log.display()))
}

/// Reads a file the server's OS user may have written (its log, in a directory it owns)
/// without following a link planted in its place: root must not quote, say, /etc/shadow
/// into an error message shown to a db-branchd caller.
pub fn read_no_follow(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Waits until the server behind `socket` answers (a query, or an authentication refusal:
/// either way it is serving). `alive` says whether the process still runs, so a server
/// that dies during start-up fails fast instead of at the timeout.
pub fn wait_ready(
    socket: &Path,
    error_log: &Path,
    timeout: Duration,
    alive: &dyn Fn() -> bool,
) -> Result<()> {
    let start = Instant::now();
    loop {
        match socket_conn(socket) {
            Ok(mut conn) => {
                // `DO 1`, not `SELECT 1`: it is subtracted from the activity counter.
                conn.query_drop("DO 1")
                    .context("the server accepted a connection but failed `DO 1`")?;
                return Ok(());
            }
            // An authentication refusal is an answer: the server is serving.
            Err(mysql::Error::MySqlError(_)) => return Ok(()),
            Err(_) => {}
        }
        if !alive() {
            return Err(anyhow!(
                "the server exited during start-up; last lines of {}:\n{}",
                error_log.display(),
                log_tail(error_log)
            ));
        }
        if start.elapsed() > timeout {
            return Err(anyhow!(
                "the server did not answer on {} within {timeout:?}; last lines of {}:\n{}",
                socket.display(),
                error_log.display(),
                log_tail(error_log)
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
