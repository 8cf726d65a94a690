use crate::cli::{EnvArgs, EnvFormat};
use crate::host::Host;
use crate::ops::connection::Connection;
use crate::ops::record::require;
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

/// The variables in `format`, as the text to print.
pub fn render(vars: &[(&'static str, String)], url: &str, format: EnvFormat) -> String {
    match format {
        EnvFormat::Shell => vars
            .iter()
            .map(|(k, v)| format!("export {}\n", assignment(k, v)))
            .collect(),
        EnvFormat::Dotenv => vars
            .iter()
            .map(|(k, v)| format!("{}\n", assignment(k, v)))
            .collect(),
        EnvFormat::Json => {
            let map: serde_json::Map<String, serde_json::Value> = vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone().into()))
                .collect();
            serde_json::to_string_pretty(&map).expect("strings serialise") + "\n"
        }
        EnvFormat::Url => format!("{url}\n"),
    }
}

pub fn run(host: &Host, args: &EnvArgs) -> Result<()> {
    let record = require(host, &args.name)?;
    let conn = Connection::of(host, &record);
    let vars = conn.variables(args.name.as_str());
    // --json on the command line wins over --format.
    let format = if host.printer.json {
        EnvFormat::Json
    } else {
        args.format
    };
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
