//! Table definitions for fast loads: a `CREATE TABLE` split into the table with its primary
//! key only, and the secondary indexes and foreign keys to add once the rows are in (an
//! index built once after the load beats one maintained row by row).

#[derive(Debug, Clone, PartialEq)]
pub struct SplitTable {
    /// `CREATE TABLE` with columns, primary key, checks and table options.
    pub base: String,
    /// `ADD KEY …` / `ADD UNIQUE KEY …` clauses for one `ALTER TABLE` after the load.
    pub indexes: Vec<String>,
    /// `ADD CONSTRAINT … FOREIGN KEY …` clauses, added after every table is loaded.
    pub foreign_keys: Vec<String>,
}

/// Splits the output of `SHOW CREATE TABLE` (one column or key per line).
pub fn split_create_table(create: &str) -> SplitTable {
    split_create_table_with(create, true)
}

/// `SHOW CREATE TABLE` with its foreign keys apart (added once every table exists) and, when
/// `defer_indexes`, its secondary indexes too: a small table is cheaper created with them
/// than altered afterwards (an `ALTER TABLE` per table cost more than building the index
/// while 20 rows go in: docs/bake.md).
pub fn split_create_table_with(create: &str, defer_indexes: bool) -> SplitTable {
    // The first line that starts with `)` closes the column list: partition clauses follow it.
    let (Some(open), Some(close)) = (create.find("(\n"), create.find("\n)")) else {
        return SplitTable {
            base: create.to_string(),
            indexes: Vec::new(),
            foreign_keys: Vec::new(),
        };
    };
    let head = &create[..open + 1];
    let tail = &create[close + 1..];
    let lines: Vec<String> = create[open + 2..close]
        .lines()
        .map(|l| l.trim().trim_end_matches(',').to_string())
        .filter(|l| !l.is_empty())
        .collect();
    // An AUTO_INCREMENT column must stay the first column of some key.
    let auto_column = lines
        .iter()
        .find(|l| l.starts_with('`') && l.to_ascii_uppercase().contains("AUTO_INCREMENT"))
        .and_then(|l| l.split('`').nth(1))
        .map(str::to_string);
    let first_column = |key: &str| -> Option<String> {
        let cols = &key[key.find('(')? + 1..];
        cols.split('`').nth(1).map(str::to_string)
    };
    let pk_first = lines
        .iter()
        .find(|l| l.starts_with("PRIMARY KEY"))
        .and_then(|l| first_column(l));
    let mut kept = Vec::new();
    let mut indexes = Vec::new();
    let mut foreign_keys = Vec::new();
    let mut auto_covered = auto_column.is_none() || pk_first == auto_column;
    for line in lines {
        let upper = line.to_ascii_uppercase();
        let is_index = [
            "KEY ",
            "UNIQUE KEY ",
            "FULLTEXT KEY ",
            "SPATIAL KEY ",
            "INDEX ",
            "UNIQUE INDEX ",
        ]
        .iter()
        .any(|p| upper.starts_with(p));
        if upper.starts_with("CONSTRAINT ") && upper.contains("FOREIGN KEY") {
            foreign_keys.push(format!("ADD {line}"));
        } else if is_index && !defer_indexes {
            kept.push(line);
        } else if is_index {
            if !auto_covered && first_column(&line) == auto_column {
                auto_covered = true;
                kept.push(line);
            } else {
                indexes.push(format!("ADD {line}"));
            }
        } else {
            kept.push(line);
        }
    }
    SplitTable {
        base: format!("{head}\n  {}\n{tail}", kept.join(",\n  ")),
        indexes,
        foreign_keys,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORDERS: &str = "CREATE TABLE `orders` (\n  `id` bigint(20) unsigned NOT NULL,\n  `customer_id` int(10) unsigned NOT NULL,\n  `total` decimal(12,2) NOT NULL,\n  PRIMARY KEY (`id`),\n  KEY `customer` (`customer_id`),\n  UNIQUE KEY `u` (`total`,`id`),\n  CONSTRAINT `fk_c` FOREIGN KEY (`customer_id`) REFERENCES `customers` (`id`),\n  CONSTRAINT `positive` CHECK (`total` >= 0)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4";

    #[test]
    fn secondary_keys_and_foreign_keys_are_deferred() {
        let s = split_create_table(ORDERS);
        assert!(s.base.contains("PRIMARY KEY (`id`)"), "{}", s.base);
        assert!(
            s.base.contains("CHECK (`total` >= 0)"),
            "checks stay: {}",
            s.base
        );
        assert!(
            !s.base.contains("KEY `customer`") && !s.base.contains("FOREIGN"),
            "{}",
            s.base
        );
        assert!(
            s.base.ends_with(") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"),
            "{}",
            s.base
        );
        assert_eq!(
            s.indexes,
            [
                "ADD KEY `customer` (`customer_id`)",
                "ADD UNIQUE KEY `u` (`total`,`id`)"
            ]
        );
        assert_eq!(
            s.foreign_keys,
            ["ADD CONSTRAINT `fk_c` FOREIGN KEY (`customer_id`) REFERENCES `customers` (`id`)"]
        );
    }

    #[test]
    fn a_small_table_keeps_its_indexes_and_loses_only_its_foreign_keys() {
        let s = split_create_table_with(ORDERS, false);
        assert!(
            s.base.contains("KEY `customer` (`customer_id`)")
                && s.base.contains("UNIQUE KEY `u` (`total`,`id`)")
                && !s.base.contains("FOREIGN"),
            "{}",
            s.base
        );
        assert!(s.indexes.is_empty());
        assert_eq!(s.foreign_keys.len(), 1);
    }

    #[test]
    fn the_key_of_an_auto_increment_column_stays() {
        let create = "CREATE TABLE `t` (\n  `a` int(11) NOT NULL,\n  `id` int(11) NOT NULL AUTO_INCREMENT,\n  PRIMARY KEY (`a`,`id`),\n  KEY `id` (`id`),\n  KEY `other` (`a`)\n) ENGINE=InnoDB";
        let s = split_create_table(create);
        assert!(s.base.contains("KEY `id` (`id`)"), "{}", s.base);
        assert_eq!(s.indexes, ["ADD KEY `other` (`a`)"]);
    }

    #[test]
    fn a_table_without_keys_is_unchanged() {
        let create =
            "CREATE TABLE `log` (\n  `at` datetime NOT NULL,\n  `msg` text\n) ENGINE=InnoDB";
        let s = split_create_table(create);
        assert!(s.indexes.is_empty() && s.foreign_keys.is_empty());
        assert!(s.base.contains("`msg` text"));
    }
}
