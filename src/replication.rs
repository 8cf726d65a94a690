//! Following a primary by replication (`baseline follow`): what differs between MySQL and
//! MariaDB — their GTID positions, the statements that point a replica at its source,
//! pause and resume its applier, and forget it all — as pure data and SQL text. Nothing
//! here runs anything (server/real.rs runs these; ops/follow.rs decides when).

use crate::flavour::Family;
use crate::sql::sql_string;
use serde::{Deserialize, Serialize};

/// Where a follower replicates from, and from which position on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaSource {
    pub family: Family,
    pub host: String,
    pub port: u16,
    pub user: String,
    pub password: String,
    /// The GTID set (MySQL) or position (MariaDB) the seed holds: replication carries on
    /// from the transaction after it.
    pub position: String,
}

/// What a follower's replication threads report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplicaStatus {
    /// The receiver (IO thread) is connected to the source.
    pub receiving: bool,
    /// The applier (SQL thread) runs.
    pub applying: bool,
    /// Seconds the applier is behind the source (None: not known, e.g. stopped).
    pub lag_seconds: Option<u64>,
    /// The GTIDs this follower has applied.
    pub position: String,
    /// The newest error of either thread, as the server words it (None: no error).
    pub last_error: Option<String>,
}

impl ReplicaStatus {
    /// Both threads run and neither reports an error.
    pub fn healthy(&self) -> bool {
        self.receiving && self.applying && self.last_error.is_none()
    }

    /// `receiver running, applier stopped`.
    pub fn threads(&self) -> String {
        let word = |on: bool| if on { "running" } else { "stopped" };
        format!(
            "receiver {}, applier {}",
            word(self.receiving),
            word(self.applying)
        )
    }

    /// Why it is not healthy: its error, else which thread is stopped.
    pub fn trouble(&self) -> String {
        self.last_error.clone().unwrap_or_else(|| self.threads())
    }
}

/// How a generation was cut from a follower (`baseline cut`), kept with the generation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cut {
    /// The source followed, password left out.
    pub source: String,
    /// The GTIDs the generation holds: every transaction of the source up to these, and
    /// none after.
    pub gtid: String,
    /// How far the follower was behind the source when its applier was paused.
    pub lag_seconds: Option<u64>,
    /// How long the applier was paused for the snapshot.
    pub pause_seconds: f64,
}

/// Which GTIDs a server has executed, as the position a replica of it starts after:
/// MariaDB's binlog position (`domain-server-seq,…`), MySQL's executed set.
pub fn source_position_query(family: Family) -> &'static str {
    match family {
        Family::Mariadb => "SELECT @@GLOBAL.gtid_binlog_pos",
        Family::Mysql => "SELECT @@GLOBAL.gtid_executed",
    }
}

/// What a follower has applied (read while its applier is paused).
pub fn applied_position_query(family: Family) -> &'static str {
    match family {
        Family::Mariadb => "SELECT @@GLOBAL.gtid_slave_pos",
        Family::Mysql => "SELECT @@GLOBAL.gtid_executed",
    }
}

/// The statements that make a follower replicate from `source`, after `source.position`,
/// and start it. MariaDB keeps the password in master.info, a file of the follower's
/// datadir that `forget_sql` deletes before any generation is sealed. MySQL would keep it
/// in a row of mysql.slave_master_info, an InnoDB table, whose deleted bytes outlive the
/// row in pages, the doublewrite file and the redo log of every copy: it is never given
/// there, only to `START REPLICA` (`start_sql`), which does not store it.
pub fn follow_sql(source: &ReplicaSource) -> Vec<String> {
    let host = sql_string(&source.host);
    let user = sql_string(&source.user);
    let password = sql_string(&source.password);
    let position = sql_string(&source.position);
    let port = source.port;
    match source.family {
        Family::Mariadb => vec![
            "STOP SLAVE".into(),
            "RESET SLAVE ALL".into(),
            format!("SET GLOBAL gtid_slave_pos = {position}"),
            format!(
                "CHANGE MASTER TO MASTER_HOST = {host}, MASTER_PORT = {port}, \
                 MASTER_USER = {user}, MASTER_PASSWORD = {password}, \
                 MASTER_USE_GTID = slave_pos, MASTER_CONNECT_RETRY = 5"
            ),
            start_sql(source),
        ],
        Family::Mysql => vec![
            "STOP REPLICA".into(),
            "RESET REPLICA ALL".into(),
            // The seed's transactions are in its data, not in any binary log of its own.
            "RESET BINARY LOGS AND GTIDS".into(),
            format!("SET GLOBAL gtid_purged = {position}"),
            // GET_SOURCE_PUBLIC_KEY: caching_sha2_password over a connection without TLS.
            format!(
                "CHANGE REPLICATION SOURCE TO SOURCE_HOST = {host}, SOURCE_PORT = {port}, \
                 SOURCE_USER = {user}, SOURCE_AUTO_POSITION = 1, GET_SOURCE_PUBLIC_KEY = 1, \
                 SOURCE_CONNECT_RETRY = 5"
            ),
            start_sql(source),
        ],
    }
}

/// Starts a follower's replication (again: after its server started). MySQL's carries the
/// password, which it does not store (`follow_sql`).
pub fn start_sql(source: &ReplicaSource) -> String {
    match source.family {
        Family::Mariadb => "START SLAVE".into(),
        Family::Mysql => format!(
            "START REPLICA USER = {} PASSWORD = {}",
            sql_string(&source.user),
            sql_string(&source.password)
        ),
    }
}

/// Stops the applier only: the receiver keeps fetching, so resuming loses no time.
pub fn pause_sql(family: Family) -> &'static str {
    match family {
        Family::Mariadb => "STOP SLAVE SQL_THREAD",
        Family::Mysql => "STOP REPLICA SQL_THREAD",
    }
}

pub fn resume_sql(family: Family) -> &'static str {
    match family {
        Family::Mariadb => "START SLAVE SQL_THREAD",
        Family::Mysql => "START REPLICA SQL_THREAD",
    }
}

/// Stops replication and removes every trace of the source from a datadir: its address,
/// user and password, and the relay logs.
pub fn forget_sql(family: Family) -> Vec<String> {
    match family {
        Family::Mariadb => vec!["STOP SLAVE".into(), "RESET SLAVE ALL".into()],
        Family::Mysql => vec!["STOP REPLICA".into(), "RESET REPLICA ALL".into()],
    }
}

/// The statement whose one row describes the replication threads.
pub fn status_query(family: Family) -> &'static str {
    match family {
        Family::Mariadb => "SHOW SLAVE STATUS",
        Family::Mysql => "SHOW REPLICA STATUS",
    }
}

/// The column names of `status_query`'s row that `ReplicaStatus` is read from:
/// (receiver running, applier running, lag, receiver's error, applier's error).
pub fn status_columns(family: Family) -> [&'static str; 5] {
    match family {
        Family::Mariadb => [
            "Slave_IO_Running",
            "Slave_SQL_Running",
            "Seconds_Behind_Master",
            "Last_IO_Error",
            "Last_SQL_Error",
        ],
        Family::Mysql => [
            "Replica_IO_Running",
            "Replica_SQL_Running",
            "Seconds_Behind_Source",
            "Last_IO_Error",
            "Last_SQL_Error",
        ],
    }
}

/// Option-file lines of a follower's server. `server_id` must differ from the source's
/// (and from any other replica's of it). A MariaDB follower starts replicating by itself at
/// every start (every other server of db-branch is told never to); a MySQL one is started
/// by db-branch, which alone holds its password. The relay log is thrown away and fetched
/// again after a crash, so a follower resumes where it was.
pub fn follower_options(family: Family, server_id: u32) -> Vec<String> {
    let mut lines = vec![
        format!("server-id={server_id}"),
        "relay-log=follower-relay-bin".to_string(),
        "relay-log-recovery=ON".to_string(),
        // Only the replication threads write (root bypasses it; clients are not given root).
        "read-only=ON".to_string(),
    ];
    match family {
        Family::Mariadb => lines.push("skip-slave-start=0".into()),
        Family::Mysql => {
            // No skip-replica-start=OFF: without its password (never stored) a receiver
            // started by the server itself could not log in; db-branch starts it.
            lines.push("gtid-mode=ON".into());
            lines.push("enforce-gtid-consistency=ON".into());
        }
    }
    lines
}

/// Why a source cannot be followed, from its variables (None: it can).
pub fn unfollowable(family: Family, log_bin: bool, gtid_mode: Option<&str>) -> Option<String> {
    if !log_bin {
        return Some(
            "its binary log is off (log_bin = OFF); start it with --log-bin (and a server_id)"
                .into(),
        );
    }
    match (family, gtid_mode) {
        (Family::Mysql, Some(mode)) if !mode.eq_ignore_ascii_case("ON") => Some(format!(
            "its gtid_mode is {mode}; a follower positions itself by GTID: set gtid_mode = ON \
             and enforce_gtid_consistency = ON on the source"
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(family: Family) -> ReplicaSource {
        ReplicaSource {
            family,
            host: "127.0.0.1".into(),
            port: 3306,
            user: "repl".into(),
            password: "it's".into(),
            position: "0-1-42".into(),
        }
    }

    #[test]
    fn each_family_is_pointed_at_its_source_in_its_own_words() {
        let maria = follow_sql(&source(Family::Mariadb)).join("\n");
        assert!(
            maria.contains("SET GLOBAL gtid_slave_pos = '0-1-42'"),
            "{maria}"
        );
        assert!(maria.contains("MASTER_USE_GTID = slave_pos"), "{maria}");
        assert!(maria.contains("MASTER_PASSWORD = 'it''s'"), "{maria}");
        let mysql = follow_sql(&source(Family::Mysql)).join("\n");
        assert!(
            mysql.contains("SET GLOBAL gtid_purged = '0-1-42'"),
            "{mysql}"
        );
        assert!(mysql.contains("SOURCE_AUTO_POSITION = 1"), "{mysql}");
        assert!(!mysql.contains("MASTER"), "{mysql}");
        // The password only in START REPLICA, which stores none of it.
        let with_password: Vec<&str> = mysql.lines().filter(|l| l.contains("it''s")).collect();
        assert_eq!(
            with_password,
            ["START REPLICA USER = 'repl' PASSWORD = 'it''s'"]
        );
    }

    #[test]
    fn a_follower_starts_replicating_and_the_others_do_not() {
        let m = follower_options(Family::Mariadb, 7).join("\n");
        assert!(
            m.contains("skip-slave-start=0") && m.contains("server-id=7"),
            "{m}"
        );
        // MySQL's is started by db-branch, which alone has its password.
        let y = follower_options(Family::Mysql, 7).join("\n");
        assert!(
            !y.contains("skip-replica-start") && y.contains("gtid-mode=ON"),
            "{y}"
        );
    }

    #[test]
    fn sources_without_binlog_or_gtids_are_refused_with_what_to_set() {
        assert!(unfollowable(Family::Mariadb, false, None)
            .unwrap()
            .contains("--log-bin"));
        assert!(unfollowable(Family::Mysql, true, Some("OFF_PERMISSIVE"))
            .unwrap()
            .contains("gtid_mode = ON"));
        assert_eq!(unfollowable(Family::Mysql, true, Some("ON")), None);
        assert_eq!(unfollowable(Family::Mariadb, true, None), None);
    }
}
