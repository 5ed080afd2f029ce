//! The backend contract: a [`Reader`] owns storage I/O and nothing else.
//!
//! The traits, in the manner of object_store's `ObjectStore` and
//! `ObjectStoreExt`:
//!
//! - [`Reader`], the core a backend implements: [`Reader::len`],
//!   [`Reader::name`], [`Reader::schema`] and [`Reader::load_many`], and
//!   [`Reader::capabilities`], what else it can do (default: nothing more);
//! - the capabilities, each an optional trait a reader hands out in its
//!   [`Capabilities`]: [`SampleIndex`] (where a sample came from and its
//!   sizes without loading it; refresh), [`PlannedReader`] (collated reads
//!   prepared ahead, see [`ReadPlan`]) and [`ChunkedReader`] (chunk blocks,
//!   the cache's fit and budget, decode counters);
//! - [`ReaderExt`], what every reader gets for free, built on the core and
//!   the capabilities: [`ReaderExt::read`] and [`ReaderExt::read_many`]
//!   (negative indices, bounds checks, [`SampleMetadata`]),
//!   [`ReaderExt::sample_metadata`], [`ReaderExt::sample_sizes`],
//!   [`ReaderExt::refresh`], [`ReaderExt::plan`] and
//!   [`ReaderExt::read_plan`], [`ReaderExt::read_collated`].
//!
//! A wrapper (an [`Arc`], a [`Dataset`](crate::Dataset), a
//! [`MultiReader`](crate::MultiReader)) forwards the five methods of
//! [`Reader`], and with [`Reader::capabilities`] every capability of what
//! it wraps.
//!
//! ```
//! use atomzarr::{AtomicData, Level, Reader, ReaderExt, Result};
//! use atomzarr::source::Schema;
//!
//! /// A toy backend that makes each sample on demand.
//! struct Dimers;
//! impl Reader for Dimers {
//!     fn len(&self) -> usize { 10 }
//!     fn name(&self) -> &str { "dimers" }
//!     fn schema(&self) -> Schema {
//!         Schema::new([("atomic_numbers".into(), Level::Atom), ("positions".into(), Level::Atom)].into())
//!     }
//!     fn load_many(&self, indices: &[usize]) -> Result<Vec<AtomicData>> {
//!         indices.iter().map(|&i| AtomicData::new(vec![1, 1], vec![[0.0; 3], [0.5 + i as f32 * 0.1, 0.0, 0.0]])).collect()
//!     }
//! }
//!
//! let r = Dimers;
//! let many = r.read_many(&[3, -1, 3]).unwrap();
//! assert_eq!(many[1].metadata.index, 9);
//! assert_eq!(many[0].data, many[2].data);
//! assert!(r.read(10).is_err());
//! assert_eq!(r.sample_sizes(2).unwrap(), (2, 0)); // the default loads the sample
//! assert!(r.chunked().is_none());
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::data::{AtomicData, Level};
use crate::data::{CollateOptions, CollatedBatch, IndexReport, collate_lists};
use crate::error::{Error, Result};
use crate::source::ReadPlan;
use crate::source::chunked::ChunkedReader;

/// Where a sample came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleMetadata {
    /// Logical index (position among active samples).
    pub index: usize,
    /// Physical index in the store (counts deleted samples).
    pub physical_index: usize,
    /// The source store or dataset name.
    pub source: Arc<str>,
}

/// A sample and its metadata, as `read` / `read_many` return them.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The fields.
    pub data: AtomicData,
    /// Where it came from.
    pub metadata: SampleMetadata,
}

/// Storage backend: the contract a new source of samples implements.
///
/// Four methods are required: [`Reader::len`], [`Reader::name`],
/// [`Reader::schema`] and [`Reader::load_many`]. The fifth,
/// [`Reader::capabilities`], hands out what else the reader can do (each a
/// trait of its own: [`SampleIndex`], [`PlannedReader`], [`ChunkedReader`]);
/// by default it can do nothing more, and [`ReaderExt`] builds the rest
/// from the four. Each method builds its own errors, naming the reader and
/// the sample.
///
/// Callers use [`ReaderExt`] (implemented for every `Reader`): `read`,
/// `read_many`, `plan` and `read_collated` normalise negative indices,
/// check bounds and attach [`SampleMetadata`].
///
/// A reader that wraps another (as [`Arc`], [`Dataset`](crate::Dataset) and
/// [`MultiReader`](crate::MultiReader) do) implements the five methods, its
/// [`Reader::capabilities`] forwarding those of the wrapped reader (or its
/// own), so that none is lost.
// `is_empty` is a convenience, so it lives in ReaderExt with the others.
#[allow(clippy::len_without_is_empty)]
pub trait Reader: Send + Sync {
    /// Logical (active) sample count.
    fn len(&self) -> usize;

    /// The name of what the reader reads (a store's path or URL), used in
    /// metadata and errors.
    fn name(&self) -> &str;

    /// What a sample holds: each field's level and each string label's.
    fn schema(&self) -> Schema;

    /// Loads samples, results aligned with `indices` (duplicates allowed).
    /// A backend that reads one sample at a time maps over `indices`.
    /// Callers check indices against [`Reader::len`] first ([`ReaderExt`]
    /// does); a backend refuses one it does not have with an error, never
    /// a panic.
    ///
    /// # Errors
    /// Whatever the backend's storage returns (for a store: [`Error::Chunk`],
    /// [`Error::Checksum`] or [`Error::Zarr`] naming the array, [`Error::Io`],
    /// [`Error::Remote`]); an index out of range is an [`Error::IndexOutOfRange`].
    fn load_many(&self, indices: &[usize]) -> Result<Vec<AtomicData>>;

    /// What the reader can do beyond loading samples. Default: nothing more
    /// ([`Capabilities::default`]).
    ///
    /// ```
    /// # fn main() -> atomzarr::Result<()> {
    /// use atomzarr::{AtomicDataZarrReader, AtomicDataZarrWriter, InMemoryReader, Reader, ZarrWriteConfig};
    /// let samples = atomzarr::data::synth::generate(4, 2, 5, 0)?;
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("c.zarr");
    /// AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default())?.write(&samples)?;
    /// let zarr = AtomicDataZarrReader::open(&path)?;
    /// let caps = zarr.capabilities();
    /// assert!(caps.index.is_some() && caps.planned.is_some() && caps.chunked.is_some());
    /// let mem = InMemoryReader::from_samples(&samples, "mem")?;
    /// assert!(mem.capabilities().chunked.is_none());
    /// # Ok(()) }
    /// ```
    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities::default()
    }
}

/// What a sample of a reader holds: the level of each field and of each
/// string label ([`AtomicData::strings`]).
///
/// ```
/// use atomzarr::Level;
/// use atomzarr::source::Schema;
/// let s = Schema::new([("energy".to_string(), Level::System)].into())
///     .with_strings([("config_type".to_string(), Level::System)].into());
/// assert_eq!(s.fields["energy"], Level::System);
/// assert_eq!(s.strings.len(), 1);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Schema {
    /// Field name to level.
    pub fields: BTreeMap<String, Level>,
    /// String label name to level.
    pub strings: BTreeMap<String, Level>,
}

impl Schema {
    /// Fields, no string labels.
    pub fn new(fields: BTreeMap<String, Level>) -> Schema {
        Schema { fields, strings: BTreeMap::new() }
    }

    /// The schema with string labels `strings`.
    pub fn with_strings(mut self, strings: BTreeMap<String, Level>) -> Schema {
        self.strings = strings;
        self
    }
}

/// The optional capabilities of a reader, as [`Reader::capabilities`]
/// hands them out: each `None` when the reader lacks it.
///
/// ```
/// let none = atomzarr::source::Capabilities::default();
/// assert!(none.index.is_none() && none.planned.is_none() && none.chunked.is_none());
/// ```
#[derive(Clone, Copy, Default)]
pub struct Capabilities<'a> {
    /// Per-sample facts without loading the sample, and refresh.
    pub index: Option<&'a dyn SampleIndex>,
    /// Collated reads prepared ahead.
    pub planned: Option<&'a dyn PlannedReader>,
    /// Stored chunks: blocks, cache, decode counters.
    pub chunked: Option<&'a dyn ChunkedReader>,
}

impl std::fmt::Debug for Capabilities<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capabilities")
            .field("index", &self.index.is_some())
            .field("planned", &self.planned.is_some())
            .field("chunked", &self.chunked.is_some())
            .finish()
    }
}

/// The capability of a reader that knows its samples without loading them
/// (the Zarr reader from its pointers and delete mask, an
/// [`InMemoryReader`](crate::InMemoryReader) from its resident pointers, a
/// [`MultiReader`](crate::MultiReader) from its children), reached through
/// [`Reader::capabilities`]. Callers use [`ReaderExt::sample_metadata`],
/// [`ReaderExt::sample_sizes`] and [`ReaderExt::refresh`], which check the
/// index first; indices given here are in `0..len()`.
///
/// ```
/// # fn main() -> atomzarr::Result<()> {
/// use atomzarr::{InMemoryReader, Reader, ReaderExt};
/// let mem = InMemoryReader::from_samples(&atomzarr::data::synth::generate(3, 2, 5, 0)?, "mem")?;
/// let index = mem.capabilities().index.unwrap();
/// assert_eq!(index.metadata(2).physical_index, 2);
/// assert_eq!(index.sizes(2)?.0, mem.read_many(&[2])?[0].data.num_atoms());
/// # Ok(()) }
/// ```
pub trait SampleIndex: Send + Sync {
    /// Where logical `index` came from: its physical index and the reader
    /// that owns it (a wrapper's child, by name).
    fn metadata(&self, index: usize) -> SampleMetadata;

    /// `(num_atoms, num_edges)` of logical `index`, without reading field data.
    ///
    /// # Errors
    /// The backend's error reading its pointers.
    fn sizes(&self, index: usize) -> Result<(usize, usize)>;

    /// Loads the reader's index again, picking up appends and deletes made
    /// since it was opened. Plans made before are not the reader's any more
    /// ([`Error::PlanMismatch`] when read).
    ///
    /// # Errors
    /// The backend's error reading its new state.
    fn reload(&self) -> Result<()>;
}

/// The capability of a reader that prepares a collated read ahead and reads
/// batches without materialising samples (the Zarr reader copies rows from
/// decoded chunks; an [`InMemoryReader`](crate::InMemoryReader) from its
/// resident buffers), reached through [`Reader::capabilities`]. Callers use
/// [`ReaderExt::plan`], which checks the indices and calls
/// [`PlannedReader::prepare`], and [`ReaderExt::read_plan`].
///
/// A backend outside this crate prepares nothing in `prepare` and does its
/// work in `read_prepared`. A wrapper that reads its own way hands itself
/// out as the capability and forwards the rest:
///
/// ```
/// # fn main() -> atomzarr::Result<()> {
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use atomzarr::{AtomicData, CollatedBatch, InMemoryReader, ReadPlan, Reader, ReaderExt, Result};
/// use atomzarr::source::{Capabilities, PlannedReader, Schema};
///
/// /// Counts the collated reads of the reader it wraps.
/// struct Counted<R> { inner: R, reads: AtomicUsize }
/// impl<R: Reader> Reader for Counted<R> {
///     fn len(&self) -> usize { self.inner.len() }
///     fn name(&self) -> &str { self.inner.name() }
///     fn schema(&self) -> Schema { self.inner.schema() }
///     fn load_many(&self, indices: &[usize]) -> Result<Vec<AtomicData>> { self.inner.load_many(indices) }
///     fn capabilities(&self) -> Capabilities<'_> {
///         Capabilities { planned: Some(self), ..self.inner.capabilities() }
///     }
/// }
/// impl<R: Reader> PlannedReader for Counted<R> {
///     fn prepare(&self, plan: &mut ReadPlan) -> Result<()> {
///         self.inner.capabilities().planned.map_or(Ok(()), |p| p.prepare(plan))
///     }
///     fn read_prepared(&self, plan: ReadPlan, out: &mut Vec<CollatedBatch>) -> Result<()> {
///         self.reads.fetch_add(1, Ordering::Relaxed);
///         self.inner.read_plan(plan, out)
///     }
/// }
///
/// let mem = InMemoryReader::from_samples(&atomzarr::data::synth::generate(4, 2, 5, 0)?, "mem")?;
/// let counted = Counted { inner: mem, reads: AtomicUsize::new(0) };
/// counted.read_collated(&[vec![0, 1], vec![-1]], &mut Vec::new())?;
/// assert_eq!(counted.reads.load(Ordering::Relaxed), 1);
/// assert_eq!(counted.sample_sizes(3)?, counted.inner.sample_sizes(3)?); // the index, forwarded
/// # Ok(()) }
/// ```
pub trait PlannedReader: Send + Sync {
    /// Prepares the read of `plan`, made by [`ReaderExt::plan`] of this
    /// reader (its indices checked). The Zarr reader finds each sample's
    /// rows and the chunks every array must decode, and keeps those chunks
    /// in its cache until the read (so a window planned while another is
    /// read is not evicted first).
    ///
    /// # Errors
    /// [`Error::PlanMismatch`] when the reader changed length since the
    /// plan's indices were checked (a refresh in between); the backend's
    /// error preparing the read (reading pointers).
    fn prepare(&self, plan: &mut ReadPlan) -> Result<()>;

    /// Reads `plan` into `out` (resized to its batches, buffers reused), one
    /// backend read for all its batches.
    ///
    /// # Errors
    /// [`Error::PlanMismatch`] when `plan` is not this reader's (made by
    /// another reader, or before a refresh); the backend's read errors;
    /// [`Error::NeighborIndex`] naming the sample whose neighbor list points
    /// outside it.
    fn read_prepared(&self, plan: ReadPlan, out: &mut Vec<CollatedBatch>) -> Result<()>;
}

/// The conveniences every [`Reader`] gets, built on its core and its
/// capabilities: checked reads with negative indices and metadata,
/// per-sample facts, refresh, and the collated path (planned, or with
/// default options). Implemented for every `Reader` (including
/// `dyn Reader`); never implemented by hand.
pub trait ReaderExt: Reader {
    /// True when there are no samples.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// One sample by logical index (in `0..len()`), no metadata: a
    /// one-element [`Reader::load_many`].
    ///
    /// # Errors
    /// The error of [`Reader::load_many`].
    fn load_sample(&self, index: usize) -> Result<AtomicData> {
        let mut v = self.load_many(&[index])?;
        match (v.pop(), v.is_empty()) {
            (Some(s), true) => Ok(s),
            _ => Err(Error::InvalidInput {
                context: self.name().to_string(),
                reason: "load_many did not return one sample for one index".into(),
            }),
        }
    }

    /// Where logical `index` came from: the index, its physical index in
    /// the store (counting deleted samples) and the reader that owns it.
    /// From the [`SampleIndex`] capability; without it, `index` itself and
    /// [`Reader::name`]. An index out of range is given back as it is.
    ///
    /// ```
    /// # fn main() -> atomzarr::Result<()> {
    /// use std::sync::Arc;
    /// use atomzarr::{InMemoryReader, MultiReader, ReaderExt};
    /// let a = InMemoryReader::from_samples(&atomzarr::data::synth::generate(2, 2, 4, 1)?, "a")?;
    /// let b = InMemoryReader::from_samples(&atomzarr::data::synth::generate(3, 2, 4, 2)?, "b")?;
    /// let multi = MultiReader::new(vec![Arc::new(a), Arc::new(b)])?;
    /// let m = multi.sample_metadata(3);
    /// assert_eq!((m.index, m.physical_index, m.source.as_ref()), (3, 1, "b"));
    /// # Ok(()) }
    /// ```
    fn sample_metadata(&self, index: usize) -> SampleMetadata {
        match self.capabilities().index {
            Some(x) if index < self.len() => SampleMetadata { index, ..x.metadata(index) },
            _ => SampleMetadata { index, physical_index: index, source: Arc::from(self.name()) },
        }
    }

    /// `(num_atoms, num_edges)` of logical `index`: from the
    /// [`SampleIndex`] capability (pointers, no field data), else by
    /// loading the sample.
    ///
    /// ```
    /// # fn main() -> atomzarr::Result<()> {
    /// use atomzarr::{AtomicData, InMemoryReader, ReaderExt};
    /// let s = AtomicData::new(vec![8, 1, 1], vec![[0.0; 3]; 3])?;
    /// let mem = InMemoryReader::from_samples(&[s], "water")?;
    /// assert_eq!(mem.sample_sizes(0)?, (3, 0));
    /// assert!(mem.sample_sizes(1).is_err());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`], or the error of reading the sizes.
    fn sample_sizes(&self, index: usize) -> Result<(usize, usize)> {
        Error::check_indices(|| self.name().to_string(), [&index], self.len())?;
        match self.capabilities().index {
            Some(x) => x.sizes(index),
            None => self.load_sample(index).map(|s| (s.num_atoms(), s.num_edges())),
        }
    }

    /// Picks up appends and deletes made since opening ([`SampleIndex::reload`]);
    /// nothing to do for a reader without the capability.
    ///
    /// # Errors
    /// The backend's error reading its new state.
    fn refresh(&self) -> Result<()> {
        self.capabilities().index.map_or(Ok(()), |x| x.reload())
    }

    /// The reader's chunked-store capability ([`Reader::capabilities`]'s
    /// `chunked`): `None` for a reader without stored chunks.
    fn chunked(&self) -> Option<&dyn ChunkedReader> {
        self.capabilities().chunked
    }

    /// Plans the collated read of `batches` laid out as `options`: checks
    /// every index against [`Reader::len`] (the one check of a collated
    /// read), then lets a [`PlannedReader`] prepare what the read needs.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] naming the reader for an index not below
    /// `len()`; the error of [`PlannedReader::prepare`].
    fn plan(&self, batches: Vec<Vec<usize>>, options: CollateOptions) -> Result<ReadPlan> {
        let mut plan = ReadPlan::checked(self.name(), self.len(), batches, options)?;
        if let Some(p) = self.capabilities().planned {
            p.prepare(&mut plan)?;
        }
        Ok(plan)
    }

    /// Reads a plan of this reader's [`ReaderExt::plan`] into `out`
    /// (resized to its batches, buffers reused), one backend read for all
    /// its batches: [`PlannedReader::read_prepared`]; without the
    /// capability, [`Reader::load_many`] and host collation
    /// (`collate_lists`), the plan's layout applied.
    ///
    /// # Errors
    /// [`Error::PlanMismatch`] for a plan of another reader or made before
    /// a refresh; the error of the read; [`Error::NeighborIndex`] naming
    /// the sample whose neighbor list points outside it;
    /// [`Error::InvalidInput`] naming the reader when `load_many` returns
    /// another number of samples than asked for.
    fn read_plan(&self, plan: ReadPlan, out: &mut Vec<CollatedBatch>) -> Result<()> {
        if let Some(p) = self.capabilities().planned {
            return p.read_prepared(plan, out);
        }
        plan.check_length(self.name(), self.len())?;
        let (batches, options) = plan.into_parts();
        let flat: Vec<usize> = batches.iter().flatten().copied().collect();
        let samples = self.load_many(&flat)?;
        out.resize_with(batches.len(), CollatedBatch::default);
        collate_lists(out, &batches, &samples, options.narrow_int64(), self.name(), &|i, report| {
            neighbor_index_error(self, i, report)
        })
    }

    /// A read that was not planned ahead: [`ReaderExt::plan`], then
    /// [`ReaderExt::read_plan`] (indices logical, in `0..len()`).
    ///
    /// # Errors
    /// As [`ReaderExt::plan`] and [`ReaderExt::read_plan`].
    fn load_collated_opt(
        &self,
        batches: &[Vec<usize>],
        opts: CollateOptions,
        out: &mut Vec<CollatedBatch>,
    ) -> Result<()> {
        self.read_plan(self.plan(batches.to_vec(), opts)?, out)
    }

    /// [`ReaderExt::load_collated_opt`] with default options.
    ///
    /// # Errors
    /// As [`ReaderExt::load_collated_opt`].
    fn load_collated(&self, batches: &[Vec<usize>], out: &mut Vec<CollatedBatch>) -> Result<()> {
        self.load_collated_opt(batches, CollateOptions::default(), out)
    }

    /// Normalises a possibly negative index to `0..len()`.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] outside `-len..len`.
    fn check_index(&self, index: i64) -> Result<usize> {
        checked_index(self, index, self.len())
    }

    /// One sample; negative indices count from the end.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`], or the backend's error.
    fn read(&self, index: i64) -> Result<Sample> {
        let i = self.check_index(index)?;
        let data = self.load_sample(i)?;
        Ok(Sample { data, metadata: self.sample_metadata(i) })
    }

    /// Many samples in the caller's order (duplicates allowed).
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] for any index, or the backend's error.
    fn read_many(&self, indices: &[i64]) -> Result<Vec<Sample>> {
        let idx = check_all(self, indices, self.len())?;
        let data = self.load_many(&idx)?;
        if data.len() != idx.len() {
            return Err(Error::InvalidInput {
                context: self.name().to_string(),
                reason: format!("load_many returned {} samples for {} indices", data.len(), idx.len()),
            });
        }
        Ok(data.into_iter().zip(&idx).map(|(data, &i)| Sample { data, metadata: self.sample_metadata(i) }).collect())
    }

    /// Collated batches for logical (possibly negative) indices; see
    /// [`ReaderExt::read_plan`].
    ///
    /// # Errors
    /// As [`ReaderExt::read_collated_opt`].
    fn read_collated(&self, batches: &[Vec<i64>], out: &mut Vec<CollatedBatch>) -> Result<()> {
        self.read_collated_opt(batches, CollateOptions::default(), out)
    }

    /// As [`ReaderExt::read_collated`], laid out as `opts` says (for example
    /// int64 fields narrowed to int32 while they are copied).
    ///
    /// ```
    /// # fn main() -> atomzarr::Result<()> {
    /// use atomzarr::{AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, HostData, ReaderExt, ZarrWriteConfig};
    /// use atomzarr::data::CollateOptions;
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("n.zarr");
    /// let s = AtomicData::new(vec![8, 1], vec![[0.0; 3]; 2])?.with_neighbor_list(vec![[0, 1]], None)?;
    /// AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default())?.write(&[s.clone(), s])?;
    /// let reader = AtomicDataZarrReader::open(&path)?;
    /// let mut out = Vec::new();
    /// reader.read_collated_opt(&[vec![0, 1]], CollateOptions::default().with_narrow_int64(true), &mut out)?;
    /// assert_eq!(out[0].fields["neighbor_list"].data, HostData::Int32(vec![0, 1, 2, 3]));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] for any index, or the error of
    /// [`ReaderExt::read_plan`].
    fn read_collated_opt(
        &self,
        batches: &[Vec<i64>],
        opts: CollateOptions,
        out: &mut Vec<CollatedBatch>,
    ) -> Result<()> {
        // Negative indices counted from the end here; `plan` checks the rest.
        let len = self.len();
        let resolve = |&i: &i64| {
            if i < 0 { checked_index(self, i, len) } else { usize::try_from(i).map_err(|_| out_of_range(self, i, len)) }
        };
        let resolved: Vec<Vec<usize>> =
            batches.iter().map(|b| b.iter().map(resolve).collect::<Result<_>>()).collect::<Result<_>>()?;
        self.read_plan(self.plan(resolved, opts)?, out)
    }
}

impl<R: Reader + ?Sized> ReaderExt for R {}

/// The error of logical sample `index` of `reader` whose neighbor list
/// holds `report.value` outside its atoms, found in samples the reader
/// returned: the reader's source and the sample's physical index.
pub(crate) fn neighbor_index_error<R: Reader + ?Sized>(reader: &R, index: usize, report: IndexReport) -> Error {
    let meta = reader.sample_metadata(index);
    Error::NeighborIndex {
        source_name: meta.source.to_string(),
        index,
        physical_index: meta.physical_index,
        value: report.value,
        num_atoms: report.num_atoms,
        append_shift: None,
    }
}

/// As [`neighbor_index_error`] for a wrapper that collated samples `reader`
/// gave it: when the reader's own batch path refuses the sample, its error
/// (built where the fault is, with what only the reader knows, such as the
/// diagnosis of the toolkit's append bug); otherwise the plain error (the
/// fault came after the read, from a transform).
pub(crate) fn reread_neighbor_error<R: Reader + ?Sized>(reader: &R, index: usize, report: IndexReport) -> Error {
    match reader.load_collated(&[vec![index]], &mut Vec::new()) {
        Err(e @ Error::NeighborIndex { .. }) => e,
        _ => neighbor_index_error(reader, index, report),
    }
}

/// `indices` normalised to `0..len` (`len` taken once by the caller: per
/// index, `len()` takes the reader's state lock each time).
fn check_all<R: Reader + ?Sized>(r: &R, indices: &[i64], len: usize) -> Result<Vec<usize>> {
    indices.iter().map(|&index| checked_index(r, index, len)).collect()
}

/// `index` in `0..len`, counting negative indices from the end.
fn checked_index<R: Reader + ?Sized>(r: &R, index: i64, len: usize) -> Result<usize> {
    Error::checked_index(|| r.name().to_string(), index, len)
}

/// [`Error::IndexOutOfRange`] for `index` of `r`.
fn out_of_range<R: Reader + ?Sized>(r: &R, index: i64, len: usize) -> Error {
    Error::IndexOutOfRange { source_name: r.name().to_string(), index, len }
}

/// A shared reader is the reader: its five methods forwarded, its
/// capabilities those of the reader.
#[deny(clippy::missing_trait_methods)]
impl<R: Reader + ?Sized> Reader for Arc<R> {
    fn len(&self) -> usize {
        (**self).len()
    }
    fn name(&self) -> &str {
        (**self).name()
    }
    fn schema(&self) -> Schema {
        (**self).schema()
    }
    fn load_many(&self, indices: &[usize]) -> Result<Vec<AtomicData>> {
        (**self).load_many(indices)
    }
    fn capabilities(&self) -> Capabilities<'_> {
        (**self).capabilities()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A backend that breaks the contract: `load_many` drops the last index.
    struct Short;

    impl Reader for Short {
        fn len(&self) -> usize {
            3
        }
        fn name(&self) -> &str {
            "short-reader"
        }
        fn schema(&self) -> Schema {
            Schema::default()
        }
        fn load_many(&self, indices: &[usize]) -> Result<Vec<AtomicData>> {
            let n = indices.len().saturating_sub(1);
            (0..n).map(|_| AtomicData::new(vec![1], vec![[0.0; 3]])).collect()
        }
    }

    #[test]
    fn a_backend_that_returns_too_few_samples_is_named_in_a_typed_error() {
        for e in [
            Short.load_sample(0).err(),
            Short.load_collated(&[vec![0, 1]], &mut Vec::new()).err(),
            Short.read_many(&[0, 2]).err(),
        ] {
            match e {
                Some(Error::InvalidInput { context, reason }) => {
                    assert_eq!(context, "short-reader");
                    assert!(reason.contains("load_many"), "{reason}");
                }
                other => panic!("expected InvalidInput naming the reader, got {other:?}"),
            }
        }
    }
}
