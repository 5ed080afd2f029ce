//! Chemical symbols to atomic numbers. A fixed table of 118 names is
//! smaller than any periodic-table crate and cannot change under us.

const SYMBOLS: [&str; 118] = [
    "H", "He", "Li", "Be", "B", "C", "N", "O", "F", "Ne", "Na", "Mg", "Al", "Si", "P", "S", "Cl", "Ar", "K", "Ca",
    "Sc", "Ti", "V", "Cr", "Mn", "Fe", "Co", "Ni", "Cu", "Zn", "Ga", "Ge", "As", "Se", "Br", "Kr", "Rb", "Sr", "Y",
    "Zr", "Nb", "Mo", "Tc", "Ru", "Rh", "Pd", "Ag", "Cd", "In", "Sn", "Sb", "Te", "I", "Xe", "Cs", "Ba", "La", "Ce",
    "Pr", "Nd", "Pm", "Sm", "Eu", "Gd", "Tb", "Dy", "Ho", "Er", "Tm", "Yb", "Lu", "Hf", "Ta", "W", "Re", "Os", "Ir",
    "Pt", "Au", "Hg", "Tl", "Pb", "Bi", "Po", "At", "Rn", "Fr", "Ra", "Ac", "Th", "Pa", "U", "Np", "Pu", "Am", "Cm",
    "Bk", "Cf", "Es", "Fm", "Md", "No", "Lr", "Rf", "Db", "Sg", "Bh", "Hs", "Mt", "Ds", "Rg", "Cn", "Nh", "Fl", "Mc",
    "Lv", "Ts", "Og",
];

/// Atomic numbers by (first letter, second letter or none), built once:
/// lookups on the import's hot path neither allocate nor search.
fn table() -> &'static [[u8; 27]; 26] {
    static TABLE: std::sync::OnceLock<[[u8; 27]; 26]> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = [[0u8; 27]; 26];
        for (k, s) in SYMBOLS.iter().enumerate() {
            let b = s.as_bytes();
            let second = b.get(1).map_or(0, |c| (c - b'a') as usize + 1);
            t[(b[0] - b'A') as usize][second] = (k + 1) as u8;
        }
        t
    })
}

/// The atomic number of a symbol, capitalised first as ASE does (`CU`, `cu`
/// and `Cu` are copper); `X` (ASE's dummy atom) is 0.
pub(crate) fn atomic_number(symbol: &str) -> Option<i64> {
    let b = symbol.as_bytes();
    if b.is_empty() || b.len() > 2 || !b.iter().all(u8::is_ascii_alphabetic) {
        return None;
    }
    let first = (b[0].to_ascii_uppercase() - b'A') as usize;
    let second = b.get(1).map_or(0, |c| (c.to_ascii_lowercase() - b'a') as usize + 1);
    match table()[first][second] {
        0 if b.len() == 1 && first == (b'X' - b'A') as usize => Some(0),
        0 => None,
        z => Some(i64::from(z)),
    }
}

/// The symbol of an atomic number (1..=118).
pub(crate) fn symbol(z: i64) -> Option<&'static str> {
    usize::try_from(z).ok().and_then(|z| z.checked_sub(1)).and_then(|k| SYMBOLS.get(k)).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbols_round_trip() {
        assert_eq!(atomic_number("H"), Some(1));
        assert_eq!(atomic_number("cu"), Some(29));
        assert_eq!(atomic_number("OG"), Some(118));
        assert_eq!(atomic_number("Xx"), None);
        for z in 1..=118 {
            assert_eq!(atomic_number(symbol(z).unwrap()), Some(z));
        }
    }
}
