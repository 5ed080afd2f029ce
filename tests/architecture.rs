//! The layering of `src/`: each top-level module imports only modules of a
//! lower layer, so the import graph between them has no cycle.
//!
//! The test reads the sources (no compiler involved): every `crate::...`
//! path in code (comments and doc comments are skipped, so a doc link may
//! point anywhere), every `super::...` that climbs to the crate root, and the
//! crate-root re-exports of `src/lib.rs` (`crate::Reader` is a use of
//! `source`). `cargo test --release --test architecture -- --nocapture`
//! prints the graph.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Layers, bottom first: a module may import only modules of a lower layer
/// (not its own layer's). A new top-level module must be added here.
const LAYERS: &[&[&str]] =
    &[&["error", "progress"], &["data"], &["source"], &["store", "sampler"], &["pipeline"], &["cli", "testing"]];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a file under `src/` (`src/store/reader/mod.rs` is
/// `["store", "reader"]`, `src/lib.rs` is `[]`).
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel.iter().map(|c| c.to_string_lossy().into_owned()).collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && !(parts.is_empty() && stem == "lib") {
        parts.push(stem.to_string());
    }
    parts
}

/// The code of a file without comments (`//` to the end of the line, and
/// `/* */`). Good enough for this crate: no `//` inside a string precedes a
/// path on the same line.
fn code_of(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        let line_c = rest.find("//");
        let block_c = rest.find("/*");
        match (line_c, block_c) {
            (Some(l), b) if b.is_none_or(|b| l < b) => {
                out.push_str(&rest[..l]);
                rest = &rest[l..];
                rest = rest.find('\n').map_or("", |n| &rest[n..]);
            }
            (_, Some(b)) => {
                out.push_str(&rest[..b]);
                rest = rest[b..].find("*/").map_or("", |e| &rest[b + e + 2..]);
            }
            _ => {
                out.push_str(rest);
                rest = "";
            }
        }
    }
    out
}

fn ident_at(s: &str) -> &str {
    let end = s.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(s.len());
    &s[..end]
}

/// The first names of the paths a `crate::` or `super::...::` prefix
/// leads to at `s` (`{a::X, b}` gives `a` and `b`).
fn first_names(s: &str) -> Vec<String> {
    let s = s.trim_start();
    if let Some(inner) = s.strip_prefix('{') {
        let mut depth = 0;
        let mut names = Vec::new();
        let mut start = true;
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => start = true,
                c if start && !c.is_whitespace() => {
                    start = false;
                    names.push(ident_at(&inner[i..]).to_string());
                }
                _ => {}
            }
        }
        names
    } else {
        vec![ident_at(s).to_string()]
    }
}

/// `stmt` without its leading attributes and visibility.
fn strip_attrs_and_pub(stmt: &str) -> &str {
    let mut s = stmt.trim_start();
    while s.starts_with('#') {
        s = s.find(']').map_or("", |e| s[e + 1..].trim_start());
    }
    if let Some(rest) = s.strip_prefix("pub") {
        s = rest.trim_start();
        if s.starts_with('(') {
            s = s.find(')').map_or("", |e| s[e + 1..].trim_start());
        }
    }
    s
}

/// Top-level modules of `lib.rs` and the module each root re-export comes from.
fn root_items(lib: &str) -> (BTreeSet<String>, BTreeMap<String, String>) {
    let mut modules = BTreeSet::new();
    let mut reexports = BTreeMap::new();
    for stmt in code_of(lib).split(';') {
        let stmt = strip_attrs_and_pub(stmt);
        if let Some(name) = stmt.strip_prefix("mod ") {
            modules.insert(name.trim().to_string());
        } else if let Some(path) = stmt.strip_prefix("use ") {
            let (module, rest) =
                path.trim().split_once("::").unwrap_or_else(|| panic!("cannot read `{stmt}` in lib.rs"));
            let rest = rest.trim();
            // `m::{A, B}` and `m::leaf::{A, B}` alike.
            let items: Vec<&str> = match rest.split_once('{') {
                Some((_, list)) => list.split([',', '}']).collect(),
                None => vec![rest],
            };
            for item in items {
                // `a::B` re-exports `B`; `B as C` re-exports `C`.
                let item = item.trim().rsplit("::").next().unwrap_or("");
                let item = item.rsplit(" as ").next().unwrap_or("").trim();
                if !item.is_empty() {
                    reexports.insert(item.to_string(), module.to_string());
                }
            }
        }
    }
    (modules, reexports)
}

/// Edges between top-level modules: `from -> {to: one example file}`.
fn import_graph() -> BTreeMap<String, BTreeMap<String, String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (modules, reexports) = root_items(&std::fs::read_to_string(src.join("lib.rs")).unwrap());
    let resolve = |name: &str, file: &Path| -> String {
        if modules.contains(name) {
            name.to_string()
        } else if let Some(m) = reexports.get(name) {
            m.clone()
        } else {
            panic!("{}: `crate::{name}` is neither a top-level module nor a root re-export", file.display())
        }
    };
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for file in files {
        let path = module_path(&src, &file);
        if path.is_empty() || (path.len() == 1 && path[0] == "main") {
            continue; // lib.rs re-exports everything; main.rs is its own crate
        }
        let from = &path[0];
        graph.entry(from.clone()).or_default();
        let code = code_of(&std::fs::read_to_string(&file).unwrap());
        let rel = file.strip_prefix(&src).unwrap().display().to_string();
        let mut uses = Vec::new();
        for (i, _) in code.match_indices("crate::") {
            let before = code[..i].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
                continue; // `$crate::`, `mycrate::`
            }
            uses.extend(first_names(&code[i + "crate::".len()..]));
        }
        for (i, _) in code.match_indices("super::") {
            if code[..i].ends_with("super::") {
                continue; // counted from the first `super::` of the chain
            }
            let mut rest = &code[i..];
            let mut depth = 0;
            while let Some(r) = rest.strip_prefix("super::") {
                depth += 1;
                rest = r;
            }
            // `mod.rs` is its folder's module: `super` of `store/mod.rs` is the root.
            if depth >= path.len() {
                uses.extend(first_names(rest));
            }
        }
        for name in uses {
            let to = resolve(&name, &file);
            if &to != from {
                graph.get_mut(from).unwrap().entry(to).or_insert_with(|| rel.clone());
            }
        }
    }
    graph
}

/// A cycle of the graph, if any, as a path that ends where it starts.
fn find_cycle(graph: &BTreeMap<String, BTreeMap<String, String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        graph: &BTreeMap<String, BTreeMap<String, String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for m in graph.get(n).into_iter().flat_map(|e| e.keys()) {
            match state.get(m.as_str()).copied().unwrap_or(0) {
                1 => {
                    let at = stack.iter().position(|s| s == m).unwrap();
                    let mut cycle = stack[at..].to_vec();
                    cycle.push(m.clone());
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = visit(m, graph, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in graph.keys() {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0
            && let Some(c) = visit(n, graph, &mut state, &mut Vec::new())
        {
            return Some(c);
        }
    }
    None
}

#[test]
fn top_level_modules_import_only_downward() {
    let graph = import_graph();
    println!("top-level import graph (module -> what it imports):");
    for (from, to) in &graph {
        println!("  {from:<9} -> {}", to.keys().cloned().collect::<Vec<_>>().join(", "));
    }
    if let Some(cycle) = find_cycle(&graph) {
        let at: Vec<String> =
            cycle.windows(2).map(|w| format!("{} -> {} ({})", w[0], w[1], graph[&w[0]][&w[1]])).collect();
        panic!("import cycle between top-level modules: {}", at.join(", "));
    }
    let mut wrong = Vec::new();
    for (from, to) in &graph {
        let Some(lf) = layer_of(from) else {
            wrong.push(format!("top-level module `{from}` is in no layer: add it to LAYERS in tests/architecture.rs"));
            continue;
        };
        for (t, file) in to {
            match layer_of(t) {
                Some(lt) if lt < lf => {}
                _ => wrong.push(format!("{from} -> {t} ({file}) does not point to a lower layer")),
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The checker itself: it must see an upward import and a cycle.
#[test]
fn checker_sees_imports_and_cycles() {
    let code =
        code_of("use crate::{a::X, b::{Y, Z}};\n// crate::c\nlet v = crate::d::f(); /* crate::e */ super::super::g::h");
    assert!(!code.contains("crate::c") && !code.contains("crate::e"));
    assert_eq!(first_names("{a::X, b::{Y, Z}};"), ["a", "b"]);
    assert_eq!(first_names("d::f();"), ["d"]);
    let (modules, reexports) = root_items(
        "mod error;\npub mod data;\n#[cfg(feature = \"cli\")]\npub mod cli;\npub use data::{AtomicData, Level};\npub use error::Result;",
    );
    assert_eq!(modules.into_iter().collect::<Vec<_>>(), ["cli", "data", "error"]);
    assert_eq!(reexports["Level"], "data");
    assert_eq!(reexports["Result"], "error");
    let edge = |to: &str| BTreeMap::from([(to.to_string(), "f.rs".to_string())]);
    let graph =
        BTreeMap::from([("a".to_string(), edge("b")), ("b".to_string(), edge("c")), ("c".to_string(), edge("a"))]);
    assert_eq!(find_cycle(&graph).unwrap(), ["a", "b", "c", "a"]);
    let graph = BTreeMap::from([("a".to_string(), edge("b")), ("b".to_string(), BTreeMap::new())]);
    assert!(find_cycle(&graph).is_none());
}
