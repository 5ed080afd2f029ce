//! One extended-XYZ frame (comment line and atom lines) to an
//! [`AtomicData`], with ASE's meaning of every key.

use std::path::Path;

use super::comment::{self, Value};
use crate::data::elements;
use crate::data::{AtomicData, Field, HostData, Level, StringField};
use crate::error::{Error, Result};
use crate::formats::units::Factors;

/// Where a frame's text sits, and the units it converts from.
pub(crate) struct FrameText<'a> {
    /// The file, for errors.
    pub file: &'a Path,
    /// 1-based line number of the atom-count line.
    pub line: usize,
    /// The comment line (without its newline).
    pub comment: &'a str,
    /// The atom lines (`natoms` of them, newline-separated).
    pub atoms: &'a str,
    /// The atom count.
    pub natoms: usize,
    /// Unit conversion of energies, lengths, forces and stresses.
    pub factors: &'a Factors,
}

/// A per-atom column as `Properties` declares it.
enum Column {
    Float(Vec<f32>),
    Int(Vec<i64>),
    Bool(Vec<bool>),
    /// `species`: symbols read as atomic numbers.
    Species(Vec<i64>),
    /// Strings other than `species`: an atom-level string label.
    Str(Vec<String>),
}

/// The comment line: the `Properties` spec and the other keys, in order.
struct CommentLine {
    spec: String,
    info: Vec<(String, Value)>,
}

/// One `Properties` entry and the column read for it.
struct Property {
    /// The field name (ASE's names: `pos` is `positions`, `Z` `atomic_numbers`).
    name: String,
    /// The name in the file, for errors.
    file_name: String,
    cols: usize,
    column: Column,
}

fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "T" | "True" | "true" | "TRUE" => Some(true),
        "F" | "False" | "false" | "FALSE" => Some(false),
        _ => None,
    }
}

/// A decimal number as f64, correctly rounded. Plain decimals with at most
/// 19 significant digits, whose digits fit 2^53 and with at most 22 after
/// the point (every number ASE writes), take Clinger's fast path: the
/// integer mantissa and 10^k are exact doubles, so one division rounds
/// correctly, giving the same bits as `str::parse` at a fraction of its
/// cost. Anything else (exponents, long mantissas, `nan`) goes to
/// `str::parse`.
fn parse_f64(t: &str) -> Option<f64> {
    const POW10: [f64; 23] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19,
        1e20, 1e21, 1e22,
    ];
    let b = t.as_bytes();
    let (neg, digits) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        Some(b'+') => (false, &b[1..]),
        _ => (false, b),
    };
    let mut mant: u64 = 0;
    let mut n_digits = 0usize;
    let mut frac: Option<usize> = None;
    for &c in digits {
        match c {
            b'0'..=b'9' => {
                if n_digits >= 19 {
                    return t.parse().ok();
                }
                mant = mant * 10 + u64::from(c - b'0');
                if mant != 0 {
                    n_digits += 1;
                }
                if let Some(f) = frac.as_mut() {
                    *f += 1;
                }
            }
            b'.' if frac.is_none() => frac = Some(0),
            _ => return t.parse().ok(),
        }
    }
    let f = frac.unwrap_or(0);
    let has_digit = digits.iter().any(u8::is_ascii_digit);
    if !has_digit || mant > (1 << 53) || f > 22 {
        return t.parse().ok();
    }
    let v = mant as f64 / POW10[f];
    Some(if neg { -v } else { v })
}

/// The field name of a `Properties` entry (ASE's `REV_PROPERTY_NAME_MAP`,
/// then this crate's names for the toolkit's core fields).
fn field_name(file_name: &str) -> String {
    match file_name {
        "pos" => "positions",
        "Z" => "atomic_numbers",
        "charge" => "charges",
        other => other,
    }
    .to_string()
}

/// `x * factor` in f64, rounded once to f32.
fn scale_f32(x: f64, factor: f64) -> f32 {
    crate::formats::units::scale_f32(x, factor)
}

impl FrameText<'_> {
    /// A float column scaled by `factor` (a no-op for 1). Columns are parsed
    /// to f32 already; a conversion widens back to f64 for the product.
    fn scaled(&self, mut v: Vec<f32>, factor: f64) -> Vec<f32> {
        if factor != 1.0 {
            v.iter_mut().for_each(|x| *x = (f64::from(*x) * factor) as f32);
        }
        v
    }

    fn err(&self, line: usize, field: &str, reason: impl Into<String>) -> Error {
        Error::Parse { file: self.file.to_path_buf(), line, field: field.to_string(), reason: reason.into() }
    }

    fn properties(&self, spec: &str) -> Result<Vec<Property>> {
        let l = self.line + 1;
        let parts: Vec<&str> = spec.split(':').collect();
        if !parts.len().is_multiple_of(3) || parts.is_empty() {
            return Err(self.err(l, "Properties", format!("`{spec}` is not a list of name:type:columns triples")));
        }
        let mut out: Vec<Property> = Vec::new();
        for t in parts.chunks(3) {
            let (name, ty, cols) = (t[0], t[1], t[2]);
            let cols: usize = cols.parse().ok().filter(|&c| c > 0).ok_or_else(|| {
                self.err(l, "Properties", format!("{name}: column count `{cols}` is not a positive integer"))
            })?;
            let n = self.natoms * cols;
            let column = match (ty, name) {
                ("S", "species") if cols == 1 => Column::Species(Vec::with_capacity(n)),
                ("S", _) if cols == 1 => Column::Str(Vec::with_capacity(n)),
                ("S", _) => {
                    return Err(self.err(l, "Properties", format!("{name}: string columns have one column (S:1)")));
                }
                ("R", _) => Column::Float(Vec::with_capacity(n)),
                ("I", _) => Column::Int(Vec::with_capacity(n)),
                ("L", _) => Column::Bool(Vec::with_capacity(n)),
                _ => return Err(self.err(l, "Properties", format!("{name}: unknown type `{ty}` (R, I, S or L)"))),
            };
            let field = field_name(name);
            if out.iter().any(|p| p.name == field) {
                return Err(self.err(l, "Properties", format!("{name} is declared twice")));
            }
            out.push(Property { name: field, file_name: name.to_string(), cols, column });
        }
        Ok(out)
    }

    /// Parses the frame: numeric and logical keys and columns become fields,
    /// string ones string labels.
    pub(crate) fn parse(&self) -> Result<AtomicData> {
        let cl = self.line + 1;
        let comment = self.comment_line()?;
        let mut props = self.properties(&comment.spec)?;
        self.read_atoms(&mut props)?;
        let mut data = self.atom_fields(props)?;
        self.comment_keys(&mut data, comment.info)?;
        if let Some(p) = data.field("positions")
            && let HostData::Float32(v) = &p.data
            && v.iter().any(|x| !x.is_finite())
        {
            return Err(self.err(cl, "pos", "non-finite position"));
        }
        Ok(data)
    }

    /// The comment line's `key=value` pairs: the `Properties` spec apart
    /// (ASE's default when absent), the other keys converted, in order.
    fn comment_line(&self) -> Result<CommentLine> {
        let cl = self.line + 1;
        let pairs = comment::split_pairs(self.comment).map_err(|r| self.err(cl, "comment line", r))?;
        let mut spec = "species:S:1:pos:R:3".to_string();
        let mut info: Vec<(String, Value)> = Vec::with_capacity(pairs.len());
        for (key, raw) in pairs {
            if key == "Properties" {
                spec = raw.unwrap_or_default();
                continue;
            }
            let value = match raw {
                Some(r) => comment::convert(&key, &r),
                None => Value::Bool(vec![true]),
            };
            if info.iter().any(|(k, _)| *k == key) {
                return Err(self.err(cl, &key, "key appears twice"));
            }
            info.push((key, value));
        }
        Ok(CommentLine { spec, info })
    }

    /// Reads the atom lines into the columns `Properties` declares.
    fn read_atoms(&self, props: &mut [Property]) -> Result<()> {
        let mut lines = self.atoms.split('\n');
        for a in 0..self.natoms {
            let l = self.line + 2 + a;
            let line = lines.next().ok_or_else(|| self.err(l, "atoms", "end of file inside the frame"))?;
            let mut tok = line.split_ascii_whitespace();
            for p in props.iter_mut() {
                for _ in 0..p.cols {
                    let t = tok.next().ok_or_else(|| {
                        self.err(l, &p.file_name, "line ends before this column (fewer columns than Properties)")
                    })?;
                    let bad = |what: &str| self.err(l, &p.file_name, format!("`{t}` is not {what}"));
                    match &mut p.column {
                        // f64 first, then f32: ASE reads doubles, the store keeps float32.
                        Column::Float(v) => v.push(parse_f64(t).ok_or_else(|| bad("a number"))? as f32),
                        Column::Int(v) => v.push(t.parse::<i64>().map_err(|_| bad("an integer"))?),
                        Column::Bool(v) => v.push(parse_bool(t).ok_or_else(|| bad("a logical (T or F)"))?),
                        Column::Species(v) => {
                            v.push(elements::atomic_number(t).ok_or_else(|| bad("a chemical symbol"))?)
                        }
                        Column::Str(v) => v.push(t.to_string()),
                    }
                }
            }
            if tok.next().is_some() {
                return Err(self.err(l, "atoms", "more columns than Properties declares"));
            }
        }
        Ok(())
    }

    /// The per-atom fields: `atomic_numbers` (from `Z` or `species`),
    /// `positions`, then every other column as a field or atom string label.
    fn atom_fields(&self, mut props: Vec<Property>) -> Result<AtomicData> {
        let cl = self.line + 1;
        let n = self.natoms;
        let take =
            |props: &mut Vec<Property>, name: &str| props.iter().position(|p| p.name == name).map(|k| props.remove(k));
        let species = take(&mut props, "species");
        let numbers = match (take(&mut props, "atomic_numbers"), species) {
            // ASE takes `Z` over `species` when both are there.
            (Some(Property { column: Column::Int(z), cols: 1, .. }), _) => z,
            (Some(p), _) => return Err(self.err(cl, &p.file_name, "Z must be one integer column (Z:I:1)")),
            (None, Some(Property { column: Column::Species(z), .. })) => z,
            _ => return Err(self.err(cl, "Properties", "neither species nor Z: no atomic numbers")),
        };
        let positions = match take(&mut props, "positions") {
            Some(Property { column: Column::Float(p), cols: 3, .. }) => self.scaled(p, self.factors.length),
            Some(p) => return Err(self.err(cl, &p.file_name, "positions must be pos:R:3")),
            None => return Err(self.err(cl, "Properties", "no pos:R:3 column")),
        };
        let mut data = AtomicData::default();
        self.put(&mut data, "atomic_numbers", Level::Atom, vec![n], numbers.into())?;
        self.put(&mut data, "positions", Level::Atom, vec![n, 3], positions.into())?;
        for p in props {
            let shape = if p.cols == 1 { vec![n] } else { vec![n, p.cols] };
            let d: HostData = match p.column {
                Column::Float(v) if p.name == "forces" => self.scaled(v, self.factors.forces).into(),
                Column::Float(v) => v.into(),
                Column::Int(v) => v.into(),
                Column::Bool(v) => v.into(),
                Column::Species(v) => v.into(),
                Column::Str(v) => {
                    if data.strings.insert(p.name.clone(), StringField::atoms(v)).is_some() {
                        return Err(self.err(cl, &p.file_name, "declared twice"));
                    }
                    continue;
                }
            };
            if p.name == "forces" && p.cols != 3 {
                return Err(self.err(cl, "forces", "forces must be forces:R:3"));
            }
            self.put(&mut data, &p.name, Level::Atom, shape, d)?;
        }
        Ok(data)
    }

    /// Adds field `name`, refusing one already there.
    fn put(&self, data: &mut AtomicData, name: &str, level: Level, shape: Vec<usize>, d: HostData) -> Result<()> {
        let cl = self.line + 1;
        if data.fields.contains_key(name) {
            return Err(self.err(cl, name, "given both as a per-atom column and as a key, or twice"));
        }
        let f = Field::new(level, shape, d).map_err(|e| self.err(cl, name, e.to_string()))?;
        data.fields.insert(name.to_string(), f);
        Ok(())
    }

    /// The comment line's keys: `Lattice` and `pbc` become `cell` and `pbc`
    /// (always present), every other key a system field or string label.
    fn comment_keys(&self, data: &mut AtomicData, info: Vec<(String, Value)>) -> Result<()> {
        let cl = self.line + 1;
        let mut cell = [0f32; 9];
        let mut has_lattice = false;
        let mut pbc: Option<Vec<bool>> = None;
        for (key, value) in info {
            match key.as_str() {
                "Lattice" => {
                    let v = value
                        .numbers()
                        .filter(|v| v.len() == 9)
                        .ok_or_else(|| self.err(cl, "Lattice", "expected 9 numbers"))?;
                    // Lattice lists a, b, c one after another: the cell's rows.
                    for (c, x) in cell.iter_mut().zip(&v) {
                        *c = scale_f32(*x, self.factors.length);
                    }
                    has_lattice = true;
                }
                "pbc" => match value {
                    Value::Bool(b) if b.len() == 3 => pbc = Some(b),
                    Value::Bool(b) if b.len() == 1 => pbc = Some(vec![b[0]; 3]),
                    _ => return Err(self.err(cl, "pbc", "expected three logicals (pbc=\"T T F\")")),
                },
                _ => self.system_key(data, key, value)?,
            }
        }
        // ASE: a Lattice without pbc means periodic in every direction.
        let pbc = pbc.unwrap_or_else(|| vec![has_lattice; 3]);
        self.put(data, "cell", Level::System, vec![1, 3, 3], cell.to_vec().into())?;
        self.put(data, "pbc", Level::System, vec![1, 3], pbc.into())
    }

    /// One comment-line key other than `Lattice` and `pbc`: energies and
    /// stresses converted to the store's units, the rest kept as given.
    fn system_key(&self, data: &mut AtomicData, key: String, value: Value) -> Result<()> {
        let cl = self.line + 1;
        let nums = value.numbers();
        match key.as_str() {
            "energy" => {
                let v = nums.filter(|v| v.len() == 1).ok_or_else(|| self.err(cl, "energy", "expected one number"))?;
                let e = vec![scale_f32(v[0], self.factors.energy)];
                self.put(data, "energy", Level::System, vec![1, 1], e.into())
            }
            "free_energy" => {
                let v =
                    nums.filter(|v| v.len() == 1).ok_or_else(|| self.err(cl, "free_energy", "expected one number"))?;
                let e = vec![scale_f32(v[0], self.factors.energy)];
                self.put(data, "free_energy", Level::System, vec![1], e.into())
            }
            "stress" | "virial" => {
                let v = nums.ok_or_else(|| self.err(cl, &key, "expected 9 or 6 numbers"))?;
                // ASE reads 9 values in Fortran order (column-major).
                let m = crate::formats::stress::to_matrix(&v, crate::formats::stress::NineOrder::ColumnMajor)
                    .map_err(|r| self.err(cl, &key, r))?;
                // Stress in pressure units; the virial is an energy.
                let f = if key == "stress" { self.factors.stress } else { self.factors.energy };
                let m: Vec<f32> = m.iter().map(|&x| scale_f32(x, f)).collect();
                self.put(data, &key, Level::System, vec![1, 3, 3], m.into())
            }
            "atomic_numbers" | "positions" | "cell" | "neighbor_list" | "shifts" => {
                Err(self.err(cl, &key, "this key names a field the import derives; rename it"))
            }
            _ => {
                let (len, d): (usize, HostData) = match value {
                    Value::Int(v) => (v.len(), v.into()),
                    Value::Float(v) => (v.len(), v.iter().map(|&x| x as f32).collect::<Vec<f32>>().into()),
                    Value::Bool(v) => (v.len(), v.into()),
                    Value::Str(v) => {
                        if data.fields.contains_key(&key) || data.strings.contains_key(&key) {
                            return Err(self.err(cl, &key, "given both as a per-atom column and as a key"));
                        }
                        data.strings.insert(key, StringField::system(v));
                        return Ok(());
                    }
                };
                let shape = if len == 1 { vec![1] } else { vec![1, len] };
                self.put(data, &key, Level::System, shape, d)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_f64;

    #[test]
    fn fast_floats_equal_std() {
        let cases = [
            "0",
            "-0.0",
            "1.5",
            "+2.25",
            "-123.456789012",
            "0.30000000000000004",
            "9007199254740993",
            "1e5",
            "-1.5E-3",
            ".5",
            "5.",
            "nan",
            "inf",
            "12345678901234567890.5",
            "0.0000000000000000000000001",
            "3.14159265358979323846",
            "-0.1234567890123456789",
        ];
        for c in cases {
            let want: Option<f64> = c.parse().ok();
            let got = parse_f64(c);
            assert_eq!(got.map(f64::to_bits), want.map(f64::to_bits), "{c}");
        }
        for bad in ["", "-", ".", "1.2.3", "x", "1-2"] {
            assert_eq!(parse_f64(bad), bad.parse::<f64>().ok(), "{bad}");
        }
        // Every number with 8 decimals, as ASE writes them, over a sweep.
        let mut x = -1234.5f64;
        while x < 1234.5 {
            let s = format!("{x:.8}");
            assert_eq!(parse_f64(&s).map(f64::to_bits), s.parse::<f64>().ok().map(f64::to_bits), "{s}");
            x += 0.7318731;
        }
    }
}
