//! Which server this is — Oracle MySQL or MariaDB, and its version — and everything that
//! differs between them: how an empty datadir is made, the option file, db-branch's own
//! login and the client account, the catalogue tables. Pure data and text: nothing here
//! runs anything.

use crate::config::Profile;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    Mysql,
    Mariadb,
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Family::Mysql => "MySQL",
            Family::Mariadb => "MariaDB",
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl Version {
    /// `9.7.4`, `10.11.19-MariaDB-0+deb12u1`, `8.0.36-log`: the leading three numbers.
    pub fn parse(text: &str) -> Option<Version> {
        let mut parts = text
            .split(|c: char| !c.is_ascii_digit())
            .filter(|p| !p.is_empty());
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        let patch = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        Some(Version {
            major,
            minor,
            patch,
        })
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl Serialize for Version {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Version {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Version::parse(&s).ok_or_else(|| serde::de::Error::custom(format!("bad version {s:?}")))
    }
}

/// A server family and version: what made a datadir, or what a binary is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Flavour {
    pub family: Family,
    pub version: Version,
}

impl fmt::Display for Flavour {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.family, self.version)
    }
}

impl Flavour {
    pub const fn new(family: Family, major: u32, minor: u32, patch: u32) -> Flavour {
        Flavour {
            family,
            version: Version {
                major,
                minor,
                patch,
            },
        }
    }

    /// From a server's `--version` line: `mysqld  Ver 9.7.4-2 for Linux …` or
    /// `mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu …`.
    pub fn from_version_output(text: &str) -> Option<Flavour> {
        let after = text.split_once(" Ver ")?.1.trim_start();
        let token = after.split_whitespace().next()?;
        let version = Version::parse(token)?;
        let family = if token.contains("MariaDB") || text.contains("MariaDB") {
            Family::Mariadb
        } else {
            Family::Mysql
        };
        Some(Flavour { family, version })
    }

    /// From `SELECT VERSION()`: `9.7.4-2`, `10.11.19-MariaDB-0+deb12u1`.
    pub fn from_version_string(v: &str) -> Option<Flavour> {
        Some(Flavour {
            family: if v.contains("MariaDB") {
                Family::Mariadb
            } else {
                Family::Mysql
            },
            version: Version::parse(v)?,
        })
    }

    /// What made a datadir, from the files each server writes there: MariaDB's
    /// `mariadb_upgrade_info` / `mysql_upgrade_info` (`10.11.19-MariaDB`), MySQL's
    /// `mysql_upgrade_history` (JSON with the versions it ran).
    pub fn of_datadir(dir: &Path) -> Option<Flavour> {
        for info in ["mariadb_upgrade_info", "mysql_upgrade_info"] {
            if let Ok(text) = std::fs::read_to_string(dir.join(info)) {
                let text = text.trim();
                if let Some(version) = Version::parse(text) {
                    let family = if text.contains("MariaDB") {
                        Family::Mariadb
                    } else {
                        Family::Mysql
                    };
                    return Some(Flavour { family, version });
                }
            }
        }
        let history = std::fs::read_to_string(dir.join("mysql_upgrade_history")).ok()?;
        let json: serde_json::Value = serde_json::from_str(&history).ok()?;
        let last = json["upgrade_history"].as_array()?.last()?;
        Some(Flavour {
            family: Family::Mysql,
            version: Version::parse(last["version"].as_str()?)?,
        })
    }

    /// The release series (`9.7`, `10.11`): within a series a server opens another's
    /// datadir as it is; across series its first start upgrades the data dictionary.
    pub fn series(&self) -> (u32, u32) {
        (self.version.major, self.version.minor)
    }

    /// True when a server of flavour `self` can start a datadir made by `made_by` without
    /// upgrading it.
    pub fn can_serve(&self, made_by: &Flavour) -> bool {
        self.family == made_by.family && self.series() == made_by.series()
    }

    pub fn is_mysql(&self) -> bool {
        self.family == Family::Mysql
    }

    /// A server bug that makes this release crash at start-up on data db-branch serves:
    /// MySQL 8.0.38, 8.4.1 and 9.0.0 crash in the tablespace duplicate check when a datadir
    /// has more than roughly 8–10k tables (MySQL bug 115517, Percona PS-9306); Oracle
    /// withdrew those releases.
    pub fn start_up_bug(&self) -> Option<&'static str> {
        let v = self.version;
        match (self.family, v.major, v.minor, v.patch) {
            (Family::Mysql, 8, 0, 38) | (Family::Mysql, 8, 4, 1) | (Family::Mysql, 9, 0, 0) => Some(
                "MySQL bug 115517 (PS-9306): it crashes at start-up in the tablespace duplicate \
                 check once a datadir holds more than about 8-10k tables; fixed in 8.0.39, 8.4.2 and 9.0.1",
            ),
            _ => None,
        }
    }

    /// MariaDB from 11.4 makes itself a TLS certificate at every start when it is given none
    /// (MDEV-31855, "SSL by default"): an RSA key search that took 0.1–1.2 s of each 11.8
    /// start here (perf: libcrypto's BN_mod_word, the prime sieve). A branch of such a
    /// server is given a certificate made by db-branch (an EC key, made in milliseconds).
    /// MySQL makes its certificates once, in `--initialize`, and keeps them in the datadir.
    pub fn makes_certificate_at_start(&self) -> bool {
        self.family == Family::Mariadb && self.series() >= (11, 4)
    }

    /// Option-file lines every branch gets. Each saved measurable start-up time or memory
    /// on a 2-core host (docs/benchmarks.md): no name resolution, no buffer-pool dump/load,
    /// no binary log, a small redo buffer (InnoDB reads that much redo at start even after
    /// a clean shutdown), a tiny MyISAM key cache nothing uses.
    pub fn fast_flags(&self) -> &'static [&'static str] {
        match self.family {
            Family::Mariadb => &[
                "skip-name-resolve",
                "innodb-buffer-pool-load-at-startup=0",
                "innodb-buffer-pool-dump-at-shutdown=0",
                "skip-log-bin",
                // A datadir that was a follower's (`baseline follow`) still names its
                // source: no server but the follower itself may start replicating.
                "skip-slave-start",
                "innodb-log-buffer-size=2M",
                "key-buffer-size=1M",
                "aria-pagecache-buffer-size=8M",
            ],
            Family::Mysql => &[
                "skip-name-resolve",
                "innodb-buffer-pool-load-at-startup=0",
                "innodb-buffer-pool-dump-at-shutdown=0",
                "skip-log-bin",
                // See MariaDB's: only a follower replicates.
                "skip-replica-start",
                // 64M by default, and it is resident: 58 MB of RSS per idle server.
                "innodb-log-buffer-size=2M",
                "key-buffer-size=1M",
                // The X protocol would listen on 33060 in every branch.
                "mysqlx=OFF",
                // 255 MB of RSS per idle server when on; migrate-check turns it on.
                "performance-schema=OFF",
                // Notes too: "Starting crash recovery" is one, and db-branch checks for it.
                "log-error-verbosity=3",
                // db-branch's own login (root@localhost by socket, OS root only). Loaded
                // here, not INSTALLed into the datadir: also under skip-grant-tables, and in
                // datadirs made elsewhere.
                "plugin-load-add=auth_socket.so",
                // MySQL rewrites its spare redo files at every start: with the default 100M
                // that is ~97 MB of a branch's own disk from its first second. 32M measured
                // 15% slower on a write-heavy load than 100M (8M: 67% slower).
                "innodb-redo-log-capacity=32M",
            ],
        }
    }

    /// Flags for the one-off servers that bake and prepare baselines only.
    pub fn oneoff_flags(&self) -> &'static [&'static str] {
        let v = &self.version;
        if self.is_mysql() && (v.major, v.minor, v.patch) >= (8, 0, 22) {
            // A new tablespace's pages reserved with fallocate instead of written as
            // zeros: 2,000 small CREATE TABLEs on 4 connections of MySQL 9.7 took 4.1 s of
            // server CPU instead of 5.2 s (by hand, mean of two runs each). Branches keep
            // the server's default.
            &["innodb-extend-and-initialize=OFF"]
        } else {
            &[]
        }
    }

    /// Flags for branch servers only, not the one-off servers that prepare baselines.
    pub fn branch_flags(&self) -> &'static [&'static str] {
        match self.family {
            Family::Mariadb => &[],
            // Branch files never move: skip checking every tablespace's path at start
            // (minutes with many tables). Not for the one-off servers: a datadir copied from
            // elsewhere may record tablespaces at paths that moved, which the validating
            // start corrects.
            Family::Mysql => &[
                "innodb-validate-tablespace-paths=OFF",
                // Native AIO reserves 2,305 of the host's fs.aio-max-nr events per server
                // (65,536 by default): the 29th MySQL branch then fails to start with
                // "Plugin initialization aborted". Simulated AIO reserves none; branches'
                // I/O is small and mostly in the page cache. One-off servers keep native AIO.
                "innodb-use-native-aio=OFF",
            ],
        }
    }

    /// Durability settings per profile. `test` skips what only protects against a crash of
    /// the server or host — `reset` returns to a clean snapshot anyway; `durable` states
    /// the engine's crash-safe defaults so no other option file can weaken them.
    pub fn profile_flags(&self, profile: Profile) -> &'static [&'static str] {
        match (self.family, profile) {
            (Family::Mariadb, Profile::Test) => &[
                // Commit writes the redo log to the OS about once a second, not each commit.
                "innodb-flush-log-at-trx-commit=0",
                // No doublewrite buffer: every page is written once (a crash can tear one).
                "innodb-doublewrite=0",
                // InnoDB never calls fsync; the OS writes back when it likes.
                "innodb-flush-method=nosync",
                "sync-binlog=0",
            ],
            (Family::Mysql, Profile::Test) => &[
                "innodb-flush-log-at-trx-commit=0",
                // Also 58 MB less RSS per server.
                "innodb-doublewrite=OFF",
                "innodb-flush-method=nosync",
                "sync-binlog=0",
            ],
            (Family::Mariadb, Profile::Durable) => &[
                "innodb-flush-log-at-trx-commit=1",
                "innodb-doublewrite=1",
                "sync-binlog=1",
            ],
            (Family::Mysql, Profile::Durable) => &[
                "innodb-flush-log-at-trx-commit=1",
                "innodb-doublewrite=ON",
                "sync-binlog=1",
            ],
        }
    }

    /// The program that makes an empty datadir, and how to call it.
    pub fn initialiser(&self) -> Initialiser {
        match self.family {
            Family::Mariadb => Initialiser::InstallDb,
            Family::Mysql => Initialiser::InitializeInsecure,
        }
    }

    /// Statements, run once on a new empty datadir, that give db-branch its own login:
    /// `root@localhost` by socket authentication, for the OS root user only.
    pub fn admin_login_sql(&self) -> Vec<String> {
        match self.family {
            // mariadb-install-db --auth-root-authentication-method=socket did it.
            Family::Mariadb => Vec::new(),
            Family::Mysql => vec!["ALTER USER root@localhost IDENTIFIED WITH auth_socket".into()],
        }
    }

    /// Statements, run in a server started with `skip-grant-tables` on a datadir made
    /// elsewhere (a clone, a copied datadir), that make sure db-branch's own login works
    /// whatever the source's `root@localhost` was.
    pub fn take_over_admin_sql(&self) -> Vec<String> {
        let auth = match self.family {
            Family::Mariadb => "IDENTIFIED VIA unix_socket",
            Family::Mysql => "IDENTIFIED WITH auth_socket",
        };
        let mut sql = vec!["FLUSH PRIVILEGES".to_string()];
        if self.family == Family::Mysql {
            // The option file loads it; an INSTALLed copy would be loaded twice.
            sql.push("DELETE FROM mysql.plugin WHERE name = 'auth_socket'".into());
        }
        sql.push(format!("CREATE USER IF NOT EXISTS root@localhost {auth}"));
        sql.push(format!("ALTER USER root@localhost {auth}"));
        sql.push("GRANT ALL PRIVILEGES ON *.* TO root@localhost WITH GRANT OPTION".into());
        sql
    }

    /// Accounts the server makes for itself (kept when a bake drops the source's).
    pub fn is_system_account(user: &str) -> bool {
        matches!(
            user,
            "root" | "mariadb.sys" | "mysql.sys" | "mysql.session" | "mysql.infoschema" | ""
        ) || user.starts_with("mysql.")
    }

    /// Statements that create the client account `user` with `password` on loopback, or
    /// give an existing one that password (the empty baselines `baseline create --empty`
    /// makes; each branch's server at every start, with the branch's own password). `localhost` stays socket-only
    /// for the OS root user where the server can say "socket or password".
    pub fn client_account_sql(&self, user: &str, password: &str) -> Vec<String> {
        let u = crate::sql::sql_string(user);
        let p = crate::sql::sql_string(password);
        let mut sql = Vec::new();
        for host in ["127.0.0.1", "::1", "localhost"] {
            let account = format!("{u}@'{host}'");
            if host == "localhost" && user == "root" {
                if self.family == Family::Mariadb {
                    sql.push(format!(
                        "ALTER USER {account} IDENTIFIED VIA unix_socket OR mysql_native_password USING PASSWORD({p})"
                    ));
                }
                continue;
            }
            sql.push(format!(
                "CREATE USER IF NOT EXISTS {account} IDENTIFIED BY {p}"
            ));
            // An account the baseline already has gets this password too.
            sql.push(format!("ALTER USER {account} IDENTIFIED BY {p}"));
            sql.push(format!(
                "GRANT ALL PRIVILEGES ON *.* TO {account} WITH GRANT OPTION"
            ));
        }
        sql
    }

    /// The client account `user` for connections from other machines (`'%'`), for branches
    /// listening off loopback (which then require TLS of every connection).
    pub fn remote_client_account_sql(&self, user: &str, password: &str) -> Vec<String> {
        let account = format!("{}@'%'", crate::sql::sql_string(user));
        let p = crate::sql::sql_string(password);
        vec![
            format!("CREATE USER IF NOT EXISTS {account} IDENTIFIED BY {p}"),
            format!("ALTER USER {account} IDENTIFIED BY {p}"),
            format!("GRANT ALL PRIVILEGES ON *.* TO {account} WITH GRANT OPTION"),
        ]
    }

    /// The information_schema table listing InnoDB tables with their ids.
    pub fn innodb_tables_view(&self) -> &'static str {
        match self.family {
            Family::Mariadb => "INNODB_SYS_TABLES",
            Family::Mysql => "INNODB_TABLES",
        }
    }

    /// Extra memory a server with migrate-check's instrumentation takes (the memory guard
    /// counts it). Measured idle RSS with and without the options: MariaDB 10.11 195 MB vs
    /// 55 MB; MySQL 9.7 (performance_schema on vs off) 423 MB vs 168 MB.
    pub fn instrumentation_memory(&self) -> u64 {
        match self.family {
            Family::Mariadb => 160 << 20,
            Family::Mysql => 256 << 20,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Initialiser {
    /// `mariadb-install-db` next to the server.
    InstallDb,
    /// `mysqld --initialize-insecure`.
    InitializeInsecure,
}

/// Option-file lines that record every statement with the stages that tell how an `ALTER`
/// ran (for `migrate-check`). The same names on both servers.
pub fn instrumentation_options() -> Vec<String> {
    [
        "performance-schema=ON",
        "performance-schema-consumer-events-statements-current=ON",
        "performance-schema-consumer-events-statements-history-long=ON",
        "performance-schema-consumer-events-stages-current=ON",
        "performance-schema-consumer-events-stages-history-long=ON",
        // 20,000 statements (a migration beyond that loses its oldest, which migrate-check
        // reports).
        "performance-schema-events-statements-history-long-size=20000",
        "performance-schema-events-stages-history-long-size=20000",
        "performance-schema-consumer-statements-digest=OFF",
        "performance-schema-max-digest-length=0",
        // Only the stages that tell how an ALTER ran (the most specific pattern wins).
        "performance-schema-instrument='stage/%=OFF'",
        "performance-schema-instrument='stage/sql/copy to tmp table=ON'",
        "performance-schema-instrument='stage/innodb/alter table%=ON'",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_lines_of_real_servers() {
        let m = Flavour::from_version_output(
            "/opt/db-branch/mysql-9.7/usr/sbin/mysqld  Ver 9.7.4-2 for Linux on x86_64 ((Debian))",
        )
        .unwrap();
        assert_eq!(m, Flavour::new(Family::Mysql, 9, 7, 4));
        assert_eq!(m.to_string(), "MySQL 9.7.4");
        let d = Flavour::from_version_output(
            "/usr/sbin/mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64 (Debian 12)",
        )
        .unwrap();
        assert_eq!(d, Flavour::new(Family::Mariadb, 10, 11, 19));
        let e = Flavour::from_version_output(
            "/x/mariadbd  Ver 11.8.9-MariaDB-0+deb13u1 from Debian for debian-linux-gnu on x86_64",
        )
        .unwrap();
        assert_eq!(e, Flavour::new(Family::Mariadb, 11, 8, 9));
        assert!(Flavour::from_version_output("bash, version 5.2.15").is_none());
        assert_eq!(
            Flavour::from_version_string("8.4.3"),
            Some(Flavour::new(Family::Mysql, 8, 4, 3))
        );
    }

    #[test]
    fn series_decide_what_can_serve_what() {
        let m97 = Flavour::new(Family::Mysql, 9, 7, 4);
        assert!(m97.can_serve(&Flavour::new(Family::Mysql, 9, 7, 1)));
        assert!(!m97.can_serve(&Flavour::new(Family::Mysql, 8, 4, 3)));
        assert!(!m97.can_serve(&Flavour::new(Family::Mariadb, 9, 7, 4)));
        let d = Flavour::new(Family::Mariadb, 10, 11, 19);
        assert!(!d.can_serve(&Flavour::new(Family::Mariadb, 11, 8, 9)));
    }

    #[test]
    fn datadirs_tell_their_flavour() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Flavour::of_datadir(dir.path()), None);
        std::fs::write(dir.path().join("mysql_upgrade_info"), "10.11.19-MariaDB").unwrap();
        assert_eq!(
            Flavour::of_datadir(dir.path()),
            Some(Flavour::new(Family::Mariadb, 10, 11, 19))
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("mysql_upgrade_history"),
            r#"{"file_format":"1","upgrade_history":[{"date":"2026-11-30 21:43:15","version":"9.7.4-2","maturity":"LTS","initialize":true}]}"#,
        )
        .unwrap();
        assert_eq!(
            Flavour::of_datadir(dir.path()),
            Some(Flavour::new(Family::Mysql, 9, 7, 4))
        );
    }

    #[test]
    fn withdrawn_mysql_releases_are_known_broken() {
        for (ma, mi, p) in [(8, 0, 38), (8, 4, 1), (9, 0, 0)] {
            let f = Flavour::new(Family::Mysql, ma, mi, p);
            assert!(f.start_up_bug().unwrap().contains("115517"), "{f}");
        }
        for (ma, mi, p) in [(8, 0, 39), (8, 4, 2), (9, 0, 1), (9, 7, 4)] {
            assert_eq!(Flavour::new(Family::Mysql, ma, mi, p).start_up_bug(), None);
        }
        assert_eq!(Flavour::new(Family::Mariadb, 9, 0, 0).start_up_bug(), None);
    }

    #[test]
    fn mariadb_from_11_4_makes_a_certificate_at_start() {
        assert!(Flavour::new(Family::Mariadb, 11, 8, 9).makes_certificate_at_start());
        assert!(Flavour::new(Family::Mariadb, 11, 4, 1).makes_certificate_at_start());
        assert!(!Flavour::new(Family::Mariadb, 10, 11, 19).makes_certificate_at_start());
        assert!(!Flavour::new(Family::Mysql, 9, 7, 4).makes_certificate_at_start());
    }

    #[test]
    fn each_flavour_gets_its_own_options() {
        let m = Flavour::new(Family::Mysql, 9, 7, 4);
        let d = Flavour::new(Family::Mariadb, 10, 11, 19);
        assert!(m.fast_flags().contains(&"mysqlx=OFF"));
        assert!(!d.fast_flags().iter().any(|f| f.starts_with("mysqlx")));
        assert!(d.fast_flags().iter().any(|f| f.starts_with("aria")));
        assert!(!m.fast_flags().iter().any(|f| f.starts_with("aria")));
        assert!(m
            .client_account_sql("root", "")
            .iter()
            .all(|s| !s.contains("unix_socket")));
    }
}
