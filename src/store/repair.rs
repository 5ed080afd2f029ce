//! `atomzarr repair`: finds neighbor lists that point outside their own
//! sample and rewrites those written by nvalchemi-toolkit's append bug.
//!
//! The bug: the toolkit's `append` offsets the stored `neighbor_list` by each
//! sample's atom offset *within the appended batch* instead of within the
//! store. Stored indices are store-global (sample-local plus `atoms_ptr[p]`),
//! so every sample of such a batch reads back (stored minus `atoms_ptr[p]`)
//! with its indices shifted by the same `-K`, `K = atoms_ptr[q0]` of the
//! batch's first sample `q0`. The appended half of every reference store in
//! `assets/` shows it.
//!
//! A sample is *bad* when some index lies outside `[0, num_atoms)`. Its
//! candidate shifts are the atom offsets `atoms_ptr[q]` (`1 <= q <= p`,
//! `K > 0`) that move every one of its indices into range. Consecutive bad
//! samples (deleted and edge-less samples in between are passed over) that
//! share candidates form a run, which the constancy of `K` within an
//! appended batch fixes when exactly one shared candidate remains. A sample
//! whose own atom offset could also start a new appended batch there, a run
//! with several shared candidates, and a sample no offset brings into range
//! are listed as not fixed and left as they are.
//!
//! ```
//! # fn main() -> atomzarr::Result<()> {
//! use atomzarr::{AtomicData, AtomicDataZarrWriter, ZarrWriteConfig};
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("ok.zarr");
//! let s = AtomicData::new(vec![1, 1], vec![[0.0; 3]; 2])?.with_neighbor_list(vec![[0, 1], [1, 0]], None)?;
//! AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default())?.write(&[s.clone(), s])?;
//! let report = atomzarr::store::repair::check(&path)?;
//! assert!(report.fixed.is_empty() && report.unfixed.is_empty());
//! assert_eq!(report.samples_checked, 2);
//! # Ok(()) }
//! ```

use std::path::Path;

use serde::Serialize;
use zarrs::array::{ArrayBytes, CodecOptions};

use crate::data::{DType, HostData};
use crate::data::{NEIGHBOR_LIST, append_shifts};
use crate::error::{Error, Result};
use crate::location::Location;
use crate::store::ZarrWriteConfig;
use crate::store::reader::{AtomicDataZarrReader, ReaderOptions, State};
use crate::store::writer::AtomicDataZarrWriter;

/// Edge rows read per store call while scanning.
const SCAN_ROWS: u64 = 1 << 20;

/// Samples fixed with one shift.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RepairedRun {
    /// Physical indices of the samples, ascending.
    pub physical: Vec<usize>,
    /// The shift `K` added to each of their indices.
    pub shift: i64,
}

/// A sample whose neighbor list is out of range and was not rewritten.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnfixedSample {
    /// Logical index (the store's active samples).
    pub index: usize,
    /// Physical index.
    pub physical_index: usize,
    /// The first index outside `[0, num_atoms)`, sample-local.
    pub value: i64,
    /// The sample's atom count.
    pub num_atoms: usize,
    /// Why it was not fixed.
    pub reason: String,
}

/// What [`check`] found, or [`repair`] found and rewrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RepairReport {
    /// The store.
    pub store: Location,
    /// Active samples with at least one edge, all checked.
    pub samples_checked: usize,
    /// Samples whose fix is unambiguous, grouped by shift.
    pub fixed: Vec<RepairedRun>,
    /// Bad samples left as they are.
    pub unfixed: Vec<UnfixedSample>,
    /// Whether the fixes were written (false for [`check`]).
    pub written: bool,
}

impl RepairReport {
    /// Number of samples in `fixed`.
    pub fn num_fixed(&self) -> usize {
        self.fixed.iter().map(|r| r.physical.len()).sum()
    }
}

/// One physical sample as the scan saw it.
#[derive(Debug, Clone, Copy)]
enum Seen {
    /// Deleted or without edges: never batched, passed over.
    Skip,
    /// Every index in range.
    Good,
    /// Some index out of range.
    Bad { value: i64, min: i64, max: i64 },
}

/// Finds the out-of-range neighbor lists of the store at `path` and what
/// [`repair`] would do with them, writing nothing.
///
/// # Errors
/// The errors of opening and reading the store (as
/// [`AtomicDataZarrReader::open`]), such as [`Error::NotFound`],
/// [`Error::Format`], [`Error::Inconsistent`] or [`Error::Chunk`].
pub fn check(path: impl AsRef<Path>) -> Result<RepairReport> {
    let reader = AtomicDataZarrReader::open_opt(path.as_ref(), ReaderOptions::default().with_cache_bytes(0))?;
    plan(&reader).map(|(report, _, _)| report)
}

/// Rewrites the neighbor lists that [`check`] can fix (adding each run's
/// shift to its stored indices), then checks the store again: every fixed
/// sample must now be in range. Samples it cannot fix are listed in the
/// report and left as they are; the store is otherwise untouched.
///
/// The rows from the first fixed sample to the end of `neighbor_list` are
/// rewritten in one write (the writer's row writes set the array's length),
/// so memory use is those rows.
///
/// # Errors
/// [`Error::Locked`] when another writer holds the store (see
/// [`repair_with_lock_timeout`] to wait for it); otherwise as
/// [`repair_with_lock_timeout`].
pub fn repair(path: impl AsRef<Path>) -> Result<RepairReport> {
    repair_with_lock_timeout(path, std::time::Duration::ZERO)
}

/// [`repair`], waiting up to `timeout` for another writer's lock.
///
/// # Errors
/// [`Error::Locked`] when another writer holds the store past `timeout`;
/// [`Error::Inconsistent`] naming `neighbor_list` when a fixed sample is still
/// out of range afterwards; the errors of [`check`] and of writing
/// ([`Error::Zarr`], [`Error::Io`]).
pub fn repair_with_lock_timeout(path: impl AsRef<Path>, timeout: std::time::Duration) -> Result<RepairReport> {
    let path = path.as_ref();
    // The writer first: opening it takes the lock and finishes any
    // interrupted operation.
    let writer = AtomicDataZarrWriter::open(path, ZarrWriteConfig::default().with_lock_timeout(timeout))?;
    let reader = AtomicDataZarrReader::open_opt(path, ReaderOptions::default().with_cache_bytes(0))?;
    let (mut report, st, whole) = plan(&reader)?;
    if report.fixed.is_empty() {
        return Ok(report);
    }
    let f = neighbor_field(&st).ok_or_else(|| Error::Internal("repair: neighbor_list vanished".into()))?;
    let ptrs = whole.edges.as_slice();
    let mut fixes: Vec<(usize, i64)> =
        report.fixed.iter().flat_map(|r| r.physical.iter().map(move |&p| (p, r.shift))).collect();
    fixes.sort_unstable();
    let first_row = ptrs[fixes[0].0] as u64;
    let end_row = f.array.shape().first().copied().unwrap_or(0);
    let mut vals = read_rows(reader.location(), f, first_row..end_row)?;
    let per_row = f.row_elems;
    for &(p, shift) in &fixes {
        let (a, b) =
            ((ptrs[p] as u64 - first_row) as usize * per_row, (ptrs[p + 1] as u64 - first_row) as usize * per_row);
        for v in vals.get_mut(a..b).ok_or_else(|| Error::inconsistent(path, &f.rel, "rows shorter than edges_ptr"))? {
            *v = v
                .checked_add(shift)
                .ok_or_else(|| Error::inconsistent(path, &f.rel, "index overflow while repairing"))?;
        }
    }
    let bytes = to_dtype_bytes(reader.location(), &f.rel, f.dtype, &vals)?;
    writer.overwrite_rows(&f.rel, first_row..end_row, bytes)?;
    report.written = true;

    // Trust, but verify: read the store back.
    let after = check(path)?;
    let still: Vec<usize> = after
        .unfixed
        .iter()
        .map(|u| u.physical_index)
        .chain(after.fixed.iter().flat_map(|r| r.physical.iter().copied()))
        .filter(|p| fixes.binary_search_by_key(p, |&(q, _)| q).is_ok())
        .collect();
    if !still.is_empty() {
        return Err(Error::inconsistent(
            path,
            &f.rel,
            format!("physical samples {still:?} still out of range after repair"),
        ));
    }
    Ok(report)
}

fn neighbor_field(st: &State) -> Option<&crate::store::reader::FieldArray> {
    st.fields.iter().find(|f| f.name == NEIGHBOR_LIST)
}

/// Rows `rows` of `f` as i64 (integer dtypes only).
fn read_rows(store: &Location, f: &crate::store::reader::FieldArray, rows: std::ops::Range<u64>) -> Result<Vec<i64>> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let mut subset = vec![rows];
    subset.extend(f.trailing.iter().map(|&d| 0..d as u64));
    let bytes: ArrayBytes = f
        .array
        .retrieve_array_subset_opt(&subset, &CodecOptions::default())
        .map_err(|e| Error::zarr(store, &f.rel, e))?;
    let raw = bytes.into_fixed().map_err(|e| Error::zarr(store, &f.rel, e))?;
    HostData::from_bytes(f.dtype, &raw)?
        .to_i64_vec()
        .filter(|_| matches!(f.dtype, DType::Int64 | DType::Int32 | DType::UInt64 | DType::UInt32))
        .ok_or_else(|| Error::inconsistent(store, &f.rel, format!("dtype {} is not an index type", f.dtype)))
}

/// `vals` in `dtype`'s native-endian bytes, refusing values that do not fit.
fn to_dtype_bytes(store: &Location, rel: &str, dtype: DType, vals: &[i64]) -> Result<Vec<u8>> {
    let bad = |v: i64| Error::inconsistent(store, rel, format!("repaired index {v} does not fit {dtype}"));
    macro_rules! cast {
        ($t:ty) => {{
            let v: Vec<$t> = vals.iter().map(|&x| <$t>::try_from(x).map_err(|_| bad(x))).collect::<Result<_>>()?;
            bytemuck::cast_slice(&v).to_vec()
        }};
    }
    Ok(match dtype {
        DType::Int64 => bytemuck::cast_slice(vals).to_vec(),
        DType::Int32 => cast!(i32),
        DType::UInt64 => cast!(u64),
        DType::UInt32 => cast!(u32),
        other => return Err(Error::inconsistent(store, rel, format!("dtype {other} is not an index type"))),
    })
}

/// The whole pointer arrays (a repair reads every sample).
#[derive(Default)]
struct WholePointers {
    atoms: Vec<i64>,
    edges: Vec<i64>,
}

/// Scans every active sample's neighbor list and plans the fixes.
fn plan(reader: &AtomicDataZarrReader) -> Result<(RepairReport, std::sync::Arc<State>, WholePointers)> {
    let st = reader.snapshot();
    let mut report = RepairReport {
        store: reader.location().clone(),
        samples_checked: 0,
        fixed: vec![],
        unfixed: vec![],
        written: false,
    };
    let Some(f) = neighbor_field(&st) else { return Ok((report, st, WholePointers::default())) };
    let whole = WholePointers {
        atoms: reader.pointer_values(&st, crate::data::Level::Atom)?,
        edges: reader.pointer_values(&st, crate::data::Level::Edge)?,
    };
    let mut logical: Vec<Option<usize>> = vec![None; st.num_samples];
    match &st.active {
        Some(active) => active.iter().enumerate().for_each(|(k, p)| logical[p] = Some(k)),
        None => logical.iter_mut().enumerate().for_each(|(k, l)| *l = Some(k)),
    }
    let seen = scan(reader.location(), &st, &whole, f, &logical, &mut report)?;
    let mut runs = Runs { atoms: &whole.atoms, seen: &seen, logical: &logical, report, run: vec![], shared: vec![] };
    runs.group();
    let mut report = runs.report;
    report.unfixed.sort_by_key(|u| u.physical_index);
    Ok((report, st, whole))
}

/// Pass 1: each physical sample's status, reading a window of edge rows
/// at a time.
fn scan(
    path: &Location,
    st: &State,
    whole: &WholePointers,
    f: &crate::store::reader::FieldArray,
    logical: &[Option<usize>],
    report: &mut RepairReport,
) -> Result<Vec<Seen>> {
    let n = st.num_samples;
    let (atoms, edges) = (&whole.atoms, &whole.edges);
    let mut seen = Vec::with_capacity(n);
    let mut p = 0;
    while p < n {
        let mut q = p + 1;
        while q < n && (edges[q + 1] - edges[p]) as u64 <= SCAN_ROWS {
            q += 1;
        }
        let base = edges[p] as u64;
        let vals = read_rows(path, f, base..edges[q] as u64)?;
        for s in p..q {
            let (e0, e1) =
                ((edges[s] as u64 - base) as usize * f.row_elems, (edges[s + 1] as u64 - base) as usize * f.row_elems);
            if logical[s].is_none() || e0 == e1 {
                seen.push(Seen::Skip);
                continue;
            }
            report.samples_checked += 1;
            let num = (atoms[s + 1] - atoms[s]) as u64;
            let local = vals[e0..e1].iter().map(|&x| x.wrapping_sub(atoms[s]));
            let (mut min, mut max, mut value) = (i64::MAX, i64::MIN, None);
            for x in local {
                min = min.min(x);
                max = max.max(x);
                if value.is_none() && (x < 0 || x as u64 >= num) {
                    value = Some(x);
                }
            }
            seen.push(match value {
                Some(value) => Seen::Bad { value, min, max },
                None => Seen::Good,
            });
        }
        p = q;
    }
    Ok(seen)
}

/// Pass 2: runs of bad samples that share a shift.
struct Runs<'a> {
    atoms: &'a [i64],
    seen: &'a [Seen],
    logical: &'a [Option<usize>],
    report: RepairReport,
    /// The physical samples of the run being built.
    run: Vec<usize>,
    /// The shifts every sample of the run admits.
    shared: Vec<i64>,
}

impl Runs<'_> {
    fn group(&mut self) {
        let atoms = self.atoms;
        for p in 0..self.seen.len() {
            let Seen::Bad { min, max, .. } = self.seen[p] else {
                if matches!(self.seen[p], Seen::Good) {
                    self.close();
                }
                continue;
            };
            let num = (atoms[p + 1] - atoms[p]) as usize;
            let mine: Vec<i64> = append_shifts(atoms, p, min, max, num).collect();
            if mine.is_empty() {
                self.close();
                self.unfixed(
                    p,
                    format!(
                        "no earlier atom offset brings its indices ({min}..={max}) into [0, {num}): not the toolkit's append bug"
                    ),
                );
                continue;
            }
            let both: Vec<i64> = self.shared.iter().copied().filter(|k| mine.contains(k)).collect();
            if self.run.is_empty() || both.is_empty() {
                // A new run (a new appended batch).
                self.close();
                self.run.push(p);
                self.shared = mine;
            } else if mine.contains(&atoms[p]) {
                // Either the run's shift continues here, or a new appended batch
                // starts at this sample (its own offset): the data cannot tell.
                self.close();
                self.unfixed(
                    p,
                    format!(
                        "ambiguous: continues the shift {both:?} of the samples before it, or starts a new appended batch (shift {})",
                        atoms[p]
                    ),
                );
            } else {
                self.run.push(p);
                self.shared = both;
            }
        }
        self.close();
    }

    fn unfixed(&mut self, p: usize, reason: String) {
        if let Seen::Bad { value, .. } = self.seen[p] {
            self.report.unfixed.push(UnfixedSample {
                index: self.logical[p].unwrap_or(p),
                physical_index: p,
                value,
                num_atoms: (self.atoms[p + 1] - self.atoms[p]) as usize,
                reason,
            });
        }
    }

    /// Ends the current run: fixed when exactly one shift fits all of it.
    fn close(&mut self) {
        if self.run.is_empty() {
            return;
        }
        if let [shift] = self.shared[..] {
            self.report.fixed.push(RepairedRun { physical: std::mem::take(&mut self.run), shift });
        } else {
            let (a, b) = (self.run[0], self.run[self.run.len() - 1]);
            let shared = std::mem::take(&mut self.shared);
            for p in std::mem::take(&mut self.run) {
                self.unfixed(
                    p,
                    format!("ambiguous: shifts {shared:?} all bring physical samples {a}..={b} into range"),
                );
            }
        }
        self.shared.clear();
    }
}
