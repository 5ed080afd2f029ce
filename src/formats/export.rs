//! `atomzarr export`: a store's samples as extended XYZ for ASE
//! (the writer of `formats/extxyz/write.rs`), written beside the target and renamed
//! into place when complete.

use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};
use crate::formats::extxyz::write::write_frame;
use crate::source::Reader;

/// Writes every logical sample of `reader` to `out` (which must not
/// exist); returns the number of frames.
///
/// # Errors
/// [`Error::InvalidInput`] when `out` exists or a sample cannot be written as
/// extended XYZ; [`Error::Io`] naming the file when writing or renaming
/// fails; the reader's errors (as [`Reader::load_many`]).
pub fn export_extxyz(reader: &dyn Reader, out: &Path) -> Result<usize> {
    if out.exists() {
        return Err(Error::invalid(out.display().to_string(), "exists; export writes a new file"));
    }
    let tmp = crate::store::format::sibling(out, ".atomzarr-export");
    let file = std::fs::File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
    const STEP: usize = 1024;
    let mut text = String::new();
    for start in (0..reader.len()).step_by(STEP) {
        let idx: Vec<usize> = (start..(start + STEP).min(reader.len())).collect();
        for (k, s) in reader.load_many(&idx)?.iter().enumerate() {
            write_frame(&mut text, s)
                .map_err(|r| Error::invalid(format!("{} sample {}", reader.name(), start + k), r))?;
        }
        w.write_all(text.as_bytes()).map_err(|e| Error::io(&tmp, e))?;
        text.clear();
    }
    let file = w.into_inner().map_err(|e| Error::io(&tmp, e.into_error()))?;
    file.sync_all().map_err(|e| Error::io(&tmp, e))?;
    std::fs::rename(&tmp, out).map_err(|e| Error::io(out, e))?;
    Ok(reader.len())
}
