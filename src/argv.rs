//! db-branch's own command line, as words: what is handed on elsewhere (to the service, to
//! another host over ssh) without one of the global flags.

/// `args` without the global flag `--NAME VALUE` / `--NAME=VALUE`; everything after `--`
/// (a command's own arguments) is kept as it is.
pub fn without_flag(args: impl Iterator<Item = String>, name: &str) -> Vec<String> {
    let flag = format!("--{name}");
    let joined = format!("--{name}=");
    let mut out = Vec::new();
    let mut args = args.peekable();
    while let Some(a) = args.next() {
        if a == "--" {
            out.push(a);
            out.extend(args.by_ref());
            break;
        }
        if a == flag {
            args.next();
            continue;
        }
        if a.starts_with(&joined) {
            continue;
        }
        out.push(a);
    }
    out
}
