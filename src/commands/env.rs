//! `env NAME --format dotenv|json|url`: connection details for scripts and CI steps.

use super::require_record;
use super::view::Connection;
use crate::cli::{EnvArgs, EnvFormat};
use crate::host::Host;
use crate::output::Output;
use anyhow::Result;

/// The variables most clients and frameworks read, in a stable order.
pub fn variables(name: &str, c: &Connection) -> Vec<(&'static str, String)> {
    let mut vars = vec![
        ("DB_BRANCH_NAME", name.to_string()),
        ("DATABASE_URL", c.url.clone()),
        ("MYSQL_HOST", c.host.clone()),
        ("MYSQL_TCP_PORT", c.port.to_string()),
        ("MYSQL_PORT", c.port.to_string()),
        ("MYSQL_UNIX_PORT", c.socket.display().to_string()),
        ("MYSQL_USER", c.user.clone()),
        ("DB_HOST", c.host.clone()),
        ("DB_PORT", c.port.to_string()),
        ("DB_USERNAME", c.user.clone()),
    ];
    if !c.password.is_empty() {
        vars.push(("MYSQL_PWD", c.password.clone()));
        vars.push(("DB_PASSWORD", c.password.clone()));
    }
    vars
}

fn dotenv_quote(v: &str) -> String {
    if v.chars()
        .all(|c| c.is_ascii_alphanumeric() || "._-/:@[]".contains(c))
    {
        v.to_string()
    } else {
        format!("'{}'", v.replace('\'', "'\\''"))
    }
}

pub fn run(host: &Host, args: &EnvArgs, out: &Output) -> Result<()> {
    let record = require_record(host, &args.name)?;
    let conn = Connection::of(host, &record);
    let vars = variables(args.name.as_str(), &conn);
    // --json on the command line wins over --format.
    let format = if out.json {
        EnvFormat::Json
    } else {
        args.format
    };
    match format {
        EnvFormat::Dotenv => {
            for (k, v) in vars {
                println!("{k}={}", dotenv_quote(&v));
            }
        }
        EnvFormat::Json => {
            let map: serde_json::Map<String, serde_json::Value> = vars
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.into()))
                .collect();
            println!("{}", serde_json::to_string_pretty(&map)?);
        }
        EnvFormat::Url => println!("{}", conn.url),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_is_shell_safe() {
        assert_eq!(
            dotenv_quote("mysql://root@127.0.0.1:3400/"),
            "mysql://root@127.0.0.1:3400/"
        );
        assert_eq!(dotenv_quote("it's $x"), "'it'\\''s $x'");
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
        };
        assert!(!variables("a", &c).iter().any(|(k, _)| *k == "MYSQL_PWD"));
        c.password = "x".into();
        assert!(variables("a", &c).iter().any(|(k, _)| *k == "MYSQL_PWD"));
    }
}
