//! The house's layering, checked: no two source files import each other, directly or round
//! a loop (docs/architecture.md, "every arrow points down").
//!
//! An arrow A -> B is a path in A that names an item of B: `use crate::…`, `super::…`,
//! `self::…` or a child module's name, in a `use` or anywhere in the code (types,
//! calls, macros' plain paths). A name a module re-exports (`pub use child::Item`) leads
//! to the file that defines it, so a re-export is a door, not a room of its own. Code under
//! `#[cfg(test)]` is left out (see `is_test`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// A module path (`["storage", "zfs"]`) → its file.
type Modules = BTreeMap<Vec<String>, PathBuf>;

fn modules(src: &Path) -> Modules {
    fn walk(dir: &Path, prefix: &[String], out: &mut Modules) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_stem().unwrap().to_string_lossy().to_string();
            if path.is_dir() {
                let mut p = prefix.to_vec();
                p.push(name);
                walk(&path, &p, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let mut p = prefix.to_vec();
                match name.as_str() {
                    "mod" => {}
                    "lib" | "main" if prefix.is_empty() => continue,
                    _ => p.push(name),
                }
                out.insert(p, path);
            }
        }
    }
    let mut out = Modules::new();
    walk(src, &[], &mut out);
    out
}

/// Every path a file mentions, as written (`crate::a::B`, `super::c`, `d::E`), with the
/// names of the `use` trees spelled out.
/// Each path comes with the inline modules (`mod tests { … }`) it sits in, so that
/// `super::` there means the file's own module.
#[derive(Default)]
struct Paths {
    found: Vec<(Vec<String>, Vec<String>)>,
    inline: Vec<String>,
}

impl Paths {
    fn push(&mut self, path: Vec<String>) {
        self.found.push((self.inline.clone(), path));
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut p = prefix.clone();
                if n.ident != "self" {
                    p.push(n.ident.to_string());
                }
                self.push(p);
            }
            syn::UseTree::Rename(r) => {
                let mut p = prefix.clone();
                p.push(r.ident.to_string());
                self.push(p);
            }
            syn::UseTree::Glob(_) => self.push(prefix.clone()),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }
}

/// `#[cfg(test)]`: a unit test sets up its world with whatever it needs (the sim host
/// above its module, the verbs it checks a step through); that is not an arrow of the
/// product.
fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && a.parse_args::<syn::Ident>().is_ok_and(|i| i == "test")
    })
}

impl<'a> Visit<'a> for Paths {
    fn visit_item(&mut self, i: &'a syn::Item) {
        let attrs = match i {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Use(u) => &u.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(x) => &x.attrs,
            syn::Item::Struct(x) => &x.attrs,
            _ => return syn::visit::visit_item(self, i),
        };
        if !is_test(attrs) {
            syn::visit::visit_item(self, i);
        }
    }
    fn visit_item_mod(&mut self, m: &'a syn::ItemMod) {
        self.inline.push(m.ident.to_string());
        syn::visit::visit_item_mod(self, m);
        self.inline.pop();
    }
    fn visit_item_use(&mut self, u: &'a syn::ItemUse) {
        let mut prefix = Vec::new();
        self.use_tree(&mut prefix, &u.tree);
    }
    fn visit_path(&mut self, p: &'a syn::Path) {
        self.push(p.segments.iter().map(|s| s.ident.to_string()).collect());
        syn::visit::visit_path(self, p);
    }
    fn visit_macro(&mut self, m: &'a syn::Macro) {
        // Paths inside a macro's tokens (format!, assert!, matches!…): each `a::b::c` run.
        let mut run: Vec<String> = Vec::new();
        let mut colons = 0;
        for t in m.tokens.clone() {
            self.tokens(t, &mut run, &mut colons);
        }
        if run.len() > 1 {
            self.push(run);
        }
        syn::visit::visit_macro(self, m);
    }
}

impl Paths {
    fn tokens(&mut self, t: proc_macro2::TokenTree, run: &mut Vec<String>, colons: &mut u8) {
        match t {
            proc_macro2::TokenTree::Ident(i) => {
                if *colons != 2 && run.len() > 1 {
                    self.push(std::mem::take(run));
                }
                if *colons != 2 {
                    run.clear();
                }
                run.push(i.to_string());
                *colons = 0;
            }
            proc_macro2::TokenTree::Punct(p) if p.as_char() == ':' => *colons += 1,
            proc_macro2::TokenTree::Group(g) => {
                if run.len() > 1 {
                    self.push(std::mem::take(run));
                }
                run.clear();
                let (mut inner, mut c) = (Vec::new(), 0);
                for t in g.stream() {
                    self.tokens(t, &mut inner, &mut c);
                }
                if inner.len() > 1 {
                    self.push(inner);
                }
                *colons = 0;
            }
            _ => {
                if run.len() > 1 {
                    self.push(std::mem::take(run));
                }
                run.clear();
                *colons = 0;
            }
        }
    }
}

/// What each module re-exports: name → the path it stands for (absolute).
type Reexports = BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>>;

fn is_pub(v: &syn::Visibility) -> bool {
    !matches!(v, syn::Visibility::Inherited)
}

struct File {
    module: Vec<String>,
    /// (inline modules, path as written).
    paths: Vec<(Vec<String>, Vec<String>)>,
}

fn parse(modules: &Modules) -> (Vec<File>, Reexports) {
    let mut files = Vec::new();
    let mut reexports = Reexports::new();
    for (module, path) in modules {
        let text = std::fs::read_to_string(path).unwrap();
        let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut paths = Paths::default();
        paths.visit_file(&ast);
        for item in &ast.items {
            if let syn::Item::Use(u) = item {
                if is_pub(&u.vis) {
                    let mut found = Paths::default();
                    found.use_tree(&mut Vec::new(), &u.tree);
                    for (_, p) in found.found {
                        if let Some(abs) = absolute(module, modules, &p) {
                            let name = p.last().unwrap().clone();
                            reexports
                                .entry(module.clone())
                                .or_default()
                                .insert(name, abs);
                        }
                    }
                }
            }
        }
        files.push(File {
            module: module.clone(),
            paths: paths.found,
        });
    }
    (files, reexports)
}

/// `path` as written in `module`, made absolute from the crate
/// root; None when it is not the crate's own (std, a dependency, a local name).
fn absolute(module: &[String], modules: &Modules, path: &[String]) -> Option<Vec<String>> {
    match path.first()?.as_str() {
        "crate" => Some(path[1..].to_vec()),
        "self" => Some(module.iter().chain(&path[1..]).cloned().collect()),
        "super" => {
            let mut base = module.to_vec();
            let mut rest = path;
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
            Some(base.into_iter().chain(rest.iter().cloned()).collect())
        }
        name => {
            // A child module named without `self::` (2018 paths): only a real child.
            let mut child = module.to_vec();
            child.push(name.to_string());
            modules
                .contains_key(&child)
                .then(|| module.iter().chain(path).cloned().collect())
        }
    }
}

/// The file an absolute path lands in: its longest module prefix, through re-exports.
fn target(
    modules: &Modules,
    reexports: &Reexports,
    abs: &[String],
    depth: u8,
) -> Option<Vec<String>> {
    let cut = (0..=abs.len())
        .rev()
        .find(|&n| modules.contains_key(&abs[..n]))?;
    let module = abs[..cut].to_vec();
    if depth < 8 {
        if let Some(next) = abs.get(cut) {
            if let Some(to) = reexports.get(&module).and_then(|r| r.get(next)) {
                let mut via = to.clone();
                via.extend_from_slice(&abs[cut + 1..]);
                if via != abs {
                    return target(modules, reexports, &via, depth + 1);
                }
            }
        }
    }
    Some(module)
}

fn arrows(src: &Path) -> (Modules, BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) {
    let modules = modules(src);
    let (files, reexports) = parse(&modules);
    let mut graph: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for f in &files {
        let out = graph.entry(f.module.clone()).or_default();
        for (inline, p) in &f.paths {
            let within: Vec<String> = f.module.iter().chain(inline).cloned().collect();
            let Some(abs) = absolute(&within, &modules, p) else {
                continue;
            };
            let Some(to) = target(&modules, &reexports, &abs, 0) else {
                continue;
            };
            // A module naming its own items, or the crate root (lib.rs, the door of all).
            if to != f.module && !to.is_empty() {
                out.insert(to);
            }
        }
    }
    (modules, graph)
}

/// Strongly connected components with more than one file (Tarjan).
fn circles(graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<Vec<String>>> {
    struct T<'g> {
        g: &'g BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        index: BTreeMap<&'g Vec<String>, usize>,
        low: BTreeMap<&'g Vec<String>, usize>,
        stack: Vec<&'g Vec<String>>,
        on: BTreeSet<&'g Vec<String>>,
        out: Vec<Vec<Vec<String>>>,
    }
    impl<'g> T<'g> {
        fn visit(&mut self, v: &'g Vec<String>) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on.insert(v);
            for w in self.g.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let l = self.low[w].min(self.low[v]);
                    self.low.insert(v, l);
                } else if self.on.contains(w) {
                    let l = self.index[w].min(self.low[v]);
                    self.low.insert(v, l);
                }
            }
            if self.low[v] == self.index[v] {
                let mut scc = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on.remove(w);
                    scc.push(w.clone());
                    if w == v {
                        break;
                    }
                }
                if scc.len() > 1 {
                    scc.sort();
                    self.out.push(scc);
                }
            }
        }
    }
    let mut t = T {
        g: graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.out
}

#[test]
fn no_source_file_imports_another_round_a_loop() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (modules, graph) = arrows(&src);
    let name = |m: &Vec<String>| modules[m].strip_prefix(&src).unwrap().display().to_string();
    let found: Vec<String> = circles(&graph)
        .iter()
        .map(|scc| {
            let members: BTreeSet<&Vec<String>> = scc.iter().collect();
            let ties: Vec<String> = scc
                .iter()
                .flat_map(|a| {
                    graph[a]
                        .iter()
                        .filter(|b| members.contains(b))
                        .map(move |b| format!("    {} -> {}", name(a), name(b)))
                })
                .collect();
            format!(
                "  {}:\n{}",
                scc.iter().map(name).collect::<Vec<_>>().join(", "),
                ties.join("\n")
            )
        })
        .collect();
    assert!(
        found.is_empty(),
        "source files that import each other (move the shared item down, or split it out):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_checker_sees_a_loop_and_a_loop_through_a_reexport() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("low")).unwrap();
    std::fs::write(src.join("lib.rs"), "pub mod high; pub mod low;").unwrap();
    std::fs::write(src.join("high.rs"), "use crate::low::Thing; pub struct Up;").unwrap();
    std::fs::write(
        src.join("low/mod.rs"),
        "mod inner; pub use inner::Thing; pub fn f() {}",
    )
    .unwrap();
    std::fs::write(
        src.join("low/inner.rs"),
        "pub struct Thing(crate::high::Up);",
    )
    .unwrap();
    let (_, graph) = arrows(src);
    let found = circles(&graph);
    assert_eq!(
        found,
        vec![vec![
            vec!["high".to_string()],
            vec!["low".to_string(), "inner".to_string()]
        ]],
        "{graph:?}"
    );
    // Down only: no loop.
    std::fs::write(src.join("low/inner.rs"), "pub struct Thing(u8);").unwrap();
    let (_, graph) = arrows(src);
    assert!(circles(&graph).is_empty(), "{graph:?}");
}
