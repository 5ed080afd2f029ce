//! The backend contract: a [`Reader`] owns storage I/O and nothing else.
//!
//! A backend implements [`Reader::len`], [`Reader::source`],
//! [`Reader::field_levels`] and at least one of the two load hooks:
//! [`Reader::load_sample`] (simple formats) or [`Reader::load_many`]
//! (batch-optimised formats); the other is derived. Callers use the provided
//! [`Reader::read`] and [`Reader::read_many`], which normalise negative
//! indices, check bounds and attach [`SampleMetadata`].
//!
//! ```
//! use std::collections::BTreeMap;
//! use atomzarr::{AtomicData, Level, Reader, Result};
//!
//! /// A toy backend that only knows how to load one sample.
//! struct Dimers;
//! impl Reader for Dimers {
//!     fn len(&self) -> usize { 10 }
//!     fn source(&self) -> &str { "dimers" }
//!     fn field_levels(&self) -> BTreeMap<String, Level> {
//!         [("atomic_numbers".into(), Level::Atom), ("positions".into(), Level::Atom)].into()
//!     }
//!     fn load_sample(&self, i: usize) -> Result<AtomicData> {
//!         AtomicData::new(vec![1, 1], vec![[0.0; 3], [0.5 + i as f32 * 0.1, 0.0, 0.0]])
//!     }
//! }
//!
//! let r = Dimers;
//! let many = r.read_many(&[3, -1, 3]).unwrap();   // derived from load_sample
//! assert_eq!(many[1].metadata.index, 9);
//! assert_eq!(many[0].data, many[2].data);
//! assert!(r.read(10).is_err());
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::data::{AtomicData, Level};
use crate::data::{CollateOptions, CollatedBatch};
use crate::error::{Error, Result};

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

/// Storage backend. See the module docs for which methods to implement.
///
/// Hook indices are logical and already in `0..len()`.
/// A backend that implements neither load hook recurses forever; implement one.
pub trait Reader: Send + Sync {
    /// Logical (active) sample count.
    fn len(&self) -> usize;

    /// True when there are no samples.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A name for the source (store path), used in metadata and errors.
    fn source(&self) -> &str;

    /// Field name to level, for every field a sample has.
    fn field_levels(&self) -> BTreeMap<String, Level>;

    /// String label name to level, for every string label a sample has
    /// ([`AtomicData::strings`]). Default: none.
    fn string_levels(&self) -> BTreeMap<String, Level> {
        BTreeMap::new()
    }

    /// Single-sample hook. Default: a one-element [`Reader::load_many`].
    fn load_sample(&self, index: usize) -> Result<AtomicData> {
        self.load_many(&[index])?
            .pop()
            .ok_or_else(|| Error::Background(format!("{}: load_many returned nothing", self.source())))
    }

    /// Many-sample hook, results aligned with `indices` (duplicates allowed).
    /// Default: [`Reader::load_sample`] per index.
    fn load_many(&self, indices: &[usize]) -> Result<Vec<AtomicData>> {
        indices.iter().map(|&i| self.load_sample(i)).collect()
    }

    /// Physical index of logical `index` (identity for stores without deletes).
    fn physical_index(&self, index: usize) -> usize {
        index
    }

    /// `(num_atoms, num_edges)` of logical `index`. Readers with pointer
    /// arrays answer without reading field data; the default loads the sample.
    fn get_metadata(&self, index: usize) -> Result<(usize, usize)> {
        let s = self.load_sample(self.check_index(index as i64)?)?;
        Ok((s.num_atoms(), s.num_edges()))
    }

    /// Picks up appends and deletes made since opening. Default: nothing to do.
    fn refresh(&self) -> Result<()> {
        Ok(())
    }

    /// The collated batch path: one backend read for all `batches`, written
    /// into `out` (resized to `batches.len()`, buffers reused). Indices are
    /// logical and already checked. Default: `load_many` + host collation;
    /// the Zarr reader overrides it with a single-pass copy from decoded chunks.
    fn load_collated(&self, batches: &[Vec<usize>], out: &mut Vec<CollatedBatch>) -> Result<()> {
        let flat: Vec<usize> = batches.iter().flatten().copied().collect();
        let samples = self.load_many(&flat)?;
        out.resize_with(batches.len(), CollatedBatch::default);
        let mut start = 0;
        for (b, dst) in batches.iter().zip(out.iter_mut()) {
            dst.fill_from_samples_with(b, &samples[start..start + b.len()], &|k, report| {
                range_error(self, b[k], report)
            })?;
            start += b.len();
        }
        Ok(())
    }

    /// As [`Reader::load_collated`], laid out as `opts` says. Default:
    /// `load_collated`, then a host pass that applies `opts`; the Zarr reader
    /// applies them while it copies rows.
    fn load_collated_with(
        &self,
        batches: &[Vec<usize>],
        opts: CollateOptions,
        out: &mut Vec<CollatedBatch>,
    ) -> Result<()> {
        self.load_collated(batches, out)?;
        if opts.narrow_int64() {
            out.iter_mut().for_each(CollatedBatch::narrow_int64);
        }
        Ok(())
    }

    /// Normalises a possibly negative index to `0..len()`.
    fn check_index(&self, index: i64) -> Result<usize> {
        checked_index(self, index, self.len())
    }

    /// One sample; negative indices count from the end.
    fn read(&self, index: i64) -> Result<Sample> {
        let i = self.check_index(index)?;
        let data = self.load_sample(i)?;
        Ok(Sample { data, metadata: self.metadata_for(i) })
    }

    /// Many samples in the caller's order (duplicates allowed).
    fn read_many(&self, indices: &[i64]) -> Result<Vec<Sample>> {
        let idx = check_all(self, indices, self.len())?;
        let data = self.load_many(&idx)?;
        Ok(data.into_iter().zip(&idx).map(|(data, &i)| Sample { data, metadata: self.metadata_for(i) }).collect())
    }

    /// Collated batches for logical (possibly negative) indices; see
    /// [`Reader::load_collated`].
    fn read_collated(&self, batches: &[Vec<i64>], out: &mut Vec<CollatedBatch>) -> Result<()> {
        self.read_collated_with(batches, CollateOptions::default(), out)
    }

    /// As [`Reader::read_collated`], laid out as `opts` says (for example
    /// int64 fields narrowed to int32 while they are copied).
    ///
    /// ```
    /// # fn main() -> atomzarr::Result<()> {
    /// use atomzarr::{AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, HostData, Reader, ZarrWriteConfig};
    /// use atomzarr::data::CollateOptions;
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("n.zarr");
    /// let s = AtomicData::new(vec![8, 1], vec![[0.0; 3]; 2])?.with_neighbor_list(vec![[0, 1]], None)?;
    /// AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default())?.write(&[s.clone(), s])?;
    /// let reader = AtomicDataZarrReader::open(&path)?;
    /// let mut out = Vec::new();
    /// reader.read_collated_with(&[vec![0, 1]], CollateOptions::default().with_narrow_int64(true), &mut out)?;
    /// assert_eq!(out[0].fields["neighbor_list"].data, HostData::Int32(vec![0, 1, 2, 3]));
    /// # Ok(()) }
    /// ```
    fn read_collated_with(
        &self,
        batches: &[Vec<i64>],
        opts: CollateOptions,
        out: &mut Vec<CollatedBatch>,
    ) -> Result<()> {
        let len = self.len();
        let checked: Vec<Vec<usize>> = batches.iter().map(|b| check_all(self, b, len)).collect::<Result<_>>()?;
        self.load_collated_with(&checked, opts, out)
    }

    /// How samples share storage chunks: the logical indices where a new
    /// block of samples starts (strictly increasing from 0), each block
    /// being the samples whose rows start in one chunk of the store's
    /// bulkiest arrays. `None` (the default) for a reader without chunks.
    /// [`ChunkShuffleSampler::for_reader`](crate::sampler::ChunkShuffleSampler::for_reader)
    /// shuffles these blocks.
    fn chunk_blocks(&self) -> Option<Vec<usize>> {
        None
    }

    /// Decode counters, for a reader that decodes chunks (default `None`).
    fn decode_counters(&self) -> Option<DecodeCounters> {
        None
    }

    /// A hint: `batches` (logical, checked by the caller) is the read that
    /// follows the one in progress. A reader with a cache keeps what that
    /// read needs rather than evict it first. Default: ignored.
    fn announce_next(&self, batches: &[Vec<usize>]) {
        let _ = batches;
    }

    /// Metadata of logical index `i`.
    fn metadata_for(&self, i: usize) -> SampleMetadata {
        SampleMetadata { index: i, physical_index: self.physical_index(i), source: Arc::from(self.source()) }
    }

    /// The error a batch path returns for logical sample `index` whose
    /// neighbor list holds `value` outside `[0, num_atoms)`; `span` is the
    /// sample's smallest and largest (sample-local) index. Default: an
    /// [`Error::NeighborIndex`] naming [`Reader::source`] and the physical
    /// index. A reader that knows the store's atom offsets (the Zarr reader)
    /// adds the diagnosis of nvalchemi-toolkit's append bug; wrappers
    /// delegate to the reader that owns the sample.
    ///
    /// ```
    /// use atomzarr::{Error, InMemoryDataset, Reader};
    /// let mem = InMemoryDataset::from_samples(&atomzarr::data::synth::generate(2, 2, 4, 0).unwrap(), "mem").unwrap();
    /// let e = mem.neighbor_index_error(1, -3, 4, (-3, 2));
    /// assert!(matches!(e, Error::NeighborIndex { index: 1, value: -3, num_atoms: 4, .. }));
    /// assert!(e.to_string().starts_with("mem, sample 1 (physical 1): neighbor_list index -3"));
    /// ```
    fn neighbor_index_error(&self, index: usize, value: i64, num_atoms: usize, span: (i64, i64)) -> Error {
        let _ = span;
        Error::NeighborIndex {
            source_name: self.source().to_string(),
            index,
            physical_index: self.physical_index(index),
            value,
            num_atoms,
            append_shift: None,
        }
    }
}

/// The batch-path error for `report`, a range violation of logical sample
/// `index` of `reader`.
pub(crate) fn range_error<R: Reader + ?Sized>(reader: &R, index: usize, report: crate::data::IndexReport) -> Error {
    reader.neighbor_index_error(index, report.value, report.num_atoms, (report.min, report.max))
}

/// `indices` normalised to `0..len` (`len` taken once by the caller: per
/// index, `len()` takes the reader's state lock each time).
fn check_all<R: Reader + ?Sized>(r: &R, indices: &[i64], len: usize) -> Result<Vec<usize>> {
    indices.iter().map(|&index| checked_index(r, index, len)).collect()
}

/// `index` in `0..len`, counting negative indices from the end.
fn checked_index<R: Reader + ?Sized>(r: &R, index: i64, len: usize) -> Result<usize> {
    let i = if index < 0 { index + len as i64 } else { index };
    if i < 0 || i as usize >= len {
        return Err(Error::IndexOutOfRange { source_name: r.source().to_string(), index, len });
    }
    Ok(i as usize)
}

impl<R: Reader + ?Sized> Reader for Arc<R> {
    fn len(&self) -> usize {
        (**self).len()
    }
    fn source(&self) -> &str {
        (**self).source()
    }
    fn field_levels(&self) -> BTreeMap<String, Level> {
        (**self).field_levels()
    }
    fn load_sample(&self, index: usize) -> Result<AtomicData> {
        (**self).load_sample(index)
    }
    fn load_many(&self, indices: &[usize]) -> Result<Vec<AtomicData>> {
        (**self).load_many(indices)
    }
    fn physical_index(&self, index: usize) -> usize {
        (**self).physical_index(index)
    }
    fn get_metadata(&self, index: usize) -> Result<(usize, usize)> {
        (**self).get_metadata(index)
    }
    fn refresh(&self) -> Result<()> {
        (**self).refresh()
    }
    fn load_collated(&self, batches: &[Vec<usize>], out: &mut Vec<CollatedBatch>) -> Result<()> {
        (**self).load_collated(batches, out)
    }
    fn load_collated_with(
        &self,
        batches: &[Vec<usize>],
        opts: CollateOptions,
        out: &mut Vec<CollatedBatch>,
    ) -> Result<()> {
        (**self).load_collated_with(batches, opts, out)
    }
    fn neighbor_index_error(&self, index: usize, value: i64, num_atoms: usize, span: (i64, i64)) -> Error {
        (**self).neighbor_index_error(index, value, num_atoms, span)
    }
    fn chunk_blocks(&self) -> Option<Vec<usize>> {
        (**self).chunk_blocks()
    }
    fn decode_counters(&self) -> Option<DecodeCounters> {
        (**self).decode_counters()
    }
    fn announce_next(&self, batches: &[Vec<usize>]) {
        (**self).announce_next(batches)
    }
}
