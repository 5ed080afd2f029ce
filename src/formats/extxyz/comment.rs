//! The comment line of an extended-XYZ frame: `key=value` pairs, parsed as
//! ASE's `key_val_str_to_dict` parses them (quotes, `{}` and `[]` delimit
//! values, a backslash escapes, a bare key means `T`; values become ints,
//! floats, bools or arrays of them when every token converts, else stay
//! strings).

/// A parsed value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Int(Vec<i64>),
    Float(Vec<f64>),
    Bool(Vec<bool>),
    Str(String),
}

impl Value {
    /// Numbers as f64 (ints widened), `None` for bools and strings.
    pub(crate) fn numbers(&self) -> Option<Vec<f64>> {
        match self {
            Value::Int(v) => Some(v.iter().map(|&x| x as f64).collect()),
            Value::Float(v) => Some(v.clone()),
            _ => None,
        }
    }
}

fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "T" | "true" | "True" | "TRUE" => Some(true),
        "F" | "false" | "False" | "FALSE" => Some(false),
        _ => None,
    }
}

/// Converts a value string the way ASE does: all tokens (split on
/// whitespace and commas) ints, else all floats, else all bools, else the
/// string itself.
pub(crate) fn convert(key: &str, raw: &str) -> Value {
    if key.eq_ignore_ascii_case("uid") {
        return Value::Str(raw.to_string());
    }
    let tokens: Vec<&str> = raw.split(|c: char| c.is_whitespace() || c == ',').filter(|t| !t.is_empty()).collect();
    if tokens.is_empty() {
        return Value::Str(raw.to_string());
    }
    if let Ok(v) = tokens.iter().map(|t| t.parse::<i64>()).collect::<Result<Vec<_>, _>>() {
        return Value::Int(v);
    }
    if let Ok(v) = tokens.iter().map(|t| t.parse::<f64>()).collect::<Result<Vec<_>, _>>() {
        return Value::Float(v);
    }
    if let Some(v) = tokens.iter().map(|t| parse_bool(t)).collect::<Option<Vec<_>>>() {
        return Value::Bool(v);
    }
    Value::Str(raw.to_string())
}

/// Splits a comment line into `(key, raw value)` pairs, in order. `Err`
/// names an unclosed delimiter.
pub(crate) fn split_pairs(line: &str) -> Result<Vec<(String, Option<String>)>, String> {
    // Each entry: the key's characters, then one list per '='-separated part.
    let mut pairs: Vec<Vec<String>> = vec![vec![String::new()]];
    let mut closing: Option<char> = None;
    let mut escaped = false;
    for ch in line.trim().chars() {
        let cur = pairs.last_mut().and_then(|p| p.last_mut());
        let Some(cur) = cur else { continue };
        if escaped {
            cur.push(ch);
            escaped = false;
        } else if ch == '\\' {
            escaped = true;
        } else if let Some(c) = closing {
            if ch == c {
                closing = None;
            } else {
                cur.push(ch);
            }
        } else if let Some(c) = match ch {
            '"' => Some('"'),
            '\'' => Some('\''),
            '{' => Some('}'),
            '[' => Some(']'),
            _ => None,
        } {
            closing = Some(c);
        } else if ch.is_whitespace() {
            let last = pairs.last().map(|p| p.len() == 1 && p[0].is_empty()).unwrap_or(true);
            let empty_part = pairs.last().and_then(|p| p.last()).is_some_and(String::is_empty);
            if last || empty_part {
                continue;
            }
            pairs.push(vec![String::new()]);
        } else if ch == '=' {
            // `key =value`: the '=' belongs to the previous key (as in ASE).
            if pairs.len() > 1 && pairs.last().is_some_and(|p| p.len() == 1 && p[0].is_empty()) {
                pairs.pop();
            }
            if let Some(p) = pairs.last_mut() {
                p.push(String::new());
            }
        } else {
            cur.push(ch);
        }
    }
    if let Some(c) = closing {
        return Err(format!("unclosed value (missing {c})"));
    }
    Ok(pairs
        .into_iter()
        .filter(|p| !(p.len() == 1 && p[0].is_empty()))
        .map(|mut p| {
            let key = p.remove(0);
            let value = (!p.is_empty()).then(|| p.join("="));
            (key, value)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_and_values_follow_ase() {
        let p =
            split_pairs(r#"Lattice="1 0 0 0 1 0 0 0 1" pbc="T T F" energy=-1.5 flag name="a b" v={1,2} s=x\ y k2 =7"#)
                .unwrap();
        let keys: Vec<&str> = p.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["Lattice", "pbc", "energy", "flag", "name", "v", "s", "k2"]);
        assert_eq!(p[7].1.as_deref(), Some("7"));
        assert_eq!(p[3].1, None);
        assert_eq!(convert("pbc", p[1].1.as_deref().unwrap()), Value::Bool(vec![true, true, false]));
        assert_eq!(convert("energy", "-1.5"), Value::Float(vec![-1.5]));
        assert_eq!(convert("v", "1,2"), Value::Int(vec![1, 2]));
        assert_eq!(convert("name", "a b"), Value::Str("a b".into()));
        assert_eq!(p[6].1.as_deref(), Some("x y"));
        assert_eq!(convert("uid", "12"), Value::Str("12".into()));
        assert!(split_pairs(r#"a="1 2"#).is_err());
    }
}
