//! Generations pin their server: a baseline made by one family or release series is never
//! started by another (its first start would upgrade the data dictionary in place), and a
//! binary that is no server is refused. Needs MySQL 9.7 and the host's MariaDB 10.11; run
//! in the MySQL tier of scripts/test.

use db_branch::testkit::TestEnv;

fn use_binary(env: &TestEnv, binary: &str) {
    let text = std::fs::read_to_string(&env.config).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("binary = "))
        .unwrap()
        .to_string();
    std::fs::write(
        &env.config,
        text.replace(&line, &format!("binary = \"{binary}\"")),
    )
    .unwrap();
}

#[test]
#[ignore = "needs root, btrfs, MySQL 9.7 and MariaDB 10.11; run by scripts/test"]
fn a_generation_is_only_started_by_the_server_family_and_series_that_made_it() {
    let mysql = "/opt/db-branch/mysql-9.7/db-branch/bin/mysqld";
    let mariadb = "/usr/sbin/mariadbd";
    let env = TestEnv::new("", "");
    use_binary(&env, mysql);
    env.run_ok(&["init"]);
    env.run_ok(&["baseline", "create", "--empty"]);
    let list = env.json(&["baseline", "list"]);
    assert_eq!(list[0]["server"]["family"], "mysql", "{list}");

    // MariaDB must not start MySQL's generation: refused, naming both, nothing made.
    use_binary(&env, mariadb);
    let err = env.run_err(&["create", "a"], 2);
    assert!(
        err.contains("MySQL 9.7") && err.contains("MariaDB 10.11"),
        "{err}"
    );
    assert!(err.contains("mysqld.binary"), "says what to do: {err}");
    assert_eq!(env.json(&["list"]), serde_json::json!([]));

    // MariaDB makes its own generation 2, which MySQL in turn refuses, and refuses as a
    // datadir to copy before copying anything.
    env.run_ok(&["baseline", "create", "--empty"]);
    env.run_ok(&["create", "maria", "--baseline", "2"]);
    env.run_ok(&["stop", "maria"]);
    use_binary(&env, mysql);
    let err = env.run_err(&["start", "maria"], 2);
    assert!(
        err.contains("MariaDB 10.11") && err.contains("MySQL 9.7"),
        "{err}"
    );
    let err = env.run_err(&["create", "b", "--baseline", "2"], 2);
    assert!(err.contains("baseline gen-000002"), "{err}");
    let gen2 = env.pool().join("baselines/gen-000002");
    let err = env.run_err(
        &[
            "baseline",
            "create",
            "--from-datadir",
            gen2.to_str().unwrap(),
        ],
        2,
    );
    assert!(err.contains("the datadir was made by MariaDB"), "{err}");
    assert_eq!(env.json(&["baseline", "list"]).as_array().unwrap().len(), 2);
    let doctor = env.json(&["doctor"]);
    assert_eq!(
        doctor["findings"],
        serde_json::json!([]),
        "no workspace left"
    );
    // MySQL's own generation still works.
    assert_eq!(
        env.json(&["create", "c", "--baseline", "1"])["state"],
        "running"
    );

    // A binary that is no server at all.
    use_binary(&env, "/bin/true");
    let err = env.run_err(&["create", "d"], 2);
    assert!(err.contains("is not a MySQL or MariaDB server"), "{err}");
    use_binary(&env, "/nonexistent/mysqld");
    let err = env.run_err(&["create", "d"], 2);
    assert!(err.contains("does not exist"), "{err}");
    use_binary(&env, mysql);
}
