//! Splitting work: a table's primary-key range into chunks for parallel readers, and a SQL
//! dump into statements.

/// `[lo, hi)` chunks covering `min..=max` in `n` parts; the first has no lower bound and the
/// last no upper bound, so rows added at either end while reading are not missed.
pub fn int_chunks(min: i128, max: i128, n: usize) -> Vec<(Option<i128>, Option<i128>)> {
    let n = n.max(1) as i128;
    let span = max - min + 1;
    if span <= 1 || n == 1 {
        return vec![(None, None)];
    }
    let step = (span + n - 1) / n;
    let mut bounds = Vec::new();
    let mut b = min + step;
    while b <= max {
        bounds.push(b);
        b += step;
    }
    let mut chunks = Vec::new();
    let mut lo = None;
    for b in bounds {
        chunks.push((lo, Some(b)));
        lo = Some(b);
    }
    chunks.push((lo, None));
    chunks
}

/// Statements of a SQL dump, as the `mariadb` client would send them: `;` ends a statement
/// outside quotes and comments, `DELIMITER` changes the terminator (routines, triggers).
pub struct Statements<R: std::io::BufRead> {
    input: R,
    delimiter: String,
    done: bool,
}

impl<R: std::io::BufRead> Statements<R> {
    pub fn new(input: R) -> Self {
        Statements {
            input,
            delimiter: ";".into(),
            done: false,
        }
    }
}

impl<R: std::io::BufRead> Iterator for Statements<R> {
    type Item = std::io::Result<String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let mut stmt = String::new();
        let mut quote: Option<char> = None;
        let mut line = String::new();
        loop {
            line.clear();
            match self.input.read_line(&mut line) {
                Err(e) => return Some(Err(e)),
                Ok(0) => {
                    self.done = true;
                    let rest = stmt.trim();
                    return (!rest.is_empty()).then(|| Ok(rest.to_string()));
                }
                Ok(_) => {}
            }
            if quote.is_none() && stmt.trim().is_empty() {
                let t = line.trim();
                if t.is_empty() || t.starts_with("-- ") || t == "--" || t.starts_with('#') {
                    continue;
                }
                if let Some(d) = t
                    .strip_prefix("DELIMITER ")
                    .or_else(|| t.strip_prefix("delimiter "))
                {
                    self.delimiter = d.trim().to_string();
                    continue;
                }
            }
            // Scan the line for quotes and the delimiter.
            let chars: Vec<char> = line.chars().collect();
            let delim: Vec<char> = self.delimiter.chars().collect();
            let mut i = 0;
            while i < chars.len() {
                let c = chars[i];
                match quote {
                    Some(q) => {
                        stmt.push(c);
                        if c == '\\' && q != '`' && i + 1 < chars.len() {
                            stmt.push(chars[i + 1]);
                            i += 1;
                        } else if c == q {
                            quote = None;
                        }
                    }
                    None => {
                        if chars[i..].starts_with(&delim) {
                            let rest: String = chars[i + delim.len()..].iter().collect();
                            if !rest.trim().is_empty() {
                                // Several statements on one line: keep the rest for later.
                                // Dumps never do this; scripts rarely do. Join it back.
                                stmt.push_str(&self.delimiter);
                                stmt.push_str(&rest);
                                i = chars.len();
                                continue;
                            }
                            return Some(Ok(stmt.trim().to_string()));
                        }
                        if c == '\'' || c == '"' || c == '`' {
                            quote = Some(c);
                        }
                        stmt.push(c);
                    }
                }
                i += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_range_once() {
        let c = int_chunks(1, 100, 4);
        assert_eq!(c.len(), 4);
        assert_eq!(c[0], (None, Some(26)));
        assert_eq!(c[3], (Some(76), None));
        for w in c.windows(2) {
            assert_eq!(w[0].1, w[1].0);
        }
        assert_eq!(int_chunks(5, 5, 8), vec![(None, None)]);
        assert_eq!(int_chunks(1, 3, 8).len(), 3);
    }

    #[test]
    fn dump_statements_split_on_delimiters_outside_quotes() {
        let dump = "-- comment\n/*!40101 SET NAMES utf8mb4 */;\nCREATE TABLE `t` (\n  `a` int\n);\nINSERT INTO `t` VALUES (1),(2);\nINSERT INTO `t` VALUES ('a;b'),('it''s'),('x\\';y');\nDELIMITER ;;\nCREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW BEGIN SET @x = 1; END ;;\nDELIMITER ;\nSELECT 1;\n";
        let s: Vec<String> = Statements::new(dump.as_bytes())
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(s.len(), 6, "{s:#?}");
        assert!(s[1].starts_with("CREATE TABLE") && s[1].ends_with(')'));
        assert_eq!(s[3], "INSERT INTO `t` VALUES ('a;b'),('it''s'),('x\\';y')");
        assert!(
            s[4].starts_with("CREATE TRIGGER") && s[4].contains("SET @x = 1;"),
            "{}",
            s[4]
        );
        assert_eq!(s[5], "SELECT 1");
    }
}
