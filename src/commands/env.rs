use crate::cli::{EnvArgs, EnvFormat};
use crate::host::Host;
use crate::ops::branch::connection::{url_escape, Connection};
use crate::ops::branch::record::require;
use anyhow::Result;

/// `KEY=value` with the value quoted for a POSIX shell where it needs it.
fn assignment(key: &str, value: &str) -> String {
    let safe = value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "._-/:@[]".contains(c));
    if safe && !value.is_empty() {
        format!("{key}={value}")
    } else {
        format!("{key}='{}'", value.replace('\'', "'\\''"))
    }
}

/// What the ecosystem formats are made of, read back from the variables (so `shell` can
/// render an option file from what a nested `env --format json` printed).
pub struct Target {
    host: String,
    port: String,
    user: String,
    password: String,
    database: String,
    ssl_ca: Option<String>,
    /// The branch's server is Oracle MySQL (None: not known).
    mysql: Option<bool>,
}

impl Target {
    pub fn of<K: AsRef<str>>(vars: &[(K, String)]) -> Target {
        Target::from_lookup(|key| {
            vars.iter()
                .find(|(k, _)| k.as_ref() == key)
                .map(|(_, v)| v.clone())
        })
    }

    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Target {
        Target {
            host: get("MYSQL_HOST").unwrap_or_else(|| "127.0.0.1".into()),
            port: get("MYSQL_TCP_PORT").unwrap_or_else(|| "3306".into()),
            user: get("MYSQL_USER").unwrap_or_else(|| "root".into()),
            password: get("MYSQL_PWD").unwrap_or_default(),
            database: get("DB_DATABASE").unwrap_or_default(),
            ssl_ca: get("MYSQL_SSL_CA"),
            mysql: get("DB_BRANCH_SERVER").map(|s| s.starts_with("MySQL")),
        }
    }

    /// `host:port`, an IPv6 address in brackets.
    fn address(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// `user[:password]@` for a URL.
    fn credentials(&self) -> String {
        if self.password.is_empty() {
            format!("{}@", url_escape(&self.user))
        } else {
            format!("{}:{}@", url_escape(&self.user), url_escape(&self.password))
        }
    }

    /// `scheme://user:password@host:port/database` and the query, if any.
    fn url(&self, scheme: &str, query: &[(&str, &str)]) -> String {
        let mut url = format!(
            "{scheme}://{}{}/{}",
            self.credentials(),
            self.address(),
            url_escape(&self.database)
        );
        append_query(&mut url, query);
        url
    }
}

fn append_query(url: &mut String, query: &[(&str, &str)]) {
    for (i, (k, v)) in query.iter().enumerate() {
        url.push(if i == 0 { '?' } else { '&' });
        url.push_str(&format!("{k}={}", url_escape(v)));
    }
}

/// A value in a MySQL option file: quoted, with the escapes the servers' parser knows.
fn option_value(value: &str) -> String {
    let escaped = value
        .replace('\\', "\\\\")
        .replace('\n', "\\n")
        .replace('\t', "\\t");
    if escaped.contains('"') {
        format!("'{escaped}'")
    } else {
        format!("\"{escaped}\"")
    }
}

/// An option file both clients read: the connection in `[client]` (every client program),
/// the database in `[mysql]` (mysqldump and mysqladmin refuse a `database` option). TLS:
/// `ssl-ca` for both; for a MySQL server MySQL's `ssl-mode`, as `loose-` (a MariaDB client
/// warns and goes on), for MariaDB's `ssl-verify-server-cert` in the group only MariaDB's
/// clients read.
pub fn mycnf(t: &Target, name: &str) -> String {
    let mut out = format!(
        "# db-branch: branch {name}; use with --defaults-file (keep it private: it holds the password)\n\
         [client]\nhost={}\nport={}\nuser={}\n",
        t.host,
        t.port,
        option_value(&t.user)
    );
    if !t.password.is_empty() {
        out.push_str(&format!("password={}\n", option_value(&t.password)));
    }
    if let Some(ca) = t.ssl_ca.as_deref() {
        out.push_str(&format!("ssl-ca={}\n", option_value(ca)));
        if t.mysql != Some(false) {
            out.push_str("loose-ssl-mode=VERIFY_IDENTITY\n");
        }
    }
    if !t.database.is_empty() {
        out.push_str(&format!(
            "[mysql]\ndatabase={}\n",
            option_value(&t.database)
        ));
    }
    if t.ssl_ca.is_some() && t.mysql != Some(true) {
        out.push_str("[client-mariadb]\nssl-verify-server-cert\n");
    }
    out
}

/// The variables in `format`, as the text to print.
/// Keys are `&'static str` where db-branch made the variables, `String` where they came
/// over a pool's socket.
pub fn render<K: AsRef<str>>(vars: &[(K, String)], url: &str, format: EnvFormat) -> String {
    let t = Target::of(vars);
    let name = vars
        .iter()
        .find(|(k, _)| k.as_ref() == "DB_BRANCH_NAME")
        .map_or("", |(_, v)| v.as_str());
    match format {
        EnvFormat::Shell => vars
            .iter()
            .map(|(k, v)| format!("export {}\n", assignment(k.as_ref(), v)))
            .collect(),
        EnvFormat::Dotenv => vars
            .iter()
            .map(|(k, v)| format!("{}\n", assignment(k.as_ref(), v)))
            .collect(),
        EnvFormat::Json => {
            let map: serde_json::Map<String, serde_json::Value> = vars
                .iter()
                .map(|(k, v)| (k.as_ref().to_string(), v.clone().into()))
                .collect();
            serde_json::to_string_pretty(&map).expect("strings serialise") + "\n"
        }
        EnvFormat::Url => format!("{url}\n"),
        EnvFormat::Jdbc => {
            // Connector/J takes the credentials as properties; it verifies the server
            // against the JVM's trust store (`env` says how to add the CA to one).
            let mut props = vec![("user", t.user.as_str()), ("password", t.password.as_str())];
            props.retain(|(_, v)| !v.is_empty());
            if t.ssl_ca.is_some() {
                props.push(("sslMode", "VERIFY_IDENTITY"));
            }
            let mut url = format!("jdbc:mysql://{}/{}", t.address(), url_escape(&t.database));
            append_query(&mut url, &props);
            format!("{url}\n")
        }
        EnvFormat::Go => {
            // go-sql-driver/mysql: `tls=true` verifies against the system roots, which
            // SSL_CERT_FILE replaces for the program (`env` says so).
            let auth = if t.password.is_empty() {
                t.user.clone()
            } else {
                format!("{}:{}", t.user, t.password)
            };
            let tls = if t.ssl_ca.is_some() { "&tls=true" } else { "" };
            format!(
                "{auth}@tcp({})/{}?parseTime=true{tls}\n",
                t.address(),
                t.database
            )
        }
        EnvFormat::Mycnf => mycnf(&t, name),
        EnvFormat::Laravel => {
            let mut lines = vec![
                ("DB_CONNECTION", "mysql"),
                ("DB_HOST", t.host.as_str()),
                ("DB_PORT", t.port.as_str()),
                ("DB_DATABASE", t.database.as_str()),
                ("DB_USERNAME", t.user.as_str()),
                ("DB_PASSWORD", t.password.as_str()),
            ];
            // What Laravel's stock config/database.php hands to PDO::MYSQL_ATTR_SSL_CA.
            if let Some(ca) = t.ssl_ca.as_deref() {
                lines.push(("MYSQL_ATTR_SSL_CA", ca));
            }
            lines
                .iter()
                .map(|(k, v)| format!("{}\n", assignment(k, v)))
                .collect()
        }
        EnvFormat::Rails => {
            // ActiveRecord's mysql2 adapter takes these keys from the URL's query.
            let query: Vec<(&str, &str)> = match t.ssl_ca.as_deref() {
                Some(ca) => vec![("sslca", ca), ("ssl_mode", "verify_identity")],
                None => Vec::new(),
            };
            format!("{}\n", assignment("DATABASE_URL", &t.url("mysql2", &query)))
        }
        EnvFormat::Sqlalchemy => {
            // SQLAlchemy's MySQL dialects gather ssl_* query keys into the driver's `ssl`.
            let query: Vec<(&str, &str)> = match t.ssl_ca.as_deref() {
                Some(ca) => vec![("ssl_ca", ca), ("ssl_check_hostname", "true")],
                None => Vec::new(),
            };
            format!("{}\n", t.url("mysql+pymysql", &query))
        }
    }
}

/// What a format's user must do beyond pasting it, said on stderr.
fn advice(format: EnvFormat, ca: Option<&str>) -> Option<String> {
    let ca = ca?;
    match format {
        EnvFormat::Jdbc => Some(format!(
            "Connector/J verifies the server against a Java trust store: \
             `keytool -importcert -noprompt -alias db-branch -file {ca} -keystore db-branch-ca.p12 -storepass changeit`, \
             then add trustCertificateKeyStoreUrl=file:db-branch-ca.p12&trustCertificateKeyStorePassword=changeit to the URL"
        )),
        EnvFormat::Go => Some(format!(
            "go-sql-driver's tls=true verifies against the system roots: run the program with SSL_CERT_FILE={ca}"
        )),
        _ => None,
    }
}

pub fn run(host: &Host, args: &EnvArgs) -> Result<()> {
    let record = require(host, &args.name)?;
    let resolved = crate::ops::branch::database::resolve(host, &record);
    let conn = Connection::with(host, &record, &resolved);
    if let Some(missing) = &resolved.config_missing {
        host.printer.note(format!(
            "client.database = {missing:?} is not a database of baseline {}; passed over",
            record.baseline
        ));
    }
    if let Some(dbs) = resolved.unchosen() {
        let name = &args.name;
        host.printer.note(format!(
            "branch {name}'s baseline has several databases ({}) and none is chosen, so the \
             URL names none; choose one with `db-branch create {name} --database NAME` \
             (or client.database in the config for every branch)",
            dbs.join(", ")
        ));
    }
    let vars = conn.variables(args.name.as_str());
    // --json on the command line wins over --format.
    let format = if host.printer.json {
        EnvFormat::Json
    } else {
        args.format
    };
    if let Some(text) = advice(format, conn.ssl_ca.as_ref().and_then(|p| p.to_str())) {
        host.printer.note(text);
    }
    host.printer.data(&render(&vars, &conn.url, format))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_is_shell_safe() {
        assert_eq!(
            assignment("U", "mysql://root@127.0.0.1:3400/"),
            "U=mysql://root@127.0.0.1:3400/"
        );
        assert_eq!(assignment("X", "it's $x"), "X='it'\\''s $x'");
        assert_eq!(assignment("E", ""), "E=''");
    }

    #[test]
    fn the_shell_format_exports() {
        let vars = vec![("DATABASE_URL", "mysql://root@127.0.0.1:3400/".to_string())];
        assert_eq!(
            render(&vars, "", EnvFormat::Shell),
            "export DATABASE_URL=mysql://root@127.0.0.1:3400/\n"
        );
        assert_eq!(
            render(&vars, "", EnvFormat::Dotenv),
            "DATABASE_URL=mysql://root@127.0.0.1:3400/\n"
        );
    }

    /// What `eval "$(db-branch env X)"` does in the README: a program started next must
    /// see the variables (they must be exported, not just set).
    #[test]
    fn eval_of_the_default_format_reaches_child_processes() {
        let vars = vec![
            ("DATABASE_URL", "mysql://root@127.0.0.1:3400/".to_string()),
            ("MYSQL_PWD", "a b'c".to_string()),
        ];
        let text = render(&vars, "", EnvFormat::Shell);
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg("eval \"$1\"; sh -c 'printf %s \"$DATABASE_URL|$MYSQL_PWD\"'")
            .arg("sh")
            .arg(&text)
            .env_remove("DATABASE_URL")
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "mysql://root@127.0.0.1:3400/|a b'c"
        );
    }
}
