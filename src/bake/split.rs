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

/// One statement of a SQL dump, as bytes (dumps carry binary data as it is), with where it
/// started.
#[derive(Debug, Clone, PartialEq)]
pub struct Statement {
    /// 1-based, in the order of the dump.
    pub number: usize,
    /// The dump's line the statement starts on.
    pub line: usize,
    /// The statement without its delimiter.
    pub text: Vec<u8>,
}

/// `text` from its next word on: whitespace and comments before it skipped, and the
/// opening of a versioned comment (`/*!40101 `), whose content the server runs.
pub fn skip_to_first_word(mut rest: &str) -> &str {
    loop {
        rest = rest.trim_start();
        if let Some(r) = rest.strip_prefix("/*!") {
            rest = r.trim_start_matches(|c: char| c.is_ascii_digit());
            continue;
        }
        if let Some(r) = rest.strip_prefix("/*") {
            rest = r.split_once("*/").map_or("", |(_, after)| after);
            continue;
        }
        if let Some(r) = rest.strip_prefix("*/") {
            rest = r;
            continue;
        }
        if rest.starts_with("--") || rest.starts_with('#') {
            rest = rest.split_once('\n').map_or("", |(_, after)| after);
            continue;
        }
        return rest;
    }
}

impl Statement {
    /// Its first `n` characters after any leading comments, for messages (bytes that are
    /// not UTF-8 shown as �).
    pub fn excerpt(&self, n: usize) -> String {
        let text = String::from_utf8_lossy(&self.text[..self.text.len().min(n * 8 + 4096)]);
        let one_line: String = skip_comments(&text)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        if one_line.chars().count() > n {
            format!("{}…", one_line.chars().take(n).collect::<String>())
        } else {
            one_line
        }
    }

    /// Its leading words, upper-cased, with versioned comments (`/*!50003 …`) opened and
    /// plain comments skipped: `CREATE TABLE`, `USE`, `SET` …
    pub fn head(&self, words: usize) -> String {
        let text = String::from_utf8_lossy(&self.text[..self.text.len().min(400)]).into_owned();
        let mut rest = text.as_str();
        let mut out = Vec::new();
        while out.len() < words {
            rest = skip_to_first_word(rest);
            let end = rest
                .find(|c: char| c.is_whitespace() || "(`;*/".contains(c))
                .unwrap_or(rest.len());
            if end == 0 {
                break;
            }
            out.push(rest[..end].to_ascii_uppercase());
            rest = &rest[end..];
        }
        out.join(" ")
    }
}

/// `text` after its leading comments (`-- …`, `# …`, `/* … */`); a versioned comment
/// (`/*!50003 …`) is code to the server and stays.
fn skip_comments(mut text: &str) -> &str {
    loop {
        text = text.trim_start();
        if text.starts_with("--") || text.starts_with('#') {
            text = text.split_once('\n').map_or("", |(_, after)| after);
        } else if text.starts_with("/*") && !text.starts_with("/*!") {
            text = text.split_once("*/").map_or("", |(_, after)| after);
        } else {
            return text;
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Code,
    Quoted(u8),
    LineComment,
    BlockComment,
}

/// Statements of a SQL dump, as the `mysql`/`mariadb` client would send them: the
/// delimiter (`;`, or what `DELIMITER` sets for routines and triggers) ends a statement
/// outside quotes and comments. Works on bytes: dumps write BLOBs raw unless `--hex-blob`.
pub struct Statements<R: std::io::BufRead> {
    input: R,
    /// The rest of a line after a statement that ended mid-line.
    pending: Vec<u8>,
    delimiter: Vec<u8>,
    line: usize,
    number: usize,
    done: bool,
}

impl<R: std::io::BufRead> Statements<R> {
    pub fn new(input: R) -> Self {
        Statements {
            input,
            pending: Vec::new(),
            delimiter: b";".to_vec(),
            line: 0,
            number: 0,
            done: false,
        }
    }
}

fn trim(b: &[u8]) -> &[u8] {
    let start = b
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(b.len());
    let end = b
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &b[start..end.max(start)]
}

impl<R: std::io::BufRead> Iterator for Statements<R> {
    type Item = std::io::Result<Statement>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let mut stmt: Vec<u8> = Vec::new();
        let mut start_line = 0;
        let mut state = State::Code;
        let mut line = Vec::new();
        loop {
            line.clear();
            let read = if self.pending.is_empty() {
                self.input.read_until(b'\n', &mut line)
            } else {
                // Same line as the statement before: its number is already counted.
                std::mem::swap(&mut line, &mut self.pending);
                self.line -= 1;
                Ok(line.len())
            };
            match read {
                Err(e) => return Some(Err(e)),
                Ok(0) => {
                    self.done = true;
                    let rest = trim(&stmt);
                    if rest.is_empty() {
                        return None;
                    }
                    self.number += 1;
                    return Some(Ok(Statement {
                        number: self.number,
                        line: start_line,
                        text: rest.to_vec(),
                    }));
                }
                Ok(_) => self.line += 1,
            }
            if state == State::Code && trim(&stmt).is_empty() {
                let t = trim(&line);
                if t.is_empty() {
                    continue;
                }
                let lower: Vec<u8> = t.iter().take(10).map(u8::to_ascii_lowercase).collect();
                if lower.starts_with(b"delimiter ") {
                    self.delimiter = trim(&t[10..]).to_vec();
                    continue;
                }
                stmt.clear();
                start_line = self.line;
            }
            let delim = self.delimiter.clone();
            let mut i = 0;
            while i < line.len() {
                let c = line[i];
                match state {
                    State::Quoted(q) => {
                        stmt.push(c);
                        if c == b'\\' && q != b'`' && i + 1 < line.len() {
                            stmt.push(line[i + 1]);
                            i += 1;
                        } else if c == q {
                            state = State::Code;
                        }
                    }
                    State::LineComment => {
                        stmt.push(c);
                        if c == b'\n' {
                            state = State::Code;
                        }
                    }
                    State::BlockComment => {
                        stmt.push(c);
                        if c == b'*' && line.get(i + 1) == Some(&b'/') {
                            stmt.push(b'/');
                            i += 1;
                            state = State::Code;
                        }
                    }
                    State::Code => {
                        if line[i..].starts_with(&delim) {
                            let rest = trim(&line[i + delim.len()..]);
                            let text = trim(&stmt).to_vec();
                            if text.is_empty() {
                                // A lone delimiter: nothing to send.
                                stmt.clear();
                                i += delim.len();
                                continue;
                            }
                            if !rest.is_empty() {
                                // More on the same line: it starts the next statement.
                                self.pending = line[i + delim.len()..].to_vec();
                            }
                            self.number += 1;
                            return Some(Ok(Statement {
                                number: self.number,
                                line: start_line,
                                text,
                            }));
                        }
                        if c == b'\'' || c == b'"' || c == b'`' {
                            state = State::Quoted(c);
                        } else if c == b'#'
                            || (c == b'-'
                                && line.get(i + 1) == Some(&b'-')
                                && line.get(i + 2).is_none_or(|n| n.is_ascii_whitespace()))
                        {
                            state = State::LineComment;
                        } else if c == b'/' && line.get(i + 1) == Some(&b'*') {
                            // Versioned comments (`/*!50003 … */`) are code to the server, but
                            // a delimiter inside one still does not end the statement.
                            state = State::BlockComment;
                            stmt.push(c);
                            stmt.push(b'*');
                            i += 2;
                            continue;
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
            .map(|r| String::from_utf8(r.unwrap().text).unwrap())
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

    #[test]
    fn statements_are_bytes_with_their_number_and_line() {
        let mut dump = b"INSERT INTO b VALUES ('".to_vec();
        dump.extend((0u8..=255).filter(|&b| b != b'\'' && b != b'\\'));
        dump.extend_from_slice(b"');\nSELECT 1; SELECT 2;\n\n-- x\nSELECT\n 3;");
        let s: Vec<Statement> = Statements::new(&dump[..]).map(|r| r.unwrap()).collect();
        assert_eq!(s.len(), 4, "{s:#?}");
        assert_eq!(s[0].text.len(), 23 + 254 + 2);
        // The bytes include a newline: the INSERT spans lines 1 and 2.
        assert_eq!(
            (s[1].number, s[1].line, &s[1].text[..]),
            (2, 3, &b"SELECT 1"[..])
        );
        assert_eq!(
            (s[2].number, s[2].line, &s[2].text[..]),
            (3, 3, &b"SELECT 2"[..])
        );
        assert_eq!((s[3].number, s[3].line), (4, 5));
        assert_eq!(s[3].head(1), "SELECT");
        assert!(s[0].excerpt(20).ends_with('…'));
    }

    #[test]
    fn heads_skip_comments_and_open_versioned_ones() {
        let st = |t: &str| Statement {
            number: 1,
            line: 1,
            text: t.as_bytes().to_vec(),
        };
        assert_eq!(st("/*!40101 SET NAMES utf8mb4 */").head(2), "SET NAMES");
        assert_eq!(
            st("/*M!999999\\- enable the sandbox mode */\n-- x\nCREATE TABLE `t` (").head(2),
            "CREATE TABLE"
        );
        assert_eq!(st("USE `shop`").head(1), "USE");
        assert_eq!(
            st("--\n-- Sequence structure for `s`\n--\n\nDROP SEQUENCE IF EXISTS `s`").excerpt(200),
            "DROP SEQUENCE IF EXISTS `s`"
        );
        assert_eq!(
            st("/*!50003 CREATE*/ /*!50017 DEFINER=`root`@`localhost`*/").excerpt(12),
            "/*!50003 CRE…"
        );
    }
}
