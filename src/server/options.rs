//! The option file each server reads (`--defaults-file`): everything that makes one branch's
//! server different from another's, plus the start-up flags measured to be fastest for its
//! flavour (see `flavour.rs`).

use crate::config::Profile;
use crate::flavour::Flavour;
use crate::values::ByteSize;
use std::net::IpAddr;
use std::path::PathBuf;

#[derive(Debug, Clone)]
pub struct ServerSpec {
    pub flavour: Flavour,
    pub datadir: PathBuf,
    /// None: no TCP at all (the one-off servers that prepare baselines).
    pub network: Option<(IpAddr, u16)>,
    pub socket: PathBuf,
    pub pid_file: PathBuf,
    pub error_log: PathBuf,
    /// Private scratch directory: servers sharing /tmp trip over each other's temp files.
    pub tmpdir: PathBuf,
    /// The only directory `LOAD DATA INFILE`, `SELECT … INTO OUTFILE` and `LOAD_FILE()`
    /// may touch (MySQL aborts at start if its compiled-in default is missing).
    pub secure_file_priv: PathBuf,
    pub buffer_pool: ByteSize,
    pub user: String,
    pub extra_args: Vec<String>,
    pub profile: Profile,
    /// Option-file lines for this branch only.
    pub branch_options: Vec<String>,
    /// SQL the server runs at every start: the branch's own password (`store::secrets`).
    pub init_file: Option<PathBuf>,
    /// CA, certificate and key: when clients off this host may connect, and for servers
    /// that would otherwise make their own at every start
    /// (`Flavour::makes_certificate_at_start`).
    pub tls: Option<crate::store::tls::TlsFiles>,
    /// Every connection must use TLS (`require_secure_transport`): clients off this host.
    pub tls_required: bool,
}

pub fn render(spec: &ServerSpec) -> String {
    let mut lines = vec![
        "# Written by db-branch; changes are overwritten.".to_string(),
        "[mysqld]".to_string(),
        format!("datadir={}", spec.datadir.display()),
        format!("socket={}", spec.socket.display()),
        format!("pid-file={}", spec.pid_file.display()),
        format!("log-error={}", spec.error_log.display()),
        format!("tmpdir={}", spec.tmpdir.display()),
        format!("secure-file-priv={}", spec.secure_file_priv.display()),
        format!("user={}", spec.user),
        format!("innodb-buffer-pool-size={}", spec.buffer_pool.bytes()),
    ];
    match spec.network {
        Some((addr, port)) => {
            lines.push(format!("bind-address={addr}"));
            lines.push(format!("port={port}"));
        }
        None => lines.push("skip-networking".into()),
    }
    lines.push(format!("# fast start-up and low memory ({})", spec.flavour));
    lines.extend(spec.flavour.fast_flags().iter().map(|f| f.to_string()));
    if spec.network.is_some() {
        lines.extend(spec.flavour.branch_flags().iter().map(|f| f.to_string()));
    }
    lines.push(format!("# profile: {}", spec.profile));
    lines.extend(
        spec.flavour
            .profile_flags(spec.profile)
            .iter()
            .map(|f| f.to_string()),
    );
    if !spec.extra_args.is_empty() {
        lines.push("# mysqld.extra_args".into());
        lines.extend(
            spec.extra_args
                .iter()
                .map(|a| a.trim_start_matches("--").to_string()),
        );
    }
    if let Some(tls) = &spec.tls {
        lines.push(if spec.tls_required {
            "# reachable from other machines: TLS only".into()
        } else {
            "# a certificate, so the server does not make one at every start".into()
        });
        lines.push(format!("ssl-ca={}", tls.ca.display()));
        lines.push(format!("ssl-cert={}", tls.cert.display()));
        lines.push(format!("ssl-key={}", tls.key.display()));
        if spec.tls_required {
            lines.push("require-secure-transport=ON".into());
        }
    }
    if let Some(init) = &spec.init_file {
        lines.push(format!("init-file={}", init.display()));
    }
    if !spec.branch_options.is_empty() {
        lines.push("# this branch only".into());
        lines.extend(spec.branch_options.iter().cloned());
    }
    lines.push(String::new());
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ServerSpec {
        ServerSpec {
            flavour: Flavour::new(crate::flavour::Family::Mariadb, 10, 11, 19),
            datadir: "/p/branches/a".into(),
            network: Some(("127.0.0.1".parse().unwrap(), 3400)),
            socket: "/r/branches/a/mysqld.sock".into(),
            pid_file: "/r/branches/a/mysqld.pid".into(),
            error_log: "/r/branches/a/error.log".into(),
            tmpdir: "/r/branches/a/tmp".into(),
            secure_file_priv: "/r/branches/a/tmp".into(),
            buffer_pool: ByteSize::mib(128),
            user: "mysql".into(),
            extra_args: vec!["--max-connections=50".into()],
            profile: Profile::Test,
            branch_options: Vec::new(),
            init_file: None,
            tls: None,
            tls_required: false,
        }
    }

    #[test]
    fn a_certificate_alone_does_not_require_tls() {
        let mut s = spec();
        s.tls = Some(crate::store::tls::TlsFiles {
            ca: "/r/tls/ca.pem".into(),
            cert: "/r/s/server.pem".into(),
            key: "/r/s/server.key".into(),
        });
        let text = render(&s);
        assert!(
            text.lines().any(|l| l == "ssl-cert=/r/s/server.pem"),
            "{text}"
        );
        assert!(!text.contains("require-secure-transport"), "{text}");
        s.tls_required = true;
        assert!(render(&s)
            .lines()
            .any(|l| l == "require-secure-transport=ON"));
    }

    #[test]
    fn branch_options() {
        let text = render(&spec());
        for want in [
            "[mysqld]",
            "datadir=/p/branches/a",
            "port=3400",
            "bind-address=127.0.0.1",
            "innodb-buffer-pool-size=134217728",
            "skip-log-bin",
            "max-connections=50",
        ] {
            assert!(text.lines().any(|l| l == want), "missing {want}:\n{text}");
        }
        assert!(!text.contains("skip-networking"));
        assert!(text
            .lines()
            .any(|l| l == "secure-file-priv=/r/branches/a/tmp"));
    }

    #[test]
    fn mysql_gets_its_own_flags() {
        let mut s = spec();
        s.flavour = Flavour::new(crate::flavour::Family::Mysql, 9, 7, 4);
        let text = render(&s);
        for want in [
            "mysqlx=OFF",
            "innodb-doublewrite=OFF",
            "performance-schema=OFF",
            "innodb-validate-tablespace-paths=OFF",
            "innodb-use-native-aio=OFF",
        ] {
            assert!(text.lines().any(|l| l == want), "missing {want}:\n{text}");
        }
        s.network = None;
        assert!(
            !render(&s).contains("validate"),
            "a datadir's first start validates"
        );
        assert!(
            !render(&s).contains("native-aio"),
            "one-off servers keep native AIO"
        );
        assert!(!text.contains("aria"), "{text}");
    }

    #[test]
    fn profiles_choose_durability() {
        let fast = render(&spec());
        assert!(fast
            .lines()
            .any(|l| l == "innodb-flush-log-at-trx-commit=0"));
        assert!(fast.lines().any(|l| l == "innodb-flush-method=nosync"));
        let mut s = spec();
        s.profile = Profile::Durable;
        let safe = render(&s);
        assert!(safe
            .lines()
            .any(|l| l == "innodb-flush-log-at-trx-commit=1"));
        assert!(!safe.contains("nosync") && !safe.contains("doublewrite=0"));
    }

    #[test]
    fn preparation_server_has_no_network() {
        let mut s = spec();
        s.network = None;
        let text = render(&s);
        assert!(text.contains("skip-networking") && !text.contains("port="));
    }
}
