//! The backend contract: a [`Reader`] owns storage I/O and nothing else.
//!
//! Three traits, in the manner of object_store's `ObjectStore` and
//! `ObjectStoreExt`:
//!
//! - [`Reader`], the core a backend implements: [`Reader::len`],
//!   [`Reader::name`], [`Reader::field_levels`] and [`Reader::load_many`],
//!   plus methods with defaults it overrides when it can do better (sizes
//!   from pointers, a collated read planned ahead: [`Reader::plan`] and
//!   [`Reader::read_plan`], see [`ReadPlan`]);
//! - [`ReaderExt`], the conveniences every reader gets for free:
//!   [`ReaderExt::read`] and [`ReaderExt::read_many`] (negative indices,
//!   bounds checks, [`SampleMetadata`]), [`ReaderExt::read_collated`];
//! - [`ChunkedReader`], the optional capability of a reader over stored
//!   chunks (chunk blocks, the cache's fit and budget, decode counters), reached through
//!   [`Reader::chunked`].
//!
//! ```
//! use std::collections::BTreeMap;
//! use atomzarr::{AtomicData, Level, Reader, ReaderExt, Result};
//!
//! /// A toy backend that makes each sample on demand.
//! struct Dimers;
//! impl Reader for Dimers {
//!     fn len(&self) -> usize { 10 }
//!     fn name(&self) -> &str { "dimers" }
//!     fn field_levels(&self) -> BTreeMap<String, Level> {
//!         [("atomic_numbers".into(), Level::Atom), ("positions".into(), Level::Atom)].into()
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
//! assert!(r.chunked().is_none());
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::data::{AtomicData, Level};
use crate::data::{CollateOptions, CollatedBatch, IndexReport, collate_lists};
use crate::error::{Error, Result};
use crate::source::ReadPlan;

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

/// Decode counters of a reader that decodes stored chunks (the Zarr reader):
/// how many bytes it decoded and how many bytes of samples it was asked for.
/// Their ratio is the decode amplification: 1 when every decoded byte was
/// delivered once, `k` when each chunk was decoded `k` times over (a cache
/// too small for the read order) or when most of each chunk was not needed.
///
/// ```
/// use atomzarr::source::DecodeCounters;
/// let before = DecodeCounters { decoded_bytes: 100, sample_bytes: 100, chunks_decoded: 1 };
/// let after = DecodeCounters { decoded_bytes: 1100, sample_bytes: 600, chunks_decoded: 9 };
/// let epoch = after.since(&before);
/// assert_eq!(epoch.amplification(), Some(2.0));
/// assert_eq!(DecodeCounters::default().amplification(), None);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DecodeCounters {
    /// Bytes of decoded chunks (each decode counted, cache hits not).
    pub decoded_bytes: u64,
    /// Bytes of field data of the samples requested (in the stored dtypes).
    pub sample_bytes: u64,
    /// Chunks decoded.
    pub chunks_decoded: u64,
}

impl DecodeCounters {
    /// `decoded_bytes / sample_bytes`; `None` before any sample byte was read.
    pub fn amplification(&self) -> Option<f64> {
        (self.sample_bytes > 0).then(|| self.decoded_bytes as f64 / self.sample_bytes as f64)
    }

    /// The counts since `earlier` (a snapshot of the same reader).
    pub fn since(&self, earlier: &DecodeCounters) -> DecodeCounters {
        DecodeCounters {
            decoded_bytes: self.decoded_bytes.saturating_sub(earlier.decoded_bytes),
            sample_bytes: self.sample_bytes.saturating_sub(earlier.sample_bytes),
            chunks_decoded: self.chunks_decoded.saturating_sub(earlier.chunks_decoded),
        }
    }
}

/// Counters of several readers added up (a [`MultiReader`](crate::MultiReader)'s children).
///
/// ```
/// use atomzarr::source::DecodeCounters;
/// let a = DecodeCounters { decoded_bytes: 10, sample_bytes: 5, chunks_decoded: 1 };
/// assert_eq!([a, a].into_iter().sum::<DecodeCounters>(), DecodeCounters { decoded_bytes: 20, sample_bytes: 10, chunks_decoded: 2 });
/// ```
impl std::iter::Sum for DecodeCounters {
    fn sum<I: Iterator<Item = DecodeCounters>>(iter: I) -> DecodeCounters {
        iter.fold(DecodeCounters::default(), |a, c| DecodeCounters {
            decoded_bytes: a.decoded_bytes.saturating_add(c.decoded_bytes),
            sample_bytes: a.sample_bytes.saturating_add(c.sample_bytes),
            chunks_decoded: a.chunks_decoded.saturating_add(c.chunks_decoded),
        })
    }
}

/// Storage backend: the contract a new source of samples implements.
///
/// Four methods are required: [`Reader::len`], [`Reader::name`],
/// [`Reader::field_levels`] and [`Reader::load_many`]. The provided methods
/// have defaults built on those, which a backend overrides when it can do
/// better: answer sizes from pointers ([`Reader::get_metadata`]), name
/// physical indices, pick up new data ([`Reader::refresh`]), and read
/// collated batches without materialising samples ([`Reader::plan`] and
/// [`Reader::read_plan`]). Indices given to them are logical and, past
/// [`Reader::plan`], already in `0..len()`. Each method builds its own
/// errors, naming the reader and the sample.
///
/// Callers use [`ReaderExt`] (implemented for every `Reader`): `read`,
/// `read_many` and `read_collated` normalise negative indices, check bounds
/// and attach [`SampleMetadata`]. A store made of chunks also exposes
/// [`ChunkedReader`] through [`Reader::chunked`].
///
/// A reader that wraps another (as [`Arc`], [`Dataset`](crate::Dataset) and
/// [`MultiReader`](crate::MultiReader) do) must forward every method, or
/// the wrapped reader's overrides are lost; put
/// `#[deny(clippy::missing_trait_methods)]` on such an impl.
// `is_empty` is a convenience, so it lives in ReaderExt with the others.
#[allow(clippy::len_without_is_empty)]
pub trait Reader: Send + Sync {
    /// Logical (active) sample count.
    fn len(&self) -> usize;

    /// The name of what the reader reads (a store's path or URL), used in
    /// metadata and errors.
    fn name(&self) -> &str;

    /// Field name to level, for every field a sample has.
    fn field_levels(&self) -> BTreeMap<String, Level>;

    /// Loads samples, results aligned with `indices` (duplicates allowed).
    /// A backend that reads one sample at a time maps over `indices`.
    ///
    /// # Errors
    /// Whatever the backend's storage returns (for a store: [`Error::Chunk`],
    /// [`Error::Checksum`] or [`Error::Zarr`] naming the array, [`Error::Io`],
    /// [`Error::Remote`]); an index out of range is an [`Error::IndexOutOfRange`].
    fn load_many(&self, indices: &[usize]) -> Result<Vec<AtomicData>>;

    /// String label name to level, for every string label a sample has
    /// ([`AtomicData::strings`]). Default: none.
    fn string_levels(&self) -> BTreeMap<String, Level> {
        BTreeMap::new()
    }

    /// Physical index of logical `index` (identity for stores without deletes).
    fn physical_index(&self, index: usize) -> usize {
        index
    }

    /// Metadata of logical `i`. Default: `i`, [`Reader::physical_index`]
    /// and [`Reader::name`]; a wrapper names the reader that owns the sample.
    fn metadata_for(&self, i: usize) -> SampleMetadata {
        SampleMetadata { index: i, physical_index: self.physical_index(i), source: Arc::from(self.name()) }
    }

    /// `(num_atoms, num_edges)` of logical `index`. Readers with pointer
    /// arrays answer without reading field data; the default loads the sample.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`], or the error of loading the sample.
    fn get_metadata(&self, index: usize) -> Result<(usize, usize)> {
        let s = self.load_sample(self.check_index(index as i64)?)?;
        Ok((s.num_atoms(), s.num_edges()))
    }

    /// Picks up appends and deletes made since opening. Default: nothing to do.
    ///
    /// # Errors
    /// The backend's error reading its new state.
    fn refresh(&self) -> Result<()> {
        Ok(())
    }

    /// Plans the collated read of `batches` laid out as `options`: checks
    /// every index against [`Reader::len`] and prepares what the read needs.
    /// Default: nothing to prepare ([`ReadPlan::new`]). The Zarr reader finds
    /// each sample's rows and the chunks every array must decode, and keeps
    /// those chunks in its cache until the read (so a window planned while
    /// another is read is not evicted first).
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] naming the reader for an index not below `len()`.
    fn plan(&self, batches: Vec<Vec<usize>>, options: CollateOptions) -> Result<ReadPlan> {
        Error::check_indices(|| self.name().to_string(), batches.iter().flatten(), self.len())?;
        Ok(ReadPlan::new(batches, options))
    }

    /// Reads a plan of this reader's [`Reader::plan`] into `out` (resized to
    /// its batches, buffers reused), one backend read for all its batches.
    /// Default: [`Reader::load_many`], host collation, then the plan's
    /// layout applied; the Zarr reader copies rows from decoded chunks and
    /// lays them out while it copies.
    ///
    /// # Errors
    /// The error of [`Reader::load_many`]; [`Error::NeighborIndex`] naming
    /// the sample whose neighbor list points outside it;
    /// [`Error::InvalidInput`] naming the reader when `load_many` returns
    /// another number of samples than asked for.
    fn read_plan(&self, plan: ReadPlan, out: &mut Vec<CollatedBatch>) -> Result<()> {
        let (batches, options, _) = plan.into_parts::<()>();
        let flat: Vec<usize> = batches.iter().flatten().copied().collect();
        let samples = self.load_many(&flat)?;
        out.resize_with(batches.len(), CollatedBatch::default);
        collate_lists(out, &batches, &samples, options.narrow_int64(), self.name(), &|i, report| {
            neighbor_index_error(self, i, report)
        })
    }

    /// The reader's chunked-store capability: chunk blocks, the cache hint
    /// and decode counters. `None` (the default) for a reader without
    /// stored chunks.
    ///
    /// ```
    /// # fn main() -> atomzarr::Result<()> {
    /// use atomzarr::{AtomicDataZarrReader, AtomicDataZarrWriter, InMemoryReader, Reader, ZarrWriteConfig};
    /// let samples = atomzarr::data::synth::generate(4, 2, 5, 0)?;
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("c.zarr");
    /// AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default())?.write(&samples)?;
    /// assert!(AtomicDataZarrReader::open(&path)?.chunked().is_some());
    /// assert!(InMemoryReader::from_samples(&samples, "mem")?.chunked().is_none());
    /// # Ok(()) }
    /// ```
    fn chunked(&self) -> Option<&dyn ChunkedReader> {
        None
    }
}

/// The capability of a reader over stored chunks (the Zarr reader, and the
/// wrappers over it), reached through [`Reader::chunked`].
///
/// ```
/// # fn main() -> atomzarr::Result<()> {
/// use atomzarr::{AtomicDataZarrReader, AtomicDataZarrWriter, Reader, ReaderExt, ZarrWriteConfig};
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("c.zarr");
/// AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default())?.write(&atomzarr::data::synth::generate(4, 2, 5, 0)?)?;
/// let reader = AtomicDataZarrReader::open(&path)?;
/// reader.read_many(&[0, 3])?;
/// let chunked = reader.chunked().unwrap();
/// assert_eq!(chunked.chunk_blocks()[0], 0);
/// assert!(chunked.decode_counters().sample_bytes > 0);
/// # Ok(()) }
/// ```
pub trait ChunkedReader: Send + Sync {
    /// How samples share storage chunks: the logical indices where a new
    /// block of samples starts (strictly increasing from 0), each block
    /// being the samples whose rows start in one chunk of the store's
    /// bulkiest arrays. Depends on the store alone (not on the cache).
    /// [`ChunkShuffleSampler::for_reader`](crate::sampler::ChunkShuffleSampler::for_reader)
    /// shuffles these blocks.
    fn chunk_blocks(&self) -> Vec<usize>;

    /// Decode counters since the reader was opened (or its counters reset).
    fn decode_counters(&self) -> DecodeCounters;

    /// Bytes the chunk cache holds now (cached chunks as they are kept,
    /// compact forms included; at most the cache's budget): with it the
    /// memory a reader holds beyond its cache can be told.
    fn cache_bytes_held(&self) -> u64;

    /// The store's decoded size against the reader's chunk cache: what the
    /// [`DataLoader`](crate::DataLoader)'s default shuffle decides by.
    fn cache_fit(&self) -> CacheFit;

    /// Sets the byte budget of the reader's chunk cache (evicting down to it
    /// at once): how a [`MultiReader`](crate::MultiReader) gives its
    /// children their shares of one budget.
    fn set_cache_bytes(&self, bytes: u64);

    /// [`cache_fit`](Self::cache_fit) of each part whose samples a mixing
    /// sampler draws apart, in index order: a
    /// [`MultiReader`](crate::MultiReader)'s children (a child without
    /// chunks counts as fitting); one part, the whole reader, otherwise.
    fn part_fits(&self) -> Vec<CacheFit> {
        vec![self.cache_fit()]
    }
}

/// Default byte budget of a reader's decoded-chunk cache, and of the one
/// budget a [`MultiReader`](crate::MultiReader)'s children share: lets a
/// store of about 1 GiB decoded stay resident.
pub const DEFAULT_CACHE_BYTES: u64 = 1280 << 20;

/// A store's decoded bytes against its reader's chunk cache
/// ([`ChunkedReader::cache_fit`]).
///
/// ```
/// use atomzarr::source::CacheFit;
/// let fit = CacheFit { decoded_bytes: 3 << 30, resident_bytes: 100 << 20, cache_bytes: 1 << 30 };
/// assert!(!fit.fits());
/// assert_eq!(fit.bulky_bytes(), (3 << 30) - (100 << 20));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheFit {
    /// Decoded bytes of every array of the store (live and deleted rows).
    pub decoded_bytes: u64,
    /// Decoded bytes of the arrays that stay resident: the smallest ones,
    /// which together hold at most an eighth of the store (their chunking
    /// costs nothing once decoded; see
    /// [`ChunkedReader::chunk_blocks`]).
    pub resident_bytes: u64,
    /// The cache's byte budget.
    pub cache_bytes: u64,
}

impl CacheFit {
    /// Whether the whole decoded store fits the cache.
    pub fn fits(&self) -> bool {
        self.decoded_bytes <= self.cache_bytes
    }

    /// Decoded bytes of the arrays that do not stay resident.
    pub fn bulky_bytes(&self) -> u64 {
        self.decoded_bytes.saturating_sub(self.resident_bytes)
    }
}

impl std::ops::Add for CacheFit {
    type Output = CacheFit;
    fn add(self, o: CacheFit) -> CacheFit {
        CacheFit {
            decoded_bytes: self.decoded_bytes.saturating_add(o.decoded_bytes),
            resident_bytes: self.resident_bytes.saturating_add(o.resident_bytes),
            cache_bytes: self.cache_bytes.saturating_add(o.cache_bytes),
        }
    }
}

/// The conveniences every [`Reader`] gets: checked reads with negative
/// indices and metadata, and the collated path with default options.
/// Implemented for every `Reader` (including `dyn Reader`); never
/// implemented by hand.
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

    /// A read that was not planned ahead: [`Reader::plan`], then
    /// [`Reader::read_plan`] (indices logical, in `0..len()`).
    ///
    /// # Errors
    /// As [`Reader::plan`] and [`Reader::read_plan`].
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
        Ok(Sample { data, metadata: self.metadata_for(i) })
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
        Ok(data.into_iter().zip(&idx).map(|(data, &i)| Sample { data, metadata: self.metadata_for(i) }).collect())
    }

    /// Collated batches for logical (possibly negative) indices; see
    /// [`Reader::read_plan`].
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
    /// [`Reader::read_plan`].
    fn read_collated_opt(
        &self,
        batches: &[Vec<i64>],
        opts: CollateOptions,
        out: &mut Vec<CollatedBatch>,
    ) -> Result<()> {
        let len = self.len();
        let checked: Vec<Vec<usize>> = batches.iter().map(|b| check_all(self, b, len)).collect::<Result<_>>()?;
        self.read_plan(self.plan(checked, opts)?, out)
    }
}

impl<R: Reader + ?Sized> ReaderExt for R {}

/// The error of logical sample `index` of `reader` whose neighbor list
/// holds `report.value` outside its atoms, found in samples the reader
/// returned: the reader's source and the sample's physical index.
pub(crate) fn neighbor_index_error<R: Reader + ?Sized>(reader: &R, index: usize, report: IndexReport) -> Error {
    let meta = reader.metadata_for(index);
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

#[deny(clippy::missing_trait_methods)]
impl<R: Reader + ?Sized> Reader for Arc<R> {
    fn len(&self) -> usize {
        (**self).len()
    }
    fn name(&self) -> &str {
        (**self).name()
    }
    fn field_levels(&self) -> BTreeMap<String, Level> {
        (**self).field_levels()
    }
    fn load_many(&self, indices: &[usize]) -> Result<Vec<AtomicData>> {
        (**self).load_many(indices)
    }
    fn string_levels(&self) -> BTreeMap<String, Level> {
        (**self).string_levels()
    }
    fn physical_index(&self, index: usize) -> usize {
        (**self).physical_index(index)
    }
    fn metadata_for(&self, i: usize) -> SampleMetadata {
        (**self).metadata_for(i)
    }
    fn get_metadata(&self, index: usize) -> Result<(usize, usize)> {
        (**self).get_metadata(index)
    }
    fn refresh(&self) -> Result<()> {
        (**self).refresh()
    }
    fn plan(&self, batches: Vec<Vec<usize>>, options: CollateOptions) -> Result<ReadPlan> {
        (**self).plan(batches, options)
    }
    fn read_plan(&self, plan: ReadPlan, out: &mut Vec<CollatedBatch>) -> Result<()> {
        (**self).read_plan(plan, out)
    }
    fn chunked(&self) -> Option<&dyn ChunkedReader> {
        (**self).chunked()
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
        fn field_levels(&self) -> BTreeMap<String, Level> {
            BTreeMap::new()
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
