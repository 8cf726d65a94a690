//! Hostile input: each bad name, config, flag, size, duration or source is refused with a
//! clear message (exit 2) before anything happens: the configured root is never created.

use std::path::Path;
use std::process::Command;

struct Case {
    what: &'static str,
    config: &'static str,
    args: Vec<&'static str>,
    /// A word the message must contain, so the user learns what was wrong.
    says: &'static str,
}

fn case(
    what: &'static str,
    config: &'static str,
    args: &[&'static str],
    says: &'static str,
) -> Case {
    Case {
        what,
        config,
        args: args.to_vec(),
        says,
    }
}

#[test]
fn bad_input_is_refused_clearly_and_changes_nothing() {
    let ok = "";
    let cases = vec![
        // Branch names.
        case("uppercase name", ok, &["create", "Feature"], "'F'"),
        case("slash", ok, &["create", "a/b"], "'/'"),
        case("dot-dot", ok, &["create", "a..b"], ".."),
        case("leading dash", ok, &["create", "--", "-rf"], "start with"),
        case("leading dot", ok, &["create", ".hidden"], "start with"),
        case("at sign", ok, &["create", "x@init"], "'@'"),
        case("shell", ok, &["create", "$(reboot)"], "'$'"),
        case("space", ok, &["create", "a b"], "' '"),
        case("newline", ok, &["create", "a\nb"], "'\\n'"),
        case("unicode", ok, &["create", "café"], "'é'"),
        case(
            "too long",
            ok,
            &[
                "create",
                "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz",
            ],
            "limit",
        ),
        case("empty", ok, &["create", ""], "empty"),
        case("trailing dot", ok, &["reset", "a."], "end with"),
        // Flags, sizes, durations, times, labels.
        case(
            "size word",
            ok,
            &["create", "a", "--buffer-pool", "lots"],
            "128M",
        ),
        case(
            "negative size",
            ok,
            &["create", "a", "--buffer-pool=-1G"],
            "128M",
        ),
        case(
            "size unit",
            ok,
            &["create", "a", "--buffer-pool", "12Q"],
            "128M",
        ),
        case(
            "buffer pool InnoDB refuses",
            ok,
            &["create", "a", "--buffer-pool", "1K"],
            "at least 5M",
        ),
        case(
            "ttl past what a timestamp holds",
            ok,
            &["create", "a", "--ttl", "1000000y"],
            "longer than 100 years",
        ),
        case(
            "a buffer pool whose sum with others would wrap",
            ok,
            &["create", "a", "--buffer-pool", "18446744073709551615"],
            "more than any host has",
        ),
        case(
            "a claim's wait past what the clock can add (it panicked)",
            ok,
            &["pool", "claim", "p", "--wait", "500000000000y"],
            "longer than 100 years",
        ),
        case(
            "an ssh host that ssh would take for an option",
            ok,
            &["--host", "ssh://-oProxyCommand=x", "list"],
            "which ssh would take for an option",
        ),
        case(
            "generation word",
            ok,
            &["create", "a", "--baseline", "latest"],
            "generation",
        ),
        case(
            "generation zero",
            ok,
            &["create", "a", "--baseline", "0"],
            "generation",
        ),
        case(
            "ttl word",
            ok,
            &["create", "a", "--ttl", "soon"],
            "duration",
        ),
        case(
            "ttl and expires",
            ok,
            &[
                "create",
                "a",
                "--ttl",
                "1d",
                "--expires-at",
                "2030-01-01T00:00:00Z",
            ],
            "cannot be used",
        ),
        case(
            "expiry time",
            ok,
            &["create", "a", "--expires-at", "tomorrow"],
            "time",
        ),
        case("label", ok, &["create", "a", "--label", "pr"], "key=value"),
        case(
            "label key",
            ok,
            &["create", "a", "--label", "PR=1"],
            "label key",
        ),
        case(
            "profile",
            ok,
            &["create", "a", "--profile", "turbo"],
            "turbo",
        ),
        case("env format", ok, &["env", "a", "--format", "yaml"], "yaml"),
        case(
            "idle duration",
            ok,
            &["stop-idle", "--idle-for", "a while"],
            "duration",
        ),
        case("gc older-than", ok, &["gc", "--older-than=-5d"], "duration"),
        case("extend without time", ok, &["extend", "a"], "required"),
        case(
            "unknown command",
            ok,
            &["destroy-everything"],
            "unrecognized",
        ),
        case(
            "migrate-check without command",
            ok,
            &["migrate-check"],
            "COMMAND",
        ),
        // Sources.
        case(
            "missing datadir",
            ok,
            &[
                "baseline",
                "create",
                "--from-datadir",
                "/nonexistent/datadir",
            ],
            "not a directory",
        ),
        case(
            "not a datadir",
            ok,
            &["baseline", "create", "--from-datadir", "/usr"],
            "does not look like",
        ),
        case(
            "missing sql",
            ok,
            &["baseline", "create", "--empty", "--sql", "/nonexistent.sql"],
            "does not exist",
        ),
        case(
            "two sources",
            ok,
            &["baseline", "create", "--empty", "--from-datadir", "/usr"],
            "cannot be used",
        ),
        // Configs.
        case("unknown key", "colour = \"red\"\n", &["list"], "colour"),
        case(
            "unknown nested key",
            "[mysqld]\nbufferpool = \"1G\"\n",
            &["list"],
            "bufferpool",
        ),
        case(
            "bad ports",
            "ports = \"4000-3000\"\n",
            &["list"],
            "port range",
        ),
        case(
            "privileged ports",
            "ports = \"80-90\"\n",
            &["list"],
            "port range",
        ),
        case(
            "bad address",
            "bind_address = \"localhost\"\n",
            &["list"],
            "address",
        ),
        case(
            "relative root",
            "root = \"var/db\"\n",
            &["list"],
            "absolute",
        ),
        case(
            "long root",
            "root = \"/a/very/long/path/that/will/not/fit/in/a/socket/path\"\n",
            &["list"],
            "40 bytes",
        ),
        case(
            "tiny pool",
            "[btrfs]\nimage_size = \"1M\"\n",
            &["list"],
            "too small",
        ),
        case(
            "tiny buffer pool",
            "[mysqld]\nbuffer_pool = \"1K\"\n",
            &["list"],
            "too small",
        ),
        case(
            "root below /tmp under systemd",
            "root = \"/tmp/dbb-x\"\nservice_manager = \"systemd\"\n",
            &["list"],
            "PrivateTmp",
        ),
        case(
            "bad extra arg",
            "[mysqld]\nextra_args = [\"max_connections=5\"]\n",
            &["list"],
            "long server option",
        ),
        case(
            "bad profile",
            "[mysqld]\nprofile = \"fast\"\n",
            &["list"],
            "fast",
        ),
        case("bad backend", "backend = \"lvm\"\n", &["list"], "lvm"),
        case(
            "bad duration",
            "[lifecycle]\nstop_idle_after = \"often\"\n",
            &["list"],
            "duration",
        ),
        case(
            "bad unit prefix",
            "[systemd]\nunit_prefix = \"my sql\"\n",
            &["list"],
            "unit_prefix",
        ),
        case("not toml", "root = \n", &["list"], "config"),
        case(
            "zfs without dataset",
            "backend = \"zfs\"\n",
            &["list"],
            "dataset",
        ),
    ];
    assert!(cases.len() >= 30);
    for c in cases {
        // Not a hidden name (`.tmpXXXX`): roots below hidden directories are refused.
        let dir = tempfile::Builder::new()
            .prefix("dbb-hostile")
            .tempdir()
            .unwrap();
        let root = dir.path().join("r");
        // Every case gets its own root; it must never be created.
        let config = if c.config.starts_with("root") {
            c.config.to_string()
        } else {
            format!("root = \"{}\"\n{}", root.display(), c.config)
        };
        let path = dir.path().join("config.toml");
        std::fs::write(&path, &config).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_db-branch"))
            .args(&c.args)
            .env("DB_BRANCH_CONFIG", &path)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}: {err}", c.what);
        assert!(
            err.contains(c.says),
            "{}: message lacks {:?}: {err}",
            c.what,
            c.says
        );
        assert!(
            !Path::new(&root).exists(),
            "{}: the root was created",
            c.what
        );
    }
}
