//! What commands print about a branch: one struct serialised for `--json` and rendered as
//! text or a table otherwise.

use super::{launch, server_rss};
use crate::branch::{BranchName, BranchRecord, Generation, Phase};
use crate::host::Host;
use crate::output::{bytes, Human};
use crate::service::ServiceState;
use chrono::{DateTime, Utc};
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use serde::Serialize;
use std::path::PathBuf;

#[derive(Debug, Clone, Serialize)]
pub struct Connection {
    pub host: String,
    pub port: u16,
    pub socket: PathBuf,
    pub user: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub password: String,
    pub url: String,
}

impl Connection {
    pub fn of(host: &Host, record: &BranchRecord) -> Connection {
        let addr = host.config.bind_address;
        let host_part = if addr.is_ipv6() {
            format!("[{addr}]")
        } else {
            addr.to_string()
        };
        let user = &host.config.client.user;
        let password = &host.config.client.password;
        let credentials = if password.is_empty() {
            utf8_percent_encode(user, NON_ALPHANUMERIC).to_string()
        } else {
            format!(
                "{}:{}",
                utf8_percent_encode(user, NON_ALPHANUMERIC),
                utf8_percent_encode(password, NON_ALPHANUMERIC)
            )
        };
        Connection {
            host: addr.to_string(),
            port: record.port,
            socket: host.layout.socket(&record.name),
            user: user.clone(),
            password: password.clone(),
            url: format!("mysql://{credentials}@{host_part}:{}/", record.port),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct BranchView {
    pub name: BranchName,
    pub state: ServiceState,
    pub phase: Phase,
    pub port: u16,
    pub baseline: Generation,
    pub created: DateTime<Utc>,
    pub buffer_pool_bytes: u64,
    /// Bytes only this branch holds on the pool (copy-on-write: starts near zero).
    pub disk_bytes: Option<u64>,
    pub rss_bytes: Option<u64>,
    pub owner: String,
    pub labels: std::collections::BTreeMap<String, String>,
    pub expires_at: Option<DateTime<Utc>>,
    pub protected: bool,
    pub protected_until: Option<DateTime<Utc>>,
    /// Last client activity db-branch saw (or the last start).
    pub last_activity: DateTime<Utc>,
    /// Stopped by `stop-idle`; `start` or `create` wakes it.
    pub stopped_idle: bool,
    pub profile: crate::config::Profile,
    /// The server died uncleanly under the `test` profile: its data may be damaged;
    /// `reset` is the way back.
    pub unclean: bool,
    pub connection: Connection,
}

impl BranchView {
    pub fn of(host: &Host, record: &BranchRecord) -> BranchView {
        let state = host
            .services
            .state(&launch(host, &record.name))
            .unwrap_or(ServiceState::Failed);
        BranchView {
            name: record.name.clone(),
            state,
            phase: record.phase,
            port: record.port,
            baseline: record.baseline,
            created: record.created,
            buffer_pool_bytes: record.buffer_pool.bytes(),
            disk_bytes: host.storage.branch_usage(&record.name).ok().flatten(),
            rss_bytes: if state.is_up() {
                server_rss(host, &record.name)
            } else {
                None
            },
            owner: record.owner.clone(),
            labels: record.labels.clone(),
            expires_at: record.expires_at,
            protected: record.is_protected(host.clock.now()),
            protected_until: record.protection.as_ref().and_then(|p| p.until),
            last_activity: record.activity.last,
            stopped_idle: record.stopped_idle,
            profile: record.profile,
            unclean: state == ServiceState::Failed
                && record.profile == crate::config::Profile::Test,
            connection: Connection::of(host, record),
        }
    }

    /// "stopped (idle)" for a branch stop-idle stopped.
    pub fn state_text(&self) -> String {
        if self.unclean {
            format!("{} (unclean: reset it)", self.state)
        } else if self.stopped_idle && !self.state.is_up() {
            format!("{} (idle)", self.state)
        } else {
            self.state.to_string()
        }
    }

    pub fn row(&self) -> Vec<String> {
        vec![
            self.name.to_string(),
            self.state_text(),
            self.port.to_string(),
            self.baseline.to_string(),
            short_time(Some(self.created)),
            short_time(Some(self.last_activity)),
            short_time(self.expires_at),
            bytes(self.disk_bytes),
            bytes(self.rss_bytes),
        ]
    }
}

fn short_time(t: Option<DateTime<Utc>>) -> String {
    t.map_or("-".into(), |t| t.format("%m-%d %H:%M").to_string())
}

pub const LIST_HEADER: [&str; 9] = [
    "NAME", "STATE", "PORT", "BASELINE", "CREATED", "ACTIVE", "EXPIRES", "DISK", "RSS",
];

impl Human for BranchView {
    fn human(&self) -> String {
        let c = &self.connection;
        format!(
            "branch:   {}\nstate:    {}\nprofile:  {}\nbaseline: {}\ncreated:  {}\nowner:    {}\nlabels:   {}\nexpires:  {}\nprotected: {}\nactive:   {}\ndisk:     {}\nrss:      {}\nhost:     {}\nport:     {}\nsocket:   {}\nuser:     {}\nurl:      {}\n",
            self.name,
            self.state_text(),
            self.profile,
            self.baseline,
            self.created.to_rfc3339(),
            self.owner,
            self.labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" "),
            self.expires_at.map_or("never".into(), |t| t.to_rfc3339()),
            match (self.protected, self.protected_until) {
                (false, _) => "no".to_string(),
                (true, None) => "yes".to_string(),
                (true, Some(u)) => format!("until {}", u.to_rfc3339()),
            },
            self.last_activity.to_rfc3339(),
            bytes(self.disk_bytes),
            bytes(self.rss_bytes),
            c.host,
            c.port,
            c.socket.display(),
            c.user,
            c.url
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::testing::sim_host;
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
                Utc::now(),
            )
        };
        let c = Connection::of(&sim.host, &record);
        assert_eq!(c.url, "mysql://root:p%40ss%3Aw%2Frd@[::1]:3401/");
    }
}
