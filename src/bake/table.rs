//! A table being baked, as information_schema describes it (shared by the copy and its
//! key ranges).

use crate::sql::quote;

#[derive(Debug, Clone, Default)]
pub struct Table {
    pub schema: String,
    pub name: String,
    pub bytes: u64,
    pub rows: u64,
    /// Its partitions are files of their own (`t#p#p0.ibd`).
    pub partitioned: bool,
    /// Has a FULLTEXT index, kept in auxiliary tablespaces of its own.
    pub fulltext: bool,
    /// MariaDB's `WITH SYSTEM VERSIONING`: its history is part of it.
    pub versioned: bool,
}

impl Table {
    pub fn qualified(&self) -> String {
        format!("{}.{}", quote(&self.schema), quote(&self.name))
    }
    pub fn label(&self) -> String {
        format!("{}.{}", self.schema, self.name)
    }
}
