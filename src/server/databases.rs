//! Which application databases a cleanly shut down datadir holds: every server (MySQL and
//! MariaDB alike) keeps one directory per database, named in its filename-safe encoding.
//! Read from the files, so it works for every way a generation is made (bake, dump,
//! datadir, promotion) and for generations made before db-branch recorded it.

use std::path::Path;

/// The schemas every server has; never an application's.
pub const SYSTEM_SCHEMAS: &[&str] = &["mysql", "information_schema", "performance_schema", "sys"];

/// The user databases in `datadir`, sorted. Directories the server keeps for itself
/// (`#innodb_redo`, `#innodb_temp`, `lost+found`) and names that are not a database's
/// encoding are left out.
pub fn in_datadir(datadir: &Path) -> std::io::Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(datadir)? {
        let entry = entry?;
        if !entry.file_type()?.is_dir() {
            continue;
        }
        let Some(file) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if file.starts_with('#') || file == "lost+found" {
            continue;
        }
        match decode(&file) {
            Some(name) if !SYSTEM_SCHEMAS.contains(&name.as_str()) => names.push(name),
            Some(_) => {}
            None => tracing::warn!("{}: not a database directory's name", file),
        }
    }
    names.sort();
    Ok(names)
}

/// A database's name from its directory's: the server writes characters outside
/// `[0-9A-Za-z_]` as `@` and four hex digits of the code point (`my-app` → `my@002dapp`).
/// The shorter `@` codes it uses for some letters of other scripts are not decoded (None).
pub fn decode(file: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = file.chars();
    while let Some(c) = chars.next() {
        if c != '@' {
            out.push(c);
            continue;
        }
        let hex: String = chars.by_ref().take(4).collect();
        if hex.len() != 4 || !hex.chars().all(|h| h.is_ascii_hexdigit()) {
            return None;
        }
        out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_decoded_as_the_server_encodes_them() {
        assert_eq!(decode("shop").as_deref(), Some("shop"));
        assert_eq!(decode("my@002dapp").as_deref(), Some("my-app"));
        assert_eq!(decode("a@0024b@002ec").as_deref(), Some("a$b.c"));
        assert_eq!(decode("caf@0G"), None);
        assert_eq!(decode("x@00"), None);
    }

    #[test]
    fn only_user_databases_are_listed() {
        let dir = tempfile::tempdir().unwrap();
        for d in [
            "mysql",
            "sys",
            "performance_schema",
            "#innodb_redo",
            "#innodb_temp",
            "lost+found",
            "shop",
            "my@002dapp",
        ] {
            std::fs::create_dir(dir.path().join(d)).unwrap();
        }
        std::fs::write(dir.path().join("ibdata1"), b"").unwrap();
        assert_eq!(in_datadir(dir.path()).unwrap(), vec!["my-app", "shop"]);
    }
}
