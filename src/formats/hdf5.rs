//! HDF5 in the SPICE and ANI-1x layouts (feature `hdf5`: `hdf5-reader`, a
//! pure-Rust reader of gzip-compressed chunked datasets and h5py's
//! variable-length strings; no libhdf5 needed).
//!
//! Both have one group per molecule (SPICE) or per formula (ANI-1x), each
//! holding per-conformer datasets; the layout is told from the first
//! group's dataset names:
//!
//! | layout | atoms | positions | energy (default key) | forces (default key) | units |
//! |---|---|---|---|---|---|
//! | SPICE | `atomic_numbers` | `conformations` (bohr) | `dft_total_energy` | `dft_total_gradient` (negated: a gradient) | hartree, bohr |
//! | ANI-1x | `atomic_numbers` | `coordinates` (Å) | `wb97x_dz.energy` | `wb97x_dz.forces` | hartree, Å |
//!
//! `--energy-key` / `--forces-key` pick another level of theory (a forces
//! key with `gradient` in its name is negated). Every other dataset with one
//! entry per conformer becomes a field (`[m]`: system `[1]`; `[m, n_atoms,
//! ...]`: atom `[n, ...]`; else system `[1, ...]`); names ending in
//! `energy` convert as energies, `forces` as forces, the rest is kept as
//! stored. NaN (ANI-1x's "not computed at this level") stays NaN: an absent
//! label. One-element string datasets (`smiles`, `subset`) become string
//! labels, and the group's name the label `molecule` (SPICE) or `formula`
//! (ANI-1x). Frames are molecules (zero cell, no periodicity).
//!
//! A group is read whole, then handed out a batch at a time: memory holds
//! the largest group's datasets (SPICE: tens of conformers; ANI-1x: up to a
//! few thousand of one formula).

use std::path::{Path, PathBuf};

use hdf5_reader::group::Group;
use hdf5_reader::{Dataset, Datatype, Hdf5File};

use crate::data::{AtomicData, Field, HostData, Level, StringField};
use crate::error::{Error, Result};
use crate::formats::units::{Energy, Factors, Length, Stress, Units, scale_f32};
use crate::formats::{Frame, FrameOptions, Frames};

/// Which layout a file has.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Layout {
    Spice,
    Ani,
}

/// A per-conformer dataset read whole.
struct Column {
    name: String,
    shape: Vec<usize>,
    data: HostData,
}

/// One group, read: its conformers handed out in order.
struct Loaded {
    name: String,
    numbers: Vec<i64>,
    positions: Vec<f64>,
    energy: Option<Vec<f64>>,
    forces: Option<Vec<f64>>,
    extra: Vec<(Column, f64)>,
    labels: Vec<(String, String)>,
    conformers: usize,
    next: usize,
}

/// Streams the conformers of a SPICE or ANI-1x file.
pub struct Hdf5Frames {
    path: PathBuf,
    layout: Layout,
    units: Units,
    factors: Factors,
    groups: Vec<Group>,
    next_group: usize,
    current: Option<Loaded>,
    energy_key: String,
    forces_key: String,
    frames: usize,
}

fn h5err(path: &Path, field: &str, e: impl std::fmt::Display) -> Error {
    Error::in_file(path, field, e)
}

/// A numeric dataset as f64 (floats) or i64 (integers) in a [`HostData`].
fn read_numeric(path: &Path, d: &Dataset) -> Result<Option<HostData>> {
    let e = |x: hdf5_reader::error::Error| h5err(path, d.name(), x);
    Ok(Some(match d.dtype() {
        Datatype::FloatingPoint { size: 4, .. } => {
            HostData::Float64(d.read_array::<f32>().map_err(e)?.iter().map(|&x| f64::from(x)).collect())
        }
        Datatype::FloatingPoint { size: 8, .. } => {
            HostData::Float64(d.read_array::<f64>().map_err(e)?.iter().copied().collect())
        }
        Datatype::FixedPoint { size, signed, .. } => {
            let v: Vec<i64> = match (size, signed) {
                (1, true) => d.read_array::<i8>().map_err(e)?.iter().map(|&x| i64::from(x)).collect(),
                (1, false) => d.read_array::<u8>().map_err(e)?.iter().map(|&x| i64::from(x)).collect(),
                (2, true) => d.read_array::<i16>().map_err(e)?.iter().map(|&x| i64::from(x)).collect(),
                (2, false) => d.read_array::<u16>().map_err(e)?.iter().map(|&x| i64::from(x)).collect(),
                (4, true) => d.read_array::<i32>().map_err(e)?.iter().map(|&x| i64::from(x)).collect(),
                (4, false) => d.read_array::<u32>().map_err(e)?.iter().map(|&x| i64::from(x)).collect(),
                (8, true) => d.read_array::<i64>().map_err(e)?.iter().copied().collect(),
                // Values above i64::MAX wrap; counts and ids never get there.
                (8, false) => d.read_array::<u64>().map_err(e)?.iter().map(|&x| x as i64).collect(),
                _ => return Ok(None),
            };
            HostData::Int64(v)
        }
        _ => return Ok(None),
    }))
}

fn is_string(d: &Dataset) -> bool {
    matches!(d.dtype(), Datatype::String { .. } | Datatype::VarLen { .. })
}

impl Hdf5Frames {
    /// Opens a file; the layout comes from the first group's dataset names.
    ///
    /// # Errors
    /// [`Error::Parse`] naming `path` when it is not an HDF5 file, has no
    /// groups, or its first group holds neither SPICE nor ANI-1x datasets.
    pub fn open(path: &Path, options: &FrameOptions) -> Result<Hdf5Frames> {
        let file = Hdf5File::open(path).map_err(|e| h5err(path, "hdf5", e))?;
        let root = file.root_group().map_err(|e| h5err(path, "hdf5", e))?;
        let groups = root.groups().map_err(|e| h5err(path, "hdf5", e))?;
        let first =
            groups.first().ok_or_else(|| h5err(path, "hdf5", "no groups (SPICE and ANI-1x have one per molecule)"))?;
        let (_, names) = first.member_names().map_err(|e| h5err(path, first.name(), e))?;
        let has = |k: &str| names.iter().any(|n| n == k);
        let layout = if has("conformations") {
            Layout::Spice
        } else if has("coordinates") {
            Layout::Ani
        } else {
            return Err(h5err(
                path,
                first.name(),
                format!("neither SPICE (conformations) nor ANI-1x (coordinates) datasets: {names:?}"),
            ));
        };
        let own = match layout {
            Layout::Spice => Units { energy: Energy::Hartree, length: Length::Bohr, stress: Stress::EnergyPerVolume },
            Layout::Ani => Units { energy: Energy::Hartree, length: Length::Angstrom, stress: Stress::EnergyPerVolume },
        };
        let units = options.units().unwrap_or(own);
        let (e, f) = match layout {
            Layout::Spice => ("dft_total_energy", "dft_total_gradient"),
            Layout::Ani => ("wb97x_dz.energy", "wb97x_dz.forces"),
        };
        Ok(Hdf5Frames {
            path: path.to_path_buf(),
            layout,
            units,
            factors: units.factors(),
            groups,
            next_group: 0,
            current: None,
            energy_key: options.energy_key().unwrap_or(e).to_string(),
            forces_key: options.forces_key().unwrap_or(f).to_string(),
            frames: 0,
        })
    }

    /// `spice` or `ani1x`.
    pub fn layout(&self) -> &'static str {
        match self.layout {
            Layout::Spice => "spice",
            Layout::Ani => "ani1x",
        }
    }

    /// The units the file is read in.
    pub fn units(&self) -> Units {
        self.units
    }

    fn load(&self, g: &Group) -> Result<Loaded> {
        let path = &self.path;
        let gname = g.name().to_string();
        let bad = |field: &str, r: String| h5err(path, &format!("{gname}/{field}"), r);
        let datasets = g.datasets().map_err(|e| h5err(path, &gname, e))?;
        let get = |k: &str| datasets.iter().find(|d| d.name() == k);
        let pos_key = if self.layout == Layout::Spice { "conformations" } else { "coordinates" };
        let numbers = match get("atomic_numbers").map(|d| read_numeric(path, d)).transpose()?.flatten() {
            Some(HostData::Int64(v)) => v,
            _ => return Err(bad("atomic_numbers", "missing, or not integers".into())),
        };
        let n = numbers.len();
        let pos_set = get(pos_key).ok_or_else(|| bad(pos_key, "missing".into()))?;
        let shape: Vec<usize> = pos_set.shape().iter().map(|&x| x as usize).collect();
        if shape.len() != 3 || shape[1] != n || shape[2] != 3 {
            return Err(bad(pos_key, format!("shape {shape:?}, expected [conformers, {n}, 3]")));
        }
        let m = shape[0];
        let positions =
            read_numeric(path, pos_set)?.map(|d| d.to_f64_vec()).ok_or_else(|| bad(pos_key, "not numbers".into()))?;
        let per_conf = |d: &Dataset, want_row: usize| -> Result<Vec<f64>> {
            let s: Vec<usize> = d.shape().iter().map(|&x| x as usize).collect();
            let row: usize = s.iter().skip(1).product();
            if s.first() != Some(&m) || row != want_row {
                return Err(bad(d.name(), format!("shape {s:?}, expected [{m}] rows of {want_row}")));
            }
            read_numeric(path, d)?.map(|x| x.to_f64_vec()).ok_or_else(|| bad(d.name(), "not numbers".into()))
        };
        let energy = get(&self.energy_key).map(|d| per_conf(d, 1)).transpose()?;
        let mut forces = get(&self.forces_key).map(|d| per_conf(d, 3 * n)).transpose()?;
        if self.forces_key.contains("gradient")
            && let Some(f) = forces.as_mut()
        {
            f.iter_mut().for_each(|x| *x = -*x);
        }
        let mut extra = Vec::new();
        let mut labels =
            vec![(if self.layout == Layout::Spice { "molecule" } else { "formula" }.to_string(), gname.clone())];
        for d in &datasets {
            let name = d.name();
            if [pos_key, "atomic_numbers", self.energy_key.as_str(), self.forces_key.as_str()].contains(&name) {
                continue;
            }
            let s: Vec<usize> = d.shape().iter().map(|&x| x as usize).collect();
            if is_string(d) {
                let v = d.read_strings().map_err(|e| h5err(path, name, e))?;
                match v.as_slice() {
                    [one] => labels.push((name.to_string(), one.clone())),
                    _ => log::warn!(
                        "{}: {gname}/{name}: {} strings, not one per group; not kept",
                        path.display(),
                        v.len()
                    ),
                }
                continue;
            }
            if s.first() != Some(&m) {
                log::warn!("{}: {gname}/{name}: shape {s:?} is not per conformer; not kept", path.display());
                continue;
            }
            let Some(data) = read_numeric(path, d)? else {
                log::warn!("{}: {gname}/{name}: a type other than numbers or strings; not kept", path.display());
                continue;
            };
            let low = name.to_ascii_lowercase();
            let factor = if low.ends_with("energy") {
                self.factors.energy
            } else if low.ends_with("forces") {
                self.factors.forces
            } else {
                1.0
            };
            extra.push((Column { name: name.to_string(), shape: s, data }, factor));
        }
        Ok(Loaded { name: gname, numbers, positions, energy, forces, extra, labels, conformers: m, next: 0 })
    }

    fn frame(&self, g: &Loaded, k: usize, record: usize) -> Result<AtomicData> {
        let path = &self.path;
        let f = &self.factors;
        let n = g.numbers.len();
        let mut d = AtomicData::default();
        let put = |d: &mut AtomicData, name: &str, level: Level, shape: Vec<usize>, data: HostData| -> Result<()> {
            let field = Field::new(level, shape, data).map_err(|e| Error::Parse {
                file: path.clone(),
                line: record,
                field: format!("{}/{name}", g.name),
                reason: e.to_string(),
            })?;
            d.fields.insert(name.to_string(), field);
            Ok(())
        };
        let rows = |v: &[f64], width: usize, factor: f64| -> Vec<f32> {
            v[k * width..(k + 1) * width].iter().map(|&x| scale_f32(x, factor)).collect()
        };
        put(&mut d, "atomic_numbers", Level::Atom, vec![n], g.numbers.clone().into())?;
        put(&mut d, "positions", Level::Atom, vec![n, 3], rows(&g.positions, 3 * n, f.length).into())?;
        put(&mut d, "cell", Level::System, vec![1, 3, 3], vec![0f32; 9].into())?;
        put(&mut d, "pbc", Level::System, vec![1, 3], vec![false; 3].into())?;
        if let Some(e) = &g.energy {
            put(&mut d, "energy", Level::System, vec![1, 1], rows(e, 1, f.energy).into())?;
        }
        if let Some(fo) = &g.forces {
            put(&mut d, "forces", Level::Atom, vec![n, 3], rows(fo, 3 * n, f.forces).into())?;
        }
        for (c, factor) in &g.extra {
            let width: usize = c.shape.iter().skip(1).product();
            let (level, shape) = match c.shape.as_slice() {
                [_] => (Level::System, vec![1]),
                [_, a, rest @ ..] if *a == n => (Level::Atom, std::iter::once(n).chain(rest.iter().copied()).collect()),
                [_, rest @ ..] => (Level::System, std::iter::once(1).chain(rest.iter().copied()).collect()),
                [] => continue,
            };
            let data: HostData = match &c.data {
                HostData::Float64(v) => rows(v, width, *factor).into(),
                HostData::Int64(v) => v[k * width..(k + 1) * width].to_vec().into(),
                _ => continue,
            };
            put(&mut d, &c.name, level, shape, data)?;
        }
        for (name, value) in &g.labels {
            d.strings.insert(name.clone(), StringField::system(value.clone()));
        }
        Ok(d)
    }
}

impl Frames for Hdf5Frames {
    fn next_batch(&mut self, max_frames: usize) -> Result<Option<Vec<Frame>>> {
        let mut out = Vec::new();
        while out.len() < max_frames.max(1) {
            let exhausted = self.current.as_ref().is_none_or(|g| g.next >= g.conformers);
            if exhausted {
                let Some(g) = self.groups.get(self.next_group) else { break };
                let loaded = self.load(g)?;
                self.next_group += 1;
                self.current = Some(loaded);
                continue;
            }
            let Some(g) = self.current.take() else { break };
            let take = (max_frames.max(1) - out.len()).min(g.conformers - g.next);
            for k in g.next..g.next + take {
                self.frames += 1;
                out.push(Frame { line: self.frames, data: self.frame(&g, k, self.frames)? });
            }
            self.current = Some(Loaded { next: g.next + take, ..g });
        }
        Ok(if out.is_empty() { None } else { Some(out) })
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn progress(&self) -> (u64, u64) {
        (self.next_group as u64, self.groups.len() as u64)
    }
}
