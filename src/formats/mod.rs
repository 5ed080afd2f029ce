//! Files of the formats MLIP data ships in, in and out of a store: each
//! format read as [`Frames`] a batch at a time, [`import`](mod@import) of
//! files into a store, [`export`](mod@export) of a store as extended XYZ and
//! [`dump`] of any reader as the toolkit's JSON.
//!
//! | module | owns |
//! |---|---|
//! | `frame` | [`Frame`], the [`Frames`] trait every format implements, [`FrameOptions`], [`FileInfo`] |
//! | `open` | [`open_frames`]: a file opened as the format it holds |
//! | [`input`] | format detection (magic bytes, extensions), gzip / xz / bzip2 text input |
//! | `stress` | a stress as files give it (Voigt 6, 9 flat, 3×3 nested) to the store's 3×3 matrix |
//! | [`units`] | a file's units to the store's (eV, Å, eV/Å, eV/Å³), CODATA 2014 as `ase.units` |
//! | [`extxyz`] | extended XYZ in ASE's dialect, streamed in batches; `write`: frames back to ASE |
//! | `ase_row` | an ASE database row as a frame (shared by the two ASE databases) |
//! | [`asedb`] | ASE's SQLite database (feature `sqlite`) |
//! | [`aselmdb`] | fairchem's `.aselmdb` (feature `lmdb`) |
//! | [`hdf5`] | SPICE and ANI-1x HDF5 (feature `hdf5`) |
//! | [`npz`] | rMD17 and sGDML npz |
//! | [`mptrj`] | the MPtrj JSON, streamed |
//! | [`import`](mod@import) | `atomzarr import`: files of any format into a store (created or appended), neighbor lists on the way, labels only some frames have |
//! | [`export`](mod@export) | `atomzarr export`: a store's samples as extended XYZ |
//! | [`dump`] | `atomzarr dump`: every sample of a reader as the toolkit's JSON dump (its fixtures' `*.expected.json`) |

#[cfg(any(feature = "sqlite", feature = "lmdb"))]
mod ase_row;
#[cfg(feature = "sqlite")]
pub mod asedb;
#[cfg(feature = "lmdb")]
pub mod aselmdb;
pub mod dump;
pub mod export;
pub mod extxyz;
mod frame;
#[cfg(feature = "hdf5")]
pub mod hdf5;
pub mod import;
pub mod input;
pub mod mptrj;
pub mod npz;
mod open;
mod stress;
pub mod units;

pub use frame::{FileInfo, Frame, FrameOptions, Frames};
pub use open::open_frames;
