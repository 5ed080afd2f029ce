//! The MPtrj JSON (CHGNet's Materials Project trajectories, 11 GB), streamed:
//! `{mp_id: {frame_id: {structure, corrected_total_energy,
//! uncorrected_total_energy, force, stress, magmom, ...}}}`.
//!
//! The file is never held whole: a scanner splits the top-level object
//! into its `mp_id` entries (tracking strings and nesting, not parsing
//! numbers), and each batch of entries is parsed by serde_json in parallel.
//! Memory holds one batch of entries' text (about `batch_frames` frames;
//! an entry is never split, so a batch holds at least one material's
//! frames) plus the frames built from it.
//!
//! | in the file | field | dtype, shape |
//! |---|---|---|
//! | `structure.sites[].species[0].element` | `atomic_numbers` | int64 `[n]` |
//! | `structure.sites[].xyz` | `positions` | float32 `[n,3]` |
//! | `structure.lattice.matrix`, `.pbc` (default `T T T`) | `cell`, `pbc` | float32 `[1,3,3]`, bool `[1,3]` |
//! | `corrected_total_energy` | `energy` | float32 `[1,1]` |
//! | `uncorrected_total_energy`, `energy_per_atom`, `ef_per_atom`, `e_per_atom_relaxed`, `ef_per_atom_relaxed`, `bandgap` | same names | float32 `[1]` |
//! | `force` | `forces` | float32 `[n,3]` |
//! | `stress` (kBar, VASP's sign: compression positive; 3×3 rows, or Voigt 6 `xx yy zz yz xz xy`) | `stress`: `-0.1 GPa × value`, in eV/Å³ | float32 `[1,3,3]` |
//! | `magmom` (`null` on some frames) | `magmoms` (absent where null) | float32 `[n]` |
//! | the outer and inner keys | string labels `mp_id`, `frame_id` | |

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;
use serde::Deserialize;

use crate::data::elements::atomic_number;
use crate::data::{AtomicData, Field, HostData, Level, StringField};
use crate::error::{Error, Result};
use crate::formats::input::{TextInput, open_text};
use crate::formats::units::{Energy, Factors, Length, Stress, Units, scale_f32};
use crate::formats::{Frame, Frames};

/// MPtrj's units: eV, Å, stress in kBar.
pub const UNITS: Units = Units { energy: Energy::EV, length: Length::Angstrom, stress: Stress::Kbar };

#[derive(Deserialize)]
struct Species {
    element: String,
    #[serde(default = "one")]
    occu: f64,
}

fn one() -> f64 {
    1.0
}

#[derive(Deserialize)]
struct Site {
    species: Vec<Species>,
    xyz: [f64; 3],
}

#[derive(Deserialize)]
struct Lattice {
    matrix: [[f64; 3]; 3],
    pbc: Option<[bool; 3]>,
}

#[derive(Deserialize)]
struct Structure {
    lattice: Lattice,
    sites: Vec<Site>,
}

#[derive(Deserialize)]
struct MptrjFrame {
    structure: Structure,
    corrected_total_energy: Option<f64>,
    uncorrected_total_energy: Option<f64>,
    energy_per_atom: Option<f64>,
    ef_per_atom: Option<f64>,
    e_per_atom_relaxed: Option<f64>,
    ef_per_atom_relaxed: Option<f64>,
    bandgap: Option<f64>,
    force: Option<Vec<[f64; 3]>>,
    stress: Option<crate::formats::stress::JsonStress>,
    magmom: Option<Vec<f64>>,
}

/// A JSON object's entries in file order (serde_json's map would sort them).
struct Ordered<T>(Vec<(String, T)>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Ordered<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for V<T> {
            type Value = Ordered<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> std::result::Result<Ordered<T>, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = m.next_entry::<String, T>()? {
                    out.push((k, v));
                }
                Ok(Ordered(out))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

/// One top-level entry: its key and the text of its value.
struct Entry {
    key: String,
    value: Vec<u8>,
}

/// Splits the top-level object into entries without parsing their values:
/// a tight loop over a buffer of the text, tracking strings and nesting
/// (a byte at a time through a reader call would cost more than the parse).
struct Scanner {
    input: TextInput,
    /// Text read and not yet handed out, from `pos` (indices into it stay
    /// valid within one [`Scanner::next`]).
    buf: Vec<u8>,
    pos: usize,
    eof: bool,
    started: bool,
    finished: bool,
    /// Bytes of text before `buf[0]`, for error positions.
    base: u64,
}

impl Scanner {
    fn new(input: TextInput) -> Scanner {
        Scanner { input, buf: Vec::new(), pos: 0, eof: false, started: false, finished: false, base: 0 }
    }

    /// Reads more text onto the buffer; false at the end of input.
    fn fill(&mut self) -> std::io::Result<bool> {
        if self.eof {
            return Ok(false);
        }
        let chunk = self.input.fill_buf()?;
        if chunk.is_empty() {
            self.eof = true;
            return Ok(false);
        }
        self.buf.extend_from_slice(chunk);
        let n = chunk.len();
        self.input.consume(n);
        Ok(true)
    }

    /// The index of the next non-blank byte at or after `i`, reading more
    /// as needed; `None` at the end of input.
    fn skip_ws(&mut self, mut i: usize) -> std::io::Result<Option<usize>> {
        loop {
            while i < self.buf.len() {
                if !self.buf[i].is_ascii_whitespace() {
                    return Ok(Some(i));
                }
                i += 1;
            }
            if !self.fill()? {
                return Ok(None);
            }
        }
    }

    /// The index just past the end of the value starting at `i` (an object,
    /// an array or a string), reading more as needed.
    fn value_end(&mut self, i: usize) -> std::io::Result<Option<usize>> {
        let (mut depth, mut in_str, mut esc) = (0usize, false, false);
        let mut j = i;
        loop {
            let buf = &self.buf;
            while j < buf.len() {
                let b = buf[j];
                j += 1;
                if in_str {
                    if esc {
                        esc = false;
                    } else if b == b'\\' {
                        esc = true;
                    } else if b == b'"' {
                        in_str = false;
                        if depth == 0 {
                            return Ok(Some(j));
                        }
                    }
                    continue;
                }
                match b {
                    b'"' => in_str = true,
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.saturating_sub(1);
                        if depth == 0 {
                            return Ok(Some(j));
                        }
                    }
                    _ => {}
                }
            }
            if !self.fill()? {
                return Ok(None);
            }
        }
    }

    /// The next entry; `Ok(None)` after the closing brace. `Err` is a
    /// reason (with the byte offset).
    fn next(&mut self) -> std::result::Result<Option<Entry>, String> {
        let io = |e: std::io::Error| e.to_string();
        if self.finished {
            return Ok(None);
        }
        // Drop what was handed out (indices below stay valid for this call:
        // the buffer only grows until the next one).
        if self.pos > 0 && self.pos * 2 >= self.buf.len() {
            self.buf.drain(..self.pos);
            self.base += self.pos as u64;
            self.pos = 0;
        }
        let at = |s: &Scanner, i: usize, what: &str| format!("byte {} of the JSON text: {what}", s.base + i as u64);
        let mut i = self.skip_ws(self.pos).map_err(io)?.ok_or_else(|| at(self, self.buf.len(), "empty input"))?;
        if !self.started {
            if self.buf[i] != b'{' {
                return Err(at(self, i, "expected the top-level object `{`"));
            }
            self.started = true;
            i = self.skip_ws(i + 1).map_err(io)?.ok_or_else(|| at(self, self.buf.len(), "end of input"))?;
        } else if self.buf[i] == b',' {
            i = self.skip_ws(i + 1).map_err(io)?.ok_or_else(|| at(self, self.buf.len(), "end of input"))?;
        }
        match self.buf[i] {
            b'}' => {
                self.finished = true;
                self.pos = i + 1;
                return Ok(None);
            }
            b'"' => {}
            _ => return Err(at(self, i, "expected a key")),
        }
        let key_end = self.value_end(i).map_err(io)?.ok_or_else(|| at(self, i, "end of input inside a key"))?;
        let key: String =
            serde_json::from_slice(&self.buf[i..key_end]).map_err(|e| at(self, i, &format!("bad key ({e})")))?;
        let colon = self.skip_ws(key_end).map_err(io)?.filter(|&c| self.buf[c] == b':');
        let colon = colon.ok_or_else(|| at(self, key_end, "expected `:` after a key"))?;
        let v = self.skip_ws(colon + 1).map_err(io)?.ok_or_else(|| at(self, colon, "end of input before a value"))?;
        if self.buf[v] != b'{' {
            return Err(at(self, v, "an MPtrj entry is an object of frames"));
        }
        let end = self.value_end(v).map_err(io)?.ok_or_else(|| at(self, v, "end of input inside an entry"))?;
        let value = self.buf[v..end].to_vec();
        self.pos = end;
        Ok(Some(Entry { key, value }))
    }
}

/// Streams MPtrj frames.
pub struct MptrjFrames {
    path: PathBuf,
    scanner: Scanner,
    file_bytes: Arc<AtomicU64>,
    size: u64,
    frames: usize,
    factors: Factors,
    units: Units,
}

impl MptrjFrames {
    /// Opens the file (plain or compressed); `units` default to [`UNITS`].
    ///
    /// # Errors
    /// [`Error::Io`] naming `path` when it cannot be opened or read;
    /// [`Error::InvalidInput`] for xz input in a build without the `xz` feature.
    pub fn open(path: &Path, units: Units) -> Result<MptrjFrames> {
        let size = std::fs::metadata(path).map_err(|e| Error::io(path, e))?.len();
        let (input, file_bytes) = open_text(path)?;
        Ok(MptrjFrames {
            path: path.to_path_buf(),
            scanner: Scanner::new(input),
            file_bytes,
            size,
            frames: 0,
            factors: units.factors(),
            units,
        })
    }
}

fn frame(
    mp_id: &str,
    frame_id: &str,
    f: MptrjFrame,
    factors: &Factors,
    sign_flip: bool,
) -> std::result::Result<AtomicData, (String, String)> {
    let bad = |field: &str, r: String| (field.to_string(), r);
    let n = f.structure.sites.len();
    let mut numbers = Vec::with_capacity(n);
    let mut positions = Vec::with_capacity(3 * n);
    for s in &f.structure.sites {
        let sp = match s.species.as_slice() {
            [one] if (one.occu - 1.0).abs() < 1e-6 => one,
            _ => return Err(bad("structure", "a disordered site (several species or partial occupancy)".into())),
        };
        numbers.push(
            atomic_number(&sp.element).ok_or_else(|| bad("structure", format!("unknown element {}", sp.element)))?,
        );
        positions.extend(s.xyz.iter().map(|&x| scale_f32(x, factors.length)));
    }
    let mut d = AtomicData::default();
    let mut put =
        |name: &str, level: Level, shape: Vec<usize>, data: HostData| -> std::result::Result<(), (String, String)> {
            let field = Field::new(level, shape, data).map_err(|e| bad(name, e.to_string()))?;
            d.fields.insert(name.to_string(), field);
            Ok(())
        };
    put("atomic_numbers", Level::Atom, vec![n], numbers.into())?;
    put("positions", Level::Atom, vec![n, 3], positions.into())?;
    let cell: Vec<f32> = f.structure.lattice.matrix.iter().flatten().map(|&x| scale_f32(x, factors.length)).collect();
    put("cell", Level::System, vec![1, 3, 3], cell.into())?;
    put("pbc", Level::System, vec![1, 3], f.structure.lattice.pbc.unwrap_or([true; 3]).to_vec().into())?;
    if let Some(e) = f.corrected_total_energy {
        put("energy", Level::System, vec![1, 1], vec![scale_f32(e, factors.energy)].into())?;
    }
    for (name, v) in [
        ("uncorrected_total_energy", f.uncorrected_total_energy),
        ("energy_per_atom", f.energy_per_atom),
        ("ef_per_atom", f.ef_per_atom),
        ("e_per_atom_relaxed", f.e_per_atom_relaxed),
        ("ef_per_atom_relaxed", f.ef_per_atom_relaxed),
    ] {
        if let Some(x) = v {
            put(name, Level::System, vec![1], vec![scale_f32(x, factors.energy)].into())?;
        }
    }
    if let Some(g) = f.bandgap {
        put("bandgap", Level::System, vec![1], vec![scale_f32(g, factors.energy)].into())?;
    }
    if let Some(force) = f.force {
        if force.len() != n {
            return Err(bad("force", format!("{} rows for {n} sites", force.len())));
        }
        let v: Vec<f32> = force.iter().flatten().map(|&x| scale_f32(x, factors.forces)).collect();
        put("forces", Level::Atom, vec![n, 3], v.into())?;
    }
    if let Some(s) = f.stress {
        // VASP reports compression as positive stress; ASE's sign is the
        // opposite.
        let sign = if sign_flip { -1.0 } else { 1.0 };
        let flat = s.flat().map_err(|r| bad("stress", r))?;
        let m = crate::formats::stress::to_matrix(&flat, crate::formats::stress::NineOrder::RowMajor)
            .map_err(|r| bad("stress", r))?;
        let v: Vec<f32> = m.iter().map(|&x| scale_f32(sign * x, factors.stress)).collect();
        put("stress", Level::System, vec![1, 3, 3], v.into())?;
    }
    if let Some(m) = f.magmom {
        if m.len() != n {
            return Err(bad("magmom", format!("{} values for {n} sites", m.len())));
        }
        put("magmoms", Level::Atom, vec![n], m.iter().map(|&x| x as f32).collect::<Vec<f32>>().into())?;
    }
    d.strings.insert("mp_id".into(), StringField::system(mp_id));
    d.strings.insert("frame_id".into(), StringField::system(frame_id));
    Ok(d)
}

impl Frames for MptrjFrames {
    fn next_batch(&mut self, max_frames: usize) -> Result<Option<Vec<Frame>>> {
        // Entries until about `max_frames` frames (a material has ~30 on
        // average; the count is only known once parsed, so estimate from
        // the text: an MPtrj frame is a few kB).
        const FRAME_BYTES_GUESS: usize = 4096;
        let mut entries = Vec::new();
        let mut bytes = 0usize;
        while bytes < max_frames.max(1) * FRAME_BYTES_GUESS {
            let e = self.scanner.next().map_err(|reason| Error::Parse {
                file: self.path.clone(),
                line: self.frames + 1,
                field: "json".into(),
                reason,
            })?;
            let Some(e) = e else { break };
            bytes += e.value.len();
            entries.push(e);
        }
        if entries.is_empty() {
            return Ok(None);
        }
        let (path, factors) = (&self.path, &self.factors);
        // Signs: the stress flips when it is read as VASP's kBar (the
        // format's own units); an override to another stress unit is taken
        // as already in ASE's sign.
        let flip = self.units.stress == Stress::Kbar;
        let parsed: Vec<Vec<AtomicData>> = entries
            .par_iter()
            .map(|e| {
                let err = |field: &str, reason: String| Error::Parse {
                    file: path.clone(),
                    line: 0,
                    field: field.to_string(),
                    reason: format!("{}: {reason}", e.key),
                };
                let frames: Ordered<MptrjFrame> =
                    serde_json::from_slice(&e.value).map_err(|x| err("json", x.to_string()))?;
                frames
                    .0
                    .into_iter()
                    .map(|(fid, f)| {
                        frame(&e.key, &fid, f, factors, flip)
                            .map_err(|(field, r)| err(&field, format!("frame {fid}: {r}")))
                    })
                    .collect()
            })
            .collect::<Result<_>>()?;
        let mut out = Vec::new();
        for data in parsed.into_iter().flatten() {
            self.frames += 1;
            out.push(Frame { line: self.frames, data });
        }
        Ok(Some(out))
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn progress(&self) -> (u64, u64) {
        (self.file_bytes.load(Ordering::Relaxed), self.size)
    }
}
