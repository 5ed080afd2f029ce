//! Extended XYZ in ASE's dialect: the exchange format of MLIP data sets
//! (MPtrj, rMD17, SPICE exports), read as [`AtomicData`](crate::AtomicData) frames.
//!
//! What becomes what:
//!
//! | in the file | field | dtype, shape |
//! |---|---|---|
//! | `species:S:1` (or `Z:I:1`, which wins) | `atomic_numbers` | int64 `[n]` |
//! | `pos:R:3` | `positions` | float32 `[n, 3]` |
//! | `forces:R:3` | `forces` | float32 `[n, 3]` |
//! | `charge:R:1` | `charges` | float32 `[n]` |
//! | any other `R`, `I`, `L` column | same name (custom unless a core name) | float32 / int64 / bool, `[n]` or `[n, k]` |
//! | `Lattice="ax ay az bx by bz cx cy cz"` | `cell` (rows a, b, c; zero when absent) | float32 `[1, 3, 3]` |
//! | `pbc="T T F"` (default: `T T T` with a Lattice, else `F F F`) | `pbc` | bool `[1, 3]` |
//! | `energy=` | `energy` | float32 `[1, 1]` |
//! | `stress=`, `virial=`: 9 numbers (ASE's column-major order) or Voigt 6 (`xx yy zz yz xz xy`) | `stress`, `virial` | float32 `[1, 3, 3]` |
//! | any other numeric or logical key | same name | float32 / int64 / bool, `[1]` or `[1, k]` |
//! | a key holding a string (`config_type=bulk`, ASE's `_JSON` values kept as written) | a system string label | [`StringField`](crate::data::StringField) |
//! | any other `S` column (`label:S:1`) | an atom string label | one string per atom |
//!
//! Floats are parsed as f64 (as ASE does) and stored as float32, the
//! toolkit's dtype; energies, lengths, forces and stresses are converted
//! from the units given at open ([`ExtxyzFrames::with_units`]; ASE's eV and
//! Å by default). Frames may differ in their fields (the import fills what
//! a frame lacks, see [`crate::formats::import`]). Lines with more or fewer
//! columns than `Properties` declares are errors (ASE ignores extra
//! columns). Blank lines between frames are skipped. The file may be gzip,
//! xz or bzip2 compressed ([`crate::formats::input::open_text`]).
//!
//! ```
//! # fn main() -> atomzarr::Result<()> {
//! use atomzarr::formats::extxyz::ExtxyzFrames;
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("water.extxyz");
//! std::fs::write(&path, "3\nenergy=-14.2 Properties=species:S:1:pos:R:3:forces:R:3\n\
//!     O 0 0 0 0 0 0.1\nH 0.96 0 0 0 0 0\nH -0.24 0.93 0 0 0 -0.1\n").unwrap();
//! let mut r = ExtxyzFrames::open(&path)?;
//! let frames = r.next_batch(100)?.unwrap();
//! assert_eq!(frames[0].line, 1);
//! let water = &frames[0].data;
//! assert_eq!(water.field("atomic_numbers").unwrap().data, vec![8i64, 1, 1].into());
//! assert_eq!(water.field("energy").unwrap().shape, vec![1, 1]);
//! assert!(r.next_batch(100)?.is_none());
//! # Ok(()) }
//! ```

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::formats::input::{TextInput, open_text};
use crate::formats::units::{Factors, Units};
use crate::formats::{Frame, Frames};

mod comment;
mod frame;
pub(crate) mod write;

use frame::FrameText;

/// A frame's place in the batch buffer.
struct RawFrame {
    line: usize,
    natoms: usize,
    comment: (usize, usize),
    atoms: (usize, usize),
}

/// Streams the frames of one extended-XYZ file in batches: memory holds one
/// batch's text and structures, whatever the file's size.
pub struct ExtxyzFrames {
    path: PathBuf,
    input: TextInput,
    file_bytes: Arc<AtomicU64>,
    size: u64,
    line: usize,
    buf: Vec<u8>,
    factors: Factors,
}

impl ExtxyzFrames {
    /// Opens a file (plain, or gzip / xz / bzip2 compressed).
    ///
    /// # Errors
    /// [`Error::Io`] naming `path` when it cannot be opened or read;
    /// [`Error::InvalidInput`] for xz input in a build without the `xz` feature.
    pub fn open(path: impl AsRef<Path>) -> Result<ExtxyzFrames> {
        let path = path.as_ref().to_path_buf();
        let size = std::fs::metadata(&path).map_err(|e| Error::io(&path, e))?.len();
        let (input, file_bytes) = open_text(&path)?;
        Ok(ExtxyzFrames {
            path,
            input,
            file_bytes,
            size,
            line: 0,
            buf: Vec::new(),
            factors: Units::default().factors(),
        })
    }

    /// Reads the file's energies, lengths, forces and stresses in `units`
    /// (default: eV and Å, ASE's), converting them to the store's.
    pub fn with_units(mut self, units: Units) -> Self {
        self.factors = units.factors();
        self
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// File bytes consumed so far (compressed bytes for a compressed file),
    /// for progress against its size.
    pub fn bytes_read(&self) -> u64 {
        self.file_bytes.load(Ordering::Relaxed)
    }

    /// Appends the next line to `buf`; its range, or `None` at the end.
    fn read_line(&mut self) -> Result<Option<(usize, usize)>> {
        let start = self.buf.len();
        let n = self.input.read_until(b'\n', &mut self.buf).map_err(|e| Error::io(&self.path, e))?;
        if n == 0 {
            return Ok(None);
        }
        self.line += 1;
        let mut end = self.buf.len();
        while end > start && matches!(self.buf[end - 1], b'\n' | b'\r') {
            end -= 1;
        }
        Ok(Some((start, end)))
    }

    /// Up to `max_frames` frames, parsed in parallel; `None` at the end of
    /// the file.
    ///
    /// # Errors
    /// [`Error::Parse`] naming the file, line and field of a frame that does not
    /// parse (a bad atom count, a short frame, text that is not UTF-8, a bad
    /// value); [`Error::Io`] naming the file when it cannot be read.
    pub fn next_batch(&mut self, max_frames: usize) -> Result<Option<Vec<Frame>>> {
        self.buf.clear();
        let mut raw = Vec::new();
        while raw.len() < max_frames.max(1) {
            let Some((s, e)) = self.read_line()? else { break };
            let text = &self.buf[s..e];
            if text.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let line = self.line;
            let natoms: usize =
                std::str::from_utf8(text).ok().and_then(|t| t.trim().parse().ok()).ok_or_else(|| Error::Parse {
                    file: self.path.clone(),
                    line,
                    field: "atom count".into(),
                    reason: format!("`{}` is not a non-negative integer", String::from_utf8_lossy(text).trim()),
                })?;
            let end_of_file = |k: usize, path: &Path, at: usize| Error::Parse {
                file: path.to_path_buf(),
                line: at,
                field: "atoms".into(),
                reason: format!("end of file after {k} of the frame's {natoms} atoms"),
            };
            let comment = self.read_line()?.ok_or_else(|| Error::Parse {
                file: self.path.clone(),
                line: line + 1,
                field: "comment line".into(),
                reason: "end of file before the comment line".into(),
            })?;
            let mut atoms = (self.buf.len(), self.buf.len());
            for k in 0..natoms {
                let (_, e) = self.read_line()?.ok_or_else(|| end_of_file(k, &self.path, self.line + 1))?;
                atoms.1 = e;
            }
            raw.push(RawFrame { line, natoms, comment, atoms });
        }
        if raw.is_empty() {
            return Ok(None);
        }
        let path = &self.path;
        let buf = &self.buf;
        let factors = &self.factors;
        let text = |r: (usize, usize), line: usize, field: &str| -> Result<&str> {
            std::str::from_utf8(&buf[r.0..r.1]).map_err(|e| Error::Parse {
                file: path.clone(),
                line,
                field: field.into(),
                reason: format!("not UTF-8 ({e})"),
            })
        };
        let frames: Vec<Frame> = raw
            .par_iter()
            .map(|f| {
                let ft = FrameText {
                    file: path,
                    line: f.line,
                    comment: text(f.comment, f.line + 1, "comment line")?,
                    atoms: text(f.atoms, f.line + 2, "atoms")?,
                    natoms: f.natoms,
                    factors,
                };
                Ok(Frame { line: f.line, data: ft.parse()? })
            })
            .collect::<Result<_>>()?;
        Ok(Some(frames))
    }
}

impl Frames for ExtxyzFrames {
    fn next_batch(&mut self, max_frames: usize) -> Result<Option<Vec<Frame>>> {
        ExtxyzFrames::next_batch(self, max_frames)
    }
    fn path(&self) -> &Path {
        &self.path
    }
    fn progress(&self) -> (u64, u64) {
        (self.bytes_read(), self.size)
    }
}

/// Every frame of a file (for small files; [`ExtxyzFrames`] streams).
///
/// # Errors
/// As [`ExtxyzFrames::open`] and [`ExtxyzFrames::next_batch`].
pub fn read_extxyz(path: impl AsRef<Path>) -> Result<Vec<Frame>> {
    let mut r = ExtxyzFrames::open(path)?;
    let mut out = Vec::new();
    while let Some(batch) = r.next_batch(4096)? {
        out.extend(batch);
    }
    Ok(out)
}
