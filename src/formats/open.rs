//! [`open_frames`]: a file opened as the format it holds (told from its
//! bytes, or named), as [`Frames`].

use std::path::Path;

use crate::error::Result;
use crate::formats::frame::{FileInfo, FrameOptions, Frames};
use crate::formats::input::{self, Format};
use crate::formats::units::Units;

/// Opens `path` as frames, in the format `options` names or the one its
/// bytes show.
///
/// # Errors
/// [`Error::InvalidInput`](crate::Error::InvalidInput) when the format cannot
/// be told or needs a feature this build lacks; [`Error::Io`](crate::Error::Io)
/// naming `path` when it cannot be read; [`Error::Parse`](crate::Error::Parse)
/// when it is not a file of its format.
pub fn open_frames(path: &Path, options: &FrameOptions) -> Result<(Box<dyn Frames>, FileInfo)> {
    let format = match options.format() {
        Some(f) => f,
        None => input::detect(path)?,
    };
    let units = |default: Units| options.units().unwrap_or(default);
    let ev = Units::default();
    Ok(match format {
        Format::Extxyz => {
            let u = units(ev);
            let r = crate::formats::extxyz::ExtxyzFrames::open(path)?.with_units(u);
            (Box::new(r), FileInfo { format, layout: "extxyz".into(), units: u })
        }
        Format::Mptrj => {
            let u = units(crate::formats::mptrj::UNITS);
            let r = crate::formats::mptrj::MptrjFrames::open(path, u)?;
            (Box::new(r), FileInfo { format, layout: "mptrj".into(), units: u })
        }
        Format::Npz => {
            let r = crate::formats::npz::NpzFrames::open(path, options.units())?;
            let info = FileInfo { format, layout: r.layout().into(), units: r.units() };
            (Box::new(r), info)
        }
        Format::AseDb | Format::AseLmdb => open_ase(path, format, units(ev))?,
        Format::Hdf5 => open_hdf5(path, options)?,
    })
}

/// ASE's SQLite (`.db`) and LMDB (`.aselmdb`) databases, each behind its
/// feature.
fn open_ase(path: &Path, format: Format, u: Units) -> Result<(Box<dyn Frames>, FileInfo)> {
    let opened: Result<(Box<dyn Frames>, &str)> = match format {
        #[cfg(feature = "sqlite")]
        Format::AseDb => crate::formats::asedb::AseDbFrames::open(path, u).map(|r| (Box::new(r) as _, "asedb")),
        #[cfg(not(feature = "sqlite"))]
        Format::AseDb => Err(missing_feature(path, format, "sqlite")),
        #[cfg(feature = "lmdb")]
        Format::AseLmdb => crate::formats::aselmdb::AseLmdbFrames::open(path, u).map(|r| (Box::new(r) as _, "aselmdb")),
        #[cfg(not(feature = "lmdb"))]
        Format::AseLmdb => Err(missing_feature(path, format, "lmdb")),
        other => {
            Err(crate::error::Error::invalid(path.display().to_string(), format!("{other} is not an ASE database")))
        }
    };
    let (frames, layout) = opened?;
    Ok((frames, FileInfo { format, layout: layout.into(), units: u }))
}

#[cfg(feature = "hdf5")]
fn open_hdf5(path: &Path, options: &FrameOptions) -> Result<(Box<dyn Frames>, FileInfo)> {
    let r = crate::formats::hdf5::Hdf5Frames::open(path, options)?;
    let info = FileInfo { format: Format::Hdf5, layout: r.layout().into(), units: r.units() };
    Ok((Box::new(r), info))
}

#[cfg(not(feature = "hdf5"))]
fn open_hdf5(path: &Path, _options: &FrameOptions) -> Result<(Box<dyn Frames>, FileInfo)> {
    Err(missing_feature(path, Format::Hdf5, "hdf5"))
}

#[cfg(not(all(feature = "sqlite", feature = "lmdb", feature = "hdf5")))]
fn missing_feature(path: &Path, format: Format, feature: &str) -> crate::error::Error {
    crate::error::Error::invalid(
        path.display().to_string(),
        format!("{format} files need atomzarr built with the `{feature}` feature (cargo build --features {feature})"),
    )
}
