//! Frames written as extended XYZ that ASE reads back as the original
//! frames (`ase.io.read(path, ":")`): the way from a store back to ASE.
//!
//! Per frame: `Lattice` and `pbc` from `cell` and `pbc` (no `Lattice` for
//! a zero cell), `Properties` with `species`, `pos` and every atom field
//! (`R` floats, `I` integers, `L` bools, `S` atom string labels), and every
//! system field and string label as a `key=value` (a 3x3 `stress` or
//! `virial` as 9 numbers in ASE's order). A label the frame does not have
//! is left out of that frame: a float field that is all NaN, an integer or
//! bool field whose `<name>_present` flag is false, an empty string label
//! (see `docs/LABELS.md`). Edge fields (neighbor lists) are not written.
//! Floats print as the shortest decimal that reads back as the same
//! float32.

use std::fmt::Write as _;

use crate::data::elements;
use crate::data::{AtomicData, Field, HostData, Level};

fn float(out: &mut String, x: f64, single: bool) {
    if single {
        let _ = write!(out, "{}", x as f32);
    } else {
        let _ = write!(out, "{x}");
    }
}

/// Element `i` as text (`T`/`F` for bools).
fn value(out: &mut String, d: &HostData, i: usize) {
    match d {
        HostData::Bool(v) => out.push(if v[i] { 'T' } else { 'F' }),
        HostData::Float32(v) => float(out, f64::from(v[i]), true),
        HostData::Float16(_) | HostData::BFloat16(_) => float(out, d.get_f64(i).unwrap_or(f64::NAN), true),
        HostData::Float64(v) => float(out, v[i], false),
        other => {
            let _ = write!(out, "{}", other.to_i64_vec().map(|v| v[i]).unwrap_or(0));
        }
    }
}

fn is_float(d: &HostData) -> bool {
    matches!(d, HostData::Float16(_) | HostData::BFloat16(_) | HostData::Float32(_) | HostData::Float64(_))
}

/// Whether the frame has field `name` (not absent in the sense of the
/// missing-label rule).
fn present(s: &AtomicData, name: &str, f: &Field) -> bool {
    if let Some(flag) = s.fields.get(&format!("{name}_present"))
        && let HostData::Bool(v) = &flag.data
        && !is_float(&f.data)
    {
        return v.first().copied().unwrap_or(true);
    }
    !(is_float(&f.data) && (0..f.data.len()).all(|i| f.data.get_f64(i).is_some_and(f64::is_nan)))
}

/// A string value as ASE's key=value parser reads it back.
fn quoted(s: &str) -> String {
    let plain = !s.is_empty() && s.chars().all(|c| c.is_ascii_graphic() && !"\"'={}[],\\".contains(c));
    if plain {
        return s.to_string();
    }
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                q.push('\\');
                q.push(c);
            }
            '\n' => q.push_str("\\n"),
            _ => q.push(c),
        }
    }
    q.push('"');
    q
}

/// The field name an extended-XYZ column takes (the reverse of the reader's
/// renaming).
fn column_name(name: &str) -> &str {
    match name {
        "positions" => "pos",
        other => other,
    }
}

/// Appends frame `s` to `out`.
///
/// # Errors
/// Why not, as a message, when the frame cannot be written (no
/// `atomic_numbers` or `positions`, an atomic number without a symbol).
pub fn write_frame(out: &mut String, s: &AtomicData) -> std::result::Result<(), String> {
    let n = s.num_atoms();
    let numbers = s.field("atomic_numbers").and_then(|f| f.data.to_i64_vec()).ok_or("no atomic_numbers")?;
    let symbols: Vec<&str> = numbers
        .iter()
        .map(|&z| elements::symbol(z).ok_or_else(|| format!("atomic number {z} has no symbol")))
        .collect::<std::result::Result<_, _>>()?;
    let _ = writeln!(out, "{n}");
    let mut comment = String::new();
    lattice_and_pbc(&mut comment, s);
    let positions = s.field("positions").ok_or("no positions")?;
    let columns = AtomColumns::of(s);
    let _ = write!(comment, "Properties={}", columns.props);
    system_keys(&mut comment, s);
    out.push_str(&comment);
    out.push('\n');
    columns.write_atoms(out, n, &symbols, &positions.data);
    Ok(())
}

/// `Lattice` (left out for a zero or absent cell) and `pbc` (all false
/// when absent), each followed by a space.
fn lattice_and_pbc(comment: &mut String, s: &AtomicData) {
    let cell = s.field("cell").map(|f| f.data.to_f64_vec()).filter(|c| c.len() == 9);
    let pbc = s.field("pbc").and_then(|f| f.data.to_i64_vec()).filter(|p| p.len() == 3);
    if let Some(c) = &cell
        && c.iter().any(|&x| x != 0.0)
    {
        comment.push_str("Lattice=\"");
        for (k, x) in c.iter().enumerate() {
            if k > 0 {
                comment.push(' ');
            }
            float(comment, *x, true);
        }
        comment.push_str("\" ");
    }
    let pbc = pbc.unwrap_or_else(|| vec![0; 3]);
    let _ = write!(
        comment,
        "pbc=\"{} {} {}\" ",
        ["F", "T"][(pbc[0] != 0) as usize],
        ["F", "T"][(pbc[1] != 0) as usize],
        ["F", "T"][(pbc[2] != 0) as usize]
    );
}

/// The atom columns after `species` and `pos`: the other atom fields the
/// frame has and its non-empty atom string labels, by name.
struct AtomColumns<'a> {
    /// The `Properties` value, `species` and `pos` included.
    props: String,
    /// Field name, values and values per atom.
    fields: Vec<(&'a str, &'a HostData, usize)>,
    /// Label name and one value per atom.
    strings: Vec<(&'a str, &'a Vec<String>)>,
}

impl<'a> AtomColumns<'a> {
    fn of(s: &'a AtomicData) -> AtomColumns<'a> {
        let mut fields: Vec<(&str, &HostData, usize)> = Vec::new();
        let mut props = String::from("species:S:1:pos:R:3");
        for (name, f) in &s.fields {
            let skip = matches!(name.as_str(), "atomic_numbers" | "positions")
                || name.ends_with("_present")
                || f.level != Level::Atom
                || !present(s, name, f);
            if skip {
                continue;
            }
            let k = f.row_len();
            let t = match &f.data {
                HostData::Bool(_) => 'L',
                d if is_float(d) => 'R',
                _ => 'I',
            };
            let _ = write!(props, ":{}:{t}:{k}", column_name(name));
            fields.push((name, &f.data, k));
        }
        let mut strings: Vec<(&str, &Vec<String>)> = Vec::new();
        for (name, f) in &s.strings {
            if f.level == Level::Atom && f.values.iter().any(|v| !v.is_empty()) {
                let _ = write!(props, ":{name}:S:1");
                strings.push((name, &f.values));
            }
        }
        AtomColumns { props, fields, strings }
    }

    /// The `n` atom lines: symbol, position, then these columns.
    fn write_atoms(&self, out: &mut String, n: usize, symbols: &[&str], positions: &HostData) {
        for a in 0..n {
            out.push_str(symbols[a]);
            for c in 0..3 {
                out.push(' ');
                value(out, positions, a * 3 + c);
            }
            for (_, d, k) in &self.fields {
                for c in 0..*k {
                    out.push(' ');
                    value(out, d, a * k + c);
                }
            }
            for (_, v) in &self.strings {
                // A column value is one token: blanks become underscores.
                out.push(' ');
                if v[a].is_empty() {
                    out.push('_');
                } else {
                    out.push_str(&v[a].replace(char::is_whitespace, "_"));
                }
            }
            out.push('\n');
        }
    }
}

/// Every system field the frame has (but `cell` and `pbc`) and non-empty
/// system string label, each as ` key=value`.
fn system_keys(comment: &mut String, s: &AtomicData) {
    for (name, f) in &s.fields {
        if f.level != Level::System
            || matches!(name.as_str(), "cell" | "pbc")
            || name.ends_with("_present")
            || !present(s, name, f)
        {
            continue;
        }
        let len = f.data.len();
        let _ = write!(comment, " {name}=");
        let order: Vec<usize> = if len == 9 && matches!(name.as_str(), "stress" | "virial") {
            // ASE reads nine values column-major.
            (0..9).map(|k| (k % 3) * 3 + k / 3).collect()
        } else {
            (0..len).collect()
        };
        if len > 1 {
            comment.push('"');
        }
        for (j, &i) in order.iter().enumerate() {
            if j > 0 {
                comment.push(' ');
            }
            value(comment, &f.data, i);
        }
        if len > 1 {
            comment.push('"');
        }
    }
    for (name, f) in &s.strings {
        if f.level == Level::System
            && let Some(v) = f.values.first().filter(|v| !v.is_empty())
        {
            let _ = write!(comment, " {name}={}", quoted(v));
        }
    }
}
