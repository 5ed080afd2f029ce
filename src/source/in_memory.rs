//! [`InMemoryReader`]: a whole store resident in host memory as one
//! [`CollatedBatch`] (one buffer per field plus atom/edge pointers), served
//! through the [`Reader`] contract so it gets the same batch API as a store
//! on disk (`Dataset::new(in_mem)`, the DataLoader, a
//! [`MultiReader`](crate::MultiReader) child).
//!
//! Batches are built by copying rows out of the resident buffers, the same
//! single-pass copy the Zarr reader does from decoded chunks, with
//! `neighbor_list` rebased to batch-local atom indices.

use std::collections::BTreeMap;
use std::sync::Arc;

use rayon::prelude::*;

use crate::data::NEIGHBOR_LIST;
use crate::data::{AtomicData, IndexRange, IndexReport, Level};
use crate::data::{CollatedBatch, CollatedField, FieldLayout, bad_indices};
use crate::error::{Error, Result};
use crate::progress::Progress;
use crate::source::{Capabilities, PlannedReader, ReadPlan, Reader, ReaderExt, SampleIndex, SampleMetadata, Schema};

type Layout = Vec<FieldLayout>;

fn layout_of(b: &CollatedBatch) -> Layout {
    b.fields
        .iter()
        .map(|(n, f)| FieldLayout {
            name: n.clone(),
            level: f.level,
            dtype: f.data.dtype(),
            trailing: f.trailing_shape.clone(),
        })
        .collect()
}

/// Names the fields in which two layouts differ (missing, extra, or of a
/// different level, dtype or row shape).
fn layout_diff(want: &Layout, got: &Layout) -> Option<String> {
    let w: BTreeMap<&String, &FieldLayout> = want.iter().map(|l| (&l.name, l)).collect();
    let g: BTreeMap<&String, &FieldLayout> = got.iter().map(|l| (&l.name, l)).collect();
    let missing: Vec<&str> = w.keys().filter(|n| !g.contains_key(*n)).map(|n| n.as_str()).collect();
    let extra: Vec<&str> = g.keys().filter(|n| !w.contains_key(*n)).map(|n| n.as_str()).collect();
    let differ: Vec<&str> =
        w.iter().filter(|(n, v)| g.get(*n).is_some_and(|x| x != *v)).map(|(n, _)| n.as_str()).collect();
    if missing.is_empty() && extra.is_empty() && differ.is_empty() {
        return None;
    }
    Some(format!("missing {missing:?}, extra {extra:?}, different level/dtype/shape {differ:?}"))
}

/// Builds the error for the pick at a position of `picks` whose neighbor
/// list points outside its own atoms; `None`: the sources were checked when
/// they were built (an [`InMemoryReader`]'s resident data), copy unchecked.
pub(crate) type RangeError<'a> = Option<&'a (dyn Fn(usize, IndexReport) -> Error + Sync)>;

/// Rebuilds `dst` as the graphs `picks` (`(source, graph)` pairs, in order)
/// of `sources`, which must share one field layout (an empty batch takes the
/// first source's, with zero rows). Indices are left for the caller to set.
pub(crate) fn gather(
    dst: &mut CollatedBatch,
    sources: &[&CollatedBatch],
    picks: &[(usize, usize)],
    range_error: RangeError,
) -> Result<()> {
    let first = picks.first().map_or(0, |p| p.0);
    let layout = sources.get(first).map(|s| layout_of(s)).unwrap_or_default();
    dst.reset(&layout);
    // Fields new to `dst` get room for every pick's rows from its home's free buffers
    // (memory a delivered batch gave back: touched before, so no page
    // faults), when it has one.
    if let Some(free) = dst.buffers.get() {
        let rows = |level: Level| -> usize {
            picks
                .iter()
                .filter_map(|&(s, k)| sources.get(s).and_then(|b| b.graph_rows(level, k)))
                .map(|r| r.len())
                .sum()
        };
        let (atoms, edges) = (rows(Level::Atom), rows(Level::Edge));
        for l in &layout {
            let n = match l.level {
                Level::Atom => atoms,
                Level::Edge => edges,
                Level::System => picks.len(),
            } * l.trailing.iter().product::<usize>();
            if let Some(f) = dst.fields.get_mut(&l.name).filter(|f| f.data.capacity() < n) {
                free.give(std::mem::replace(&mut f.data, free.take(l.dtype, n)));
            }
        }
    }
    gather_append(dst, sources, picks, range_error)
}

/// Appends graphs `picks` of `sources` to `dst`, whose layout they must
/// share. Neighbor indices are rebased and checked against their own graph's
/// atoms in the same copy.
pub(crate) fn gather_append(
    dst: &mut CollatedBatch,
    sources: &[&CollatedBatch],
    picks: &[(usize, usize)],
    range_error: RangeError,
) -> Result<()> {
    if dst.atoms_ptr.is_empty() {
        dst.atoms_ptr.push(0);
    }
    if dst.edges_ptr.is_empty() {
        dst.edges_ptr.push(0);
    }
    let want = layout_of(dst);
    let mut checked = vec![false; sources.len()];
    for &(s, _) in picks {
        let src = sources.get(s).ok_or_else(|| Error::Internal("gather: source out of range".into()))?;
        if !std::mem::replace(&mut checked[s], true)
            && let Some(diff) = layout_diff(&want, &layout_of(src))
        {
            return Err(Error::invalid("batch", format!("samples with different fields in one batch: {diff}")));
        }
    }
    // Pointers first: each pick's atom base in dst rebases its neighbor list.
    let mut bases = Vec::with_capacity(picks.len());
    let mut atom_rows = Vec::with_capacity(picks.len());
    for &(s, k) in picks {
        let src = sources[s];
        let out_of_range = || Error::Internal(format!("gather: graph {k} out of range"));
        let atoms_k = src.graph_rows(Level::Atom, k).ok_or_else(out_of_range)?;
        let edges_k = src.graph_rows(Level::Edge, k).ok_or_else(out_of_range)?;
        let atoms = *dst.atoms_ptr.last().unwrap_or(&0);
        let edges = *dst.edges_ptr.last().unwrap_or(&0);
        bases.push(atoms - atoms_k.start as i64);
        dst.atoms_ptr.push(atoms + atoms_k.len() as i64);
        dst.edges_ptr.push(edges + edges_k.len() as i64);
        atom_rows.push(atoms_k);
    }
    copy_fields(dst, sources, picks, &bases, &atom_rows, range_error)?;
    // String labels: the first pick's source names them.
    if dst.strings.is_empty()
        && let Some(&(s, _)) = picks.first()
    {
        for (name, f) in &sources[s].strings {
            dst.strings.insert(name.clone(), crate::data::StringField { level: f.level, values: Vec::new() });
        }
    }
    for (name, f) in dst.strings.iter_mut() {
        for &(s, k) in picks {
            let values = sources[s]
                .strings
                .get(name)
                .and_then(|sf| sources[s].graph_rows(sf.level, k).and_then(|rows| sf.values.get(rows)))
                .ok_or_else(|| Error::invalid("batch", format!("string label {name} missing from a sample")))?;
            f.values.extend(values.iter().cloned());
        }
    }
    Ok(())
}

/// Appends every field's rows of `picks` to `dst` (its pointers already
/// extended): `bases[pos]` rebases pick `pos`'s neighbor indices, whose
/// atoms in their source are `atom_rows[pos]`.
fn copy_fields(
    dst: &mut CollatedBatch,
    sources: &[&CollatedBatch],
    picks: &[(usize, usize)],
    bases: &[i64],
    atom_rows: &[std::ops::Range<usize>],
    range_error: RangeError,
) -> Result<()> {
    // Runs of consecutive graphs of one source are copied as one block, and
    // each field's source is looked up once per field, not once per pick (a
    // mixture's batch alternates between its children, one pick at a time).
    let runs = pick_runs(picks);
    for (name, f) in dst.fields.iter_mut() {
        let row_bytes = f.trailing_shape.iter().product::<usize>() * f.data.dtype().size();
        let is_nl = name == NEIGHBOR_LIST;
        let per_source: Vec<Option<&CollatedField>> = sources.iter().map(|b| b.fields.get(name)).collect();
        let vanished = || Error::Internal(format!("gather: field {name} vanished"));
        let out_of_range = |k: usize| Error::Internal(format!("gather: graph {k} out of range"));
        let short = || Error::invalid(format!("field {name}"), "buffer shorter than its pointers");
        for run in &runs {
            let (s, k0) = picks[run.start];
            let sf = per_source.get(s).copied().flatten().ok_or_else(vanished)?;
            let bytes_of = |rows: std::ops::Range<usize>| {
                sf.data.as_bytes().get(rows.start * row_bytes..rows.end * row_bytes).ok_or_else(short)
            };
            match range_error {
                // Checked graph by graph: each index against its own graph's atoms.
                Some(range_error) if is_nl => {
                    for pos in run.clone() {
                        let k = picks[pos].1;
                        let rows = sources[s].graph_rows(f.level, k).ok_or_else(|| out_of_range(k))?;
                        let bytes = bytes_of(rows)?;
                        let start = f.data.len();
                        // The graph's atoms are atom_rows[pos] in its source and start at their start + base here.
                        let (a0, n) = (atom_rows[pos].start as i64, atom_rows[pos].len() as u64);
                        let base = bases[pos];
                        if !f.data.extend_indices_checked(bytes, IndexRange { lo: a0, n, offset: base })? {
                            return Err(bad_indices(&f.data, start, a0 + base, n, |r| range_error(pos, r)));
                        }
                    }
                }
                _ => {
                    let k1 = picks[run.end - 1].1;
                    let first = sources[s].graph_rows(f.level, k0).ok_or_else(|| out_of_range(k0))?;
                    let last = sources[s].graph_rows(f.level, k1).ok_or_else(|| out_of_range(k1))?;
                    let bytes = bytes_of(first.start..last.end)?;
                    // One base for the run: its graphs' atoms are contiguous
                    // in the source and here alike.
                    if is_nl {
                        f.data.extend_rebased(bytes, bases[run.start])?
                    } else {
                        f.data.extend_from_bytes(bytes)
                    }
                }
            }
        }
    }
    Ok(())
}

/// `picks` cut into runs of consecutive graphs (`k`, `k + 1`, ...) of one
/// source, as ranges of positions in `picks`.
fn pick_runs(picks: &[(usize, usize)]) -> Vec<std::ops::Range<usize>> {
    let mut runs = Vec::new();
    let mut start = 0;
    for i in 1..=picks.len() {
        let joins = i < picks.len() && picks[i].0 == picks[i - 1].0 && picks[i].1 == picks[i - 1].1 + 1;
        if !joins {
            runs.push(start..i);
            start = i;
        }
    }
    runs
}

/// Checks every graph's neighbor indices in `b` against its own atoms.
fn verify_neighbors(b: &CollatedBatch, err: impl Fn(usize, IndexReport) -> Error) -> Result<()> {
    let Some(nl) = b.fields.get(NEIGHBOR_LIST) else { return Ok(()) };
    let per_row: usize = nl.trailing_shape.iter().product();
    for k in 0..b.num_graphs() {
        let (atoms, edges) = match (b.graph_rows(Level::Atom, k), b.graph_rows(Level::Edge, k)) {
            (Some(a), Some(e)) => (a, e),
            _ => return Err(Error::Internal(format!("graph {k} out of range of its pointers"))),
        };
        if let Some(r) =
            nl.data.index_report(edges.start * per_row..edges.end * per_row, atoms.start as i64, atoms.len() as u64)
        {
            return Err(err(k, r));
        }
    }
    Ok(())
}

/// Options of [`InMemoryReader::from_reader_opt`].
///
/// ```
/// let o = atomzarr::InMemoryOptions::default().with_chunk_size(4096).with_progress(true);
/// assert_eq!((o.chunk_size(), o.progress()), (4096, true));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InMemoryOptions {
    /// Samples read per backend call while loading (default 1024).
    pub(crate) chunk_size: usize,
    /// Show a progress bar on stderr while loading (default off; without
    /// the `progress` feature: `log::info!` lines instead).
    pub(crate) progress: bool,
}

impl Default for InMemoryOptions {
    fn default() -> Self {
        InMemoryOptions { chunk_size: 1024, progress: false }
    }
}

impl InMemoryOptions {
    /// Sets `chunk_size`.
    pub fn with_chunk_size(mut self, n: usize) -> Self {
        self.chunk_size = n;
        self
    }
    /// Sets `progress`.
    pub fn with_progress(mut self, yes: bool) -> Self {
        self.progress = yes;
        self
    }
    /// Samples read per backend call while loading.
    pub fn chunk_size(&self) -> usize {
        self.chunk_size
    }
    /// Whether loading shows a progress bar.
    pub fn progress(&self) -> bool {
        self.progress
    }
}

/// Every sample of a reader, resident in host memory.
///
/// ```
/// # fn main() -> atomzarr::Result<()> {
/// use atomzarr::{AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, Dataset, InMemoryReader, Reader, ReaderExt, ZarrWriteConfig};
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("m.zarr");
/// let samples = atomzarr::data::synth::generate(6, 2, 5, 1)?;
/// AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default())?.write(&samples)?;
/// let mem = InMemoryReader::from_reader(&AtomicDataZarrReader::open(&path)?)?;
/// assert_eq!(mem.len(), 6);
/// assert_eq!(mem.read(4)?.data, samples[4]);
/// let b = mem.load_batches(&[vec![5, 0]])?;
/// assert_eq!(b[0].to_samples()?, vec![samples[5].clone(), samples[0].clone()]);
/// let ds = Dataset::new(mem); // the same batch API as a store on disk
/// assert_eq!(ds.load_batches(&[vec![5, 0]])?, b);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct InMemoryReader {
    data: CollatedBatch,
    levels: BTreeMap<String, Level>,
    source: String,
    /// Physical index per logical index, when the source has deletes.
    physical: Option<Vec<usize>>,
}

impl InMemoryReader {
    /// Loads every sample of `reader` with default options.
    ///
    /// # Errors
    /// As [`InMemoryReader::from_reader_opt`].
    pub fn from_reader<R: Reader + ?Sized>(reader: &R) -> Result<Self> {
        Self::from_reader_opt(reader, InMemoryOptions::default())
    }

    /// Loads every sample of `reader`, `chunk_size` at a time through its
    /// collated path (a [`Dataset`](crate::Dataset) validates and transforms
    /// on the way in).
    ///
    /// # Errors
    /// [`Error::Config`] when `chunk_size` is 0; the reader's errors (as
    /// [`ReaderExt::load_collated`]), among them
    /// [`Error::NeighborIndex`] naming the reader's sample whose neighbor list
    /// points outside it.
    pub fn from_reader_opt<R: Reader + ?Sized>(reader: &R, options: InMemoryOptions) -> Result<Self> {
        Error::check_at_least_one("InMemoryReader: chunk_size", options.chunk_size)?;
        let n = reader.len();
        let bar = Progress::new(options.progress, n as u64, "in memory");
        let mut data = CollatedBatch::default();
        let mut chunk = Vec::new();
        let mut start = 0;
        while start < n {
            let end = (start + options.chunk_size).min(n);
            reader.load_collated(&[(start..end).collect()], &mut chunk)?;
            let part = chunk.first().ok_or_else(|| Error::InvalidInput {
                context: reader.name().to_string(),
                reason: "load_collated returned nothing".into(),
            })?;
            if part.num_graphs() != end - start {
                return Err(Error::InvalidInput {
                    context: reader.name().to_string(),
                    reason: format!("load_collated returned {} samples for {}", part.num_graphs(), end - start),
                });
            }
            if start == 0 {
                data = std::mem::take(&mut chunk[0]);
            } else {
                let picks: Vec<(usize, usize)> = (0..part.num_graphs()).map(|k| (0, k)).collect();
                gather_append(&mut data, &[part], &picks, None)?;
            }
            bar.inc((end - start) as u64);
            start = end;
        }
        bar.finish_and_clear();
        data.indices = (0..n).collect();
        if data.atoms_ptr.is_empty() {
            data.atoms_ptr.push(0);
            data.edges_ptr.push(0);
        }
        let levels = if n == 0 {
            reader.schema().fields
        } else {
            data.fields.iter().map(|(k, f)| (k.clone(), f.level)).collect()
        };
        // Checked once here (whatever the reader's batch path checked), so
        // batches copied from the resident data need no check.
        verify_neighbors(&data, |k, r| crate::source::reread_neighbor_error(reader, k, r))?;
        let physical: Vec<usize> = (0..n).map(|i| reader.sample_metadata(i).physical_index).collect();
        let physical = physical.iter().enumerate().any(|(i, &p)| i != p).then_some(physical);
        Ok(InMemoryReader { data, levels, source: format!("{} (in memory)", reader.name()), physical })
    }

    /// Holds `samples` (they must share fields, dtypes and row shapes).
    ///
    /// # Errors
    /// As [`CollatedBatch::fill_from_samples`], naming `source` in
    /// [`Error::NeighborIndex`].
    pub fn from_samples(samples: &[AtomicData], source: impl Into<String>) -> Result<Self> {
        let idx: Vec<usize> = (0..samples.len()).collect();
        let source = source.into();
        let mut data = CollatedBatch::default();
        data.fill_from_samples_opt(&idx, samples, &|k, r| Error::NeighborIndex {
            source_name: source.clone(),
            index: k,
            physical_index: k,
            value: r.value,
            num_atoms: r.num_atoms,
            append_shift: None,
        })?;
        let levels = data.fields.iter().map(|(k, f)| (k.clone(), f.level)).collect();
        Ok(InMemoryReader { data, levels, source, physical: None })
    }

    /// The resident data: every sample, collated, `indices = 0..len`.
    pub fn collated(&self) -> &CollatedBatch {
        &self.data
    }

    /// Bytes held by the field buffers and pointers.
    pub fn nbytes(&self) -> usize {
        self.data.fields.values().map(|f| f.data.as_bytes().len()).sum::<usize>()
            + (self.data.atoms_ptr.len() + self.data.edges_ptr.len()) * 8
    }

    /// One collated batch per inner list (indices in `0..len`), copied
    /// straight from the resident buffers.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] for an index not below [`len`](Reader::len).
    pub fn load_batches(&self, lists: &[Vec<usize>]) -> Result<Vec<CollatedBatch>> {
        let mut out = Vec::with_capacity(lists.len());
        self.load_collated(lists, &mut out)?;
        Ok(out)
    }

    fn check(&self, indices: &[usize]) -> Result<()> {
        Error::check_indices(|| self.source.clone(), indices, self.len())
    }

    fn sample(&self, k: usize) -> Result<AtomicData> {
        self.data.sample(k)
    }
}

impl Reader for InMemoryReader {
    fn len(&self) -> usize {
        self.data.num_graphs()
    }

    fn name(&self) -> &str {
        &self.source
    }

    fn schema(&self) -> Schema {
        let strings = self.data.strings.iter().map(|(k, f)| (k.clone(), f.level)).collect();
        Schema::new(self.levels.clone()).with_strings(strings)
    }

    fn load_many(&self, indices: &[usize]) -> Result<Vec<AtomicData>> {
        // The raw read refuses an index it does not have.
        self.check(indices)?;
        indices.iter().map(|&i| self.sample(i)).collect()
    }

    fn capabilities(&self) -> Capabilities<'_> {
        // Resident buffers: no chunks, no decode.
        Capabilities { index: Some(self), planned: Some(self), chunked: None }
    }
}

/// Physical indices of the source, sizes from the resident pointers.
impl SampleIndex for InMemoryReader {
    fn metadata(&self, index: usize) -> SampleMetadata {
        let physical_index = self.physical.as_ref().and_then(|p| p.get(index).copied()).unwrap_or(index);
        SampleMetadata { index, physical_index, source: Arc::from(self.source.as_str()) }
    }

    fn sizes(&self, index: usize) -> Result<(usize, usize)> {
        let d = &self.data;
        match (d.graph_rows(Level::Atom, index), d.graph_rows(Level::Edge, index)) {
            (Some(a), Some(e)) => Ok((a.len(), e.len())),
            _ => Err(Error::Internal(format!("{}: sample {index} out of range of its pointers", self.source))),
        }
    }

    fn reload(&self) -> Result<()> {
        // A resident copy: nothing changes under it.
        Ok(())
    }
}

/// Nothing to prepare: batches are copied straight from the resident
/// buffers.
impl PlannedReader for InMemoryReader {
    fn prepare(&self, _plan: &mut ReadPlan) -> Result<()> {
        Ok(())
    }

    /// Gathers rows from the resident buffers, then lays them out as the
    /// plan says. A plan made for another number of samples is an
    /// [`Error::PlanMismatch`] (the resident data never changes, so a plan
    /// of the same length reads the same samples).
    fn read_prepared(&self, plan: ReadPlan, out: &mut Vec<CollatedBatch>) -> Result<()> {
        plan.check_length(&self.source, self.len())?;
        let (batches, opts) = plan.into_parts();
        out.resize_with(batches.len(), CollatedBatch::default);
        out.par_iter_mut().zip(batches.par_iter()).try_for_each(|(dst, b)| {
            let picks: Vec<(usize, usize)> = b.iter().map(|&i| (0, i)).collect();
            // The resident data was checked when it was loaded.
            gather(dst, &[&self.data], &picks, None)?;
            dst.indices.clear();
            dst.indices.extend_from_slice(b);
            if opts.narrow_int64() {
                dst.narrow_int64();
            }
            Ok(())
        })
    }
}
