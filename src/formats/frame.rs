//! Frames from files: [`Frame`], the [`Frames`] trait every import format
//! implements, and the options and facts of an opened file.
//!
//! A format hands out frames in batches, so memory holds one batch (and
//! whatever the format needs to find the next one, stated per format),
//! whatever the file's size. Values arrive in the store's units (eV, Å,
//! eV/Å, eV/Å³) and sign conventions (forces, not gradients; ASE's stress
//! sign).

use std::path::Path;

use crate::data::AtomicData;
use crate::error::Result;
use crate::formats::input::Format;
use crate::formats::units::Units;

/// One frame and where it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    /// Where the frame is in its file, 1-based: the line of its atom count
    /// in a text file, else its record (row, entry, conformer) number.
    pub line: usize,
    /// The structure.
    pub data: AtomicData,
}

/// A file read as frames, a batch at a time.
pub trait Frames: Send {
    /// Up to `max_frames` frames; `None` at the end.
    ///
    /// # Errors
    /// [`Error::Parse`](crate::Error::Parse) naming the file and the line (or
    /// record) of a frame that does not parse; [`Error::Io`](crate::Error::Io)
    /// naming the file when it cannot be read.
    fn next_batch(&mut self, max_frames: usize) -> Result<Option<Vec<Frame>>>;
    /// The file.
    fn path(&self) -> &Path;
    /// Progress as (done, total), in bytes of the file or in frames.
    fn progress(&self) -> (u64, u64);
}

/// How [`open_frames`](crate::formats::open_frames) reads a file.
///
/// ```
/// use atomzarr::formats::FrameOptions;
/// let o = FrameOptions::default().with_energy_key(Some("ccsd(t)_cbs.energy".into()));
/// assert_eq!(o.energy_key(), Some("ccsd(t)_cbs.energy"));
/// ```
#[derive(Debug, Clone, Default)]
pub struct FrameOptions {
    format: Option<Format>,
    units: Option<Units>,
    energy_key: Option<String>,
    forces_key: Option<String>,
}

impl FrameOptions {
    /// The format; default: told from the file ([`detect`](crate::formats::input::detect)).
    pub fn with_format(mut self, format: Option<Format>) -> Self {
        self.format = format;
        self
    }
    /// The format, when given.
    pub fn format(&self) -> Option<Format> {
        self.format
    }
    /// The file's units, over the format's own (SPICE: hartree and bohr;
    /// rMD17 and sGDML: kcal/mol; ASE formats: eV and Å).
    pub fn with_units(mut self, units: Option<Units>) -> Self {
        self.units = units;
        self
    }
    /// The units override.
    pub fn units(&self) -> Option<Units> {
        self.units
    }
    /// HDF5: the dataset holding energies (another level of theory).
    pub fn with_energy_key(mut self, key: Option<String>) -> Self {
        self.energy_key = key;
        self
    }
    /// The energy key.
    pub fn energy_key(&self) -> Option<&str> {
        self.energy_key.as_deref()
    }
    /// HDF5: the dataset holding forces (or gradients, for keys with
    /// `gradient` in their name).
    pub fn with_forces_key(mut self, key: Option<String>) -> Self {
        self.forces_key = key;
        self
    }
    /// The forces key.
    pub fn forces_key(&self) -> Option<&str> {
        self.forces_key.as_deref()
    }
}

/// What an opened file is: its format, its layout within the format, its
/// units (after any override) and the frames it will give.
#[derive(Debug, Clone, PartialEq)]
pub struct FileInfo {
    /// The format.
    pub format: Format,
    /// The layout within the format (`spice`, `ani1x`, `rmd17`, `sgdml`, or
    /// the format's name).
    pub layout: String,
    /// The units the file's values were read in.
    pub units: Units,
}
