//! Host-side collated batches: one contiguous buffer per field plus CSR atom
//! and edge pointers, the disjoint-graph layout a model consumes.
//!
//! [`CollatedBatch`] is reused across calls (buffers are cleared, not freed),
//! which is how the loader hands the reader memory it already owns.

use std::collections::BTreeMap;

use crate::data::NEIGHBOR_LIST;
use crate::data::{AtomicData, DType, HostData, IndexRange, IndexReport, Level, StringField};
use crate::error::{Error, Result};

/// How a reader lays out collated batches (see
/// [`ReaderExt::plan`](crate::ReaderExt::plan)).
///
/// ```
/// use atomzarr::data::CollateOptions;
/// let opts = CollateOptions::default().with_narrow_int64(true);
/// assert!(opts.narrow_int64());
/// assert!(!CollateOptions::default().narrow_int64());
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CollateOptions {
    narrow_int64: bool,
    /// Leave edge-level fields out (the caller rebuilds them).
    skip_edges: bool,
}

impl CollateOptions {
    /// Collate int64 fields (atomic numbers, neighbor lists, ...) as int32.
    /// Nothing is truncated: the Zarr reader narrows each chunk once, when it
    /// decodes it, and caches the narrowed chunk (half the bytes; a reader
    /// read both ways caches both); an array with a value outside int32 is
    /// read as int64 from the first read that meets it on. Readers without
    /// a fused path narrow each batch's field when all its values fit
    /// ([`CollatedBatch::narrow_int64`]). Default off. The
    /// [`DataLoader`](crate::DataLoader) turns it on for devices whose int
    /// tensors are int32 (Flex, CUDA), so building device batches converts
    /// nothing.
    pub fn with_narrow_int64(mut self, yes: bool) -> Self {
        self.narrow_int64 = yes;
        self
    }

    /// Whether int64 fields are narrowed to int32.
    pub fn narrow_int64(&self) -> bool {
        self.narrow_int64
    }

    /// Lets a reader leave out edge-level fields and give every sample zero
    /// edges: the [`Dataset`](crate::Dataset) asks for it when it builds
    /// neighbor lists at a cutoff, which replace the stored edges anyway.
    /// The Zarr reader then decodes no edge chunk; readers without a fused
    /// path may still return the edges.
    pub(crate) fn with_skip_edges(mut self, yes: bool) -> Self {
        self.skip_edges = yes;
        self
    }

    /// Whether edge-level fields may be left out.
    pub(crate) fn skip_edges(&self) -> bool {
        self.skip_edges
    }
}

/// What a batch holds for one field: its name, level, dtype and the shape
/// of one row (what [`CollatedBatch::reset`] lays buffers out by).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldLayout {
    /// The field's name.
    pub name: String,
    /// Atom, edge or system.
    pub level: Level,
    /// Element type as the batch holds it.
    pub dtype: DType,
    /// Shape of one row.
    pub trailing: Vec<usize>,
}

/// One field of a collated batch.
#[derive(Debug, Clone, PartialEq)]
pub struct CollatedField {
    /// Atom, edge or system.
    pub level: Level,
    /// Shape of one row (the batch's rows are the level's axis).
    pub trailing_shape: Vec<usize>,
    /// All rows of all samples, concatenated in batch order.
    pub data: HostData,
}

impl CollatedField {
    /// Rows in the batch.
    pub fn rows(&self) -> usize {
        let per_row: usize = self.trailing_shape.iter().product();
        self.data.len().checked_div(per_row).unwrap_or(0)
    }

    /// Full shape `[rows, trailing...]`.
    pub fn shape(&self) -> Vec<usize> {
        let mut s = vec![self.rows()];
        s.extend(&self.trailing_shape);
        s
    }
}

/// A batch of samples on the host, collated.
///
/// `neighbor_list` (if present) holds batch-local atom indices: sample `k`'s
/// edges point into rows `atoms_ptr[k]..atoms_ptr[k+1]`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CollatedBatch {
    /// Logical indices of the samples, in batch order.
    pub indices: Vec<usize>,
    /// `[B+1]` atom offsets.
    pub atoms_ptr: Vec<i64>,
    /// `[B+1]` edge offsets.
    pub edges_ptr: Vec<i64>,
    /// Fields by name.
    pub fields: BTreeMap<String, CollatedField>,
    /// String labels by name, every graph's rows concatenated in batch
    /// order (one value per graph for system labels, one per atom for atom
    /// labels).
    pub strings: BTreeMap<String, StringField>,
    /// The [`BatchBuffers`](super::BatchBuffers) the field buffers came from, which take them back when the
    /// device tensors made from them are dropped
    /// ([`AtomicBatch::from_collated`](crate::AtomicBatch::from_collated)).
    pub buffers: super::BufferHome,
}

impl CollatedBatch {
    /// Gives the field buffers back to the free buffers they came from (see
    /// [`buffers`](Self::buffers)), for later batches to be written into, and
    /// drops the rest. A consumer of host batches done with one calls this
    /// rather than dropping it, which frees the memory instead.
    ///
    /// ```
    /// # fn main() -> atomzarr::Result<()> {
    /// use atomzarr::{AtomicDataZarrReader, AtomicDataZarrWriter, ReaderExt, ZarrWriteConfig};
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("r.zarr");
    /// let samples = atomzarr::data::synth::generate(4, 2000, 2000, 0)?;
    /// AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default())?.write(&samples)?;
    /// let reader = AtomicDataZarrReader::open(&path)?;
    /// let mut out = Vec::new();
    /// reader.read_collated(&[vec![0, 1, 2, 3]], &mut out)?;
    /// let free = reader.batch_buffers();
    /// assert_eq!(free.held_bytes(), 0);
    /// out.pop().unwrap().recycle();
    /// assert!(free.held_bytes() > 0, "positions, forces, ... are back");
    /// # Ok(()) }
    /// ```
    pub fn recycle(self) {
        let CollatedBatch { fields, buffers, .. } = self;
        for (_, f) in fields {
            buffers.give(f.data);
        }
    }

    /// Number of samples (graphs).
    pub fn num_graphs(&self) -> usize {
        self.indices.len()
    }

    /// Total atoms.
    pub fn num_atoms(&self) -> usize {
        self.atoms_ptr.last().copied().unwrap_or(0) as usize
    }

    /// Total edges.
    pub fn num_edges(&self) -> usize {
        self.edges_ptr.last().copied().unwrap_or(0) as usize
    }

    /// Empties the batch, keeping every buffer's allocation, and makes sure a
    /// buffer exists for each field of `layout`.
    pub fn reset(&mut self, layout: &[FieldLayout]) {
        self.indices.clear();
        self.atoms_ptr.clear();
        self.atoms_ptr.push(0);
        self.edges_ptr.clear();
        self.edges_ptr.push(0);
        self.fields.retain(|name, _| layout.iter().any(|l| &l.name == name));
        self.strings.clear();
        for FieldLayout { name, level, dtype, trailing } in layout {
            let keep = self
                .fields
                .get(name)
                .is_some_and(|f| f.data.dtype() == *dtype && f.level == *level && &f.trailing_shape == trailing);
            if keep {
                if let Some(f) = self.fields.get_mut(name) {
                    f.data.clear();
                }
            } else {
                self.fields.insert(
                    name.clone(),
                    CollatedField {
                        level: *level,
                        trailing_shape: trailing.clone(),
                        data: HostData::with_capacity(*dtype, 0),
                    },
                );
            }
        }
    }

    /// Collates samples (the generic path used by readers without a fused
    /// batch path, and by validated batches). Fields must agree across
    /// samples in level, dtype and trailing shape.
    ///
    /// # Errors
    /// As [`CollatedBatch::fill_from_samples`].
    pub fn from_samples(indices: &[usize], samples: &[AtomicData]) -> Result<CollatedBatch> {
        let mut b = CollatedBatch::default();
        b.fill_from_samples(indices, samples)?;
        Ok(b)
    }

    /// As [`CollatedBatch::from_samples`], into this batch's buffers.
    ///
    /// Every neighbor index is checked against its own sample's atom count
    /// while it is copied: an index outside `[0, num_atoms)` would point
    /// into another structure of the batch, so it is an
    /// [`Error::NeighborIndex`] (source `"batch"`, the sample named by its
    /// entry in `indices`).
    ///
    /// ```
    /// use atomzarr::{AtomicData, CollatedBatch, Error};
    /// let ok = AtomicData::new(vec![1, 1], vec![[0.0; 3]; 2]).unwrap().with_neighbor_list(vec![[0, 1]], None).unwrap();
    /// let bad = ok.clone().with_neighbor_list(vec![[0, 2]], None).unwrap();
    /// let b = CollatedBatch::from_samples(&[7, 8], &[ok.clone(), ok.clone()]).unwrap();
    /// assert_eq!(b.fields["neighbor_list"].data.to_i64_vec().unwrap(), vec![0, 1, 2, 3]);
    /// let e = CollatedBatch::from_samples(&[7, 8], &[ok, bad]).unwrap_err();
    /// assert!(matches!(e, Error::NeighborIndex { index: 8, value: 2, num_atoms: 2, .. }), "{e}");
    /// ```
    ///
    /// # Errors
    /// [`Error::NeighborIndex`] for such an index; [`Error::InvalidInput`]
    /// naming the sample and field when fields or string labels differ from
    /// the first sample's in name, level, dtype or trailing shape.
    pub fn fill_from_samples(&mut self, indices: &[usize], samples: &[AtomicData]) -> Result<()> {
        self.fill_from_samples_opt(indices, samples, &|k, r| Error::NeighborIndex {
            source_name: "batch".into(),
            index: indices.get(k).copied().unwrap_or(k),
            physical_index: indices.get(k).copied().unwrap_or(k),
            value: r.value,
            num_atoms: r.num_atoms,
            append_shift: None,
        })
    }

    /// Gives each new field buffer of `layout` room for `samples` from
    /// the batch's home: memory a delivered batch gave back.
    fn take_recycled(&mut self, layout: &[FieldLayout], samples: &[AtomicData]) {
        let Some(free) = self.buffers.get() else { return };
        for l in layout {
            let need = samples.iter().filter_map(|s| s.fields.get(&l.name)).map(|f| f.data.len()).sum();
            if let Some(dst) = self.fields.get_mut(&l.name).filter(|d| d.data.capacity() == 0) {
                dst.data = free.take(l.dtype, need);
            }
        }
    }

    /// As [`CollatedBatch::fill_from_samples`]; `range_error(k, report)`
    /// builds the error for batch position `k` (readers name their store).
    pub(crate) fn fill_from_samples_opt(
        &mut self,
        indices: &[usize],
        samples: &[AtomicData],
        range_error: &dyn Fn(usize, IndexReport) -> Error,
    ) -> Result<()> {
        let layout: Vec<FieldLayout> = samples
            .first()
            .map(|s| {
                s.fields
                    .iter()
                    .map(|(n, f)| FieldLayout {
                        name: n.clone(),
                        level: f.level,
                        dtype: f.dtype(),
                        trailing: f.trailing_shape().to_vec(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        self.reset(&layout);
        self.take_recycled(&layout, samples);
        for (k, s) in samples.iter().enumerate() {
            let atom_base = *self.atoms_ptr.last().unwrap_or(&0);
            if s.fields.len() != layout.len() {
                return Err(field_count_mismatch(k, s, &layout));
            }
            for (name, f) in &s.fields {
                let dst = self.fields.get_mut(name).ok_or_else(|| {
                    Error::invalid(format!("batch sample {k}"), format!("field {name} not in the first sample"))
                })?;
                if dst.level != f.level || dst.data.dtype() != f.dtype() || dst.trailing_shape != f.trailing_shape() {
                    return Err(Error::invalid(
                        format!("batch sample {k}, field {name}"),
                        format!(
                            "{} {} {:?} differs from the first sample's {} {} {:?}",
                            f.level,
                            f.dtype(),
                            f.trailing_shape(),
                            dst.level,
                            dst.data.dtype(),
                            dst.trailing_shape
                        ),
                    ));
                }
                if name == NEIGHBOR_LIST {
                    // Moved to batch-local and range-checked in one copy.
                    let n = s.num_atoms() as u64;
                    let start = dst.data.len();
                    if !dst
                        .data
                        .extend_indices_checked(f.data.as_bytes(), IndexRange { lo: 0, n, offset: atom_base })?
                    {
                        return Err(bad_indices(&dst.data, start, atom_base, n, |r| range_error(k, r)));
                    }
                } else {
                    dst.data.extend_from(&f.data)?;
                }
            }
            self.append_strings(k, s)?;
            self.atoms_ptr.push(atom_base + s.num_atoms() as i64);
            let e = *self.edges_ptr.last().unwrap_or(&0);
            self.edges_ptr.push(e + s.num_edges() as i64);
        }
        self.indices.clear();
        self.indices.extend_from_slice(indices);
        Ok(())
    }

    /// Appends sample `k`'s string labels; the first sample sets which
    /// labels the batch has.
    fn append_strings(&mut self, k: usize, s: &AtomicData) -> Result<()> {
        if k == 0 {
            self.strings =
                s.strings.iter().map(|(n, f)| (n.clone(), StringField { level: f.level, values: vec![] })).collect();
        }
        if s.strings.len() != self.strings.len() {
            return Err(Error::invalid(
                format!("batch sample {k}"),
                format!("{} string labels, the first sample has {}", s.strings.len(), self.strings.len()),
            ));
        }
        for (name, f) in &s.strings {
            match self.strings.get_mut(name) {
                Some(dst) if dst.level == f.level => dst.values.extend(f.values.iter().cloned()),
                _ => {
                    return Err(Error::invalid(
                        format!("batch sample {k}"),
                        format!("string label {name} ({}) differs from the first sample's", f.level),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Stores each int64 field as int32 when all its values fit (see
    /// [`CollateOptions::narrow_int64`]); other fields are left as they are.
    /// This is the separate pass that readers without a fused path use.
    ///
    /// ```
    /// use atomzarr::{AtomicData, CollatedBatch, HostData};
    /// let s = AtomicData::new(vec![8, 1], vec![[0.0; 3]; 2]).unwrap();
    /// let mut b = CollatedBatch::from_samples(&[0], &[s]).unwrap();
    /// b.narrow_int64();
    /// assert_eq!(b.fields["atomic_numbers"].data, HostData::Int32(vec![8, 1]));
    /// ```
    pub fn narrow_int64(&mut self) {
        for f in self.fields.values_mut() {
            if let HostData::Int64(v) = &f.data
                && let Some(narrow) = crate::data::narrow_i64(v)
            {
                f.data = HostData::Int32(narrow);
            }
        }
    }

    /// Rows of graph `k` on `level`'s axis, `None` when `k` is out of range
    /// or the batch's pointers are inconsistent.
    pub fn graph_rows(&self, level: Level, k: usize) -> Option<std::ops::Range<usize>> {
        super::Pointers { atoms: &self.atoms_ptr, edges: &self.edges_ptr }.checked_rows(level, k)
    }

    /// Graph `k` as a sample, its neighbor list made sample-local: the one
    /// place a collated batch (or an [`InMemoryReader`](crate::InMemoryReader)'s
    /// resident buffers) is split into samples.
    ///
    /// ```
    /// use atomzarr::{AtomicData, CollatedBatch};
    /// let a = AtomicData::new(vec![1, 1], vec![[0.0; 3]; 2]).unwrap().with_neighbor_list(vec![[0, 1]], None).unwrap();
    /// let b = AtomicData::new(vec![8], vec![[1.0; 3]]).unwrap().with_neighbor_list(vec![[0, 0]], None).unwrap();
    /// let batch = CollatedBatch::from_samples(&[0, 1], &[a.clone(), b.clone()]).unwrap();
    /// assert_eq!(batch.fields["neighbor_list"].data.to_i64_vec(), Some(vec![0, 1, 2, 2])); // batch-local
    /// assert_eq!(batch.sample(1).unwrap(), b);
    /// assert!(batch.sample(2).is_err());
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the sample when `k` is not below
    /// [`num_graphs`](Self::num_graphs) or the batch's buffers do not cover its rows.
    pub fn sample(&self, k: usize) -> Result<AtomicData> {
        let mut s = AtomicData::default();
        for (name, f) in &self.fields {
            let rows = self.graph_rows(f.level, k).ok_or_else(|| {
                Error::invalid(
                    format!("batch sample {k}"),
                    format!("out of range of the batch's {} graphs", self.num_graphs()),
                )
            })?;
            let row_bytes = f.trailing_shape.iter().product::<usize>() * f.data.dtype().size();
            let bytes = f.data.as_bytes().get(rows.start * row_bytes..rows.end * row_bytes).ok_or_else(|| {
                Error::invalid(
                    format!("batch sample {k}, field {name}"),
                    format!("rows {}..{} beyond the field's {} rows", rows.start, rows.end, f.rows()),
                )
            })?;
            let data = if name == NEIGHBOR_LIST {
                let mut data =
                    HostData::with_capacity(f.data.dtype(), rows.len() * f.trailing_shape.iter().product::<usize>());
                // graph_rows checked k < num_graphs, so atoms_ptr[k] exists.
                data.extend_rebased(bytes, -self.atoms_ptr[k])?;
                data
            } else {
                HostData::from_bytes(f.data.dtype(), bytes)?
            };
            let mut shape = Vec::with_capacity(1 + f.trailing_shape.len());
            shape.push(rows.len());
            shape.extend(&f.trailing_shape);
            s.fields.insert(name.clone(), crate::data::Field { level: f.level, shape, data });
        }
        for (name, f) in &self.strings {
            let values = self
                .graph_rows(f.level, k)
                .and_then(|rows| f.values.get(rows))
                .ok_or_else(|| {
                    Error::invalid(
                        format!("batch sample {k}, string label {name}"),
                        format!("{} values do not cover graph {k}'s rows", f.values.len()),
                    )
                })?
                .to_vec();
            s.strings.insert(name.clone(), StringField { level: f.level, values });
        }
        Ok(s)
    }

    /// Splits the batch back into samples (neighbor lists made sample-local).
    ///
    /// # Errors
    /// As [`CollatedBatch::sample`].
    pub fn to_samples(&self) -> Result<Vec<AtomicData>> {
        (0..self.num_graphs()).map(|k| self.sample(k)).collect()
    }
}

/// Collates `samples`, the samples of `lists` concatenated, into `out`: one
/// batch per list, each filling the buffers its batch already has, int64
/// indices narrowed to int32 when `narrow_int64`. `index_error(i, report)`
/// builds the error for a neighbor list of logical index `i` pointing
/// outside its sample; `name` (the reader) is named when `samples` is not
/// one sample per index.
pub(crate) fn collate_lists(
    out: &mut [CollatedBatch],
    lists: &[Vec<usize>],
    samples: &[AtomicData],
    narrow_int64: bool,
    name: &str,
    index_error: &dyn Fn(usize, IndexReport) -> Error,
) -> Result<()> {
    // Callers size `out` to `lists`, so the zip below fills every batch.
    debug_assert_eq!(out.len(), lists.len());
    let asked: usize = lists.iter().map(Vec::len).sum();
    if samples.len() != asked {
        return Err(Error::InvalidInput {
            context: name.to_string(),
            reason: format!("load_many returned {} samples for {asked} indices", samples.len()),
        });
    }
    let mut start = 0;
    for (list, dst) in lists.iter().zip(out.iter_mut()) {
        dst.fill_from_samples_opt(list, &samples[start..start + list.len()], &|k, report| {
            index_error(list[k], report)
        })?;
        if narrow_int64 {
            dst.narrow_int64();
        }
        start += list.len();
    }
    Ok(())
}

/// The error for indices `start..` of `data` (one sample whose atoms are
/// `base..base + n` there) after a checked copy found one out of range.
pub(crate) fn bad_indices(
    data: &HostData,
    start: usize,
    base: i64,
    n: u64,
    err: impl FnOnce(IndexReport) -> Error,
) -> Error {
    match data.index_report(start..data.len(), base, n) {
        Some(r) => err(r),
        // The copy's int32 offset did not fit (see `extend_indices_checked`).
        None => Error::invalid(NEIGHBOR_LIST, format!("atom offset of a sample beyond int32 (base {base})")),
    }
}

/// The error for batch sample `k` whose fields differ in number from the
/// first sample's `layout`: names the fields in which the two differ (a
/// label one has and the other lacks is the usual case).
fn field_count_mismatch(k: usize, s: &AtomicData, layout: &[FieldLayout]) -> Error {
    let missing: Vec<&str> = layout.iter().map(|l| l.name.as_str()).filter(|n| !s.fields.contains_key(*n)).collect();
    let extra: Vec<&str> =
        s.fields.keys().map(String::as_str).filter(|n| !layout.iter().any(|l| l.name == *n)).collect();
    Error::invalid(
        format!("batch sample {k}"),
        format!(
            "{} fields, the first sample has {} (lacks {missing:?} of the first sample; has {extra:?} it lacks)",
            s.fields.len(),
            layout.len()
        ),
    )
}
