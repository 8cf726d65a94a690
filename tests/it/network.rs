//! A branch reachable from another machine: the test makes a network namespace joined to
//! this one by a veth pair (testkit::veth: its own addresses, nothing else), binds branches
//! to this side's address and connects from the other side. Removed when the test ends.

use db_branch::testkit::veth::Veth;
use db_branch::testkit::{server, TestEnv};

#[test]
#[ignore = "needs root, btrfs and a server; run by scripts/test"]
fn off_loopback_a_branch_requires_tls_and_clients_verify_it() {
    let veth = Veth::new();
    let env = TestEnv::new(&format!("bind_address = \"{}\"", veth.host_addr), "");
    env.run_ok(&["init"]);
    assert!(env.root.join("tls/ca.pem").exists(), "init makes the CA");
    env.run_ok(&["baseline", "create", "--empty"]);
    let created = env.json(&["create", "far"]);
    let port = created["port"].as_u64().unwrap();
    let conn = &created["connection"];
    let ca = conn["ssl_ca"].as_str().expect("ssl_ca in the connection");
    let password = conn["password"].as_str().unwrap();
    assert!(
        conn["url"]
            .as_str()
            .unwrap()
            .contains("ssl-mode=VERIFY_IDENTITY"),
        "{conn}"
    );
    let vars = env.run_ok(&["env", "far"]);
    assert!(vars.contains(&format!("MYSQL_SSL_CA={ca}")), "{vars}");

    let s = server();
    let base = vec![
        "--no-defaults".to_string(),
        format!("-h{}", veth.host_addr),
        format!("-P{port}"),
        "-uroot".to_string(),
        format!("-p{password}"),
        "-N".to_string(),
        "-B".to_string(),
    ];
    // Verified TLS from the other machine: the server's certificate is for this address.
    let verified: Vec<String> = if s.mysql {
        vec![
            format!("--ssl-ca={ca}"),
            "--ssl-mode=VERIFY_IDENTITY".into(),
        ]
    } else {
        vec![format!("--ssl-ca={ca}"), "--ssl-verify-server-cert".into()]
    };
    let mut args = base.clone();
    args.extend(verified);
    args.extend(["-e".into(), "SHOW SESSION STATUS LIKE 'Ssl_version'".into()]);
    let out = veth.run(&s.client, &args);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("TLS"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Without TLS the server refuses the same login (MySQL says why; MariaDB answers
    // "Access denied").
    let mut args = base.clone();
    args.push(if s.mysql {
        "--ssl-mode=DISABLED".into()
    } else {
        "--skip-ssl".into()
    });
    args.extend(["-e".into(), "SELECT 1".into()]);
    let out = veth.run(&s.client, &args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a plain connection was let in");
    assert!(
        err.contains("insecure transport") || err.contains("Access denied"),
        "{err}"
    );
    // The formats carry the same verified TLS in each client's own syntax: the server's
    // client from the option file, and SQLAlchemy + PyMySQL from its URL.
    let cnf = env.root.join("far.cnf");
    std::fs::write(&cnf, env.run_ok(&["env", "far", "--format", "mycnf"])).unwrap();
    let out = veth.run(
        &s.client,
        &[
            format!("--defaults-file={}", cnf.display()),
            "-N".into(),
            "-B".into(),
            "-e".into(),
            "SHOW SESSION STATUS LIKE 'Ssl_version'".into(),
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("TLS"),
        "mycnf: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let url = env.run_ok(&["env", "far", "--format", "sqlalchemy"]);
    let script = "import sys, sqlalchemy\n\
        e = sqlalchemy.create_engine(sys.argv[1])\n\
        with e.connect() as c:\n    \
            print(c.exec_driver_sql(\"SHOW SESSION STATUS LIKE 'Ssl_version'\").fetchone()[1])\n";
    let out = veth.run(
        std::path::Path::new("/usr/bin/python3"),
        &["-c".into(), script.into(), url.trim().into()],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("TLS"),
        "sqlalchemy: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // With the CA the URL names swapped for another, the same URL is refused: it verifies.
    let other_ca = env.root.join("other-ca.pem");
    std::fs::write(&other_ca, include_str!("../fixtures/unrelated-ca.pem")).unwrap();
    let ca_escaped = db_branch::ops::branch::connection::url_escape(ca);
    let forged = url.trim().replace(
        &ca_escaped,
        &db_branch::ops::branch::connection::url_escape(other_ca.to_str().unwrap()),
    );
    assert_ne!(forged, url.trim(), "the URL names the CA: {url}");
    let out = veth.run(
        std::path::Path::new("/usr/bin/python3"),
        &["-c".into(), script.into(), forged],
    );
    assert!(
        !out.status.success(),
        "a server not signed by the named CA was let through"
    );
    env.run_ok(&["delete", "far", "--yes"]);
}
