//! JSON dump of a store's logical samples, byte-compatible with the
//! reference fixtures' `*.expected.json` (Python's `json.dumps` of the
//! reference reader's output): `{"num_samples", "fields", "samples"}`, field
//! keys sorted, each field `{"dtype", "shape", "data"}` with flat data, floats
//! widened to f64 and printed as Python's `repr` prints them (`NaN` for an
//! absent label). String labels appear among the fields with dtype
//! `"string"` and their values as JSON strings.
//!
//! Written by hand rather than with `serde_json` because Python's float
//! formatting (`1e-05`, `5.0`, `1e+16`) and its `", "` / `": "` separators
//! differ from serde_json's.

use std::fmt::Write as _;
use std::io::Write;

use crate::data::HostData;
use crate::error::{Error, Result};
use crate::source::Reader;

/// Formats an f64 exactly as Python's `repr(float)`.
///
/// ```
/// use atomzarr::formats::dump::py_float;
/// assert_eq!(py_float(5.0), "5.0");
/// assert_eq!(py_float(1e-5), "1e-05");
/// assert_eq!(py_float(0.0001), "0.0001");
/// assert_eq!(py_float(1e16), "1e+16");
/// assert_eq!(py_float(123456789012345.6), "123456789012345.6");
/// assert_eq!(py_float(f32::MAX as f64), "3.4028234663852886e+38");
/// assert_eq!(py_float(-0.0), "-0.0");
/// ```
pub fn py_float(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity".into() } else { "-Infinity".into() };
    }
    // Rust's `{:e}` gives the shortest round-trip digit count, as Python's repr
    // does; where several digit strings of that length round-trip, Python
    // prints the one nearest the exact value (ties to even), which is what
    // Rust's fixed-precision formatting of that length yields.
    let shortest = format!("{:e}", x);
    let k = shortest.split('e').next().map_or(1, |m| m.chars().filter(char::is_ascii_digit).count());
    let sci = format!("{:.*e}", k.saturating_sub(1), x);
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mant) = match mant.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mant),
    };
    let digits: String = mant.chars().filter(|c| *c != '.').collect();
    let decpt = exp + 1; // value = 0.DIGITS * 10^decpt
    let mut out = String::from(sign);
    if !(-3..=16).contains(&decpt) {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(out, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    } else if decpt <= 0 {
        out.push_str("0.");
        out.push_str(&"0".repeat((-decpt) as usize));
        out.push_str(&digits);
    } else {
        let d = decpt as usize;
        if digits.len() <= d {
            out.push_str(&digits);
            out.push_str(&"0".repeat(d - digits.len()));
            out.push_str(".0");
        } else {
            out.push_str(&digits[..d]);
            out.push('.');
            out.push_str(&digits[d..]);
        }
    }
    out
}

/// A JSON string literal exactly as Python's `json.dumps` (`ensure_ascii`)
/// writes it: `\"`, `\\`, the short escapes for `\b \f \n \r \t`, and
/// `\uXXXX` (lower-case hex, surrogate pairs above U+FFFF) for every other
/// character outside `' '..='~'`. Field names are user input (custom fields),
/// so they must be escaped for the dump to stay valid JSON.
///
/// ```
/// use atomzarr::formats::dump::py_json_str;
/// assert_eq!(py_json_str("energy"), "\"energy\"");
/// assert_eq!(py_json_str("a\"b\\c\n"), r#""a\"b\\c\n""#);
/// assert_eq!(py_json_str("é𝛼\u{7f}"), r#""\u00e9\ud835\udefc\u007f""#);
/// ```
pub fn py_json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{:04x}", u);
                }
            }
        }
    }
    out.push('"');
    out
}

fn write_data(out: &mut String, d: &HostData) {
    out.push('[');
    macro_rules! ints {
        ($v:expr) => {
            for (i, x) in $v.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                let _ = write!(out, "{x}");
            }
        };
    }
    match d {
        HostData::Bool(v) => {
            for (i, x) in v.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(if *x { "true" } else { "false" });
            }
        }
        HostData::Int8(v) => ints!(v),
        HostData::Int16(v) => ints!(v),
        HostData::Int32(v) => ints!(v),
        HostData::Int64(v) => ints!(v),
        HostData::UInt8(v) => ints!(v),
        HostData::UInt16(v) => ints!(v),
        HostData::UInt32(v) => ints!(v),
        HostData::UInt64(v) => ints!(v),
        _ => {
            for (i, x) in d.to_f64_vec().into_iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&py_float(x));
            }
        }
    }
    out.push(']');
}

/// Writes every logical sample of `reader` as the fixtures' JSON.
///
/// # Errors
/// The reader's errors (as [`Reader::load_many`]); [`Error::Io`] naming the
/// reader's source when writing to `w` fails.
pub fn dump_json(reader: &dyn Reader, w: &mut dyn Write) -> Result<()> {
    let schema = reader.schema();
    let mut levels = schema.fields;
    levels.extend(schema.strings);
    let mut out = String::new();
    let _ = write!(out, "{{\"num_samples\": {}, \"fields\": {{", reader.len());
    for (i, (name, level)) in levels.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{}: \"{level}\"", py_json_str(name));
    }
    out.push_str("}, \"samples\": [");
    const STEP: usize = 1024;
    let io = |e: std::io::Error| Error::io(std::path::Path::new(reader.name()), e);
    for start in (0..reader.len()).step_by(STEP) {
        let idx: Vec<usize> = (start..(start + STEP).min(reader.len())).collect();
        for (k, s) in reader.load_many(&idx)?.iter().enumerate() {
            if start + k > 0 {
                out.push_str(", ");
            }
            out.push('{');
            // Fields and string labels in one name order (names are distinct).
            let mut names: Vec<&String> = s.fields.keys().chain(s.strings.keys()).collect();
            names.sort();
            for (j, name) in names.into_iter().enumerate() {
                if j > 0 {
                    out.push_str(", ");
                }
                if let Some(f) = s.fields.get(name) {
                    let shape: Vec<String> = f.shape.iter().map(ToString::to_string).collect();
                    let _ = write!(
                        out,
                        "{}: {{\"dtype\": \"{}\", \"shape\": [{}], \"data\": ",
                        py_json_str(name),
                        f.dtype(),
                        shape.join(", ")
                    );
                    write_data(&mut out, &f.data);
                } else if let Some(f) = s.strings.get(name) {
                    let _ = write!(
                        out,
                        "{}: {{\"dtype\": \"string\", \"shape\": [{}], \"data\": [",
                        py_json_str(name),
                        f.values.len()
                    );
                    for (k, v) in f.values.iter().enumerate() {
                        if k > 0 {
                            out.push_str(", ");
                        }
                        out.push_str(&py_json_str(v));
                    }
                    out.push(']');
                }
                out.push('}');
            }
            out.push('}');
        }
        w.write_all(out.as_bytes()).map_err(io)?;
        out.clear();
    }
    out.push_str("]}");
    w.write_all(out.as_bytes()).map_err(io)?;
    Ok(())
}
