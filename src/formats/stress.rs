//! A stress (or virial) as files give it, made the store's 3×3 matrix.
//!
//! ASE keeps what the calculator gave: 6 Voigt components (`xx yy zz yz xz
//! xy`) or a 3×3 matrix, which JSON-based formats write nested and others
//! flat. Every importer goes through [`to_matrix`], so each accepts both.

use serde::Deserialize;

/// The order of 9 flat values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NineOrder {
    /// Row after row (ASE's databases, numpy's default).
    RowMajor,
    /// Column after column (ASE's extended XYZ, Fortran order).
    ColumnMajor,
}

/// A stress in a JSON document: flat (6 or 9 numbers) or nested (3 rows of 3).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum JsonStress {
    /// 6 Voigt components or 9 numbers, row-major.
    Flat(Vec<f64>),
    /// A 3×3 matrix, a row per list.
    Rows(Vec<Vec<f64>>),
}

impl JsonStress {
    /// The values, flat and row-major.
    ///
    /// # Errors
    /// A reason when the rows are not 3 rows of 3.
    pub(crate) fn flat(&self) -> Result<Vec<f64>, String> {
        match self {
            JsonStress::Flat(v) => Ok(v.clone()),
            JsonStress::Rows(rows) if rows.len() == 3 && rows.iter().all(|r| r.len() == 3) => {
                Ok(rows.iter().flatten().copied().collect())
            }
            JsonStress::Rows(rows) => Err(format!(
                "a matrix of {} rows of {:?} values, expected 3 rows of 3",
                rows.len(),
                rows.iter().map(Vec::len).collect::<Vec<_>>()
            )),
        }
    }
}

/// The 3×3 matrix, row-major, of 6 Voigt components or 9 values in `order`.
///
/// # Errors
/// A reason when there are neither 6 nor 9 values.
pub(crate) fn to_matrix(v: &[f64], order: NineOrder) -> Result<[f64; 9], String> {
    match (v.len(), order) {
        (9, NineOrder::RowMajor) => Ok(std::array::from_fn(|k| v[k])),
        (9, NineOrder::ColumnMajor) => Ok(std::array::from_fn(|k| v[(k % 3) * 3 + k / 3])),
        // Voigt: xx yy zz yz xz xy.
        (6, _) => Ok([v[0], v[5], v[4], v[5], v[1], v[3], v[4], v[3], v[2]]),
        (k, _) => Err(format!("{k} values, expected 6 (Voigt: xx yy zz yz xz xy) or 9 (a 3x3 matrix)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn voigt_and_both_nine_orders_give_one_matrix() {
        let m = [1.0, 6.0, 5.0, 6.0, 2.0, 4.0, 5.0, 4.0, 3.0];
        assert_eq!(to_matrix(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], NineOrder::RowMajor), Ok(m));
        let rows = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0];
        let cols = [1.0, 4.0, 7.0, 2.0, 5.0, 8.0, 3.0, 6.0, 9.0];
        assert_eq!(to_matrix(&rows, NineOrder::RowMajor), Ok(rows));
        assert_eq!(to_matrix(&cols, NineOrder::ColumnMajor), Ok(rows));
        assert!(to_matrix(&[1.0; 4], NineOrder::RowMajor).is_err());
        let nested: JsonStress = serde_json::from_str("[[1,2,3],[4,5,6],[7,8,9]]").unwrap();
        assert_eq!(nested.flat(), Ok(rows.to_vec()));
        let ragged: JsonStress = serde_json::from_str("[[1,2,3],[4,5],[7,8,9]]").unwrap();
        assert!(ragged.flat().is_err());
    }
}
