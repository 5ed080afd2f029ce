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

/// The atomic number of a symbol, capitalised first as ASE does (`CU`, `cu`
/// and `Cu` are copper); `X` (ASE's dummy atom) is 0.
pub(crate) fn atomic_number(symbol: &str) -> Option<i64> {
    let mut chars = symbol.chars();
    let first = chars.next()?;
    let mut cap = String::with_capacity(symbol.len());
    cap.push(first.to_ascii_uppercase());
    cap.extend(chars.map(|c| c.to_ascii_lowercase()));
    if cap == "X" {
        return Some(0);
    }
    SYMBOLS.iter().position(|&s| s == cap).map(|k| k as i64 + 1)
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
