//! docs/CONCEPTS.md's walk of one batch stays true: every file it cites
//! exists and defines every name cited beside it, every type it names in
//! passing is defined somewhere in `src/`, the layer of each row is the
//! folder of its file, the walk has at most 20 steps, and it passes through
//! each layer once (the pipeline, where the batch starts and ends, at both
//! ends).

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The backticked tokens of `cell`.
fn ticked(cell: &str) -> Vec<String> {
    cell.split('`').skip(1).step_by(2).map(str::to_string).collect()
}

/// Whether `src` defines `name`: a function for a lower-case name, a type
/// (struct, enum, trait, alias) or an impl of one for a capitalised name.
fn defines(src: &str, name: &str) -> bool {
    if name.starts_with(|c: char| c.is_ascii_uppercase()) {
        ["struct ", "enum ", "trait ", "type "].iter().any(|k| {
            src.match_indices(&format!("{k}{name}"))
                .any(|(i, m)| !src[i + m.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_'))
        })
    } else {
        src.match_indices(&format!("fn {name}")).any(|(i, m)| src[i + m.len()..].starts_with(['(', '<']))
    }
}

fn all_sources(dir: &Path, out: &mut String) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            all_sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push_str(&std::fs::read_to_string(&p).unwrap());
        }
    }
}

#[test]
fn the_walk_of_one_batch_cites_what_the_code_defines() {
    let doc = std::fs::read_to_string(root().join("docs/CONCEPTS.md")).unwrap();
    let walk = doc.split("## One shuffled batch").nth(1).expect("the walk section");
    let rows: Vec<Vec<&str>> = walk
        .lines()
        .filter(|l| l.starts_with("| ") && l.chars().nth(2).is_some_and(|c| c.is_ascii_digit()))
        .map(|l| l.trim_matches('|').split(" | ").map(str::trim).collect())
        .collect();
    assert!(!rows.is_empty() && rows.len() <= 20, "{} steps", rows.len());
    let mut everything = String::new();
    all_sources(&root().join("src"), &mut everything);
    let mut layers: Vec<&str> = Vec::new();
    for (k, row) in rows.iter().enumerate() {
        let [step, layer, file, names, hands] = row[..] else { panic!("row {k}: {row:?}") };
        assert_eq!(step, (k + 1).to_string(), "steps are numbered in order");
        let file = ticked(file).pop().unwrap_or_else(|| panic!("step {step}: no file"));
        let src = std::fs::read_to_string(root().join(&file)).unwrap_or_else(|e| panic!("step {step}: {file}: {e}"));
        assert_eq!(file.split('/').nth(1), Some(layer), "step {step}: {file} is not in {layer}");
        for name in ticked(names) {
            for part in name.split("::") {
                assert!(defines(&src, part), "step {step}: {file} does not define `{part}` (of `{name}`)");
            }
        }
        for token in ticked(hands) {
            if token.ends_with(".rs") {
                assert!(root().join(&token).is_file(), "step {step}: {token} does not exist");
            } else if let Some((ty, method)) = token.split_once("::") {
                assert!(defines(&everything, ty), "step {step}: `{ty}` is defined nowhere in src/");
                // A method, or a variant (an indented line of its enum).
                let variant = method.starts_with(|c: char| c.is_ascii_uppercase())
                    && everything.lines().any(|l| l.trim_start().starts_with(method) && l.starts_with("    "));
                assert!(defines(&everything, method) || variant, "step {step}: `{token}` is defined nowhere in src/");
            } else if token.starts_with(|c: char| c.is_ascii_uppercase()) && token.chars().all(|c| c.is_alphanumeric())
            {
                assert!(defines(&everything, &token), "step {step}: `{token}` is defined nowhere in src/");
            }
        }
        if layers.last() != Some(&layer) {
            layers.push(layer);
        }
    }
    assert_eq!(
        layers,
        ["pipeline", "sampler", "source", "store", "data", "pipeline"],
        "the layers, in the walk's order"
    );
}
