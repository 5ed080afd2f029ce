//! String labels of a sample ([`StringField`]): `config_type`, `sid`,
//! `mp_id`, frame ids, SMILES, subsets. They live beside the numeric
//! fields ([`AtomicData::strings`](crate::AtomicData::strings)), never in a
//! tensor: a batch carries them on the host
//! ([`CollatedBatch::strings`](crate::CollatedBatch::strings)), for splits,
//! per-config weights and provenance.
//!
//! A label a frame does not have is the empty string (see
//! `docs/LABELS.md`).

use crate::data::Level;

/// One string label: one string per row of its level (a system label has
/// one, an atom label one per atom). Edge-level strings do not exist.
///
/// ```
/// use atomzarr::{Level, data::StringField};
/// let f = StringField::system("bulk");
/// assert_eq!((f.level, f.values.as_slice()), (Level::System, ["bulk".to_string()].as_slice()));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StringField {
    /// System (one value) or atom (one per atom).
    pub level: Level,
    /// The values, one per row.
    pub values: Vec<String>,
}

impl StringField {
    /// A system-level label (one value).
    pub fn system(value: impl Into<String>) -> StringField {
        StringField { level: Level::System, values: vec![value.into()] }
    }

    /// An atom-level label (one value per atom).
    pub fn atoms(values: Vec<String>) -> StringField {
        StringField { level: Level::Atom, values }
    }
}
