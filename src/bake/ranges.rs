//! A big table's rows split into ranges of its key, for parallel readers, exactly: every
//! bound is a key value the source itself returned in key order, and every comparison with
//! a bound is made by the source in the key column's own collation (a string bound is
//! written `CONVERT(? USING cs) COLLATE the_column's`), so whatever the collation — case,
//! accents, PAD SPACE or NO PAD — and however wide the key, each row satisfies exactly one
//! range's predicate: the predicates are the key's own total order cut at increasing
//! points. Bounds come from one pass of the source over the key (a stride: the row `step`
//! past the previous bound, `LIMIT 1 OFFSET step - 1`), not a scan from the start per bound.

use super::table::Table;
use crate::sql::quote;
use anyhow::{anyhow, Result};
use mysql::prelude::Queryable;
use mysql::Value;

/// A column of the key the ranges cut, with how a bound is written for it.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyColumn {
    pub name: String,
    /// `?`, or the typed form that makes the source compare in the column's own terms.
    placeholder: String,
    /// An integer type: bounds can be computed between MIN and MAX.
    integer: bool,
}

/// How a table's rows are read.
#[derive(Debug, Clone, PartialEq)]
pub enum Split {
    /// By one reader; `why` says why a table big enough to split was not.
    Whole { why: Option<String> },
    /// `bounds.len() + 1` ranges over `key` (`by` names the index).
    Ranges {
        key: Vec<KeyColumn>,
        by: String,
        bounds: Vec<Vec<Value>>,
    },
}

/// One column of a unique index, as information_schema describes it.
#[derive(Debug, Clone)]
struct IndexColumn {
    index: String,
    column: String,
    sub_part: Option<u64>,
    data_type: String,
    charset: Option<String>,
    collation: Option<String>,
    nullable: bool,
    precision: Option<u64>,
    scale: Option<u64>,
    /// A CHAR in a NO PAD collation on MariaDB: InnoDB orders its index by the padded value
    /// while SQL compares the unpadded one, so with characters the collation ignores the
    /// index and `>=` disagree (MariaDB 11.8: `k >= ''` by the index misses a row holding
    /// only U+0301 that `STRCMP` calls equal). A range read by that index would miss it.
    padded_mismatch: bool,
}

const INTEGERS: &[&str] = &["tinyint", "smallint", "mediumint", "int", "bigint"];

/// Types whose order in `ORDER BY` is the order of `<`/`>=` against a bound of the same
/// type. ENUM and SET are not (they sort by their index number and compare as strings),
/// floats do not round-trip, and BLOB/TEXT keys are prefixes.
const ORDERED: &[&str] = &[
    "tinyint",
    "smallint",
    "mediumint",
    "int",
    "bigint",
    "decimal",
    "char",
    "varchar",
    "binary",
    "varbinary",
    "date",
    "datetime",
    "timestamp",
    "time",
    "year",
];

/// Character set and collation names are identifiers; anything else is not spliced in.
fn plain_name(s: &str) -> Option<&str> {
    (!s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')).then_some(s)
}

impl IndexColumn {
    fn key_column(&self) -> Option<KeyColumn> {
        if !ORDERED.contains(&self.data_type.as_str())
            || self.sub_part.is_some()
            || self.padded_mismatch
        {
            return None;
        }
        let placeholder = match (self.charset.as_deref(), self.collation.as_deref()) {
            (Some(cs), Some(coll)) => format!(
                "CONVERT(? USING {}) COLLATE {}",
                plain_name(cs)?,
                plain_name(coll)?
            ),
            _ if self.data_type == "decimal" => format!(
                "CAST(? AS DECIMAL({}, {}))",
                self.precision.unwrap_or(65),
                self.scale.unwrap_or(30)
            ),
            _ => "?".to_string(),
        };
        Some(KeyColumn {
            name: self.column.clone(),
            placeholder,
            integer: INTEGERS.contains(&self.data_type.as_str()),
        })
    }
}

/// The key to split by: the primary key, else a unique key of NOT NULL columns (what
/// InnoDB clusters such a table by), cut to its leading columns of an ordered type;
/// `Err` says why there is none.
fn choose_key(
    source: &mut mysql::Conn,
    t: &Table,
) -> Result<std::result::Result<(String, Vec<KeyColumn>), String>> {
    type Row = (
        String,
        String,
        Option<u64>,
        String,
        Option<String>,
        Option<String>,
        String,
        Option<u64>,
        Option<u64>,
    );
    let rows: Vec<Row> = source.exec(
        "SELECT s.INDEX_NAME, s.COLUMN_NAME, s.SUB_PART, c.DATA_TYPE, c.CHARACTER_SET_NAME, \
           c.COLLATION_NAME, c.IS_NULLABLE, c.NUMERIC_PRECISION, c.NUMERIC_SCALE \
         FROM information_schema.STATISTICS s JOIN information_schema.COLUMNS c \
           ON c.TABLE_SCHEMA = s.TABLE_SCHEMA AND c.TABLE_NAME = s.TABLE_NAME \
          AND c.COLUMN_NAME = s.COLUMN_NAME \
         WHERE s.TABLE_SCHEMA = ? AND s.TABLE_NAME = ? AND s.NON_UNIQUE = 0 \
         ORDER BY s.INDEX_NAME <> 'PRIMARY', s.INDEX_NAME, s.SEQ_IN_INDEX",
        (&t.schema, &t.name),
    )?;
    let mut columns: Vec<IndexColumn> = rows
        .into_iter()
        .map(
            |(
                index,
                column,
                sub_part,
                data_type,
                charset,
                collation,
                nullable,
                precision,
                scale,
            )| {
                IndexColumn {
                    index,
                    column,
                    sub_part,
                    data_type: data_type.to_ascii_lowercase(),
                    charset,
                    collation,
                    nullable: nullable == "YES",
                    precision,
                    scale,
                    padded_mismatch: false,
                }
            },
        )
        .collect();
    for c in columns.iter_mut().filter(|c| c.data_type == "char") {
        c.padded_mismatch =
            char_index_disagrees(source, c.charset.as_deref(), c.collation.as_deref())?;
    }
    let mut indexes: Vec<(String, Vec<IndexColumn>)> = Vec::new();
    for c in columns {
        match indexes.last_mut() {
            Some((name, cols)) if *name == c.index => cols.push(c),
            _ => indexes.push((c.index.clone(), vec![c])),
        }
    }
    // A unique index over a nullable column admits many NULLs: not a key.
    let Some((index, cols)) = indexes
        .into_iter()
        .find(|(_, cols)| cols.iter().all(|c| !c.nullable))
    else {
        return Ok(Err(
            "no primary key or unique key of NOT NULL columns (InnoDB's \
                       hidden row id is not visible to SQL)"
                .to_string(),
        ));
    };
    let key: Vec<KeyColumn> = cols.iter().map_while(IndexColumn::key_column).collect();
    if key.is_empty() {
        let lead = &cols[0];
        let why = if lead.padded_mismatch {
            "a CHAR in a NO PAD collation, whose index order MariaDB does not keep to"
        } else {
            "a type whose sort order is not its comparison order (or a prefix of a column)"
        };
        return Ok(Err(format!(
            "its key {index} leads with {} {}: {why}",
            lead.data_type, lead.column
        )));
    }
    Ok(Ok((index, key)))
}

/// Whether a CHAR key in `collation` is one whose index order MariaDB does not keep to
/// (see `padded_mismatch`): a NO PAD collation (`'a' = 'a '` is false) on MariaDB.
fn char_index_disagrees(
    source: &mut mysql::Conn,
    charset: Option<&str>,
    collation: Option<&str>,
) -> Result<bool> {
    let (Some(cs), Some(coll)) = (charset.and_then(plain_name), collation.and_then(plain_name))
    else {
        return Ok(false);
    };
    let (mariadb, pads): (bool, bool) = source
        .query_first(format!(
            "SELECT @@version LIKE '%MariaDB%', \
             CONVERT('a' USING {cs}) COLLATE {coll} = CONVERT('a ' USING {cs}) COLLATE {coll}"
        ))?
        .unwrap_or((false, true));
    Ok(mariadb && !pads)
}

/// `key OP vals` in the key's lexicographic order: `strict` between leading columns
/// (`<` or `>`), `last` on the last one (`<`, `>=`, `>`). SQL and its parameters.
fn compare(key: &[KeyColumn], vals: &[Value], strict: &str, last: &str) -> (String, Vec<Value>) {
    let mut terms = Vec::new();
    let mut params = Vec::new();
    for i in 0..key.len() {
        let mut parts = Vec::new();
        for (c, v) in key.iter().zip(vals).take(i) {
            parts.push(format!("{} = {}", quote(&c.name), c.placeholder));
            params.push(v.clone());
        }
        let op = if i + 1 == key.len() { last } else { strict };
        parts.push(format!(
            "{} {op} {}",
            quote(&key[i].name),
            key[i].placeholder
        ));
        params.push(vals[i].clone());
        terms.push(format!("({})", parts.join(" AND ")));
    }
    (format!("({})", terms.join(" OR ")), params)
}

/// The predicate of the range `[lo, hi)` (either end open when `None`); `None` for the
/// whole table.
pub fn predicate(
    key: &[KeyColumn],
    lo: Option<&[Value]>,
    hi: Option<&[Value]>,
) -> Option<(String, Vec<Value>)> {
    let mut sql = Vec::new();
    let mut params = Vec::new();
    if let Some(lo) = lo {
        let (s, p) = compare(key, lo, ">", ">=");
        sql.push(s);
        params.extend(p);
    }
    if let Some(hi) = hi {
        let (s, p) = compare(key, hi, "<", "<");
        sql.push(s);
        params.extend(p);
    }
    (!sql.is_empty()).then(|| (sql.join(" AND "), params))
}

/// The columns of `key`, comma-separated and quoted (for ORDER BY and SELECT).
pub fn column_list(key: &[KeyColumn]) -> String {
    key.iter()
        .map(|c| quote(&c.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The columns of `key` as they are named, for messages.
pub fn column_names(key: &[KeyColumn]) -> String {
    key.iter()
        .map(|c| c.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Up to `pieces - 1` bounds cutting `t` into ranges of about `rows / pieces` rows, each
/// the row `step` rows past the one before in key order.
fn stride_bounds(
    source: &mut mysql::Conn,
    t: &Table,
    key: &[KeyColumn],
    pieces: usize,
) -> Result<Vec<Vec<Value>>> {
    let step = (t.rows / pieces as u64).max(1);
    let cols = column_list(key);
    let mut bounds: Vec<Vec<Value>> = Vec::new();
    // TABLE_ROWS is an estimate: a table bigger than it said gets more ranges, up to this.
    while bounds.len() < pieces * 2 {
        let (filter, params) = match bounds.last() {
            Some(prev) => {
                let (s, p) = compare(key, prev, ">", ">");
                (format!(" WHERE {s}"), p)
            }
            None => (String::new(), Vec::new()),
        };
        let offset = if bounds.is_empty() { step } else { step - 1 };
        let row: Option<mysql::Row> = source.exec_first(
            format!(
                "SELECT {cols} FROM {}{filter} ORDER BY {cols} LIMIT 1 OFFSET {offset}",
                t.qualified()
            ),
            params,
        )?;
        let Some(row) = row else { break };
        let values = row.unwrap();
        if values.len() != key.len() {
            return Err(anyhow!(
                "the bound of {} had {} columns",
                t.label(),
                values.len()
            ));
        }
        bounds.push(values);
    }
    Ok(bounds)
}

/// Integer bounds between MIN and MAX of a single integer key: two index lookups.
fn integer_bounds(
    source: &mut mysql::Conn,
    t: &Table,
    column: &str,
    pieces: usize,
) -> Result<Vec<Vec<Value>>> {
    let col = quote(column);
    let (min, max): (Option<String>, Option<String>) = source
        .query_first(format!(
            "SELECT MIN({col}), MAX({col}) FROM {}",
            t.qualified()
        ))?
        .unwrap_or((None, None));
    let (Some(min), Some(max)) = (min, max) else {
        return Ok(Vec::new());
    };
    let (min, max): (i128, i128) = (min.parse()?, max.parse()?);
    Ok(super::split::int_chunks(min, max, pieces)
        .into_iter()
        .skip(1)
        .filter_map(|(lo, _)| lo)
        .map(|b| {
            vec![match i64::try_from(b) {
                Ok(i) => Value::Int(i),
                Err(_) => Value::UInt(b as u64),
            }]
        })
        .collect())
}

/// How to read `t` with about `pieces` readers; tables under `min_rows` go whole (planning
/// costs more than it saves).
pub fn plan(source: &mut mysql::Conn, t: &Table, pieces: usize, min_rows: u64) -> Result<Split> {
    if t.rows < min_rows || pieces < 2 {
        return Ok(Split::Whole { why: None });
    }
    if t.versioned {
        return Ok(Split::Whole {
            why: Some("system-versioned: its key repeats in its history".into()),
        });
    }
    let (by, key) = match choose_key(source, t)? {
        Ok(k) => k,
        Err(why) => return Ok(Split::Whole { why: Some(why) }),
    };
    let single_integer = key.len() == 1 && key[0].integer;
    let bounds = if single_integer {
        integer_bounds(source, t, &key[0].name, pieces)?
    } else {
        stride_bounds(source, t, &key, pieces)?
    };
    if bounds.is_empty() {
        return Ok(Split::Whole { why: None });
    }
    Ok(Split::Ranges { key, by, bounds })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str, placeholder: &str) -> KeyColumn {
        KeyColumn {
            name: name.into(),
            placeholder: placeholder.into(),
            integer: placeholder == "?",
        }
    }

    #[test]
    fn a_composite_range_is_lexicographic_with_the_bounds_typed() {
        let key = [
            col("tenant", "?"),
            col("id", "CONVERT(? USING utf8mb4) COLLATE utf8mb4_general_ci"),
        ];
        let lo = [Value::Int(3), Value::Bytes(b"a".to_vec())];
        let hi = [Value::Int(5), Value::Bytes(b"b".to_vec())];
        let (sql, params) = predicate(&key, Some(&lo), Some(&hi)).unwrap();
        let id = "CONVERT(? USING utf8mb4) COLLATE utf8mb4_general_ci";
        assert_eq!(
            sql,
            format!(
                "((`tenant` > ?) OR (`tenant` = ? AND `id` >= {id})) AND \
                 ((`tenant` < ?) OR (`tenant` = ? AND `id` < {id}))"
            )
        );
        assert_eq!(
            params,
            vec![
                Value::Int(3),
                Value::Int(3),
                Value::Bytes(b"a".to_vec()),
                Value::Int(5),
                Value::Int(5),
                Value::Bytes(b"b".to_vec()),
            ]
        );
        assert_eq!(predicate(&key, None, None), None);
        let (sql, _) = predicate(&key[..1], None, Some(&hi[..1])).unwrap();
        assert_eq!(sql, "((`tenant` < ?))");
    }

    #[test]
    fn only_ordered_whole_columns_make_a_key() {
        let c = |ty: &str, cs: Option<&str>, sub: Option<u64>| IndexColumn {
            index: "PRIMARY".into(),
            column: "k".into(),
            sub_part: sub,
            data_type: ty.into(),
            charset: cs.map(str::to_string),
            collation: cs.map(|c| format!("{c}_unicode_ci")),
            nullable: false,
            precision: Some(10),
            scale: Some(2),
            padded_mismatch: false,
        };
        assert_eq!(c("int", None, None).key_column().unwrap().placeholder, "?");
        assert_eq!(
            c("varchar", Some("utf8mb4"), None)
                .key_column()
                .unwrap()
                .placeholder,
            "CONVERT(? USING utf8mb4) COLLATE utf8mb4_unicode_ci"
        );
        assert_eq!(
            c("decimal", None, None).key_column().unwrap().placeholder,
            "CAST(? AS DECIMAL(10, 2))"
        );
        assert!(c("enum", Some("utf8mb4"), None).key_column().is_none());
        assert!(c("double", None, None).key_column().is_none());
        assert!(c("varchar", Some("utf8mb4"), Some(10))
            .key_column()
            .is_none());
        assert!(c("varchar", Some("utf8mb4'; DROP"), None)
            .key_column()
            .is_none());
    }
}
