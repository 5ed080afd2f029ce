//! `atomzarr verify`: a whole store checked, every chunk of every array
//! read once, every fault listed (what `PRAGMA integrity_check` or
//! `git fsck` do for their stores).
//!
//! The checks:
//! - the store opens (root attributes, arrays, the sizes their metadata
//!   claims; see [`AtomicDataZarrReader::open`]); a store that does not is
//!   one fault, the reader's error;
//! - each array's dtype and shape against the format: pointers int64 with
//!   `num_samples + 1` entries, masks bool with one entry per row of their
//!   axis, fields with one row per row of their level (the arrays end where
//!   the last pointer says), the core fields' element kind and trailing
//!   shape;
//! - every chunk decodes, to the bytes its shape says, with its crc32c
//!   where the chunk has one (a failed checksum names the chunk);
//! - the pointers start at 0 and never decrease (every decrease listed);
//! - the atom and edge masks agree with the sample mask on every row;
//! - each active sample's neighbor indices lie within its own atoms.
//!
//! The chunks are decoded in parallel (rayon), once each, and dropped:
//! memory is the pointers and the sample mask (17 bytes a sample) and a
//! chunk per thread.
//!
//! ```
//! # fn main() -> atomzarr::Result<()> {
//! use atomzarr::{AtomicDataZarrWriter, ZarrWriteConfig};
//! use atomzarr::store::verify::{VerifyOptions, verify};
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("v.zarr");
//! let samples = atomzarr::data::synth::generate(30, 2, 6, 0)?;
//! AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default())?.write(&samples)?;
//! let report = verify(&path, &VerifyOptions::default())?;
//! assert!(report.is_clean(), "{:?}", report.faults);
//! assert_eq!(report.num_samples, 30);
//! # Ok(()) }
//! ```

mod layout;
mod report;
mod rows;

use rayon::prelude::*;

pub use report::{Fault, VerifyReport};

use crate::data::{Level, NEIGHBOR_LIST};
use crate::error::{Error, Result};
use crate::location::Location;
use crate::progress::Progress;
use crate::store::format;
use crate::store::reader::{AtomicDataZarrReader, FieldArray, ReaderOptions};
use layout::Totals;
use rows::{Check, Counted};

/// Options of [`verify`].
///
/// ```
/// let o = atomzarr::store::verify::VerifyOptions::default().with_progress(true);
/// assert!(o.progress());
/// ```
#[derive(Debug, Clone, Default)]
pub struct VerifyOptions {
    progress: bool,
}

impl VerifyOptions {
    /// Shows a progress bar over the chunks (feature `progress`; else log lines).
    pub fn with_progress(mut self, yes: bool) -> Self {
        self.progress = yes;
        self
    }
    /// Whether progress is shown.
    pub fn progress(&self) -> bool {
        self.progress
    }
}

/// Checks the store at `location` (a path or, with feature `remote`, a
/// URL) and lists every fault found: see the [module docs](self) for the
/// checks. A store that does not open gives the reader's error as its one
/// fault.
///
/// # Errors
/// [`Error::NotFound`] when nothing is at a local `location` (there is no
/// store to check); [`Error::Remote`] when a remote store cannot be reached.
/// Every fault of the store itself is in the report.
pub fn verify(location: impl Into<Location>, options: &VerifyOptions) -> Result<VerifyReport> {
    let location = location.into();
    let mut report = VerifyReport {
        store: location.clone(),
        num_samples: 0,
        arrays: 0,
        chunks: 0,
        decoded_bytes: 0,
        faults: vec![],
    };
    let reader = match AtomicDataZarrReader::open_opt(&location, ReaderOptions::default().with_cache_bytes(0)) {
        Ok(r) => r,
        Err(e @ (Error::NotFound { .. } | Error::Remote { .. })) => return Err(e),
        Err(e) => {
            report.faults.push(Fault::from_error(&location, &e));
            return Ok(report);
        }
    };
    let st = reader.snapshot();
    let n = st.num_samples;
    report.num_samples = n;
    let totals =
        Totals { atoms: st.rows_of(Level::Atom), edges: st.rows_of(Level::Edge), samples: st.rows_of(Level::System) };
    let mut metas: Vec<(&str, FieldArray)> = Vec::new();
    for (rel, opened) in reader.open_meta_arrays() {
        match opened {
            Ok(f) => {
                report.faults.extend(layout::meta_faults(&location, rel, &f, totals));
                metas.push((rel, f));
            }
            Err(e) => report.faults.push(Fault::from_error(&location, &e)),
        }
    }
    for f in &st.fields {
        report.faults.extend(layout::field_faults(&location, f, totals));
    }
    // The chunks each array's rows in use lie in (never more than its
    // shape holds: a longer claim is a shape fault above).
    let chunks_of = |f: &FieldArray, rows: u64| {
        rows.min(f.array.shape().first().copied().unwrap_or(0)).div_ceil(f.chunk_rows.max(1))
    };
    let mut tasks: Vec<(&FieldArray, u64, u64, Check)> = Vec::new();
    for (rel, f) in &metas {
        let (rows, check) = match *rel {
            format::ATOMS_MASK => (totals.atoms, Check::AtomMask),
            format::EDGES_MASK => (totals.edges, Check::EdgeMask),
            _ => continue,
        };
        tasks.extend((0..chunks_of(f, rows)).map(|c| (f, c, rows, check)));
    }
    for f in &st.fields {
        let rows = totals.of_level(f.level);
        let check = if f.name == NEIGHBOR_LIST { Check::Neighbors } else { Check::Decode };
        tasks.extend((0..chunks_of(f, rows)).map(|c| (f, c, rows, check)));
    }
    let strings = AtomicDataZarrReader::string_arrays(&st);
    let string_tasks: Vec<(usize, u64)> = strings
        .iter()
        .enumerate()
        .flat_map(|(i, (_, _, level, cr))| (0..totals.of_level(*level).div_ceil((*cr).max(1))).map(move |c| (i, c)))
        .collect();
    let meta_chunks: u64 = metas.iter().map(|(_, f)| ((n as u64) + 1).div_ceil(f.chunk_rows.max(1))).sum();
    let bar = Progress::new(options.progress, meta_chunks + (tasks.len() + string_tasks.len()) as u64, "verify");
    let meta_refs: Vec<(&str, &FieldArray)> = metas.iter().map(|(r, f)| (*r, f)).collect();
    let (whole, faults, mut counted) = rows::read_meta(&reader, &meta_refs, n);
    bar.inc(meta_chunks);
    report.faults.extend(faults);
    let found: Vec<(Vec<Fault>, Counted)> = tasks
        .par_iter()
        .map(|&(f, c, rows, check)| {
            let r = rows::check_chunk(&reader, f, c, rows, check, &whole);
            bar.inc(1);
            r
        })
        .collect();
    for (faults, c) in found {
        report.faults.extend(faults);
        counted = counted.add(c);
    }
    for (i, c) in string_tasks {
        match rows::check_strings(&reader, &st, i, c) {
            Ok(k) => counted = counted.add(k),
            Err(e) => report.faults.push(Fault::from_error(&location, &e).in_chunk(c)),
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    report.arrays = metas.len() + st.fields.len() + strings.len();
    report.chunks = counted.chunks;
    report.decoded_bytes = counted.bytes;
    tidy(&mut report.faults);
    Ok(report)
}

/// Faults in order (array, chunk, sample), one per array and sample (a
/// sample whose rows span two chunks is listed at the first).
fn tidy(faults: &mut Vec<Fault>) {
    faults.sort_by(|a, b| (&a.array, a.sample, a.chunk).cmp(&(&b.array, b.sample, b.chunk)));
    faults.dedup_by(|b, a| a.sample.is_some() && a.array == b.array && a.sample == b.sample);
    faults.sort_by(|a, b| (&a.array, a.chunk, a.sample).cmp(&(&b.array, b.chunk, b.sample)));
}
