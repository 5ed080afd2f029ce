//! A sample ([`AtomicData`]): named [`Field`]s on the atom, edge and system
//! axes, with typed constructors and validation.

use std::collections::BTreeMap;

use crate::data::{DType, HostData, IndexReport, Level, NEIGHBOR_LIST, StringField};
use crate::error::{Error, Result};

/// One named array of a sample: level, shape and data.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// Atom, edge or system.
    pub level: Level,
    /// Full shape; `shape[0]` is the row count on the level's axis.
    pub shape: Vec<usize>,
    /// Flat row-major data; `data.len() == shape.iter().product()`.
    pub data: HostData,
}

impl Field {
    /// A field, checking that `shape` matches the element count.
    ///
    /// ```
    /// use atomzarr::{Field, Level};
    /// let f = Field::new(Level::Atom, vec![2, 3], vec![0f32; 6]).unwrap();
    /// assert_eq!(f.rows(), 2);
    /// assert!(Field::new(Level::Atom, vec![2, 3], vec![0f32; 5]).is_err());
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `shape` is empty or its product differs
    /// from the element count of `data`.
    pub fn new(level: Level, shape: Vec<usize>, data: impl Into<HostData>) -> Result<Field> {
        let data = data.into();
        let n: usize = shape.iter().product();
        if shape.is_empty() {
            return Err(Error::invalid("field", "shape must have at least one dimension (rows)"));
        }
        if n != data.len() {
            return Err(Error::invalid(
                "field",
                format!("shape {shape:?} holds {n} elements but data has {}", data.len()),
            ));
        }
        Ok(Field { level, shape, data })
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }

    /// Rows on the level's axis (`shape[0]`).
    pub fn rows(&self) -> usize {
        self.shape.first().copied().unwrap_or(0)
    }

    /// Shape without the leading row dimension.
    pub fn trailing_shape(&self) -> &[usize] {
        self.shape.get(1..).unwrap_or(&[])
    }

    /// Elements per row.
    pub fn row_len(&self) -> usize {
        self.trailing_shape().iter().product()
    }
}

/// One atomic structure: named fields on the atom, edge and system axes.
///
/// Build one with the typed constructors, then hand a list to the writer:
///
/// ```
/// use atomzarr::AtomicData;
/// let s = AtomicData::new(vec![1, 8, 1], vec![[0.0, 0.0, 0.0], [0.96, 0.0, 0.0], [-0.24, 0.93, 0.0]])
///     .unwrap()
///     .with_energy(-14.2)
///     .with_forces(vec![[0.0; 3]; 3])
///     .unwrap()
///     .with_neighbor_list(vec![[0, 1], [1, 0]], None)
///     .unwrap();
/// assert_eq!(s.num_atoms(), 3);
/// assert_eq!(s.num_edges(), 2);
/// assert_eq!(s.field("energy").unwrap().shape, vec![1, 1]);
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AtomicData {
    /// Fields by name (sorted, which keeps dumps and comparisons stable).
    pub fields: BTreeMap<String, Field>,
    /// String labels by name (`config_type`, `sid`, ...), kept on the host;
    /// names distinct from the fields'.
    pub strings: BTreeMap<String, StringField>,
}

fn flat3<const N: usize>(v: Vec<[f32; N]>) -> Vec<f32> {
    v.into_iter().flatten().collect()
}

impl AtomicData {
    /// A structure from atomic numbers and positions (Å), the two fields
    /// every sample has.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `atomic_numbers` and `positions` differ in
    /// length.
    pub fn new(atomic_numbers: Vec<i64>, positions: Vec<[f32; 3]>) -> Result<AtomicData> {
        let n = atomic_numbers.len();
        if positions.len() != n {
            return Err(Error::invalid(
                "AtomicData::new",
                format!("{n} atomic numbers but {} positions", positions.len()),
            ));
        }
        let mut d = AtomicData::default();
        d.fields.insert("atomic_numbers".into(), Field::new(Level::Atom, vec![n], atomic_numbers)?);
        d.fields.insert("positions".into(), Field::new(Level::Atom, vec![n, 3], flat3(positions))?);
        Ok(d)
    }

    /// Adds (or replaces) any field.
    pub fn with_field(mut self, name: impl Into<String>, field: Field) -> AtomicData {
        self.fields.insert(name.into(), field);
        self
    }

    /// Adds a per-atom 3-vector field (`forces`, `velocities`, ...).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the field when `v` has a row count other
    /// than the sample's atoms.
    pub fn with_atom_vectors(self, name: &str, v: Vec<[f32; 3]>) -> Result<AtomicData> {
        let n = v.len();
        self.check_rows(name, Level::Atom, n)?;
        Ok(self.with_field(name, Field::new(Level::Atom, vec![n, 3], flat3(v))?))
    }

    /// Adds a per-atom scalar field (`charges`, `atomic_masses`, ...).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the field when `v` has a row count other
    /// than the sample's atoms.
    pub fn with_atom_scalars(self, name: &str, v: impl Into<HostData>) -> Result<AtomicData> {
        let v = v.into();
        let n = v.len();
        self.check_rows(name, Level::Atom, n)?;
        Ok(self.with_field(name, Field::new(Level::Atom, vec![n], v)?))
    }

    /// Forces `[n_atoms, 3]`.
    ///
    /// # Errors
    /// As [`AtomicData::with_atom_vectors`].
    pub fn with_forces(self, forces: Vec<[f32; 3]>) -> Result<AtomicData> {
        self.with_atom_vectors("forces", forces)
    }

    /// Velocities `[n_atoms, 3]`.
    ///
    /// # Errors
    /// As [`AtomicData::with_atom_vectors`].
    pub fn with_velocities(self, v: Vec<[f32; 3]>) -> Result<AtomicData> {
        self.with_atom_vectors("velocities", v)
    }

    /// Partial charges `[n_atoms]`.
    ///
    /// # Errors
    /// As [`AtomicData::with_atom_scalars`].
    pub fn with_charges(self, q: Vec<f32>) -> Result<AtomicData> {
        self.with_atom_scalars("charges", q)
    }

    /// Total energy, stored `[1, 1]` float32.
    pub fn with_energy(self, energy: f32) -> AtomicData {
        self.with_system("energy", vec![1, 1], vec![energy])
    }

    /// Cell vectors (rows), stored `[1, 3, 3]` float32.
    pub fn with_cell(self, cell: [[f32; 3]; 3]) -> AtomicData {
        self.with_system("cell", vec![1, 3, 3], flat3(cell.to_vec()))
    }

    /// Periodic boundary flags, stored `[1, 3]` bool.
    pub fn with_pbc(self, pbc: [bool; 3]) -> AtomicData {
        self.with_system("pbc", vec![1, 3], pbc.to_vec())
    }

    /// Stress (Voigt-free 3x3), stored `[1, 3, 3]` float32.
    pub fn with_stress(self, stress: [[f32; 3]; 3]) -> AtomicData {
        self.with_system("stress", vec![1, 3, 3], flat3(stress.to_vec()))
    }

    /// Any system-level field; `shape[0]` should be 1.
    fn with_system(self, name: &str, shape: Vec<usize>, data: impl Into<HostData>) -> AtomicData {
        let data = data.into();
        // The shapes above are constructed to match their data, so this cannot fail.
        let field = Field { level: Level::System, shape, data };
        self.with_field(name, field)
    }

    /// Neighbor list `[n_edges, 2]` of sample-local atom indices (int64) and,
    /// optionally, periodic `shifts` `[n_edges, 3]` (Å, so that
    /// `r_ij = r_j - r_i + shift_ij`).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `shifts` has a length other than `pairs`'.
    pub fn with_neighbor_list(self, pairs: Vec<[i64; 2]>, shifts: Option<Vec<[f32; 3]>>) -> Result<AtomicData> {
        let e = pairs.len();
        let mut d = self.with_field(
            NEIGHBOR_LIST,
            Field::new(Level::Edge, vec![e, 2], pairs.into_iter().flatten().collect::<Vec<_>>())?,
        );
        if let Some(s) = shifts {
            if s.len() != e {
                return Err(Error::invalid("shifts", format!("{} shifts for {e} edges", s.len())));
            }
            d = d.with_field("shifts", Field::new(Level::Edge, vec![e, 3], flat3(s))?);
        }
        Ok(d)
    }

    /// Adds a custom field at `level` with its full shape.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `shape` does not fit `data`, or an atom or
    /// edge field's row count differs from the sample's on that axis.
    pub fn with_custom(
        self,
        name: &str,
        level: Level,
        shape: Vec<usize>,
        data: impl Into<HostData>,
    ) -> Result<AtomicData> {
        let field = Field::new(level, shape, data)?;
        if level != Level::System {
            self.check_rows(name, level, field.rows())?;
        }
        Ok(self.with_field(name, field))
    }

    fn check_rows(&self, name: &str, level: Level, n: usize) -> Result<()> {
        let have = match level {
            Level::Atom => self.fields.values().find(|f| f.level == Level::Atom).map(Field::rows),
            Level::Edge => self.fields.values().find(|f| f.level == Level::Edge).map(Field::rows),
            Level::System => Some(1),
        };
        match have {
            Some(h) if h != n => {
                Err(Error::invalid(name, format!("{n} rows but the sample has {h} on the {level} axis")))
            }
            _ => Ok(()),
        }
    }

    /// A field by name.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.get(name)
    }

    /// Adds (or replaces) a system-level string label.
    ///
    /// ```
    /// use atomzarr::AtomicData;
    /// let s = AtomicData::new(vec![1], vec![[0.0; 3]]).unwrap().with_string("config_type", "isolated_atom");
    /// assert_eq!(s.string("config_type"), Some("isolated_atom"));
    /// assert_eq!(s.string("sid"), None);
    /// ```
    pub fn with_string(mut self, name: impl Into<String>, value: impl Into<String>) -> AtomicData {
        self.strings.insert(name.into(), StringField::system(value));
        self
    }

    /// A system-level string label by name.
    pub fn string(&self, name: &str) -> Option<&str> {
        self.strings.get(name).filter(|f| f.level == Level::System).and_then(|f| f.values.first()).map(String::as_str)
    }

    /// Atom count (rows of the first atom field; 0 if none).
    pub fn num_atoms(&self) -> usize {
        self.fields.values().find(|f| f.level == Level::Atom).map_or(0, Field::rows)
    }

    /// Edge count (rows of the first edge field; 0 if none).
    pub fn num_edges(&self) -> usize {
        self.fields.values().find(|f| f.level == Level::Edge).map_or(0, Field::rows)
    }

    /// The first neighbor index outside `[0, num_atoms)`, if any, with the
    /// smallest and largest index (`None` also when there is no integer
    /// neighbor list: [`AtomicData::validate`] reports that).
    pub(crate) fn neighbor_report(&self) -> Option<IndexReport> {
        let nl = &self.fields.get(NEIGHBOR_LIST)?.data;
        nl.index_report(0..nl.len(), 0, self.num_atoms() as u64)
    }

    /// Checks the invariants the Dataset validates: atom fields agree on the
    /// atom count, edge fields on the edge count, system fields have one row,
    /// neighbor indices lie in `[0, n_atoms)`, positions are finite.
    ///
    /// # Errors
    /// The first failed check, as a message naming the field (a plain
    /// `String`, which the Dataset reports as [`Error::Validation`] and the
    /// writer as [`Error::InvalidInput`]).
    pub fn validate(&self) -> std::result::Result<(), String> {
        let n = self.num_atoms();
        let e = self.num_edges();
        for (name, f) in &self.fields {
            if f.data.len() != f.shape.iter().product::<usize>() {
                return Err(format!("{name}: shape {:?} does not match {} elements", f.shape, f.data.len()));
            }
            match f.level {
                Level::Atom if f.rows() != n => {
                    return Err(format!("{name}: {} rows, expected {n} atoms", f.rows()));
                }
                Level::Edge if f.rows() != e => {
                    return Err(format!("{name}: {} rows, expected {e} edges", f.rows()));
                }
                Level::System if f.rows() != 1 => {
                    return Err(format!("{name}: system field with {} rows, expected 1", f.rows()));
                }
                _ => {}
            }
        }
        for (name, f) in &self.strings {
            let want = match f.level {
                Level::System => 1,
                Level::Atom => n,
                Level::Edge => return Err(format!("{name}: string labels are system or atom level, not edge")),
            };
            if f.values.len() != want {
                return Err(format!("{name}: {} strings, expected {want} ({} level)", f.values.len(), f.level));
            }
            if self.fields.contains_key(name) {
                return Err(format!("{name}: both a field and a string label"));
            }
        }
        if let Some(nl) = self.fields.get(NEIGHBOR_LIST) {
            let idx = nl
                .data
                .to_i64_vec()
                .ok_or_else(|| format!("neighbor_list: dtype {} is not an integer type", nl.dtype()))?;
            if let Some(bad) = idx.iter().find(|&&i| i < 0 || i as usize >= n) {
                return Err(format!("neighbor_list: index {bad} outside [0, {n})"));
            }
        }
        if let Some(p) = self.fields.get("positions")
            && p.data.to_f64_vec().iter().any(|x| !x.is_finite())
        {
            return Err("positions: non-finite value".into());
        }
        Ok(())
    }
}
