//! The chunked-store capability of a reader ([`ChunkedReader`]) and what it
//! reports: decode counters ([`DecodeCounters`]) and the store's fit in the
//! chunk cache ([`CacheFit`]).

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

/// The capability of a reader over stored chunks (the Zarr reader, and the
/// wrappers over it), reached through
/// [`Reader::capabilities`](crate::Reader::capabilities) (or
/// [`ReaderExt::chunked`](crate::ReaderExt::chunked)).
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

    /// Shares the budget among the [`part_fits`](Self::part_fits) parts for
    /// an epoch that draws part `d` `passes[d]` times over
    /// ([`split_cache_budget_by_passes`](crate::source::split_cache_budget_by_passes)):
    /// what a [`DataLoader`](crate::DataLoader) fitting a mixing sampler
    /// tells a [`MultiReader`](crate::MultiReader). A reader of one part
    /// has nothing to share: its whole budget is that part's.
    fn share_cache_by_passes(&self, passes: &[f64]) {
        let _ = passes;
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
