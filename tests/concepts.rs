//! docs/CONCEPTS.md's walk of one batch stays true: every file it cites
//! exists and defines every name cited beside it, every type it names in
//! passing is defined somewhere in `src/`, and each row is called from the
//! function its "called from" cell names: that function, in the file of the
//! earlier row that cites it, calls one of the row's names. The walk
//! follows time, so a row leads to the next one it names.

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
        fn_at(src, name).is_some()
    }
}

/// Where `src` first defines `fn name` (followed by its parameters or
/// generics, so `fn read` is not found in `fn read_plan`).
fn fn_at(src: &str, name: &str) -> Option<usize> {
    src.match_indices(&format!("fn {name}")).find(|(i, m)| src[i + m.len()..].starts_with(['(', '<'])).map(|(i, _)| i)
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

/// Whether `word` occurs in `text` as a whole identifier.
fn has_word(text: &str, word: &str) -> bool {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(word).any(|(i, _)| !text[..i].ends_with(ident) && !text[i + word.len()..].starts_with(ident))
}

/// Whether `body` calls function `name` (the word followed by its
/// arguments or a turbofish, so a field of that name does not count), or,
/// for a capitalised name, names the type.
fn calls(body: &str, name: &str) -> bool {
    if name.starts_with(|c: char| c.is_ascii_uppercase()) {
        return has_word(body, name);
    }
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    body.match_indices(name).any(|(i, _)| {
        let after = &body[i + name.len()..];
        !body[..i].ends_with(ident) && (after.starts_with('(') || after.starts_with("::<"))
    })
}

/// The body of `fn name` in `src` (from its line to the closing brace at
/// its indentation); for `Type::name`, the first such function after an
/// `impl` line that names `Type`.
fn body_of<'a>(src: &'a str, name: &str) -> Option<&'a str> {
    let (ty, method) = match name.split_once("::") {
        Some((t, m)) => (Some(t), m),
        None => (None, name),
    };
    let from = match ty {
        Some(t) => std::iter::once(0)
            .chain(src.match_indices('\n').map(|(i, _)| i + 1))
            .find(|&i| src[i..].starts_with("impl") && src[i..].lines().next().is_some_and(|l| has_word(l, t)))?,
        None => 0,
    };
    let i = fn_at(&src[from..], method)?;
    let start = src[..from + i].rfind('\n').map_or(0, |n| n + 1);
    let indent: String = src[start..].chars().take_while(|c| *c == ' ').collect();
    let close = format!("\n{indent}}}");
    let end = src[start..].find(&close)? + start + close.len();
    Some(&src[start..end])
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
    assert!(rows.len() >= 12 && rows.len() <= 20, "{} steps: the walk is at most 20", rows.len());
    let mut everything = String::new();
    all_sources(&root().join("src"), &mut everything);
    // Each row's file and names, for the rows after it to name as callers.
    let mut cited: Vec<(String, Vec<String>)> = Vec::new();
    for (k, row) in rows.iter().enumerate() {
        let [step, thread, file, names, caller, hands] = row[..] else { panic!("row {k}: {row:?}") };
        assert_eq!(step, (k + 1).to_string(), "steps are numbered in order");
        assert!(["consumer", "read", "rayon", "read, then rayon"].contains(&thread), "step {step}: thread {thread:?}");
        let file = ticked(file).pop().unwrap_or_else(|| panic!("step {step}: no file"));
        let src = std::fs::read_to_string(root().join(&file)).unwrap_or_else(|e| panic!("step {step}: {file}: {e}"));
        let names = ticked(names);
        for name in &names {
            for part in name.split("::") {
                assert!(defines(&src, part), "step {step}: {file} does not define `{part}` (of `{name}`)");
            }
        }
        // The caller: a function an earlier row cites, whose body calls
        // one of this row's names.
        if caller.starts_with("the user's") {
            assert!(!names.is_empty(), "step {step}: no names");
        } else {
            let by = ticked(caller).into_iter().next().unwrap_or_else(|| panic!("step {step}: no caller named"));
            let by = by.as_str();
            let last = by.rsplit("::").next().unwrap_or(by);
            let (by_file, _) = cited
                .iter()
                .rev()
                .find(|(_, ns)| ns.iter().any(|n| n == by || n.rsplit("::").next() == Some(last)))
                .unwrap_or_else(|| panic!("step {step}: the caller `{by}` is cited by no earlier row"));
            let by_src = std::fs::read_to_string(root().join(by_file)).unwrap();
            let body = body_of(&by_src, by).unwrap_or_else(|| panic!("step {step}: no `fn {by}` in {by_file}"));
            assert!(
                names.iter().any(|n| n.split("::").any(|part| calls(body, part))),
                "step {step}: `{by}` ({by_file}) calls none of {names:?}"
            );
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
        cited.push((file, names));
    }
}

#[test]
fn the_body_finder_sees_calls_in_the_right_function() {
    let src = "impl A {\n    fn go(&self) {\n        self.step();\n    }\n}\nimpl B {\n    fn go(&self) {\n        other();\n    }\n}\n";
    assert!(has_word(body_of(src, "A::go").unwrap(), "step"));
    assert!(!has_word(body_of(src, "B::go").unwrap(), "step"));
    assert!(has_word(body_of(src, "B::go").unwrap(), "other"));
    assert!(!has_word("self.steps()", "step"));
    assert!(calls("self.to_device(b)", "to_device") && calls("f::<u8>()", "f"));
    assert!(!calls("self.to_device.uploader", "to_device"));
    assert!(body_of(src, "C::go").is_none());
}
