//! Frames from files: the [`FrameSource`] every importer format implements,
//! and [`open_frames`], which opens a file as the format it holds.
//!
//! A source hands out frames in batches, so memory holds one batch (and
//! whatever the format needs to find the next one, stated per format),
//! whatever the file's size. Values arrive in the store's units (eV, Å,
//! eV/Å, eV/Å³) and sign conventions (forces, not gradients; ASE's stress
//! sign).

use std::path::Path;

use crate::data::AtomicData;
use crate::error::Result;
use crate::source::input::{self, Format};
use crate::source::units::Units;

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
pub trait FrameSource: Send {
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

/// How [`open_frames`] reads a file.
///
/// ```
/// use atomzarr::source::frames::SourceOptions;
/// let o = SourceOptions::default().with_energy_key(Some("ccsd(t)_cbs.energy".into()));
/// assert_eq!(o.energy_key(), Some("ccsd(t)_cbs.energy"));
/// ```
#[derive(Debug, Clone, Default)]
pub struct SourceOptions {
    format: Option<Format>,
    units: Option<Units>,
    energy_key: Option<String>,
    forces_key: Option<String>,
}

impl SourceOptions {
    /// The format; default: told from the file ([`input::detect`]).
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
pub struct SourceInfo {
    /// The format.
    pub format: Format,
    /// The layout within the format (`spice`, `ani1x`, `rmd17`, `sgdml`, or
    /// the format's name).
    pub layout: String,
    /// The units the file's values were read in.
    pub units: Units,
}

/// Opens `path` as frames, in the format `options` names or the one its
/// bytes show.
///
/// # Errors
/// [`Error::InvalidInput`](crate::Error::InvalidInput) when the format cannot
/// be told or needs a feature this build lacks; [`Error::Io`](crate::Error::Io)
/// naming `path` when it cannot be read; [`Error::Parse`](crate::Error::Parse)
/// when it is not a file of its format.
pub fn open_frames(path: &Path, options: &SourceOptions) -> Result<(Box<dyn FrameSource>, SourceInfo)> {
    let format = match options.format() {
        Some(f) => f,
        None => input::detect(path)?,
    };
    let units = |default: Units| options.units().unwrap_or(default);
    let ev = Units::default();
    Ok(match format {
        Format::Extxyz => {
            let u = units(ev);
            let r = crate::source::extxyz::ExtxyzReader::open(path)?.with_units(u);
            (Box::new(r), SourceInfo { format, layout: "extxyz".into(), units: u })
        }
        Format::Mptrj => {
            let u = units(crate::source::mptrj::UNITS);
            let r = crate::source::mptrj::MptrjReader::open(path, u)?;
            (Box::new(r), SourceInfo { format, layout: "mptrj".into(), units: u })
        }
        Format::Npz => {
            let r = crate::source::npz::NpzReader::open(path, options.units())?;
            let info = SourceInfo { format, layout: r.layout().into(), units: r.units() };
            (Box::new(r), info)
        }
        Format::AseDb => open_asedb(path, units(ev))?,
        Format::AseLmdb => open_aselmdb(path, units(ev))?,
        Format::Hdf5 => open_hdf5(path, options)?,
    })
}

#[cfg(feature = "sqlite")]
fn open_asedb(path: &Path, u: Units) -> Result<(Box<dyn FrameSource>, SourceInfo)> {
    let r = crate::source::asedb::AseDbReader::open(path, u)?;
    Ok((Box::new(r), SourceInfo { format: Format::AseDb, layout: "asedb".into(), units: u }))
}

#[cfg(not(feature = "sqlite"))]
fn open_asedb(path: &Path, _u: Units) -> Result<(Box<dyn FrameSource>, SourceInfo)> {
    Err(missing_feature(path, Format::AseDb, "sqlite"))
}

#[cfg(feature = "lmdb")]
fn open_aselmdb(path: &Path, u: Units) -> Result<(Box<dyn FrameSource>, SourceInfo)> {
    let r = crate::source::aselmdb::AseLmdbReader::open(path, u)?;
    Ok((Box::new(r), SourceInfo { format: Format::AseLmdb, layout: "aselmdb".into(), units: u }))
}

#[cfg(not(feature = "lmdb"))]
fn open_aselmdb(path: &Path, _u: Units) -> Result<(Box<dyn FrameSource>, SourceInfo)> {
    Err(missing_feature(path, Format::AseLmdb, "lmdb"))
}

#[cfg(feature = "hdf5")]
fn open_hdf5(path: &Path, options: &SourceOptions) -> Result<(Box<dyn FrameSource>, SourceInfo)> {
    let r = crate::source::hdf5::Hdf5Reader::open(path, options)?;
    let info = SourceInfo { format: Format::Hdf5, layout: r.layout().into(), units: r.units() };
    Ok((Box::new(r), info))
}

#[cfg(not(feature = "hdf5"))]
fn open_hdf5(path: &Path, _options: &SourceOptions) -> Result<(Box<dyn FrameSource>, SourceInfo)> {
    Err(missing_feature(path, Format::Hdf5, "hdf5"))
}

#[cfg(not(all(feature = "sqlite", feature = "lmdb", feature = "hdf5")))]
fn missing_feature(path: &Path, format: Format, feature: &str) -> crate::error::Error {
    crate::error::Error::invalid(
        path.display().to_string(),
        format!("{format} files need atomzarr built with the `{feature}` feature (cargo build --features {feature})"),
    )
}
