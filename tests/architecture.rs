//! The layering of `src/`: each top-level module imports only modules of a
//! lower layer, so the import graph between them has no cycle; inside each
//! folder, the files import each other without a cycle either.
//!
//! The test reads the sources (no compiler involved): every `crate::...`
//! path in code (comments and doc comments are skipped, so a doc link may
//! point anywhere), every `super::...` that climbs to the crate root, and the
//! crate-root re-exports of `src/lib.rs` (`crate::Reader` is a use of
//! `source`). `cargo test --release --test architecture -- --nocapture`
//! prints the graph.
//!
//! Size rules over the library (`src/`) and the command line (`cli/src/`):
//! no function over 100 lines, no file over 700.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Layers, bottom first: a module may import only modules of a lower layer
/// (not its own layer's). A new top-level module must be added here.
const LAYERS: &[&[&str]] = &[
    &["location"],
    &["error", "progress", "threads"],
    &["data"],
    &["source"],
    &["store", "sampler"],
    &["formats", "prep"],
    &["pipeline"],
    &["bench", "testing"],
];

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

/// The names a `use` path brings in, after its first segment: `m::{A, B}`
/// and `m::leaf::{A, B}` alike; `a::B` brings `B`, `B as C` brings `C`.
fn use_items(rest: &str) -> Vec<String> {
    let rest = rest.trim();
    let items: Vec<&str> = match rest.split_once('{') {
        Some((_, list)) => list.split([',', '}']).collect(),
        None => vec![rest],
    };
    items
        .into_iter()
        .map(|item| item.trim().rsplit("::").next().unwrap_or("").rsplit(" as ").next().unwrap_or("").trim())
        .filter(|item| !item.is_empty())
        .map(str::to_string)
        .collect()
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
            for item in use_items(rest) {
                reexports.insert(item, module.to_string());
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
        if path.is_empty() {
            continue; // lib.rs re-exports everything
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
            if name.is_empty() || name == "*" {
                // `use super::*` in an inline `mod tests` of a top-level
                // file: its own module, not the crate root.
                continue;
            }
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

/// The modules of folder `dir` (module path `module`): its files other than
/// `mod.rs` and its subfolders, each with the files that belong to it.
fn folder_members(dir: &Path) -> BTreeMap<String, Vec<PathBuf>> {
    let mut members: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            let mut files = Vec::new();
            rust_files(&p, &mut files);
            members.insert(p.file_name().unwrap().to_string_lossy().into_owned(), files);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
            if stem != "mod" && stem != "lib" && stem != "main" {
                members.insert(stem, vec![p]);
            }
        }
    }
    members
}

/// The names `mod_rs` re-exports from its members: `pub use m::{A, B}`
/// maps `A` and `B` to `m`.
fn reexported_by(mod_rs: &str, members: &BTreeMap<String, Vec<PathBuf>>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for stmt in code_of(mod_rs).split(';') {
        let stmt = strip_attrs_and_pub(stmt);
        let Some(path) = stmt.strip_prefix("use ") else { continue };
        let path = path.trim().trim_start_matches("self::");
        let Some((m, rest)) = path.split_once("::") else { continue };
        if !members.contains_key(m) {
            continue;
        }
        for item in use_items(rest) {
            out.insert(item, m.to_string());
        }
    }
    out
}

/// The import graph between the members of one folder (`module` is its
/// module path, empty for `src/`): `crate::module::x` and, from the
/// folder's own files, `super::x`, with names the folder's `mod.rs`
/// re-exports resolved to the member that defines them.
fn folder_graph(dir: &Path, module: &[String]) -> BTreeMap<String, BTreeMap<String, String>> {
    let members = folder_members(dir);
    let mod_rs = std::fs::read_to_string(dir.join("mod.rs")).unwrap_or_default();
    let reexports = reexported_by(&mod_rs, &members);
    let resolve = |name: &str| -> Option<String> {
        if members.contains_key(name) { Some(name.to_string()) } else { reexports.get(name).cloned() }
    };
    let prefix = if module.is_empty() { "crate::".to_string() } else { format!("crate::{}::", module.join("::")) };
    let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for (member, files) in &members {
        graph.entry(member.clone()).or_default();
        for file in files {
            let code = code_of(&std::fs::read_to_string(file).unwrap());
            let direct = file.parent() == Some(dir);
            let mut names = Vec::new();
            for (i, _) in code.match_indices(&prefix) {
                if code[..i].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
                    continue;
                }
                names.extend(first_names(&code[i + prefix.len()..]));
            }
            if direct && !module.is_empty() {
                for (i, _) in code.match_indices("super::") {
                    let before = &code[..i];
                    if before.ends_with("super::") || before.chars().next_back().is_some_and(|c| c.is_alphanumeric()) {
                        continue;
                    }
                    let rest = &code[i + "super::".len()..];
                    if !rest.starts_with("super::") {
                        names.extend(first_names(rest));
                    }
                }
            }
            for name in names {
                if let Some(to) = resolve(&name).filter(|to| to != member) {
                    let rel = file.strip_prefix(dir).unwrap().display().to_string();
                    graph.get_mut(member).unwrap().entry(to).or_insert(rel);
                }
            }
        }
    }
    graph
}

/// Every folder of `src/` below the root, with its module path.
fn folders(dir: &Path, module: Vec<String>, out: &mut Vec<(PathBuf, Vec<String>)>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries.into_iter().filter(|p| p.is_dir()) {
        let mut m = module.clone();
        m.push(p.file_name().unwrap().to_string_lossy().into_owned());
        out.push((p.clone(), m.clone()));
        folders(&p, m, out);
    }
}

#[test]
fn no_import_cycle_between_the_files_of_a_folder() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    folders(&src, Vec::new(), &mut all);
    assert!(all.len() >= 8, "found only {} folders under src/", all.len());
    let mut cycles = Vec::new();
    for (dir, module) in &all {
        let graph = folder_graph(dir, module);
        if let Some(cycle) = find_cycle(&graph) {
            let at: Vec<String> =
                cycle.windows(2).map(|w| format!("{} -> {} ({})", w[0], w[1], graph[&w[0]][&w[1]])).collect();
            cycles.push(format!("src/{}: {}", module.join("/"), at.join(", ")));
        }
    }
    assert!(cycles.is_empty(), "file-level import cycles inside a folder:\n{}", cycles.join("\n"));
}

/// The folder checker sees a cycle through `super::` and through a name
/// the folder's `mod.rs` re-exports.
#[test]
fn folder_checker_sees_cycles_through_reexports() {
    let dir = std::env::temp_dir().join(format!("atomzarr-arch-{}", std::process::id()));
    let f = dir.join("fmt");
    std::fs::create_dir_all(&f).unwrap();
    std::fs::write(f.join("mod.rs"), "mod frame;\nmod open;\npub use frame::Frame;\n").unwrap();
    std::fs::write(f.join("frame.rs"), "pub struct Frame;\nfn x() { super::open::open(); }\n").unwrap();
    std::fs::write(f.join("open.rs"), "use crate::fmt::Frame;\npub fn open() {}\n").unwrap();
    let graph = folder_graph(&f, &["fmt".to_string()]);
    assert_eq!(graph["frame"].keys().collect::<Vec<_>>(), ["open"]);
    assert_eq!(graph["open"].keys().collect::<Vec<_>>(), ["frame"]);
    assert!(find_cycle(&graph).is_some());
    std::fs::write(f.join("frame.rs"), "pub struct Frame;\n").unwrap();
    assert!(find_cycle(&folder_graph(&f, &["fmt".to_string()])).is_none());
    std::fs::remove_dir_all(&dir).unwrap();
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

/// The source folders the size rules hold for: the library's `src/` and
/// the command line's `cli/src/` (tests and examples are exempt).
fn source_dirs() -> [PathBuf; 2] {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    [root.join("src"), root.join("cli/src")]
}

/// Every source file of [`source_dirs`], with its path from the repository root.
fn source_files() -> Vec<(String, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in source_dirs() {
        rust_files(&dir, &mut files);
    }
    files.into_iter().map(|f| (f.strip_prefix(root).unwrap().display().to_string(), f)).collect()
}

/// Functions of the library and the command line longer than `limit`
/// lines (from the `fn` line to its closing brace), as `file:line name (n
/// lines)`. A body is found by counting braces in the code without
/// comments, strings and char literals.
fn long_functions(limit: usize) -> Vec<String> {
    let mut long = Vec::new();
    for (rel, file) in source_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        long.extend(
            long_functions_in(&text, limit)
                .into_iter()
                .map(|(line, name, n)| format!("{rel}:{line} {name} ({n} lines)")),
        );
    }
    long
}

/// No source file of the library or the command line is over 700 lines:
/// a file that long holds more than one job.
#[test]
fn no_source_file_runs_over_700_lines() {
    assert!(source_files().len() > 50, "the source folders were not found");
    let long: Vec<String> = source_files()
        .into_iter()
        .filter_map(|(rel, file)| {
            let n = std::fs::read_to_string(&file).unwrap().lines().count();
            (n > 700).then(|| format!("{rel}: {n} lines"))
        })
        .collect();
    assert!(long.is_empty(), "source files over 700 lines; split them by job:\n{}", long.join("\n"));
}

/// `(first line, name, lines)` of each function of `text` over `limit` lines.
fn long_functions_in(text: &str, limit: usize) -> Vec<(usize, String, usize)> {
    let lines: Vec<String> = text.lines().map(strip_literals).collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(name) = fn_name(line) else { continue };
        let (mut depth, mut parens, mut opened) = (0i64, 0i64, false);
        'scan: for (j, l) in lines.iter().enumerate().skip(i) {
            for c in l.chars() {
                match c {
                    '(' | '[' => parens += 1,
                    ')' | ']' => parens -= 1,
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    ';' if !opened && parens == 0 => break 'scan, // a declaration without a body
                    _ => {}
                }
                if opened && depth == 0 {
                    let n = j - i + 1;
                    if n > limit {
                        out.push((i + 1, name.clone(), n));
                    }
                    break 'scan;
                }
            }
        }
    }
    out
}

/// A line's code without its `//` comment, string contents and char literals.
fn strip_literals(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => break,
            '"' => {
                while let Some(s) = chars.next() {
                    match s {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
                out.push_str("\"\"");
            }
            // A char literal ('{', '\n'), not a lifetime ('a).
            '\'' => {
                let rest: String = chars.clone().take(3).collect();
                let close = if rest.starts_with('\\') {
                    rest.char_indices().skip(2).find(|&(_, c)| c == '\'')
                } else {
                    rest.char_indices().nth(1).filter(|&(_, c)| c == '\'')
                };
                if let Some((k, _)) = close {
                    for _ in 0..=k {
                        chars.next();
                    }
                    out.push_str("''");
                } else {
                    out.push(c);
                }
            }
            _ => out.push(c),
        }
    }
    out
}

/// The name of the function a line starts, if it starts one.
fn fn_name(line: &str) -> Option<String> {
    let mut s = line.trim_start();
    for prefix in ["pub(crate) ", "pub(super) ", "pub ", "const ", "async ", "unsafe ", "extern \"\" "] {
        s = s.strip_prefix(prefix).unwrap_or(s);
    }
    let rest = s.strip_prefix("fn ")?;
    let name = ident_at(rest);
    (!name.is_empty()).then(|| name.to_string())
}

#[test]
fn no_function_runs_over_100_lines() {
    let long = long_functions(100);
    assert!(long.is_empty(), "functions over 100 lines; split them at their seams:\n{}", long.join("\n"));
}

#[test]
fn the_length_checker_counts_bodies() {
    let body = |n: usize| (0..n).map(|i| format!("    let x{i} = '{{'; // }}\n")).collect::<String>();
    let text =
        format!("fn short() {{\n{}}}\npub(crate) fn long(a: [u8; 2]) -> u8 {{\n{}}}\nfn decl();\n", body(3), body(120));
    assert_eq!(long_functions_in(&text, 100), vec![(6, "long".to_string(), 122)]);
    assert!(long_functions_in(&text, 200).is_empty());
}

/// Entries of the source tree map in `lib.rs`: (path under `src/`, the
/// entry's text including its continuation lines).
fn tree_map(lib: &str) -> Vec<(String, String)> {
    let mut in_tree = false;
    let mut entries: Vec<(String, String)> = Vec::new();
    let mut stack: Vec<String> = Vec::new();
    for line in lib.lines() {
        let Some(l) = line.strip_prefix("//! ") else { continue };
        if l == "src/" {
            in_tree = true;
            continue;
        }
        if !in_tree {
            continue;
        }
        if l.starts_with("```") {
            break;
        }
        // Depth: the number of 4-column groups before the branch.
        let cols: Vec<char> = l.chars().collect();
        let mut depth = 0;
        while cols.len() >= 4 * depth + 4
            && matches!(cols[4 * depth], '│' | ' ')
            && cols[4 * depth + 1..4 * depth + 4].iter().all(|&c| c == ' ')
        {
            depth += 1;
        }
        let rest: String = cols[(4 * depth).min(cols.len())..].iter().collect();
        if let Some(entry) = rest.strip_prefix("├── ").or_else(|| rest.strip_prefix("└── ")) {
            let name = entry.split_whitespace().next().unwrap_or("").to_string();
            stack.truncate(depth);
            stack.push(name.trim_end_matches('/').to_string());
            entries.push((stack.join("/"), entry.to_string()));
        } else if let Some(last) = entries.last_mut() {
            last.1.push(' ');
            last.1.push_str(rest.trim());
        }
    }
    entries
}

/// The map in `lib.rs` names only what exists, and every file of `src/`
/// is named: by an entry of its own, or by its stem in the text of the
/// nearest folder entry above it (`mod.rs` excepted).
#[test]
fn the_tree_map_in_lib_rs_matches_src() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let entries = tree_map(&std::fs::read_to_string(src.join("lib.rs")).unwrap());
    assert!(entries.len() > 10, "no tree map found in lib.rs");
    let mut wrong = Vec::new();
    for (path, _) in &entries {
        if !src.join(path).exists() {
            wrong.push(format!("the map names src/{path}, which does not exist"));
        }
    }
    let text_of = |p: &str| entries.iter().find(|(e, _)| e == p).map(|(_, t)| t.clone());
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    for file in files {
        let rel = file.strip_prefix(&src).unwrap().to_string_lossy().replace('\\', "/");
        if rel == "lib.rs" || rel.ends_with("/mod.rs") || text_of(&rel).is_some() {
            continue;
        }
        let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
        // The nearest folder above the file that has an entry.
        let mut dir = Path::new(&rel).parent().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
        let mut text = None;
        while !dir.is_empty() {
            if let Some(t) = text_of(&dir) {
                text = Some(t);
                break;
            }
            dir = Path::new(&dir).parent().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
        }
        let named = text.is_some_and(|t| t.split(|c: char| !(c.is_alphanumeric() || c == '_')).any(|w| w == stem));
        if !named {
            wrong.push(format!("src/{rel} is not in the map in lib.rs"));
        }
    }
    assert!(wrong.is_empty(), "the source tree map in src/lib.rs has drifted from src/:\n{}", wrong.join("\n"));
}
