//! [`Dataset`]: validation and transforms over any [`Reader`]. It never
//! chooses sample order, and reads in the background only through a
//! [`Prefetcher`](crate::Prefetcher).
//!
//! The canonical batch API is [`Dataset::load_batches`]: one inner list per
//! batch, all served by ONE backend read. With validation skipped and no
//! transforms it takes the reader's collated path (rows copied straight from
//! decoded chunks into batch buffers); otherwise samples are read, validated,
//! transformed and then collated.
//!
//! ```
//! # fn main() -> atomzarr::Result<()> {
//! use atomzarr::{AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, Dataset, ZarrWriteConfig};
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("d.zarr");
//! let mk = |n: usize| AtomicData::new(vec![1; n], vec![[0.0; 3]; n]).unwrap().with_energy(n as f32);
//! AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default())?.write(&[mk(1), mk(2), mk(3)])?;
//! let ds = Dataset::new(AtomicDataZarrReader::open(&path)?);
//! let batches = ds.load_batches(&[vec![2, 0], vec![1]])?;
//! assert_eq!(batches[0].atoms_ptr, vec![0, 3, 4]);
//! let prefetch = atomzarr::Prefetcher::new(1);
//! prefetch.push(&ds, vec![vec![0], vec![1, 2]]);
//! assert!(prefetch.has_pending());
//! assert_eq!(prefetch.pop()?.len(), 2);
//! # Ok(()) }
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use burn::data::dataset::DatasetError;

use super::reads::ReadCtx;
pub use super::reads::{ErrorPolicy, Transform};
use crate::data::AtomicData;
use crate::data::BatchBuffers;
use crate::data::neighbors;
use crate::data::{CollateOptions, CollatedBatch};
use crate::error::{Error, Result};
use crate::prep::transforms::CollatedTransform;
use crate::source::{Capabilities, PlannedReader, ReadPlan, Reader, ReaderExt, Schema};

/// Validation and transforms over a [`Reader`] (background reads are a
/// [`Prefetcher`](crate::Prefetcher)'s). Cloning is cheap and shares the
/// reader.
pub struct Dataset<R: Reader> {
    /// Everything a read uses, set by the `with_` methods below.
    read: ReadCtx<R>,
    /// The batch layout of reads that do not name one (`load_batches`).
    collate: CollateOptions,
    /// The fields of a transformed sample, found once (see `schema`).
    transformed_levels: Arc<OnceLock<std::collections::BTreeMap<String, crate::data::Level>>>,
}

impl<R: Reader> Clone for Dataset<R> {
    fn clone(&self) -> Self {
        Dataset { read: self.read.clone(), collate: self.collate, transformed_levels: self.transformed_levels.clone() }
    }
}

impl<R: Reader> std::fmt::Debug for Dataset<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dataset")
            .field("source", &self.read.reader.name())
            .field("len", &self.read.reader.len())
            .field("skip_validation", &self.read.skip_validation)
            .finish()
    }
}

impl<R: Reader + 'static> Dataset<R> {
    /// A dataset over `reader`, validation on, one background worker.
    pub fn new(reader: R) -> Self {
        Self::from_arc(Arc::new(reader))
    }

    /// As [`Dataset::new`] for a shared reader.
    pub fn from_arc(reader: Arc<R>) -> Self {
        Dataset {
            read: ReadCtx {
                reader,
                cutoff: None,
                skip_validation: false,
                transforms: Vec::new(),
                collated: Vec::new(),
                epoch: 0,
                policy: ErrorPolicy::Fail,
                skipped: Arc::new(AtomicU64::new(0)),
                buffers: BatchBuffers::new(crate::data::DEFAULT_BATCH_BUFFER_BYTES),
            },
            collate: CollateOptions::default(),
            transformed_levels: Arc::new(OnceLock::new()),
        }
    }

    /// Skips per-sample validation (for trusted stores): batches are built
    /// straight from the reader's collated path.
    pub fn with_skip_validation(mut self, yes: bool) -> Self {
        self.read.skip_validation = yes;
        self
    }

    /// The free buffers that batches collated here from validated samples
    /// are written into and go back to (default: the Dataset's own, up to
    /// [`DEFAULT_BATCH_BUFFER_BYTES`](crate::data::DEFAULT_BATCH_BUFFER_BYTES)).
    /// Give it a reader's
    /// ([`AtomicDataZarrReader::batch_buffers`](crate::AtomicDataZarrReader::batch_buffers))
    /// to recycle every batch of both paths in one place.
    ///
    /// ```
    /// # fn main() -> atomzarr::Result<()> {
    /// use atomzarr::{AtomicDataZarrReader, AtomicDataZarrWriter, Dataset, ZarrWriteConfig};
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("v.zarr");
    /// AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default())?.write(&atomzarr::data::synth::generate(2000, 20, 40, 0)?)?;
    /// let reader = std::sync::Arc::new(AtomicDataZarrReader::open(&path)?);
    /// let ds = Dataset::from_arc(reader.clone()).with_batch_buffers(reader.batch_buffers().clone());
    /// // Batches large enough for their buffers to be worth keeping.
    /// for b in ds.load_batches(&[(0..1000).collect(), (1000..2000).collect()])? {
    ///     b.recycle();
    /// }
    /// assert!(reader.batch_buffers().held_bytes() > 0);
    /// # Ok(()) }
    /// ```
    pub fn with_batch_buffers(mut self, buffers: Arc<crate::data::BatchBuffers>) -> Self {
        self.read.buffers = buffers;
        self
    }

    /// Builds `neighbor_list` and `shifts` of every structure at `cutoff` Å
    /// while loading, replacing any stored edges: inside the fused read
    /// path, in parallel over the structures of each batch, from the
    /// store's float32 positions, cell and pbc, straight into the batch's
    /// buffers. The lists equal those `atomzarr import --cutoff` stores for
    /// the same cutoff (same pairs, images and order). Stored edges are
    /// never reused for a cutoff (so no cutoff can exceed theirs): they are
    /// not validated, and with `skip_validation` a chunked reader does not
    /// decode them; without a cutoff the stored edges are read as they are.
    ///
    /// A structure whose list cannot be built (a singular periodic cell,
    /// non-finite positions, more than
    /// [`MAX_NEIGHBORS_PER_ATOM`](crate::data::neighbors::MAX_NEIGHBORS_PER_ATOM)
    /// neighbors per atom) is an [`Error::Validation`] naming it, which
    /// [`ErrorPolicy::Skip`] skips.
    ///
    /// ```
    /// # fn main() -> atomzarr::Result<()> {
    /// use atomzarr::{AtomicData, Dataset, InMemoryReader};
    /// // Two H2 molecules, stored without edges.
    /// let h2 = AtomicData::new(vec![1, 1], vec![[0.0; 3], [0.0, 0.0, 0.74]])?;
    /// let ds = Dataset::new(InMemoryReader::from_samples(&[h2.clone(), h2], "h2")?).with_cutoff(1.0)?;
    /// let b = &ds.load_batches(&[vec![0, 1]])?[0];
    /// assert_eq!(b.edges_ptr, vec![0, 2, 4]);
    /// assert_eq!(b.fields["neighbor_list"].data.to_i64_vec().unwrap(), vec![0, 1, 1, 0, 2, 3, 3, 2]);
    /// assert!(Dataset::new(InMemoryReader::from_samples(&[], "e")?).with_cutoff(-1.0).is_err());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Config`] for a cutoff that is not a positive finite number;
    /// [`Error::InvalidInput`] when the reader has an edge field other than
    /// `neighbor_list` and `shifts` (its rows could not follow the new edges).
    pub fn with_cutoff(mut self, cutoff: f64) -> Result<Self> {
        neighbors::check_cutoff(cutoff)?;
        let levels = self.read.reader.schema().fields;
        if let Some(name) = neighbors::foreign_edge_field(levels.iter().map(|(n, l)| (n, *l))) {
            return Err(Error::invalid(
                self.read.reader.name(),
                format!("edge field {name} cannot follow neighbor lists built while loading"),
            ));
        }
        self.read.cutoff = Some(cutoff);
        self.transformed_levels = Arc::new(OnceLock::new());
        Ok(self)
    }

    /// The cutoff neighbor lists are built at while loading, if any.
    pub fn cutoff(&self) -> Option<f64> {
        self.read.cutoff
    }

    /// How batches are laid out (default: as stored). The
    /// [`DataLoader`](crate::DataLoader) sets this for its backend.
    pub fn with_collate_options(mut self, opts: CollateOptions) -> Self {
        self.collate = opts;
        self
    }

    /// What a bad sample does to a read (default [`ErrorPolicy::Fail`]); see
    /// [`ErrorPolicy`] for both policies and Burn's `Dataset::get`. The one
    /// place to set it: a [`DataLoader`](crate::DataLoader) built over this
    /// dataset drops a skipped sample from its batch, counts it in
    /// [`DataLoader::stats`](crate::DataLoader::stats), and yields no batch
    /// left without samples.
    ///
    /// ```
    /// # fn main() -> atomzarr::Result<()> {
    /// use atomzarr::{AtomicData, Dataset, Error, InMemoryReader, Reader};
    /// use atomzarr::ErrorPolicy;
    /// /// Three samples, the second with an edge to an atom it does not have.
    /// struct Three;
    /// impl Reader for Three {
    ///     fn len(&self) -> usize { 3 }
    ///     fn name(&self) -> &str { "three" }
    ///     fn schema(&self) -> atomzarr::source::Schema { Default::default() }
    ///     fn load_many(&self, idx: &[usize]) -> atomzarr::Result<Vec<AtomicData>> {
    ///         idx.iter().map(|&i| AtomicData::new(vec![1, 1], vec![[0.0; 3]; 2])?.with_neighbor_list(vec![[0, if i == 1 { 9 } else { 1 }]], None)).collect()
    ///     }
    /// }
    /// let fail = Dataset::new(Three);
    /// assert!(matches!(fail.load_batches(&[vec![0, 1, 2]]), Err(Error::NeighborIndex { index: 1, value: 9, .. })));
    /// let skip = Dataset::new(Three).with_error_policy(ErrorPolicy::Skip);
    /// assert_eq!(skip.load_batches(&[vec![0, 1, 2]])?[0].indices, vec![0, 2]);
    /// assert_eq!(skip.skipped_samples(), 1);
    /// # Ok(()) }
    /// ```
    pub fn with_error_policy(mut self, policy: ErrorPolicy) -> Self {
        self.read.policy = policy;
        self
    }

    /// The error policy.
    pub fn error_policy(&self) -> ErrorPolicy {
        self.read.policy
    }

    /// Samples skipped so far under [`ErrorPolicy::Skip`] (by this dataset
    /// and its clones; a [`DataLoader`](crate::DataLoader) counts its own).
    pub fn skipped_samples(&self) -> u64 {
        self.read.skipped.load(Ordering::Relaxed)
    }

    /// The same dataset counting skips apart from the original.
    pub(crate) fn with_own_skip_count(mut self) -> Self {
        self.read.skipped = Arc::new(AtomicU64::new(0));
        self
    }

    /// Adds a per-sample transform (applied in order, after validation).
    pub fn with_transform(mut self, f: impl Fn(AtomicData) -> Result<AtomicData> + Send + Sync + 'static) -> Self {
        self.read.transforms.push(Arc::new(f));
        self.transformed_levels = Arc::new(OnceLock::new());
        self
    }

    /// Adds a transform of collated batches (applied in order, after the
    /// per-sample transforms and collation): E0 subtraction, scale and
    /// shift, random rotation, sample weights
    /// ([`crate::prep::transforms`]). It keeps the reader's fast path:
    /// with validation skipped and no per-sample transform, batches are
    /// still copied straight from decoded chunks, then transformed in place.
    ///
    /// ```
    /// # fn main() -> atomzarr::Result<()> {
    /// use std::collections::BTreeMap;
    /// use atomzarr::{AtomicData, Dataset, InMemoryReader};
    /// use atomzarr::prep::transforms::SubtractE0s;
    /// let h2 = AtomicData::new(vec![1, 1], vec![[0.0; 3]; 2])?.with_energy(-31.0);
    /// let ds = Dataset::new(InMemoryReader::from_samples(&[h2], "h2")?)
    ///     .with_collated_transform(SubtractE0s::new(BTreeMap::from([(1, -13.6)])));
    /// assert!((ds.load_batches(&[vec![0]])?[0].fields["energy"].data.to_f64_vec()[0] + 3.8).abs() < 1e-5);
    /// assert!((ds.get_sample(0)?.field("energy").unwrap().data.to_f64_vec()[0] + 3.8).abs() < 1e-5);
    /// # Ok(()) }
    /// ```
    pub fn with_collated_transform(mut self, t: impl CollatedTransform + 'static) -> Self {
        self.read.collated.push(Arc::new(t));
        self.transformed_levels = Arc::new(OnceLock::new());
        self
    }

    /// The epoch collated transforms see (default 0): the
    /// [`DataLoader`](crate::DataLoader) sets its own on the handle each
    /// epoch reads through, so a random rotation changes every epoch and a
    /// resumed epoch sees the rotations it saw. Set it yourself when you
    /// drive the Dataset without the DataLoader (Burn's own loader).
    pub fn with_epoch(mut self, epoch: u64) -> Self {
        self.read.epoch = epoch;
        self
    }

    /// The epoch collated transforms see.
    pub fn epoch(&self) -> u64 {
        self.read.epoch
    }

    /// The reader.
    pub fn reader(&self) -> &Arc<R> {
        &self.read.reader
    }

    /// Whether validation is skipped.
    pub fn skip_validation(&self) -> bool {
        self.read.skip_validation
    }

    /// Logical sample count. (Both traits a Dataset implements, Burn's
    /// `Dataset` and [`Reader`], have a `len`; this one spares the caller
    /// naming a trait.)
    pub fn len(&self) -> usize {
        self.read.reader.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// One sample, validated and transformed.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] for `index` not below [`len`](Self::len);
    /// [`Error::Validation`] or [`Error::NeighborIndex`] for a sample that fails
    /// validation (whatever the error policy); a transform's error; the reader's.
    pub fn get_sample(&self, index: usize) -> Result<AtomicData> {
        let ctx = &self.read;
        ctx.check(&[vec![index]])?;
        let s = ctx.sample(index, self.read.reader.load_sample(index)?)?;
        ctx.collated_samples(&[index], vec![s])?.pop().ok_or_else(|| Error::Internal("no sample".into()))
    }

    /// One batch per inner list, through one backend read.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] for an index not below [`len`](Self::len);
    /// [`Error::Validation`] or [`Error::NeighborIndex`] for a bad sample unless
    /// the policy is [`ErrorPolicy::Skip`]; a transform's error; the reader's.
    pub fn load_batches(&self, lists: &[Vec<usize>]) -> Result<Vec<CollatedBatch>> {
        self.read.load_batches(lists, self.collate)
    }

    /// The plan of reading `lists` as [`Dataset::load_batches`] would
    /// (indices checked; on the reader's collated path, the reader's own
    /// preparation, see [`PlannedReader::prepare`]). The [`DataLoader`](crate::DataLoader)
    /// plans each window on its own thread and hands the plan to a read
    /// thread ([`Dataset::read_planned`]).
    ///
    /// ```
    /// # fn main() -> atomzarr::Result<()> {
    /// use atomzarr::{Dataset, InMemoryReader};
    /// let ds = Dataset::new(InMemoryReader::from_samples(&atomzarr::data::synth::generate(4, 2, 5, 0)?, "mem")?);
    /// let plan = ds.plan(vec![vec![3, 1], vec![0]])?;
    /// assert_eq!(ds.read_planned(plan)?[0].indices, [3, 1]);
    /// assert!(ds.plan(vec![vec![4]]).is_err());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] naming the reader; the reader's planning error.
    pub fn plan(&self, lists: Vec<Vec<usize>>) -> Result<ReadPlan> {
        self.read.plan(lists, self.collate)
    }

    /// Reads a plan of [`Dataset::plan`] (of this dataset or a clone):
    /// the batches [`Dataset::load_batches`] returns for its lists.
    ///
    /// # Errors
    /// As [`Dataset::load_batches`].
    pub fn read_planned(&self, plan: ReadPlan) -> Result<Vec<CollatedBatch>> {
        self.read.read(plan)
    }
}

/// Burn's `Dataset`: errors are Burn's `DatasetError` wrapping the typed
/// [`Error`] (it names the store, array and sample); nothing panics, an
/// index past the end included.
///
/// `get_many`, which Burn's `BatchDataLoader` calls with each batch's
/// indices, is one fused read of them (the reader's chunk-planned batch
/// path), split into samples for Burn's batcher.
///
/// ```
/// # fn main() -> atomzarr::Result<()> {
/// use burn::data::dataset::Dataset as _;
/// use atomzarr::{Dataset, InMemoryReader};
/// let ds = Dataset::new(InMemoryReader::from_samples(&atomzarr::data::synth::generate(4, 2, 5, 0)?, "mem")?);
/// let two = ds.get_many(vec![3, 1]).unwrap();
/// assert_eq!(two[1], ds.get(1).unwrap());
/// assert!(ds.get(4).is_err()); // out of range: an error naming the reader
/// # Ok(()) }
/// ```
impl<R: Reader + 'static> burn::data::dataset::Dataset<AtomicData> for Dataset<R> {
    /// The sample, validated unless skipped, transformed, and its neighbor
    /// indices checked as a batch would. Under [`ErrorPolicy::Skip`] a bad
    /// sample is replaced by the next good one (see [`ErrorPolicy`]), since
    /// Burn's loaders stop at an error.
    fn get(&self, index: usize) -> std::result::Result<AtomicData, DatasetError> {
        self.burn_get(index).map_err(DatasetError::new)
    }

    /// The samples at `indexes`, in their order, through one fused read.
    /// Under [`ErrorPolicy::Skip`] a batch with a bad sample is read again
    /// sample by sample, each bad one replaced as `get` does,
    /// so Burn's epoch keeps its length.
    fn get_many(&self, indexes: Vec<usize>) -> std::result::Result<Vec<AtomicData>, DatasetError> {
        let n = indexes.len();
        let skip = self.error_policy() == ErrorPolicy::Skip;
        let fused = if skip {
            self.read.plan(vec![indexes.clone()], self.collate).and_then(|p| self.read.read_strict(p))
        } else {
            self.load_batches(std::slice::from_ref(&indexes))
        };
        let batch = match fused {
            Ok(b) => b,
            Err(e) if skip && e.is_sample_error() => {
                return indexes.into_iter().map(|i| self.burn_get(i).map_err(DatasetError::new)).collect();
            }
            Err(e) => return Err(DatasetError::new(e)),
        };
        let mut all = Vec::with_capacity(n);
        for b in &batch {
            all.extend(b.to_samples().map_err(DatasetError::new)?);
        }
        Ok(all)
    }

    fn len(&self) -> usize {
        self.read.reader.len()
    }
}

impl<R: Reader + 'static> Dataset<R> {
    /// Burn's `get` under the error policy.
    fn burn_get(&self, index: usize) -> Result<AtomicData> {
        let ctx = &self.read;
        let e = match ctx.checked_sample(index) {
            Ok(s) => return Ok(s),
            Err(e) => e,
        };
        if self.read.policy != ErrorPolicy::Skip || !e.is_sample_error() {
            return Err(e);
        }
        let len = self.read.reader.len();
        log::warn!("atomzarr: skipping sample {index} of {}: {e}", self.read.reader.name());
        self.read.skipped.fetch_add(1, Ordering::Relaxed);
        for step in 1..len {
            let i = (index + step) % len;
            match ctx.checked_sample(i) {
                Ok(s) => return Ok(s),
                Err(e) if e.is_sample_error() => continue,
                Err(e) => return Err(e),
            }
        }
        Err(Error::invalid(self.read.reader.name(), format!("every sample is bad (the first: {e})")))
    }
}

/// A Dataset is itself a [`Reader`], so Datasets compose: as a
/// [`MultiReader`](crate::MultiReader) child, under an
/// [`InMemoryReader`](crate::InMemoryReader), or wrapped again. Loads return
/// validated (unless skipped) and transformed samples; its planning
/// ([`PlannedReader`]) is [`Dataset::plan`] and [`Dataset::read_planned`]
/// laid out as the plan's options say; the index (metadata, sizes,
/// refresh) and the chunk capability are the reader's, so wrapping a reader
/// in a Dataset loses none of them.
///
/// ```
/// # fn main() -> atomzarr::Result<()> {
/// use atomzarr::{Dataset, InMemoryReader, Reader, ReaderExt};
/// let mem = InMemoryReader::from_samples(&atomzarr::data::synth::generate(4, 2, 5, 0)?, "mem")?;
/// let ds = Dataset::new(mem).with_transform(|s| Ok(s.with_energy(1.0)));
/// let as_reader: &dyn Reader = &ds;
/// assert_eq!(as_reader.read(2)?.data.field("energy").unwrap().data.to_f64_vec(), vec![1.0]);
/// assert_eq!(as_reader.sample_sizes(2)?, ds.reader().sample_sizes(2)?);
/// # Ok(()) }
/// ```
// A wrapper forwards every capability: none may fall back to a default.
#[deny(clippy::missing_trait_methods)]
impl<R: Reader + 'static> Reader for Dataset<R> {
    fn len(&self) -> usize {
        self.read.reader.len()
    }

    fn name(&self) -> &str {
        self.read.reader.name()
    }

    /// The reader's schema; with transforms, the fields of the first sample
    /// as transformed (a transform may add or drop fields), found at the
    /// first call and kept (until another transform is added), falling back
    /// to the reader's when that sample cannot be read.
    fn schema(&self) -> Schema {
        let schema = self.read.reader.schema();
        let transformed =
            !(self.read.transforms.is_empty() && self.read.collated.is_empty() && self.read.cutoff.is_none());
        if !transformed || self.is_empty() {
            return schema;
        }
        if let Some(levels) = self.transformed_levels.get() {
            return Schema { fields: levels.clone(), ..schema };
        }
        match self.get_sample(0) {
            Ok(s) => {
                let levels: std::collections::BTreeMap<_, _> =
                    s.fields.iter().map(|(k, f)| (k.clone(), f.level)).collect();
                Schema { fields: self.transformed_levels.get_or_init(|| levels).clone(), ..schema }
            }
            Err(_) => schema,
        }
    }

    fn load_many(&self, indices: &[usize]) -> Result<Vec<AtomicData>> {
        let ctx = &self.read;
        let samples = ctx.reader.load_many(indices)?;
        let samples = samples.into_iter().zip(indices).map(|(s, &i)| ctx.sample(i, s)).collect::<Result<_>>()?;
        ctx.collated_samples(indices, samples)
    }

    fn capabilities(&self) -> Capabilities<'_> {
        let inner = self.read.reader.capabilities();
        Capabilities { index: inner.index, planned: Some(self), chunked: inner.chunked }
    }
}

/// The Dataset's reads: the reader's own planning on its collated path,
/// samples validated and transformed otherwise.
impl<R: Reader + 'static> PlannedReader for Dataset<R> {
    fn prepare(&self, plan: &mut ReadPlan) -> Result<()> {
        self.read.prepare(plan)
    }

    fn read_prepared(&self, plan: ReadPlan, out: &mut Vec<CollatedBatch>) -> Result<()> {
        *out = self.read.read(plan)?;
        Ok(())
    }
}
