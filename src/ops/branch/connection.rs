//! How clients reach a branch: its connection details and the environment variables most
//! clients and frameworks read.

use crate::branch::BranchRecord;
use crate::host::Host;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde::Serialize;
use std::path::PathBuf;

/// What stays as it is in a URL's path or query value: RFC 3986's unreserved characters.
pub const URL_VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// `value` escaped for a URL's path or query.
pub fn url_escape(value: &str) -> String {
    utf8_percent_encode(value, URL_VALUE).to_string()
}

#[derive(Debug, Clone, Serialize)]
pub struct Connection {
    pub host: String,
    pub port: u16,
    pub socket: PathBuf,
    pub user: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub password: String,
    pub url: String,
    /// The CA that signed the server's certificate, when the branch requires TLS (it
    /// listens off loopback); clients verify the server against it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ssl_ca: Option<PathBuf>,
    /// The application database clients are pointed at (ops::database); null when the
    /// baseline has several and none was chosen.
    pub database: Option<String>,
    /// The server's own command-line client on the branch's host (`shell` runs it).
    pub client: PathBuf,
    /// The server that made its data (its TLS options differ by family).
    #[serde(skip)]
    pub server: Option<crate::flavour::Flavour>,
}

impl Connection {
    pub fn of(host: &Host, record: &BranchRecord) -> Connection {
        Connection::with(host, record, &super::database::resolve(host, record))
    }

    /// `of` with the branch's database already resolved (`env` also explains it).
    pub fn with(
        host: &Host,
        record: &BranchRecord,
        resolved: &super::database::Resolved,
    ) -> Connection {
        let addr = host.config.bind_address;
        // What other machines reach this host by, when set; else where the branch listens.
        let reach = match host.config.advertise_address.as_str() {
            "" => addr.to_string(),
            a => a.to_string(),
        };
        let user = &host.config.client.user;
        // The branch's own password; a branch made before db-branch kept one (and not
        // started since) still has the configured one.
        let own = crate::store::secrets::password(&host.layout, &record.name)
            .ok()
            .flatten();
        let password = own.as_ref().unwrap_or(&host.config.client.password);
        let ssl_ca = crate::store::tls::needed(addr).then(|| host.layout.tls_ca_cert());
        let database = resolved.database.as_ref().map(|d| d.to_string());
        let mut conn = Connection {
            host: reach,
            port: record.port,
            socket: host.layout.socket(&record.name),
            user: user.clone(),
            password: password.clone(),
            url: String::new(),
            ssl_ca,
            database,
            client: host.server.client_program(),
            server: record.server,
        };
        conn.url = conn.make_url();
        conn
    }

    /// The same server reached as another account, pointed at `database` (a dense pool
    /// slot's).
    pub fn for_account(mut self, user: &str, password: &str, database: &str) -> Connection {
        self.user = user.to_string();
        self.password = password.to_string();
        self.database = Some(database.to_string());
        self.url = self.make_url();
        self
    }

    /// `mysql://USER:PASSWORD@HOST:PORT/DATABASE`, with the CA to verify against when the
    /// server requires TLS.
    fn make_url(&self) -> String {
        let credentials = if self.password.is_empty() {
            utf8_percent_encode(&self.user, NON_ALPHANUMERIC).to_string()
        } else {
            format!(
                "{}:{}",
                utf8_percent_encode(&self.user, NON_ALPHANUMERIC),
                utf8_percent_encode(&self.password, NON_ALPHANUMERIC)
            )
        };
        let host_part = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        let path = self.database.as_deref().map(url_escape).unwrap_or_default();
        match &self.ssl_ca {
            Some(ca) => format!(
                "mysql://{credentials}@{host_part}:{}/{path}?ssl-mode=VERIFY_IDENTITY&ssl-ca={}",
                self.port,
                utf8_percent_encode(&ca.display().to_string(), NON_ALPHANUMERIC)
            ),
            None => format!("mysql://{credentials}@{host_part}:{}/{path}", self.port),
        }
    }

    /// Without the password (for someone who may see the branch but not log in to it).
    pub fn redact(&mut self) {
        if !self.password.is_empty() {
            self.url = self.url.replacen(
                &format!(
                    ":{}@",
                    utf8_percent_encode(&self.password, NON_ALPHANUMERIC)
                ),
                "@",
                1,
            );
            self.password.clear();
        }
    }

    /// The variables most clients and frameworks read, in a stable order.
    pub fn variables(&self, name: &str) -> Vec<(&'static str, String)> {
        let mut vars = vec![
            ("DB_BRANCH_NAME", name.to_string()),
            ("DATABASE_URL", self.url.clone()),
            ("MYSQL_HOST", self.host.clone()),
            ("MYSQL_TCP_PORT", self.port.to_string()),
            ("MYSQL_PORT", self.port.to_string()),
            ("MYSQL_UNIX_PORT", self.socket.display().to_string()),
            ("MYSQL_USER", self.user.clone()),
            ("DB_HOST", self.host.clone()),
            ("DB_PORT", self.port.to_string()),
            ("DB_USERNAME", self.user.clone()),
        ];
        if let Some(db) = &self.database {
            vars.push(("DB_DATABASE", db.clone()));
            vars.push(("MYSQL_DATABASE", db.clone()));
        }
        if !self.password.is_empty() {
            vars.push(("MYSQL_PWD", self.password.clone()));
            vars.push(("DB_PASSWORD", self.password.clone()));
        }
        if let Some(ca) = &self.ssl_ca {
            vars.push(("MYSQL_SSL_CA", ca.display().to_string()));
            vars.push(("MYSQL_SSL_MODE", "VERIFY_IDENTITY".into()));
            vars.push(("DB_SSL_CA", ca.display().to_string()));
        }
        vars.push(("DB_BRANCH_CLIENT", self.client.display().to_string()));
        if let Some(server) = &self.server {
            vars.push(("DB_BRANCH_SERVER", server.to_string()));
        }
        vars
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::branch::{Generation, Phase};
    use crate::ops::testing::sim_host;
    use crate::values::ByteSize;

    #[test]
    fn url_escapes_credentials_and_brackets_ipv6() {
        let mut sim = sim_host();
        sim.host.config.client.password = "p@ss:w/rd".into();
        sim.host.config.bind_address = "::1".parse().unwrap();
        let record = BranchRecord {
            port: 3401,
            phase: Phase::Ready,
            ..BranchRecord::new(
                "a".parse().unwrap(),
                Generation(1),
                ByteSize::mib(128),
                chrono::Utc::now(),
            )
        };
        let c = Connection::of(&sim.host, &record);
        assert_eq!(c.url, "mysql://root:p%40ss%3Aw%2Frd@[::1]:3401/shop");
    }

    #[test]
    fn password_only_when_set() {
        let mut c = Connection {
            host: "127.0.0.1".into(),
            port: 3400,
            socket: "/r/s".into(),
            user: "root".into(),
            password: String::new(),
            url: "mysql://root@127.0.0.1:3400/".into(),
            ssl_ca: None,
            database: None,
            client: "/usr/bin/mariadb".into(),
            server: None,
        };
        assert!(!c.variables("a").iter().any(|(k, _)| *k == "MYSQL_PWD"));
        c.password = "x".into();
        assert!(c.variables("a").iter().any(|(k, _)| *k == "MYSQL_PWD"));
    }
}
