//! SQL text: literals and identifiers quoted as both servers read them. Pure text, used by
//! everything that writes a statement (the flavours' account statements, the baker, the
//! connection helpers).

/// A single-quoted SQL string literal.
pub fn sql_string(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"))
}

/// A backquoted SQL identifier.
pub fn quote(ident: &str) -> String {
    format!("`{}`", ident.replace('`', "``"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_are_doubled_and_backslashes_escaped() {
        assert_eq!(sql_string(r"it's a \ path"), r"'it''s a \\ path'");
        assert_eq!(quote("we`ird"), "`we``ird`");
    }
}
