//! [`MultiReader`]: several readers behind one global index space.
//!
//! Child `d` owns global indices `offsets[d]..offsets[d + 1]` (offsets are
//! the running sum of child lengths). A request is split per child, served
//! by ONE read of each child that has samples in it (so a Zarr child still
//! plans its chunks over the whole request), and recombined in the caller's
//! order. Children are any [`Reader`]: a store reader, an
//! [`InMemoryReader`](crate::InMemoryReader), or a [`Dataset`](crate::Dataset)
//! with its own validation and transforms.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use rayon::prelude::*;

use crate::data::{AtomicData, BatchBuffers, BufferHome, DEFAULT_BATCH_BUFFER_BYTES, IndexReport, Level};
use crate::data::{CollateOptions, CollatedBatch, CollatedField, Field, HostData};
use crate::error::{Error, Result};
use crate::source::gather;
pub use crate::source::multi_options::{DATASET_INDEX, LOSS_WEIGHT, MultiReaderOptions};
use crate::source::plan::{BatchSource, MixedPlan};
use crate::source::split_cache_budget_by_passes;
use crate::source::union::FieldUnion;
use crate::source::{CacheFit, Capabilities, ChunkedReader, DecodeCounters, PlannedReader};
use crate::source::{Prepared, ReadPlan, Reader, ReaderExt, SampleIndex, SampleMetadata, Schema};

/// Several [`Reader`]s behind one global index space; itself a [`Reader`],
/// so `Dataset::new(multi)` and the [`DataLoader`](crate::DataLoader) take it.
///
/// ```
/// # fn main() -> atomzarr::Result<()> {
/// use std::sync::Arc;
/// use atomzarr::{InMemoryReader, MultiReader, Reader, ReaderExt};
/// let a = InMemoryReader::from_samples(&atomzarr::data::synth::generate(3, 2, 4, 1)?, "a")?;
/// let b = InMemoryReader::from_samples(&atomzarr::data::synth::generate(5, 2, 4, 2)?, "b")?;
/// let multi = MultiReader::new(vec![Arc::new(a.clone()), Arc::new(b.clone())])?;
/// assert_eq!(multi.len(), 8);
/// assert_eq!(multi.offsets(), vec![0, 3, 8]);
/// assert_eq!(multi.to_local_index(4)?, (1, 1));
/// let got = multi.read_many(&[4, 0])?;
/// assert_eq!(got[0].data, b.read(1)?.data);
/// assert_eq!(got[0].metadata.source.as_ref(), "b");
/// assert_eq!(got[1].data, a.read(0)?.data);
/// # Ok(()) }
/// ```
pub struct MultiReader {
    children: Vec<Arc<dyn Reader>>,
    /// `children.len() + 1` running lengths; swapped whole by `refresh`.
    offsets: RwLock<Arc<Vec<usize>>>,
    output_strict: bool,
    dataset_index: bool,
    /// The union of the children's fields, when they differ (`output_strict` off).
    union: RwLock<Option<Arc<FieldUnion>>>,
    /// Each child's loss weight, as [`LOSS_WEIGHT`].
    loss_weights: Option<Vec<f32>>,
    /// The budget the children's caches share (see [`MultiReaderOptions::with_cache_bytes`]).
    cache_bytes: std::sync::atomic::AtomicU64,
    /// How many times over an epoch draws each child, when a loader's
    /// mixing sampler said (empty: not known; equal parts).
    passes: std::sync::Mutex<Vec<f64>>,
    /// Memory of the batches gathered from several children, back from
    /// their consumers for later ones.
    batch_buffers: Arc<BatchBuffers>,
    source: String,
}

impl std::fmt::Debug for MultiReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiReader")
            .field("source", &self.source)
            .field("offsets", &self.offsets())
            .field("output_strict", &self.output_strict)
            .finish()
    }
}

/// `(child, local index)` of `global`, an index below the last offset
/// (checked by the caller).
fn owner(offsets: &[usize], global: usize) -> (usize, usize) {
    // The last offset <= global; empty children share their offset and are skipped.
    let d = offsets.partition_point(|&o| o <= global).saturating_sub(1);
    (d, global - offsets[d])
}

fn offsets_of(children: &[Arc<dyn Reader>]) -> Vec<usize> {
    let mut o = Vec::with_capacity(children.len() + 1);
    o.push(0);
    for c in children {
        o.push(o[o.len() - 1] + c.len());
    }
    o
}

/// Errors naming the fields in which non-empty children differ.
fn check_strict(children: &[Arc<dyn Reader>]) -> Result<()> {
    let mut reference: Option<(usize, BTreeMap<String, Level>)> = None;
    for (d, c) in children.iter().enumerate() {
        if c.is_empty() {
            continue;
        }
        let levels = c.schema().fields;
        let Some((r, want)) = &reference else {
            reference = Some((d, levels));
            continue;
        };
        if &levels != want {
            let missing: Vec<&String> = want.keys().filter(|n| !levels.contains_key(*n)).collect();
            let extra: Vec<&String> = levels.keys().filter(|n| !want.contains_key(*n)).collect();
            let level: Vec<&String> =
                want.iter().filter(|(n, l)| levels.get(*n).is_some_and(|x| x != *l)).map(|(n, _)| n).collect();
            return Err(Error::invalid(
                format!("MultiReader output_strict: dataset {d} ({})", c.name()),
                format!(
                    "differs from dataset {r} ({}): missing fields {missing:?}, extra fields {extra:?}, \
                     different level {level:?}",
                    children[*r].name()
                ),
            ));
        }
    }
    Ok(())
}

impl MultiReader {
    /// Children in global index order, `output_strict` on.
    ///
    /// # Errors
    /// [`Error::Config`] when there is no child; [`Error::InvalidInput`]
    /// when non-empty children differ in field names or levels.
    pub fn new(children: Vec<Arc<dyn Reader>>) -> Result<Self> {
        Self::with_options(children, MultiReaderOptions::default())
    }

    /// As [`MultiReader::new`] with options.
    ///
    /// # Errors
    /// [`Error::Config`] when there is no child; [`Error::InvalidInput`] when
    /// `output_strict` is on and non-empty children differ in field names or
    /// levels, or `dataset_index` is on and a child has a field of that name
    /// already.
    pub fn with_options(children: Vec<Arc<dyn Reader>>, options: MultiReaderOptions) -> Result<Self> {
        if children.is_empty() {
            return Err(Error::Config("MultiReader needs at least one child".into()));
        }
        if options.output_strict {
            check_strict(&children)?;
        }
        if options.dataset_index
            && let Some(c) = children.iter().find(|c| c.schema().fields.contains_key(DATASET_INDEX))
        {
            return Err(Error::invalid(
                format!("MultiReader with_dataset_index: child {}", c.name()),
                format!("has a field {DATASET_INDEX} already"),
            ));
        }
        let source = format!("multi[{}]", children.iter().map(|c| c.name()).collect::<Vec<_>>().join(", "));
        let union = if options.output_strict { None } else { FieldUnion::of(&children)?.map(Arc::new) };
        let multi = MultiReader {
            union: RwLock::new(union),
            loss_weights: None,
            offsets: RwLock::new(Arc::new(offsets_of(&children))),
            children,
            output_strict: options.output_strict,
            dataset_index: options.dataset_index,
            cache_bytes: options.cache_bytes.into(),
            passes: std::sync::Mutex::new(Vec::new()),
            batch_buffers: BatchBuffers::new(DEFAULT_BATCH_BUFFER_BYTES),
            source,
        };
        multi.share_cache();
        Ok(multi)
    }

    /// Sets each child's cache budget to its share of the mixture's, and
    /// logs the split.
    fn share_cache(&self) {
        let budget = self.cache_bytes.load(std::sync::atomic::Ordering::Relaxed);
        let fits = self.part_fits();
        let passes = crate::threads::lock(&self.passes).clone();
        let shares = split_cache_budget_by_passes(&fits, budget, &passes);
        let mib = |b: u64| b as f64 / f64::from(1 << 20);
        for ((c, share), fit) in self.children.iter().zip(&shares).zip(&fits) {
            if let Some(ch) = c.chunked() {
                ch.set_cache_bytes(*share);
                log::info!(
                    "{}: cache share {:.0} MiB of the mixture's {:.0} MiB (decodes to {:.0} MiB, {:.0} MiB resident)",
                    c.name(),
                    mib(*share),
                    mib(budget),
                    mib(fit.decoded_bytes),
                    mib(fit.resident_bytes)
                );
            }
        }
    }

    /// The children.
    pub fn children(&self) -> &[Arc<dyn Reader>] {
        &self.children
    }

    /// Child lengths (as of construction or the last [`ReaderExt::refresh`]).
    pub fn child_lens(&self) -> Vec<usize> {
        self.offsets().windows(2).map(|w| w[1] - w[0]).collect()
    }

    /// Running offsets: child `d` owns `offsets[d]..offsets[d + 1]`.
    pub fn offsets(&self) -> Vec<usize> {
        self.snapshot().to_vec()
    }

    /// Whether `output_strict` is on.
    pub fn output_strict(&self) -> bool {
        self.output_strict
    }

    fn snapshot(&self) -> Arc<Vec<usize>> {
        // The lock only guards an Arc swap; a poisoned lock still holds a valid Arc.
        self.offsets.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    fn locate(&self, offsets: &[usize], global: usize) -> Result<(usize, usize)> {
        let len = offsets.last().copied().unwrap_or(0);
        Error::check_indices(|| self.source.clone(), [&global], len)?;
        Ok(owner(offsets, global))
    }

    /// `(child, local index)` of a global index.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] when `global` is not below the total length.
    pub fn to_local_index(&self, global: usize) -> Result<(usize, usize)> {
        self.locate(&self.snapshot(), global)
    }

    /// The global index of `local` in child `child`.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] when `child` is not below the number of
    /// children, or naming the child when `local` is not below its length.
    pub fn to_global_index(&self, child: usize, local: usize) -> Result<usize> {
        let o = self.snapshot();
        Error::check_indices(|| format!("{} (its children)", self.name()), [&child], o.len().saturating_sub(1))?;
        Error::check_indices(|| self.children[child].name().to_string(), [&local], o[child + 1] - o[child])?;
        Ok(o[child] + local)
    }

    /// Every sample and batch carries the system field [`LOSS_WEIGHT`]
    /// (float32): `weights[d]` for a sample of child `d`, the weight of its
    /// data set in a multi-task loss
    /// ([`pipeline::loss::multi_task_loss`](crate::pipeline::loss::multi_task_loss)).
    ///
    /// ```
    /// # fn main() -> atomzarr::Result<()> {
    /// use std::sync::Arc;
    /// use atomzarr::{InMemoryReader, MultiReader, Reader, ReaderExt};
    /// let a = InMemoryReader::from_samples(&atomzarr::data::synth::generate(2, 2, 4, 1)?, "a")?;
    /// let b = InMemoryReader::from_samples(&atomzarr::data::synth::generate(3, 2, 4, 2)?, "b")?;
    /// let multi = MultiReader::new(vec![Arc::new(a), Arc::new(b)])?.with_loss_weights(vec![1.0, 0.25])?;
    /// let mut out = Vec::new();
    /// multi.read_collated(&[vec![4, 0]], &mut out)?;
    /// assert_eq!(out[0].fields["loss_weight"].data, atomzarr::HostData::Float32(vec![0.25, 1.0]));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Config`] when there is not one weight per child, or a
    /// weight is negative or not finite; [`Error::InvalidInput`] when a
    /// child has a field of that name already.
    pub fn with_loss_weights(mut self, weights: Vec<f32>) -> Result<Self> {
        if weights.len() != self.children.len() || weights.iter().any(|w| !w.is_finite() || *w < 0.0) {
            return Err(Error::Config(format!(
                "{}: loss weights {weights:?}: one finite weight >= 0 per child ({} children)",
                self.source,
                self.children.len()
            )));
        }
        if let Some(c) = self.children.iter().find(|c| c.schema().fields.contains_key(LOSS_WEIGHT)) {
            return Err(Error::invalid(
                format!("MultiReader with_loss_weights: child {}", c.name()),
                format!("has a field {LOSS_WEIGHT} already"),
            ));
        }
        self.loss_weights = Some(weights);
        Ok(self)
    }

    /// Each child's loss weight, when set.
    pub fn loss_weights(&self) -> Option<&[f32]> {
        self.loss_weights.as_deref()
    }

    fn union(&self) -> Option<Arc<FieldUnion>> {
        self.union.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Child `d`'s sample as the mixture has it: the union's fields, and
    /// the fields the mixture adds.
    fn finish_sample(&self, union: Option<&FieldUnion>, d: usize, s: AtomicData) -> Result<AtomicData> {
        let mut s = match union {
            Some(u) => u.fill_sample(d, s)?,
            None => s,
        };
        if self.dataset_index {
            s = s
                .with_field(DATASET_INDEX, Field { level: Level::System, shape: vec![1], data: vec![d as i64].into() });
        }
        if let Some(w) = &self.loss_weights {
            s = s.with_field(LOSS_WEIGHT, Field { level: Level::System, shape: vec![1], data: vec![w[d]].into() });
        }
        Ok(s)
    }

    /// Adds the fields the mixture adds to a batch of global indices `b`.
    fn add_fields(&self, offsets: &[usize], dst: &mut CollatedBatch, b: &[usize]) {
        let system = |data| CollatedField { level: Level::System, trailing_shape: vec![], data };
        if self.dataset_index {
            let children = b.iter().map(|&g| owner(offsets, g).0 as i64).collect();
            dst.fields.insert(DATASET_INDEX.into(), system(HostData::Int64(children)));
        }
        if let Some(w) = &self.loss_weights {
            let weights = b.iter().map(|&g| w[owner(offsets, g).0]).collect();
            dst.fields.insert(LOSS_WEIGHT.into(), system(HostData::Float32(weights)));
        }
    }
}

/// Every method goes to the child that owns the sample, or to all children.
// A wrapper forwards every capability: none may fall back to a default.
#[deny(clippy::missing_trait_methods)]
impl Reader for MultiReader {
    fn len(&self) -> usize {
        self.snapshot().last().copied().unwrap_or(0)
    }

    fn name(&self) -> &str {
        &self.source
    }

    /// The union of the children's fields (the first non-empty child's,
    /// when they agree), with [`DATASET_INDEX`] and [`LOSS_WEIGHT`] when
    /// they are added.
    fn schema(&self) -> Schema {
        let mut schema = match self.union() {
            Some(u) => u.schema(),
            None => self.children.iter().find(|c| !c.is_empty()).unwrap_or(&self.children[0]).schema(),
        };
        if self.dataset_index {
            schema.fields.insert(DATASET_INDEX.to_string(), Level::System);
        }
        if self.loss_weights.is_some() {
            schema.fields.insert(LOSS_WEIGHT.to_string(), Level::System);
        }
        schema
    }

    fn load_many(&self, indices: &[usize]) -> Result<Vec<AtomicData>> {
        let offsets = self.snapshot();
        let union = self.union();
        let n = self.children.len();
        let mut locals: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut positions: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (pos, &g) in indices.iter().enumerate() {
            let (d, l) = self.locate(&offsets, g)?;
            locals[d].push(l);
            positions[d].push(pos);
        }
        let loaded: Vec<Vec<AtomicData>> = (0..n)
            .into_par_iter()
            .map(|d| if locals[d].is_empty() { Ok(Vec::new()) } else { self.children[d].load_many(&locals[d]) })
            .collect::<Result<_>>()?;
        let mut out: Vec<Option<AtomicData>> = vec![None; indices.len()];
        for (d, samples) in loaded.into_iter().enumerate() {
            if samples.len() != positions[d].len() {
                return Err(Error::InvalidInput {
                    context: self.children[d].name().to_string(),
                    reason: format!("load_many returned {} samples for {} indices", samples.len(), positions[d].len()),
                });
            }
            for (s, &p) in samples.into_iter().zip(&positions[d]) {
                out[p] = Some(self.finish_sample(union.as_deref(), d, s)?);
            }
        }
        // Every position was filled by exactly one child above.
        out.into_iter().map(|s| s.ok_or_else(|| Error::Internal("MultiReader: a sample went missing".into()))).collect()
    }

    /// The children's capabilities combined: the index and planning always
    /// (each child answers for its samples), [`ChunkedReader`] when at
    /// least one child has stored chunks.
    fn capabilities(&self) -> Capabilities<'_> {
        let chunked = self.children.iter().any(|c| c.chunked().is_some()).then_some(self as &dyn ChunkedReader);
        Capabilities { index: Some(self), planned: Some(self), chunked }
    }
}

/// Each sample's facts from the child that owns it.
impl SampleIndex for MultiReader {
    /// The child's metadata, under the global index.
    fn metadata(&self, index: usize) -> SampleMetadata {
        match self.to_local_index(index) {
            Ok((d, l)) => SampleMetadata { index, ..self.children[d].sample_metadata(l) },
            Err(_) => SampleMetadata { index, physical_index: index, source: Arc::from(self.source.as_str()) },
        }
    }

    fn sizes(&self, index: usize) -> Result<(usize, usize)> {
        let (d, l) = self.to_local_index(index)?;
        self.children[d].sample_sizes(l)
    }

    /// Refreshes every child, then the offsets (and, under `output_strict`,
    /// re-checks the fields; without it, takes their union anew). Refresh children through the MultiReader, not
    /// directly, or the offsets go stale.
    fn reload(&self) -> Result<()> {
        for c in &self.children {
            c.refresh()?;
        }
        if self.output_strict {
            check_strict(&self.children)?;
        } else {
            let union = FieldUnion::of(&self.children)?.map(Arc::new);
            *self.union.write().unwrap_or_else(std::sync::PoisonError::into_inner) = union;
        }
        *self.offsets.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(offsets_of(&self.children));
        // Grown children need more: split the budget anew.
        self.share_cache();
        Ok(())
    }
}

impl PlannedReader for MultiReader {
    /// Splits the window among the children (one sub-batch per output
    /// batch a child has samples in, in its local indices) and plans each
    /// child's share with the child, children laid out as stored (the
    /// plan's options are applied to the gathered batches).
    fn prepare(&self, plan: &mut ReadPlan) -> Result<()> {
        let offsets = self.snapshot();
        // The split needs the offsets the indices were checked against.
        plan.check_length(&self.source, offsets.last().copied().unwrap_or(0))?;
        let batches = plan.batches();
        let n = self.children.len();
        let mut child_lists: Vec<Vec<Vec<usize>>> = vec![Vec::new(); n];
        let mut sources = Vec::with_capacity(batches.len());
        for b in batches {
            let mut slot_of: Vec<Option<usize>> = vec![None; n];
            let mut slots: Vec<(usize, usize)> = Vec::new();
            let mut picks = Vec::with_capacity(b.len());
            for &g in b {
                let (d, l) = owner(&offsets, g);
                let slot = *slot_of[d].get_or_insert_with(|| {
                    slots.push((d, child_lists[d].len()));
                    child_lists[d].push(Vec::new());
                    slots.len() - 1
                });
                let (_, j) = slots[slot];
                picks.push((slot, child_lists[d][j].len()));
                child_lists[d][j].push(l);
            }
            sources.push(if slots.len() == 1 {
                BatchSource::Single(slots[0].0, slots[0].1)
            } else {
                BatchSource::Mixed(slots, picks)
            });
        }
        let children = child_lists
            .into_iter()
            .zip(&self.children)
            .zip(offsets.windows(2))
            .map(|((lists, c), o)| {
                if lists.is_empty() {
                    return Ok(None);
                }
                // The window's indices were checked; each child's share is in its range.
                let mut part = ReadPlan::part(o[1] - o[0], lists, CollateOptions::default());
                if let Some(p) = c.capabilities().planned {
                    p.prepare(&mut part)?;
                }
                Ok(Some(part))
            })
            .collect::<Result<_>>()?;
        plan.set_prepared(Prepared::Mixed(Box::new(MixedPlan { offsets, children, sources })));
        Ok(())
    }

    /// One read per child, children in parallel; batches that mix children
    /// are gathered from the children's batches. A plan made before a
    /// refresh, or by another reader, is an [`Error::PlanMismatch`].
    fn read_prepared(&self, mut plan: ReadPlan, out: &mut Vec<CollatedBatch>) -> Result<()> {
        let window = match plan.take_prepared() {
            Prepared::Mixed(w) if Arc::ptr_eq(&w.offsets, &self.snapshot()) => *w,
            Prepared::Mixed(_) => {
                return Err(Error::plan_mismatch(&self.source, "planned by another mixture, or before a refresh"));
            }
            _ => return Err(Error::plan_mismatch(&self.source, "planned by a reader of another kind")),
        };
        let (batches, opts) = plan.into_parts();
        let MixedPlan { offsets, children, sources } = window;
        let union = self.union();
        let asked: Vec<Vec<usize>> = children
            .iter()
            .map(|p| p.as_ref().map(|p| p.batches().iter().map(Vec::len).collect()).unwrap_or_default())
            .collect();
        // One read per child, children in parallel.
        let mut child_out: Vec<Vec<CollatedBatch>> = children
            .into_par_iter()
            .enumerate()
            .map(|(d, p)| {
                let mut o = Vec::new();
                if let Some(p) = p {
                    self.children[d].read_plan(p, &mut o)?;
                    let ok = o.len() == asked[d].len() && o.iter().zip(&asked[d]).all(|(c, &l)| c.num_graphs() == l);
                    if !ok {
                        return Err(Error::InvalidInput {
                            context: self.children[d].name().to_string(),
                            reason: "read_plan returned batches that do not match the request".into(),
                        });
                    }
                    if let Some(u) = &union {
                        o.iter_mut().try_for_each(|b| u.fill_batch(d, b))?;
                    }
                }
                Ok(o)
            })
            .collect::<Result<_>>()?;
        out.resize_with(batches.len(), CollatedBatch::default);
        let home = BufferHome::of(&self.batch_buffers);
        // Batches served whole by one child are moved, not copied.
        for (dst, source) in out.iter_mut().zip(&sources) {
            if let BatchSource::Single(d, j) = *source {
                *dst = std::mem::take(&mut child_out[d][j]);
            }
        }
        out.par_iter_mut().zip(sources.par_iter()).zip(batches.par_iter()).try_for_each(|((dst, source), b)| {
            if let BatchSource::Mixed(slots, picks) = source {
                if dst.buffers.get().is_none() {
                    dst.buffers = home.clone();
                }
                let from: Vec<&CollatedBatch> = slots.iter().map(|&(d, j)| &child_out[d][j]).collect();
                // Children checked their own batches; this names the child's
                // sample should a child have let one through.
                let range_error = |pos: usize, r: IndexReport| {
                    let (slot, graph) = picks[pos];
                    let d = slots[slot].0;
                    let local = from[slot].indices.get(graph).copied().unwrap_or(graph);
                    crate::source::neighbor_index_error(&*self.children[d], local, r)
                };
                gather(dst, &from, picks, Some(&range_error))?;
            }
            // Global indices, in request order.
            dst.indices.clear();
            dst.indices.extend_from_slice(b);
            if opts.narrow_int64() {
                dst.narrow_int64();
            }
            Ok(())
        })?;
        // The children's batches that were gathered from go back to their
        // homes (moved ones were taken above).
        for b in child_out.into_iter().flatten() {
            b.recycle();
        }
        for (dst, b) in out.iter_mut().zip(&batches) {
            self.add_fields(&offsets, dst, b);
        }
        Ok(())
    }
}

/// The children's chunk capabilities under the global index space. A child
/// without chunks counts as one block per sample and decodes nothing.
impl ChunkedReader for MultiReader {
    /// Each child's blocks, shifted by its offset: a block never spans two
    /// children.
    fn chunk_blocks(&self) -> Vec<usize> {
        let offsets = self.snapshot();
        let mut starts = Vec::new();
        for (d, c) in self.children.iter().enumerate() {
            let (lo, hi) = (offsets[d], offsets[d + 1]);
            match c.chunked() {
                Some(ch) => starts.extend(ch.chunk_blocks().into_iter().map(|b| lo + b).filter(|&g| g < hi)),
                None => starts.extend(lo..hi),
            }
        }
        starts
    }

    /// The sum over the children with chunks (their caches share the
    /// mixture's budget).
    fn cache_fit(&self) -> CacheFit {
        self.part_fits().into_iter().fold(CacheFit::default(), |a, b| a + b)
    }

    /// Splits `bytes` among the children as [`MultiReaderOptions::with_cache_bytes`] does.
    fn set_cache_bytes(&self, bytes: u64) {
        self.cache_bytes.store(bytes, std::sync::atomic::Ordering::Relaxed);
        self.share_cache();
    }

    /// Each child's fit against its share of the budget.
    fn part_fits(&self) -> Vec<CacheFit> {
        self.children.iter().map(|c| c.chunked().map(|ch| ch.cache_fit()).unwrap_or_default()).collect()
    }

    /// Splits the budget anew for an epoch drawing each child `passes`
    /// times over (see [`split_cache_budget_by_passes`]).
    fn share_cache_by_passes(&self, passes: &[f64]) {
        *crate::threads::lock(&self.passes) = passes.to_vec();
        self.share_cache();
    }

    /// The sum over the children.
    fn decode_counters(&self) -> DecodeCounters {
        self.children.iter().filter_map(|c| c.chunked()).map(|c| c.decode_counters()).sum()
    }

    /// The sum over the children (their caches share the mixture's budget).
    fn cache_bytes_held(&self) -> u64 {
        self.children.iter().filter_map(|c| c.chunked()).map(|c| c.cache_bytes_held()).sum()
    }
}
