//! numpy `.npz` archives in the rMD17 and sGDML (MD17, MD22) key sets,
//! streamed frame by frame.
//!
//! | key set | atoms | positions | energies | forces | units |
//! |---|---|---|---|---|---|
//! | rMD17 | `nuclear_charges` | `coords` | `energies` | `forces` | kcal/mol, Å |
//! | sGDML | `z` | `R` | `E` (`[m]` or `[m,1]`) | `F` | `e_unit` / `r_unit` when present, else kcal/mol, Å |
//!
//! Every other array whose first axis has one entry per frame becomes a
//! field (`[m]`: system `[1]`; `[m, n_atoms, ...]`: atom `[n, ...]`; else
//! system `[1, ...]`); names holding `energ` convert as energies, `force`
//! as forces, the rest is kept as stored. A 0-d string array (`name`,
//! `theory`) becomes a string label of every frame (`e_unit`, `r_unit`,
//! `md5`, `type` are bookkeeping and are not kept). An sGDML `lattice`
//! gives the cell (periodic); otherwise frames are molecules (zero cell,
//! no periodicity).
//!
//! The zip's central directory is read with the `zip` crate; each array's
//! bytes are then read straight from the file at its offset (stored, or
//! deflated as `savez_compressed` writes them), rows as they are needed, so
//! memory holds one batch of frames. `.npy` headers are parsed here: the
//! format is a short Python-literal dict (`descr`, `fortran_order`,
//! `shape`) and a crate would add nothing to reading rows from an offset.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::data::{AtomicData, Field, HostData, Level, StringField};
use crate::error::{Error, Result};
use crate::formats::units::{Energy, Factors, Length, Stress, Units, scale_f32};
use crate::formats::{Frame, Frames};

/// An array's element type.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Float,
    Int {
        signed: bool,
    },
    Bool,
    /// `<U`: UCS-4 code points.
    Unicode,
    /// `|S`: bytes.
    Bytes,
}

/// An `.npy` header.
#[derive(Debug, Clone)]
struct Header {
    kind: Kind,
    size: usize,
    little: bool,
    shape: Vec<usize>,
}

impl Header {
    fn row_elems(&self) -> usize {
        self.shape.iter().skip(1).product()
    }
    fn elems(&self) -> usize {
        self.shape.iter().product()
    }
}

/// A value of the header dict: `'<f8'`, `False`, `(4, 9, 3)`.
fn header_value<'a>(dict: &'a str, key: &str) -> Option<&'a str> {
    let at = dict.find(&format!("'{key}'"))? + key.len() + 2;
    let rest = dict[at..].trim_start().strip_prefix(':')?.trim_start();
    let end = match rest.chars().next()? {
        '(' => rest.find(')')? + 1,
        '\'' => rest[1..].find('\'')? + 2,
        _ => rest.find([',', '}']).unwrap_or(rest.len()),
    };
    Some(rest[..end].trim())
}

fn parse_header(text: &str) -> std::result::Result<Header, String> {
    let descr = header_value(text, "descr").ok_or("no descr")?.trim_matches('\'');
    if header_value(text, "fortran_order") != Some("False") {
        return Err("Fortran-ordered arrays are not supported (save with C order)".into());
    }
    let shape_txt = header_value(text, "shape").ok_or("no shape")?;
    let shape = shape_txt
        .trim_matches(|c| c == '(' || c == ')')
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<usize>().map_err(|_| format!("shape {shape_txt}")))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let (order, rest) = descr.split_at(1.min(descr.len()));
    let little = order != ">";
    let (code, n) = rest.split_at(1.min(rest.len()));
    let n: usize = n.parse().map_err(|_| format!("dtype {descr}"))?;
    let (kind, size) = match code {
        "f" if n == 4 || n == 8 => (Kind::Float, n),
        "i" => (Kind::Int { signed: true }, n),
        "u" => (Kind::Int { signed: false }, n),
        "b" => (Kind::Bool, 1),
        "U" => (Kind::Unicode, 4 * n),
        "S" => (Kind::Bytes, n),
        _ => return Err(format!("dtype {descr} is not supported")),
    };
    Ok(Header { kind, size, little, shape })
}

/// One array of the archive, read row by row from its offset.
struct NpyStream {
    name: String,
    header: Header,
    input: Box<dyn Read + Send>,
    rows_read: usize,
}

/// Where an entry's bytes are.
struct EntryLoc {
    start: u64,
    len: u64,
    deflated: bool,
}

fn entry_locations(path: &Path) -> Result<BTreeMap<String, EntryLoc>> {
    let bad = |r: String| Error::in_file(path, "npz", r);
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let mut zip = zip::ZipArchive::new(BufReader::new(file)).map_err(|e| bad(format!("not a zip archive ({e})")))?;
    let mut out = BTreeMap::new();
    for i in 0..zip.len() {
        let f = zip.by_index_raw(i).map_err(|e| bad(e.to_string()))?;
        let name = f.name().trim_end_matches(".npy").to_string();
        // Deflate is read here (flate2), so the zip crate is built without
        // its decompressors and reports method 8 as unsupported.
        let deflated = match f.compression() {
            zip::CompressionMethod::Stored => false,
            m if m == zip::CompressionMethod::DEFLATE => true,
            other => return Err(bad(format!("{name}: compression {other:?} (numpy writes stored or deflated)"))),
        };
        let start = f.data_start().ok_or_else(|| bad(format!("{name}: no data offset")))?;
        out.insert(name, EntryLoc { start, len: f.compressed_size(), deflated });
    }
    Ok(out)
}

impl NpyStream {
    fn open(path: &Path, name: &str, loc: &EntryLoc) -> Result<NpyStream> {
        let bad = |r: String| Error::in_file(path, name, r);
        let mut file = File::open(path).map_err(|e| Error::io(path, e))?;
        file.seek(SeekFrom::Start(loc.start)).map_err(|e| Error::io(path, e))?;
        let raw = BufReader::with_capacity(1 << 20, file.take(loc.len));
        let mut input: Box<dyn Read + Send> =
            if loc.deflated { Box::new(flate2::read::DeflateDecoder::new(raw)) } else { Box::new(raw) };
        let mut magic = [0u8; 8];
        input.read_exact(&mut magic).map_err(|e| bad(format!("truncated .npy ({e})")))?;
        if &magic[..6] != b"\x93NUMPY" {
            return Err(bad("not an .npy array".into()));
        }
        let hlen = if magic[6] == 1 {
            let mut b = [0u8; 2];
            input.read_exact(&mut b).map_err(|e| bad(e.to_string()))?;
            u16::from_le_bytes(b) as usize
        } else {
            let mut b = [0u8; 4];
            input.read_exact(&mut b).map_err(|e| bad(e.to_string()))?;
            u32::from_le_bytes(b) as usize
        };
        if hlen > 1 << 20 {
            return Err(bad(format!("header of {hlen} bytes")));
        }
        let mut text = vec![0u8; hlen];
        input.read_exact(&mut text).map_err(|e| bad(e.to_string()))?;
        let header = parse_header(&String::from_utf8_lossy(&text)).map_err(bad)?;
        Ok(NpyStream { name: name.to_string(), header, input, rows_read: 0 })
    }

    /// The next `rows` rows' raw bytes.
    fn read_rows_raw(&mut self, rows: usize, path: &Path) -> Result<Vec<u8>> {
        let n = rows * self.header.row_elems() * self.header.size;
        let mut buf = vec![0u8; n];
        self.input.read_exact(&mut buf).map_err(|e| Error::Parse {
            file: path.to_path_buf(),
            line: self.rows_read + 1,
            field: self.name.clone(),
            reason: format!("truncated array ({e})"),
        })?;
        self.rows_read += rows;
        Ok(buf)
    }

    /// The next `rows` rows as f64.
    fn read_f64(&mut self, rows: usize, path: &Path) -> Result<Vec<f64>> {
        let h = self.header.clone();
        let raw = self.read_rows_raw(rows, path)?;
        Ok(raw.chunks_exact(h.size).map(|c| to_f64(c, &h)).collect())
    }

    /// The next `rows` rows as i64 (integer and bool arrays).
    fn read_i64(&mut self, rows: usize, path: &Path) -> Result<Vec<i64>> {
        let h = self.header.clone();
        let raw = self.read_rows_raw(rows, path)?;
        Ok(raw.chunks_exact(h.size).map(|c| to_i64(c, &h)).collect())
    }

    /// A 0-d (or 1-element) string array.
    fn read_string(&mut self, path: &Path) -> Result<String> {
        let h = self.header.clone();
        let raw = self.read_rows_raw(if h.shape.is_empty() { 1 } else { h.shape[0] }, path)?;
        Ok(match h.kind {
            Kind::Unicode => raw
                .chunks_exact(4)
                .map(|c| {
                    if h.little {
                        u32::from_le_bytes([c[0], c[1], c[2], c[3]])
                    } else {
                        u32::from_be_bytes([c[0], c[1], c[2], c[3]])
                    }
                })
                .take_while(|&c| c != 0)
                .filter_map(char::from_u32)
                .collect(),
            _ => String::from_utf8_lossy(&raw).trim_end_matches('\0').to_string(),
        })
    }
}

fn to_i64(c: &[u8], h: &Header) -> i64 {
    let mut b = [0u8; 8];
    let n = c.len().min(8);
    if h.little {
        b[..n].copy_from_slice(&c[..n]);
        // Sign-extend.
        if matches!(h.kind, Kind::Int { signed: true }) && n < 8 && c[n - 1] & 0x80 != 0 {
            b[n..].fill(0xff);
        }
        i64::from_le_bytes(b)
    } else {
        b[8 - n..].copy_from_slice(&c[..n]);
        if matches!(h.kind, Kind::Int { signed: true }) && n < 8 && c[0] & 0x80 != 0 {
            b[..8 - n].fill(0xff);
        }
        i64::from_be_bytes(b)
    }
}

fn to_f64(c: &[u8], h: &Header) -> f64 {
    match (h.kind, h.size) {
        (Kind::Float, 8) => {
            let b = [c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]];
            if h.little { f64::from_le_bytes(b) } else { f64::from_be_bytes(b) }
        }
        (Kind::Float, 4) => {
            let b = [c[0], c[1], c[2], c[3]];
            f64::from(if h.little { f32::from_le_bytes(b) } else { f32::from_be_bytes(b) })
        }
        _ => to_i64(c, h) as f64,
    }
}

/// Which key set a file has.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Layout {
    Rmd17,
    Sgdml,
}

/// How an extra per-frame array converts.
#[derive(Debug, Clone, Copy)]
enum Convert {
    Energy,
    Forces,
    None,
}

/// The arrays of an `.npz`, opened by name.
struct Archive<'a> {
    path: &'a Path,
    locs: BTreeMap<String, EntryLoc>,
}

/// The arrays besides the key set's: per-frame fields and string labels.
struct Extras {
    extra: Vec<(NpyStream, Convert)>,
    labels: Vec<(String, String)>,
}

impl Archive<'_> {
    fn bad(&self, field: &str, r: String) -> Error {
        Error::in_file(self.path, field, r)
    }

    fn has(&self, k: &str) -> bool {
        self.locs.contains_key(k)
    }

    fn open(&self, k: &str) -> Result<NpyStream> {
        NpyStream::open(self.path, k, &self.locs[k])
    }

    /// The key set: its layout and the keys of atomic numbers, positions,
    /// energies and forces.
    fn key_set(&self) -> Result<(Layout, [&'static str; 4])> {
        if self.has("nuclear_charges") && self.has("coords") {
            Ok((Layout::Rmd17, ["nuclear_charges", "coords", "energies", "forces"]))
        } else if self.has("z") && self.has("R") {
            Ok((Layout::Sgdml, ["z", "R", "E", "F"]))
        } else {
            let names: Vec<&str> = self.locs.keys().map(String::as_str).collect();
            Err(self.bad(
                "npz",
                format!(
                    "neither the rMD17 (nuclear_charges, coords, ...) nor the sGDML (z, R, E, F) key set: {names:?}"
                ),
            ))
        }
    }

    /// A 0-d string array, if the archive has it.
    fn read_str(&self, k: &str) -> Result<Option<String>> {
        if !self.has(k) {
            return Ok(None);
        }
        let mut s = self.open(k)?;
        Ok(Some(s.read_string(self.path)?))
    }

    /// The file's own units: kcal/mol and Å, or sGDML's `e_unit` / `r_unit`.
    fn own_units(&self, layout: Layout) -> Result<Units> {
        let mut own = Units { energy: Energy::KcalPerMol, length: Length::Angstrom, stress: Stress::EnergyPerVolume };
        if layout == Layout::Sgdml {
            if let Some(e) = self.read_str("e_unit")? {
                own.energy = match e.as_str() {
                    "kcal/mol" => Energy::KcalPerMol,
                    "eV" => Energy::EV,
                    "Ha" | "hartree" | "Hartree" => Energy::Hartree,
                    "kJ/mol" => Energy::KjPerMol,
                    other => return Err(self.bad("e_unit", format!("unknown energy unit {other:?} (use --units)"))),
                };
            }
            if let Some(r) = self.read_str("r_unit")? {
                own.length = match r.as_str() {
                    "Ang" | "A" | "Angstrom" => Length::Angstrom,
                    "bohr" | "Bohr" | "au" => Length::Bohr,
                    "nm" => Length::Nm,
                    other => return Err(self.bad("r_unit", format!("unknown length unit {other:?} (use --units)"))),
                };
            }
        }
        Ok(own)
    }

    /// sGDML's `lattice` as the cell, scaled by `length`.
    fn lattice(&self, length: f64) -> Result<Vec<f32>> {
        let mut l = self.open("lattice")?;
        let v = l.read_f64(l.header.shape.first().copied().unwrap_or(1).max(1), self.path)?;
        if v.len() != 9 {
            return Err(self.bad("lattice", format!("{} values, expected 3x3", v.len())));
        }
        Ok(v.iter().map(|&x| scale_f32(x, length)).collect())
    }

    /// Array `k`, if the archive has it, which must have one entry per frame.
    fn per_frame(&self, k: &str, frames: usize) -> Result<Option<NpyStream>> {
        if !self.has(k) {
            return Ok(None);
        }
        let s = self.open(k)?;
        if s.header.shape.first() != Some(&frames) {
            return Err(self.bad(k, format!("shape {:?}: not one entry per frame ({frames})", s.header.shape)));
        }
        Ok(Some(s))
    }

    /// The arrays not in `known`: one-element string arrays as labels,
    /// per-frame arrays as fields (converted by name); others are logged and
    /// not kept.
    fn extras(&self, known: &[&str], frames: usize) -> Result<Extras> {
        let path = self.path;
        let mut extra = Vec::new();
        let mut labels = Vec::new();
        for k in self.locs.keys().filter(|k| !known.contains(&k.as_str())) {
            let s = self.open(k)?;
            match s.header.kind {
                Kind::Unicode | Kind::Bytes if s.header.elems() == 1 => {
                    let mut s = s;
                    labels.push((k.clone(), s.read_string(path)?));
                }
                Kind::Unicode | Kind::Bytes => {
                    log::warn!("{}: {k}: a string array of shape {:?} is not kept", path.display(), s.header.shape)
                }
                _ if s.header.shape.first() == Some(&frames) && !s.header.shape.is_empty() => {
                    let low = k.to_ascii_lowercase();
                    let c = if low.contains("force") {
                        Convert::Forces
                    } else if low.contains("energ") {
                        Convert::Energy
                    } else {
                        Convert::None
                    };
                    extra.push((s, c));
                }
                _ => log::warn!("{}: {k}: shape {:?} is not per frame; not kept", path.display(), s.header.shape),
            }
        }
        Ok(Extras { extra, labels })
    }
}

/// Streams the frames of an rMD17 or sGDML `.npz`.
pub struct NpzFrames {
    path: PathBuf,
    layout: Layout,
    units: Units,
    factors: Factors,
    numbers: Vec<i64>,
    cell: Option<Vec<f32>>,
    positions: NpyStream,
    energies: Option<NpyStream>,
    forces: Option<NpyStream>,
    extra: Vec<(NpyStream, Convert)>,
    labels: Vec<(String, String)>,
    frames: usize,
    done: usize,
}

impl NpzFrames {
    /// Opens an `.npz`; `units` override the key set's own.
    ///
    /// # Errors
    /// [`Error::Io`] naming `path` when it cannot be read; [`Error::Parse`] naming
    /// `path` and the entry when it is not a zip of `.npy` arrays, lacks the
    /// rMD17 or sGDML keys, or an array has the wrong shape, dtype or units.
    pub fn open(path: &Path, units: Option<Units>) -> Result<NpzFrames> {
        let ar = Archive { path, locs: entry_locations(path)? };
        let (layout, [z_key, r_key, e_key, f_key]) = ar.key_set()?;
        let mut z = ar.open(z_key)?;
        let n = z.header.elems();
        let numbers = z.read_i64(if z.header.shape.is_empty() { 1 } else { z.header.shape[0] }, path)?;
        let positions = ar.open(r_key)?;
        let frames = positions.header.shape.first().copied().unwrap_or(0);
        if positions.header.shape != [frames, n, 3] {
            return Err(ar.bad(r_key, format!("shape {:?}, expected [frames, {n}, 3]", positions.header.shape)));
        }
        // The file's units are read (and checked) even when `units` overrides them.
        let own = ar.own_units(layout)?;
        let units = units.unwrap_or(own);
        let factors = units.factors();
        let cell = match (layout, ar.has("lattice")) {
            (Layout::Sgdml, true) => Some(ar.lattice(factors.length)?),
            _ => None,
        };
        let energies = ar.per_frame(e_key, frames)?;
        if let Some(e) = &energies
            && e.header.row_elems() != 1
        {
            return Err(ar.bad(e_key, format!("shape {:?}, expected [frames] or [frames, 1]", e.header.shape)));
        }
        let forces = ar.per_frame(f_key, frames)?;
        if let Some(f) = &forces
            && f.header.shape != [frames, n, 3]
        {
            return Err(ar.bad(f_key, format!("shape {:?}, expected [frames, {n}, 3]", f.header.shape)));
        }
        let known = [z_key, r_key, e_key, f_key, "e_unit", "r_unit", "md5", "type", "lattice"];
        let Extras { extra, labels } = ar.extras(&known, frames)?;
        Ok(NpzFrames {
            path: path.to_path_buf(),
            layout,
            units,
            factors,
            numbers,
            cell,
            positions,
            energies,
            forces,
            extra,
            labels,
            frames,
            done: 0,
        })
    }

    /// `rmd17` or `sgdml`.
    pub fn layout(&self) -> &'static str {
        match self.layout {
            Layout::Rmd17 => "rmd17",
            Layout::Sgdml => "sgdml",
        }
    }

    /// The units the file is read in.
    pub fn units(&self) -> Units {
        self.units
    }
}

impl Frames for NpzFrames {
    fn next_batch(&mut self, max_frames: usize) -> Result<Option<Vec<Frame>>> {
        let k = max_frames.max(1).min(self.frames - self.done);
        if k == 0 {
            return Ok(None);
        }
        let path = self.path.clone();
        let n = self.numbers.len();
        let f = self.factors;
        let pos = self.positions.read_f64(k, &path)?;
        let energies = match &mut self.energies {
            Some(s) => Some(s.read_f64(k, &path)?),
            None => None,
        };
        let forces = match &mut self.forces {
            Some(s) => Some(s.read_f64(k, &path)?),
            None => None,
        };
        let mut extra = Vec::with_capacity(self.extra.len());
        for (s, c) in &mut self.extra {
            let is_float = s.header.kind == Kind::Float;
            let data: HostData = if is_float {
                let factor = match c {
                    Convert::Energy => f.energy,
                    Convert::Forces => f.forces,
                    Convert::None => 1.0,
                };
                s.read_f64(k, &path)?.iter().map(|&x| scale_f32(x, factor)).collect::<Vec<f32>>().into()
            } else if s.header.kind == Kind::Bool {
                s.read_i64(k, &path)?.iter().map(|&x| x != 0).collect::<Vec<bool>>().into()
            } else {
                s.read_i64(k, &path)?.into()
            };
            extra.push((s.name.clone(), s.header.shape.clone(), data));
        }
        let mut out = Vec::with_capacity(k);
        for i in 0..k {
            let record = self.done + i + 1;
            let mut d = AtomicData::default();
            let put = |d: &mut AtomicData, name: &str, level: Level, shape: Vec<usize>, data: HostData| -> Result<()> {
                let field = Field::new(level, shape, data).map_err(|e| Error::Parse {
                    file: path.clone(),
                    line: record,
                    field: name.to_string(),
                    reason: e.to_string(),
                })?;
                d.fields.insert(name.to_string(), field);
                Ok(())
            };
            put(&mut d, "atomic_numbers", Level::Atom, vec![n], self.numbers.clone().into())?;
            let p: Vec<f32> = pos[i * 3 * n..(i + 1) * 3 * n].iter().map(|&x| scale_f32(x, f.length)).collect();
            put(&mut d, "positions", Level::Atom, vec![n, 3], p.into())?;
            let periodic = self.cell.is_some();
            put(
                &mut d,
                "cell",
                Level::System,
                vec![1, 3, 3],
                self.cell.clone().unwrap_or_else(|| vec![0.0; 9]).into(),
            )?;
            put(&mut d, "pbc", Level::System, vec![1, 3], vec![periodic; 3].into())?;
            if let Some(e) = &energies {
                put(&mut d, "energy", Level::System, vec![1, 1], vec![scale_f32(e[i], f.energy)].into())?;
            }
            if let Some(fo) = &forces {
                let v: Vec<f32> = fo[i * 3 * n..(i + 1) * 3 * n].iter().map(|&x| scale_f32(x, f.forces)).collect();
                put(&mut d, "forces", Level::Atom, vec![n, 3], v.into())?;
            }
            for (name, shape, data) in &extra {
                let row: usize = shape.iter().skip(1).product();
                let bytes = &data.as_bytes()[i * row * data.dtype().size()..(i + 1) * row * data.dtype().size()];
                let one = HostData::from_bytes(data.dtype(), bytes)?;
                let (level, shape) = match shape.as_slice() {
                    [_] => (Level::System, vec![1]),
                    [_, a, rest @ ..] if *a == n => {
                        (Level::Atom, std::iter::once(n).chain(rest.iter().copied()).collect())
                    }
                    [_, rest @ ..] => (Level::System, std::iter::once(1).chain(rest.iter().copied()).collect()),
                    [] => continue,
                };
                put(&mut d, name, level, shape, one)?;
            }
            for (k, v) in &self.labels {
                d.strings.insert(k.clone(), StringField::system(v.clone()));
            }
            out.push(Frame { line: record, data: d });
        }
        self.done += k;
        Ok(Some(out))
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn progress(&self) -> (u64, u64) {
        (self.done as u64, self.frames as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_parse_as_numpy_writes_them() {
        let h = parse_header("{'descr': '<f8', 'fortran_order': False, 'shape': (4, 9, 3), }").unwrap();
        assert_eq!((h.kind, h.size, h.shape.clone()), (Kind::Float, 8, vec![4, 9, 3]));
        let h = parse_header("{'descr': '<U8', 'fortran_order': False, 'shape': (), }").unwrap();
        assert_eq!((h.kind, h.size, h.elems()), (Kind::Unicode, 32, 1));
        let h = parse_header("{'descr': '|u1', 'fortran_order': False, 'shape': (12,), }").unwrap();
        assert_eq!((h.kind, h.shape.clone()), (Kind::Int { signed: false }, vec![12]));
        assert!(parse_header("{'descr': '<f8', 'fortran_order': True, 'shape': (2,), }").is_err());
        assert!(parse_header("{'descr': '<c16', 'fortran_order': False, 'shape': (2,), }").is_err());
        let neg = Header { kind: Kind::Int { signed: true }, size: 2, little: true, shape: vec![] };
        assert_eq!(to_i64(&(-3i16).to_le_bytes(), &neg), -3);
    }
}
