//! Real clients connect from db-branch's output alone: a stock Django project's `migrate`,
//! SQLAlchemy + Alembic (also under `migrate-check`), Node's mysql2, Go's database/sql,
//! PHP's PDO from Laravel's variables, Ruby's mysql2 from the Rails URL, and the server's
//! own CLI from the option file; `exec` and `shell`. The clients are Debian's packages and
//! npm's mysql2, installed by scripts/install-clients (the test tier runs it).

use db_branch::testkit::{assert_success, seed_sql, server, TestEnv};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Where scripts/install-clients put what is not a Debian package (Node's mysql2).
fn clients_dir() -> PathBuf {
    std::env::var_os("DB_BRANCH_CLIENTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/var/cache/db-branch/clients".into())
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn ok(out: Output, what: &str) -> String {
    assert!(out.status.success(), "{what} failed: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `db-branch exec NAME -- ARGS` in `dir`.
fn exec_in(env: &TestEnv, dir: &Path, name: &str, args: &[&str]) -> Output {
    let mut all = vec!["exec", name, "--"];
    all.extend(args);
    env.command(&all).current_dir(dir).output().unwrap()
}

/// What `sh -c 'set -a; . FILE; exec …'` gives a program: how a `.env` file is loaded in a
/// shell (the formats print POSIX-shell-quoted values).
fn with_env_file(file: &Path, program: &str, args: &[&str]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(r#"set -a; . "$0"; exec "$@""#)
        .arg(file)
        .arg(program)
        .args(args)
        .output()
        .unwrap()
}

const DJANGO_SETTINGS: &str = r#"
import dj_database_url, pymysql
pymysql.install_as_MySQLdb()
SECRET_KEY = "test"
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth"]
DATABASES = {"default": dj_database_url.config()}
USE_TZ = True
"#;

const ALEMBIC_INI: &str = "[alembic]\nscript_location = migrations\n";

const ALEMBIC_ENV: &str = r#"
import os, pymysql
from alembic import context
from sqlalchemy import create_engine
pymysql.install_as_MySQLdb()
engine = create_engine(os.environ["DATABASE_URL"])
with engine.connect() as connection:
    context.configure(connection=connection, target_metadata=None)
    with context.begin_transaction():
        context.run_migrations()
"#;

const ALEMBIC_VERSION: &str = r#"
from alembic import op
import sqlalchemy as sa
revision = "0001"
down_revision = None
def upgrade():
    op.create_table("widgets", sa.Column("id", sa.Integer, primary_key=True),
                    sa.Column("customer_id", sa.Integer, nullable=False))
    op.create_index("by_customer", "widgets", ["customer_id"])
"#;

const NODE_CHECK: &str = r#"
const mysql = require("mysql2/promise");
(async () => {
  const c = await mysql.createConnection(process.env.DATABASE_URL);
  const [rows] = await c.query("SELECT COUNT(*) AS n FROM customers");
  console.log(rows[0].n);
  await c.end();
})().catch((e) => { console.error(e); process.exit(1); });
"#;

const GO_CHECK: &str = r#"
package main

import (
	"database/sql"
	"fmt"
	"os"

	_ "github.com/go-sql-driver/mysql"
)

func main() {
	db, err := sql.Open("mysql", os.Args[1])
	if err != nil {
		panic(err)
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM customers").Scan(&n); err != nil {
		panic(err)
	}
	fmt.Println(n)
}
"#;

/// Laravel's stock config/database.php, reduced to what PDO gets.
const PHP_CHECK: &str = r#"<?php
$dsn = sprintf("mysql:host=%s;port=%s;dbname=%s", getenv("DB_HOST"), getenv("DB_PORT"), getenv("DB_DATABASE"));
$options = array_filter([PDO::MYSQL_ATTR_SSL_CA => getenv("MYSQL_ATTR_SSL_CA") ?: null]);
$pdo = new PDO($dsn, getenv("DB_USERNAME"), getenv("DB_PASSWORD"), $options);
echo $pdo->query("SELECT COUNT(*) FROM customers")->fetchColumn(), "\n";
"#;

/// What ActiveRecord does with DATABASE_URL for the mysql2 adapter: URL parts, and the
/// query's keys as options.
const RUBY_CHECK: &str = r#"
require "mysql2"; require "uri"; require "cgi"
u = URI.parse(ENV.fetch("DATABASE_URL"))
abort "not a mysql2 URL: #{u.scheme}" unless u.scheme == "mysql2"
q = CGI.parse(u.query || "")
opts = { host: u.host, port: u.port, username: CGI.unescape(u.user),
         password: CGI.unescape(u.password || ""), database: u.path.sub(%r{^/}, "") }
opts[:sslca] = q["sslca"].first if q.key?("sslca")
opts[:ssl_mode] = q["ssl_mode"].first.to_sym if q.key?("ssl_mode")
puts Mysql2::Client.new(**opts).query("SELECT COUNT(*) AS n FROM customers").first["n"]
"#;

#[test]
#[ignore = "needs root, btrfs, a server and scripts/install-clients; run by scripts/test"]
fn real_clients_connect_from_db_branch_output_alone() {
    let env = TestEnv::with_baseline();
    let created = env.json(&["create", "app"]);
    assert_eq!(created["connection"]["database"], "shop", "{created}");
    let status = env.json(&["status", "app"]);
    assert_eq!(status["connection"]["database"], "shop", "{status}");
    let url = env.run_ok(&["env", "app", "--format", "url"]);
    assert!(url.trim().ends_with("/shop"), "{url}");
    let work = env.root.join("clients");
    std::fs::create_dir_all(&work).unwrap();

    // exec: the variables, and the command's exit code.
    let out = exec_in(
        &env,
        &work,
        "app",
        &["sh", "-c", "printf %s \"$DB_DATABASE\"; exit 7"],
    );
    assert_eq!(out.status.code(), Some(7), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "shop");
    let out = exec_in(&env, &work, "app", &["no-such-program-here"]);
    assert_eq!(out.status.code(), Some(127), "{}", text(&out));

    // Django: `migrate` from DATABASE_URL, as a stock project reads it.
    let django = work.join("django");
    std::fs::create_dir_all(django.join("shopsite")).unwrap();
    std::fs::write(django.join("shopsite/__init__.py"), "").unwrap();
    std::fs::write(django.join("shopsite/settings.py"), DJANGO_SETTINGS).unwrap();
    let out = Command::new("django-admin")
        .current_dir(&django)
        .env("DJANGO_SETTINGS_MODULE", "shopsite.settings")
        .env("PYTHONPATH", &django)
        .arg("version")
        .output()
        .unwrap();
    ok(out, "django-admin version");
    let mut migrate = env.command(&["exec", "app", "--", "django-admin", "migrate", "--noinput"]);
    let out = migrate
        .current_dir(&django)
        .env("DJANGO_SETTINGS_MODULE", "shopsite.settings")
        .env("PYTHONPATH", &django)
        .output()
        .unwrap();
    let log = ok(out, "django migrate");
    assert!(log.contains("Applying auth.0001_initial... OK"), "{log}");

    // SQLAlchemy + Alembic: `upgrade head`, then the same under migrate-check.
    let alembic = work.join("alembic");
    std::fs::create_dir_all(alembic.join("migrations/versions")).unwrap();
    std::fs::write(alembic.join("alembic.ini"), ALEMBIC_INI).unwrap();
    std::fs::write(alembic.join("migrations/env.py"), ALEMBIC_ENV).unwrap();
    std::fs::write(alembic.join("migrations/versions/0001.py"), ALEMBIC_VERSION).unwrap();
    ok(
        exec_in(
            &env,
            &alembic,
            "app",
            &["/usr/bin/python3", "-m", "alembic", "upgrade", "head"],
        ),
        "alembic upgrade head",
    );
    let out = exec_in(
        &env,
        &alembic,
        "app",
        &["/usr/bin/python3", "-m", "alembic", "current"],
    );
    assert!(ok(out, "alembic current").contains("0001"));
    let out = env
        .command(&[
            "--json",
            "migrate-check",
            "--",
            "/usr/bin/python3",
            "-m",
            "alembic",
            "upgrade",
            "head",
        ])
        .current_dir(&alembic)
        .output()
        .unwrap();
    let report = ok(out, "migrate-check -- alembic upgrade head");
    assert!(report.contains("widgets"), "{report}");

    // Node's mysql2: the URL alone, the database not named anywhere else.
    std::fs::write(work.join("check.js"), NODE_CHECK).unwrap();
    let out = env
        .command(&["exec", "app", "--", "node", "check.js"])
        .current_dir(&work)
        .env("NODE_PATH", clients_dir().join("node/node_modules"))
        .output()
        .unwrap();
    assert_eq!(ok(out, "node mysql2"), "2000");

    // Go's database/sql with Debian's go-sql-driver, from --format go.
    let dsn = env.run_ok(&["env", "app", "--format", "go"]);
    std::fs::write(work.join("main.go"), GO_CHECK).unwrap();
    let out = Command::new("go")
        .args(["run", "main.go", dsn.trim()])
        .current_dir(&work)
        .env("GO111MODULE", "off")
        .env("GOPATH", "/usr/share/gocode")
        .env("GOCACHE", clients_dir().join("go-build"))
        .env("HOME", &work)
        .output()
        .unwrap();
    assert_eq!(ok(out, "go database/sql"), "2000");

    // PHP's PDO, from Laravel's .env variables.
    let laravel = work.join("laravel.env");
    std::fs::write(&laravel, env.run_ok(&["env", "app", "--format", "laravel"])).unwrap();
    std::fs::write(work.join("check.php"), PHP_CHECK).unwrap();
    let out = with_env_file(&laravel, "php", &[work.join("check.php").to_str().unwrap()]);
    assert_eq!(ok(out, "php pdo"), "2000");

    // Ruby's mysql2, from the Rails DATABASE_URL.
    let rails = work.join("rails.env");
    std::fs::write(&rails, env.run_ok(&["env", "app", "--format", "rails"])).unwrap();
    let out = with_env_file(&rails, "ruby", &["-e", RUBY_CHECK]);
    assert_eq!(ok(out, "ruby mysql2"), "2000");

    // The server's own CLI, from the option file (MySQL's client ignores MYSQL_PWD).
    let cnf = work.join("app.cnf");
    std::fs::write(&cnf, env.run_ok(&["env", "app", "--format", "mycnf"])).unwrap();
    let s = server();
    let out = Command::new(&s.client)
        .arg(format!("--defaults-file={}", cnf.display()))
        .args(["-N", "-B", "-e", "SELECT COUNT(*) FROM customers"])
        .output()
        .unwrap();
    assert_eq!(ok(out, "client --defaults-file"), "2000");

    shell_keeps_the_password_out_of_sight(&env);
    env.run_ok(&["delete", "app", "--yes"]);
}

/// `shell`: the server's client on the branch's database; the password in no process's
/// argv and not in the client's environment, while it runs.
fn shell_keeps_the_password_out_of_sight(env: &TestEnv) {
    let out = env
        .command(&["shell", "app", "--", "-N", "-B", "-e", "SELECT DATABASE()"])
        .output()
        .unwrap();
    assert_eq!(ok(out, "shell -e"), "shop");
    let password = env.json(&["status", "app"])["connection"]["password"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!password.is_empty());
    let mut child = env
        .command(&["shell", "app", "--", "-N", "-B", "-e", "SELECT SLEEP(3)"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    let mut seen_client = false;
    while std::time::Instant::now() < deadline {
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let pid = entry.path();
            let Ok(cmdline) = std::fs::read(pid.join("cmdline")) else {
                continue;
            };
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            assert!(
                !cmdline.contains(&password),
                "the password is in a process's argv: {cmdline}"
            );
            if cmdline.contains("--defaults-file=/dev/fd/") {
                seen_client = true;
                let environ = std::fs::read(pid.join("environ")).unwrap_or_default();
                assert!(
                    !String::from_utf8_lossy(&environ).contains(&password),
                    "the password is in the client's environment"
                );
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "shell with SLEEP failed");
    assert!(seen_client, "the client was never seen running");
}

#[test]
#[ignore = "needs root, btrfs and a server; run by scripts/test"]
fn with_two_databases_none_is_named_until_one_is_chosen() {
    let env = TestEnv::new("", "");
    env.run_ok(&["init"]);
    env.baseline_from_sql(
        "two.sql",
        &format!(
            "{}\nCREATE DATABASE crm;\nCREATE TABLE crm.leads (id INT PRIMARY KEY);\n",
            std::fs::read_to_string(seed_sql()).unwrap()
        ),
    );
    let list = env.json(&["baseline", "list"]);
    assert_eq!(
        list[0]["databases"],
        serde_json::json!(["crm", "shop"]),
        "{list}"
    );

    let created = env.json(&["create", "multi"]);
    assert_eq!(created["connection"]["database"], serde_json::Value::Null);
    let url = created["connection"]["url"].as_str().unwrap();
    assert!(url.ends_with('/'), "{url}");
    let out = env.run(&["env", "multi"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_success(&out, "");
    assert!(
        err.contains("crm, shop") && err.contains("--database"),
        "{err}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("DB_DATABASE"));

    let other = env.json(&["create", "other", "--database", "crm"]);
    assert_eq!(other["connection"]["database"], "crm");
    assert!(other["connection"]["url"]
        .as_str()
        .unwrap()
        .ends_with("/crm"));
    let err = env.run_err(&["create", "bad", "--database", "missing"], 2);
    assert!(
        err.contains("crm, shop") && err.contains("missing"),
        "{err}"
    );
    assert!(
        !env.json(&["list"]).to_string().contains("\"bad\""),
        "a refused create left a branch"
    );
    // A re-run chooses it for an existing branch.
    let chosen = env.json(&["create", "multi", "--database", "shop"]);
    assert_eq!(chosen["connection"]["database"], "shop");
    let vars = env.run_ok(&["env", "multi"]);
    assert!(vars.contains("export DB_DATABASE=shop"), "{vars}");
    for b in ["multi", "other"] {
        env.run_ok(&["delete", b, "--yes"]);
    }
}
