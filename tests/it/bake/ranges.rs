//! The logical bake's key ranges against a real server: for generated keys in several
//! collations (case, accents, combining marks, trailing spaces, the empty string, characters
//! a collation folds together), in CHAR, VARCHAR, composite and unsigned keys, the ranges
//! `ranges::plan` cuts read every row exactly once.

use db_branch::bake::copy::Table;
use db_branch::bake::ranges::{self, Split};
use db_branch::bake::session::{connect_source, session, SOURCE_SESSION};
use db_branch::testkit::{source_url, TestEnv};
use mysql::prelude::Queryable;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// Collations to try where the server has them: each server's default, binary, the UCA
/// ones (NO PAD on MySQL's 0900), and MariaDB's NO PAD general.
const COLLATIONS: &[&str] = &[
    "utf8mb4_general_ci",
    "utf8mb4_bin",
    "utf8mb4_unicode_ci",
    "utf8mb4_0900_ai_ci",
    "utf8mb4_0900_as_cs",
    "utf8mb4_uca1400_ai_ci",
    "utf8mb4_general_nopad_ci",
];

/// Pieces of keys: what collations fold (case, accents, ß/ss, æ/ae, a combining acute
/// after e), spaces that PAD SPACE ignores at the end, characters outside the BMP.
const PIECES: &[&str] = &[
    "a", "A", "á", "Á", "ä", "å", "e", "é", "\u{301}", "E", "ß", "ss", "s", "æ", "ae", " ", "  ",
    "z", "Z", "-", "0", "9", "😀", "😁",
];

fn key() -> impl Strategy<Value = String> {
    proptest::collection::vec(proptest::sample::select(PIECES), 0..5).prop_map(|p| p.concat())
}

fn unsigned() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(1),
        Just(i64::MAX as u64),
        Just(i64::MAX as u64 + 1),
        Just(u64::MAX),
        any::<u64>(),
        0u64..1000,
    ]
}

#[derive(Debug, Clone)]
struct Case {
    keys: Vec<(u8, String)>,
    numbers: Vec<u64>,
    pieces: usize,
}

fn case() -> impl Strategy<Value = Case> {
    (
        proptest::collection::vec((0u8..3, key()), 0..60),
        proptest::collection::vec(unsigned(), 0..40),
        2usize..12,
    )
        .prop_map(|(keys, numbers, pieces)| Case {
            keys,
            numbers,
            pieces,
        })
}

/// Reads `t` range by range as a bake's reader would; the `n` of every row read.
fn read_by_ranges(
    reader: &mut mysql::Conn,
    t: &Table,
    pieces: usize,
    split_seen: &mut usize,
) -> Result<(Vec<u64>, String), TestCaseError> {
    let fail = |e: anyhow::Error| TestCaseError::fail(format!("{}: {e:#}", t.label()));
    let split = ranges::plan(reader, t, pieces, 0).map_err(fail)?;
    let select = format!("SELECT n FROM {}", t.qualified());
    let mut read = Vec::new();
    let described = format!("{split:?}");
    match split {
        Split::Whole { .. } => read.extend(reader.query::<u64, _>(&select).unwrap()),
        Split::Ranges { key, bounds, .. } => {
            *split_seen += 1;
            let mut lo: Option<Vec<mysql::Value>> = None;
            for hi in bounds.iter().map(Some).chain([None]) {
                let (filter, params) =
                    ranges::predicate(&key, lo.as_deref(), hi.map(|h| h.as_slice())).unwrap();
                let rows: Vec<u64> = reader
                    .exec(format!("{select} WHERE {filter}"), params)
                    .map_err(|e| fail(e.into()))?;
                read.extend(rows);
                lo = hi.cloned();
            }
        }
    }
    read.sort_unstable();
    Ok((read, described))
}

#[test]
#[ignore = "needs root, btrfs and a server; run by scripts/test"]
fn ranges_read_every_row_once_whatever_the_collation() {
    let env = TestEnv::new("", "");
    env.run_ok(&["init"]);
    env.baseline_from_sql("ranges.sql", "CREATE DATABASE r;\n");
    let port = env.json(&["create", "r"])["port"].as_u64().unwrap() as u16;
    let url = source_url(port);
    let mut writer = connect_source(&url).unwrap();
    writer.query_drop("SET NAMES utf8mb4").unwrap();
    let mut reader = connect_source(&url).unwrap();
    session(&mut reader, SOURCE_SESSION).unwrap();

    let have: Vec<String> = writer
        .query("SELECT COLLATION_NAME FROM information_schema.COLLATIONS")
        .unwrap();
    let collations: Vec<&str> = COLLATIONS
        .iter()
        .copied()
        .filter(|c| have.iter().any(|h| h == c))
        .collect();
    assert!(collations.len() >= 4, "collations here: {collations:?}");
    // (table, DDL of its key, key of a row, tenant in the key)
    let mut tables: Vec<(String, String, bool)> = Vec::new();
    for (i, c) in collations.iter().enumerate() {
        for (shape, ddl, tenant) in [
            ("v", format!("k VARCHAR(20) COLLATE {c} NOT NULL, PRIMARY KEY (k)"), false),
            ("c", format!("k CHAR(20) COLLATE {c} NOT NULL, PRIMARY KEY (k)"), false),
            (
                "t",
                format!("tenant TINYINT NOT NULL, k VARCHAR(20) COLLATE {c} NOT NULL, PRIMARY KEY (tenant, k)"),
                true,
            ),
            // A unique key, no primary key: what InnoDB clusters by.
            ("u", format!("k VARCHAR(20) COLLATE {c} NOT NULL, UNIQUE KEY uk (k)"), false),
        ] {
            let name = format!("{shape}{i}");
            writer
                .query_drop(format!(
                    "CREATE TABLE r.{name} ({ddl}, n BIGINT UNSIGNED NOT NULL) CHARSET utf8mb4"
                ))
                .unwrap();
            tables.push((name, c.to_string(), tenant));
        }
    }
    writer
        .query_drop(
            "CREATE TABLE r.big (k BIGINT UNSIGNED PRIMARY KEY, n BIGINT UNSIGNED NOT NULL)",
        )
        .unwrap();

    let mut runner = TestRunner::new(Config {
        cases: 24,
        failure_persistence: None,
        ..Config::default()
    });
    // run() takes a Fn: the connections and counts are borrowed per case.
    let conns = std::cell::RefCell::new((writer, reader, 0usize, 0usize));
    let result = runner.run(&case(), |case| {
        let mut guard = conns.borrow_mut();
        let (writer, reader, split_seen, rows_seen) = &mut *guard;
        for (name, collation, tenant) in &tables {
            writer.query_drop(format!("DELETE FROM r.{name}")).unwrap();
            for (n, (t, k)) in case.keys.iter().enumerate() {
                // Keys equal under the collation collide: the first stays.
                let (cols, vals) = if *tenant {
                    (
                        "tenant, k, n",
                        vec![mysql::Value::from(*t), k.into(), (n as u64).into()],
                    )
                } else {
                    ("k, n", vec![k.into(), (n as u64).into()])
                };
                writer
                    .exec_drop(
                        format!(
                            "INSERT IGNORE INTO r.{name} ({cols}) VALUES ({})",
                            vec!["?"; vals.len()].join(", ")
                        ),
                        vals,
                    )
                    .unwrap();
            }
            let t = table(writer, name);
            let want: Vec<u64> = writer
                .query(format!("SELECT n FROM r.{name} ORDER BY n"))
                .unwrap();
            *rows_seen += want.len();
            let (got, split) = read_by_ranges(reader, &t, case.pieces, split_seen)?;
            prop_assert_eq!(got, want, "table {} ({}), {}", name, collation, split);
        }
        writer.query_drop("DELETE FROM r.big").unwrap();
        for (n, k) in case.numbers.iter().enumerate() {
            writer
                .exec_drop("INSERT IGNORE INTO r.big VALUES (?, ?)", (k, n as u64))
                .unwrap();
        }
        let t = table(writer, "big");
        let want: Vec<u64> = writer.query("SELECT n FROM r.big ORDER BY n").unwrap();
        let (got, split) = read_by_ranges(reader, &t, case.pieces, split_seen)?;
        prop_assert_eq!(got, want, "table big (BIGINT UNSIGNED), {}", split);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let (_, _, split_seen, rows_seen) = conns.into_inner();
    // Not vacuous: most tables of most cases were cut.
    assert!(
        split_seen > tables.len() * 4,
        "split {split_seen} times, {rows_seen} rows"
    );
}

/// The table as `list_tables` describes it, with its true row count (the estimate of a
/// table just filled may be anything).
fn table(conn: &mut mysql::Conn, name: &str) -> Table {
    let rows: u64 = conn
        .query_first(format!("SELECT COUNT(*) FROM r.{name}"))
        .unwrap()
        .unwrap();
    Table {
        schema: "r".into(),
        name: name.into(),
        rows,
        ..Table::default()
    }
}
