//! Which application database a branch's clients are pointed at (the path of
//! `DATABASE_URL`, `DB_DATABASE`): `create --database` (kept in the record), else the
//! config's `client.database`, else the generation's only database. With several and none
//! chosen, none: a URL naming a database the application does not use would be worse.

use crate::branch::{BranchRecord, DatabaseName, Generation};
use crate::error::Error;
use crate::host::Host;

/// A branch's database and what its generation holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub database: Option<DatabaseName>,
    /// The generation's application databases (None: its files do not tell).
    pub available: Option<Vec<String>>,
    /// `client.database` names a database the generation lacks (it was passed over).
    pub config_missing: Option<DatabaseName>,
}

impl Resolved {
    /// Several databases and none chosen: what `env` explains on stderr.
    pub fn unchosen(&self) -> Option<&[String]> {
        match (&self.database, &self.available) {
            (None, Some(dbs)) if dbs.len() > 1 => Some(dbs),
            _ => None,
        }
    }
}

/// The database of `record`, on `host` now.
pub fn resolve(host: &Host, record: &BranchRecord) -> Resolved {
    let available = host.storage.generation_databases(record.baseline);
    choose(
        record.database.as_ref(),
        host.config.client.database.as_ref(),
        available,
    )
}

/// The order of the rules, without the host.
pub fn choose(
    chosen: Option<&DatabaseName>,
    configured: Option<&DatabaseName>,
    available: Option<Vec<String>>,
) -> Resolved {
    let has = |d: &DatabaseName| {
        available
            .as_ref()
            .is_none_or(|dbs| dbs.iter().any(|x| x == d.as_str()))
    };
    let mut config_missing = None;
    let database = if let Some(d) = chosen {
        Some(d.clone())
    } else {
        match configured {
            Some(d) if has(d) => Some(d.clone()),
            other => {
                config_missing = other.cloned();
                match available.as_deref() {
                    Some([only]) => only.parse().ok(),
                    _ => None,
                }
            }
        }
    };
    Resolved {
        database,
        available,
        config_missing,
    }
}

/// Checks `create --database NAME` against what generation `gen` holds: exit 2 with the
/// list when it lacks it. Generations whose files do not tell are taken at their word.
pub fn check_requested(host: &Host, gen: Generation, name: &DatabaseName) -> anyhow::Result<()> {
    check_in(
        name,
        host.storage.generation_databases(gen).as_deref(),
        &format!("baseline {gen}"),
    )
}

pub fn check_in(
    name: &DatabaseName,
    available: Option<&[String]>,
    what: &str,
) -> anyhow::Result<()> {
    let Some(dbs) = available else {
        return Ok(());
    };
    if dbs.iter().any(|d| d == name.as_str()) {
        return Ok(());
    }
    let has = if dbs.is_empty() {
        "no application database".to_string()
    } else {
        format!("these: {}", dbs.join(", "))
    };
    Err(Error::new(
        crate::error::Kind::Usage,
        format!("{what} has no database {name:?}; it has {has}"),
    )
    .hint("choose one of them with --database, or leave it out")
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db(s: &str) -> DatabaseName {
        s.parse().unwrap()
    }

    fn dbs(v: &[&str]) -> Option<Vec<String>> {
        Some(v.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn the_chosen_one_then_the_config_then_the_only_one() {
        let shop = db("shop");
        let two = dbs(&["crm", "shop"]);
        assert_eq!(
            choose(Some(&shop), None, dbs(&["crm"])).database,
            Some(shop.clone())
        );
        assert_eq!(
            choose(None, Some(&shop), two.clone()).database,
            Some(shop.clone())
        );
        assert_eq!(
            choose(None, None, dbs(&["shop"])).database,
            Some(shop.clone())
        );
        let r = choose(None, None, two.clone());
        assert_eq!(r.database, None);
        assert_eq!(r.unchosen().unwrap().len(), 2);
        // A configured name the generation lacks is passed over, and said so.
        let r = choose(None, Some(&db("gone")), dbs(&["shop"]));
        assert_eq!(r.database, Some(shop.clone()));
        assert_eq!(r.config_missing, Some(db("gone")));
        // Unknown contents: the config is taken at its word; no database otherwise.
        assert_eq!(choose(None, Some(&shop), None).database, Some(shop));
        assert_eq!(choose(None, None, None).database, None);
        assert_eq!(choose(None, None, dbs(&[])).unchosen(), None);
    }

    #[test]
    fn a_missing_database_is_a_usage_error_naming_what_exists() {
        let err = check_in(
            &db("missing"),
            Some(&["crm".into(), "shop".into()]),
            "baseline 1",
        )
        .unwrap_err();
        let (kind, _) = crate::report::classify(&err);
        assert_eq!(kind, crate::error::Kind::Usage);
        let text = crate::report::render(&err);
        assert!(
            text.contains("crm, shop") && text.contains("missing"),
            "{text}"
        );
        assert!(check_in(&db("shop"), Some(&["shop".into()]), "b").is_ok());
        assert!(check_in(&db("x"), None, "b").is_ok());
    }
}
