//! Decoded-chunk cache shared across reads, keyed by (array, inner chunk).
//!
//! Why not zarrs' `ChunkCacheDecodedLruSizeLimit`: it caches at the array's
//! chunk grid, which for a sharded array is the whole shard (500,000 rows in
//! the reference configuration). A shuffled read needs a few rows from many
//! inner chunks; caching shards would decode 50 inner chunks to serve one.
//! Keying by inner chunk keeps the decode granularity and the cache granularity
//! equal. The LRU bookkeeping is the `lru` crate's (zarrs uses it too).
//!
//! Eviction is least-recently-used with one exception: the chunks of windows
//! planned and not yet read ([`ChunkCache::protect`], held by the plan that
//! `ReaderExt::plan` returns until its read starts or it is dropped) are
//! evicted only when nothing else is left. So a read whose chunks do not fit
//! next to the cached ones evicts chunks no upcoming read is known to need
//! first, and the next window finds its chunks still there. Within one read
//! every needed chunk is decoded at most once whatever the budget (the read
//! holds what it decoded until it has copied the rows).
//!
//! ## Sizing the budget
//!
//! - Whole store fits (decoded size below the budget): every chunk is decoded
//!   once per reader, whatever the read order.
//! - Sequential reads of a larger store: the budget needs the chunks of two
//!   read windows (the one being copied and the one planned next) plus the
//!   arrays small enough to stay resident (per-system arrays).
//! - The block-pool shuffle ([`ChunkShuffleSampler`](crate::sampler::ChunkShuffleSampler),
//!   what `with_shuffle(true)` reads on a store larger than the cache): the
//!   pool's `pool_blocks` blocks of decoded chunks plus the resident arrays; the
//!   loader sizes `pool_blocks` so that the pool takes half of what the resident
//!   arrays leave ([`pool_blocks`](crate::sampler::pool_blocks)).
//! - Memory: cached chunks live in the reader's chunk memory (huge-page
//!   advised blocks recycled by size); a block the cache evicts is reused by
//!   the next decode rather than returned, so the process keeps what the
//!   cache and the windows in flight needed at their peak.
//! - A uniform random shuffle of a store several times the budget touches
//!   nearly every chunk in every window: no budget short of the decoded store
//!   avoids re-decoding; the block pool does.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// A decoded chunk, as decoded or in a compact form (see `compact`).
pub(crate) type ChunkBytes = Arc<Chunk>;

pub use super::chunk_memory::ChunkBuf;
use super::chunk_memory::ChunkMemory;
pub(crate) use super::compact::Chunk;

pub use crate::source::DEFAULT_CACHE_BYTES;

/// The form a read takes an array's chunks in: as stored, or int64 values
/// narrowed to int32 (half the bytes; see
/// [`CollateOptions::narrow_int64`](crate::data::CollateOptions::narrow_int64)).
/// The two forms of one chunk are cached apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Width {
    /// The stored dtype.
    Stored,
    /// Int64 narrowed to int32.
    Int32,
}

/// What the cache keeps chunks of: an array (its id in the reader) in one
/// [`Width`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ArrayKey {
    pub(crate) array: u32,
    pub(crate) width: Width,
}

impl From<u32> for ArrayKey {
    /// The array as stored.
    fn from(array: u32) -> ArrayKey {
        ArrayKey { array, width: Width::Stored }
    }
}

/// Hit / miss / size counters of a reader's decoded-chunk cache ([`AtomicDataZarrReader::cache_stats`](crate::AtomicDataZarrReader::cache_stats)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheStats {
    /// Lookups served from the cache.
    pub hits: u64,
    /// Lookups that had to decode.
    pub misses: u64,
    /// Bytes currently held.
    pub bytes: u64,
    /// Chunks currently held.
    pub entries: u64,
    /// The byte budget.
    pub budget: u64,
}

struct Inner {
    lru: lru::LruCache<(ArrayKey, u64), ChunkBytes, rustc_hash::FxBuildHasher>,
    bytes: u64,
}

impl Inner {
    /// The least recently used entry that no planned read needs, else the
    /// least recently used one.
    fn victim(&self, planned: &Planned) -> Option<(ArrayKey, u64)> {
        let free = self.lru.iter().rev().map(|(k, _)| *k).find(|&(a, c)| !is_planned(planned, a.array, c));
        free.or_else(|| self.lru.peek_lru().map(|(k, _)| *k))
    }

    /// Evicts down to `budget` bytes.
    fn evict_to(&mut self, budget: u64, planned: &Mutex<Planned>) {
        if self.bytes <= budget {
            return;
        }
        let planned = lock_planned(planned);
        while self.bytes > budget {
            let Some(key) = self.victim(&planned) else { break };
            if let Some(v) = self.lru.pop(&key) {
                self.bytes -= v.len() as u64;
            }
        }
    }
}

/// The chunks `(array id, chunk)` of each window planned and not yet read
/// (sorted), in either width.
type Planned = Vec<Arc<[(u32, u64)]>>;

/// Whether a planned window needs chunk `c` of array `a`.
fn is_planned(planned: &Planned, a: u32, c: u64) -> bool {
    planned.iter().any(|p| p.binary_search(&(a, c)).is_ok())
}

/// The protection of one planned window's chunks ([`ChunkCache::protect`]):
/// dropping it (when the window's read starts, or the plan is abandoned)
/// takes them back.
pub(crate) struct Protection {
    planned: Arc<Mutex<Planned>>,
    keys: Arc<[(u32, u64)]>,
}

impl Drop for Protection {
    fn drop(&mut self) {
        lock_planned(&self.planned).retain(|p| !Arc::ptr_eq(p, &self.keys));
    }
}

fn lock_planned(planned: &Mutex<Planned>) -> std::sync::MutexGuard<'_, Planned> {
    // A list of shared key lists: a panic elsewhere cannot leave it half-written.
    planned.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A byte-budgeted LRU of decoded chunks. A budget of 0 disables it.
pub struct ChunkCache {
    /// The byte budget; a mixture's shared budget moves it (see
    /// [`ChunkCache::set_budget`]).
    budget: AtomicU64,
    /// Memory for decoded chunks, cached or not (see `memory`).
    memory: Arc<ChunkMemory>,
    inner: Mutex<Inner>,
    /// Chunks of planned windows, evicted last (see [`ChunkCache::protect`]).
    planned: Arc<Mutex<Planned>>,
    hits: AtomicU64,
    misses: AtomicU64,
    decoded_bytes: AtomicU64,
    sample_bytes: AtomicU64,
    chunks_decoded: AtomicU64,
}

impl std::fmt::Debug for ChunkCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkCache").field("stats", &self.stats()).finish()
    }
}

impl ChunkCache {
    /// A cache holding at most `budget` bytes of decoded data. Its buffers
    /// come from a chunk memory that maps at most the budget plus two read windows'
    /// chunks at the reader's default window bound
    /// ([`DEFAULT_WINDOW_DECODE_BYTES`](super::DEFAULT_WINDOW_DECODE_BYTES)),
    /// decoded beside the cached ones.
    #[cfg(test)]
    pub fn new(budget: u64) -> ChunkCache {
        Self::with_memory_limit(budget, budget.saturating_add(2 * super::DEFAULT_WINDOW_DECODE_BYTES))
    }

    /// A cache of `budget` bytes whose chunk buffers come from a chunk memory
    /// mapping at most `memory_limit` bytes.
    pub(crate) fn with_memory_limit(budget: u64, memory_limit: u64) -> ChunkCache {
        ChunkCache {
            budget: AtomicU64::new(budget),
            memory: ChunkMemory::new(memory_limit),
            inner: Mutex::new(Inner {
                // A shuffled window of a small-chunk store looks up thousands
                // of chunks; SipHash was a fifth of its read.
                lru: lru::LruCache::unbounded_with_hasher(rustc_hash::FxBuildHasher),
                bytes: 0,
            }),
            planned: Arc::default(),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            decoded_bytes: AtomicU64::new(0),
            sample_bytes: AtomicU64::new(0),
            chunks_decoded: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the LRU inconsistent in a
        // way that matters (worst case a stale byte count), so recover.
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The byte budget.
    pub fn budget(&self) -> u64 {
        self.budget.load(Ordering::Relaxed)
    }

    /// Sets the byte budget (evicting down to it at once) and the bytes the
    /// chunk memory may map.
    pub(crate) fn set_budget(&self, budget: u64, memory_limit: u64) {
        self.memory.set_limit(memory_limit);
        self.budget.store(budget, Ordering::Relaxed);
        self.lock().evict_to(budget, &self.planned);
    }

    /// Looks up a chunk, counting a hit or a miss.
    pub fn get(&self, array: impl Into<ArrayKey>, chunk: u64) -> Option<ChunkBytes> {
        if self.budget() == 0 {
            self.misses.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let found = self.lock().lru.get(&(array.into(), chunk)).cloned();
        let counter = if found.is_some() { &self.hits } else { &self.misses };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Inserts a chunk, evicting least-recently-used ones past the budget
    /// (protected ones last, see [`ChunkCache::protect`]). Chunks larger than
    /// the whole budget are not kept.
    pub fn insert(&self, array: impl Into<ArrayKey>, chunk: u64, bytes: ChunkBytes) {
        let size = bytes.len() as u64;
        let budget = self.budget();
        if size > budget {
            return;
        }
        let mut g = self.lock();
        if let Some(old) = g.lru.put((array.into(), chunk), bytes) {
            g.bytes -= old.len() as u64;
        }
        g.bytes += size;
        g.evict_to(budget, &self.planned);
    }

    /// Bytes the cache can take before it evicts anything.
    pub(crate) fn room(&self) -> u64 {
        let budget = self.budget();
        if budget == 0 {
            return 0;
        }
        budget.saturating_sub(self.lock().bytes)
    }

    /// Protects `chunks`, `(array id, chunk)` in both widths, for as long
    /// as the returned value lives: those a planned read needs, evicted
    /// only when nothing unprotected is left.
    pub(crate) fn protect(&self, chunks: impl IntoIterator<Item = (u32, u64)>) -> Protection {
        let mut keys: Arc<[(u32, u64)]> = chunks.into_iter().collect();
        if !keys.is_sorted()
            && let Some(k) = Arc::get_mut(&mut keys)
        {
            k.sort_unstable();
        }
        // Nothing to keep when nothing is cached.
        if self.budget() > 0 {
            lock_planned(&self.planned).push(keys.clone());
        }
        Protection { planned: self.planned.clone(), keys }
    }

    /// A buffer of `len` bytes for a decoded chunk, its contents unspecified
    /// (the caller overwrites all of it).
    pub(crate) fn alloc(&self, len: usize) -> ChunkBuf {
        self.memory.alloc(len)
    }

    /// Counts one chunk decode of `bytes` decoded bytes.
    pub(crate) fn count_decode(&self, bytes: u64) {
        self.decoded_bytes.fetch_add(bytes, Ordering::Relaxed);
        self.chunks_decoded.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts `bytes` of sample field data requested.
    pub(crate) fn count_request(&self, bytes: u64) {
        self.sample_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Decoded and requested byte counts since the last
    /// [`reset_counters`](Self::reset_counters).
    pub fn decode_counters(&self) -> crate::source::DecodeCounters {
        crate::source::DecodeCounters {
            decoded_bytes: self.decoded_bytes.load(Ordering::Relaxed),
            sample_bytes: self.sample_bytes.load(Ordering::Relaxed),
            chunks_decoded: self.chunks_decoded.load(Ordering::Relaxed),
        }
    }

    /// Drops every entry (after the store changed underneath).
    pub fn clear(&self) {
        let mut g = self.lock();
        g.lru.clear();
        g.bytes = 0;
    }

    /// Current counters.
    pub fn stats(&self) -> CacheStats {
        let g = self.lock();
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            bytes: g.bytes,
            entries: g.lru.len() as u64,
            budget: self.budget(),
        }
    }

    /// Zeroes the hit, miss and decode counters.
    pub fn reset_counters(&self) {
        for c in [&self.hits, &self.misses, &self.decoded_bytes, &self.sample_bytes, &self.chunks_decoded] {
            c.store(0, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_lru_past_budget_and_counts() {
        let c = ChunkCache::new(100);
        c.insert(0, 0, Arc::new(Chunk::plain(ChunkBuf::from(vec![0; 40]))));
        c.insert(0, 1, Arc::new(Chunk::plain(ChunkBuf::from(vec![0; 40]))));
        assert!(c.get(0, 0).is_some()); // 0 now most recent
        c.insert(0, 2, Arc::new(Chunk::plain(ChunkBuf::from(vec![0; 40])))); // evicts 1
        assert!(c.get(0, 1).is_none());
        assert!(c.get(0, 0).is_some());
        let s = c.stats();
        assert_eq!((s.hits, s.misses, s.bytes, s.entries), (2, 1, 80, 2));
        c.insert(1, 0, Arc::new(Chunk::plain(ChunkBuf::from(vec![0; 101])))); // larger than budget: not kept
        assert!(c.get(1, 0).is_none());
    }

    #[test]
    fn protected_chunks_are_evicted_last() {
        let c = ChunkCache::new(100);
        for k in 0..3 {
            c.insert(0, k, Arc::new(Chunk::plain(ChunkBuf::from(vec![0; 30]))));
        }
        // The next read needs chunk 0 (the least recent) and chunk 1: plain
        // LRU would evict 0 then 1.
        let first = c.protect(vec![(0, 0), (0, 1)]);
        c.insert(0, 3, Arc::new(Chunk::plain(ChunkBuf::from(vec![0; 30])))); // evicts 2, the LRU unprotected
        assert!(c.get(0, 2).is_none());
        c.insert(0, 4, Arc::new(Chunk::plain(ChunkBuf::from(vec![0; 30])))); // evicts 3 (0 and 1 protected)
        assert!(c.get(0, 3).is_none());
        assert!(c.get(0, 0).is_some() && c.get(0, 1).is_some() && c.get(0, 4).is_some());
        // Only the newest is unprotected: it goes (its reader holds it).
        let second = c.protect(vec![(0, 4)]);
        c.insert(0, 5, Arc::new(Chunk::plain(ChunkBuf::from(vec![0; 30]))));
        assert!(c.get(0, 5).is_none());
        // Everything protected: the least recent goes first.
        let third = c.protect(vec![(0, 6)]);
        c.insert(0, 6, Arc::new(Chunk::plain(ChunkBuf::from(vec![0; 30]))));
        assert_eq!(c.stats().entries, 3);
        assert!(c.get(0, 0).is_none()); // looked up before 1 and 4 above
        assert!(c.get(0, 1).is_some() && c.get(0, 6).is_some());
        // The first plan read (dropped): its chunk 1 goes before 4 and 6.
        drop(first);
        c.insert(0, 7, Arc::new(Chunk::plain(ChunkBuf::from(vec![0; 30]))));
        assert!(c.get(0, 1).is_none() && c.get(0, 4).is_some() && c.get(0, 6).is_some());
        drop((second, third));
        assert!(lock_planned(&c.planned).is_empty());
    }

    #[test]
    fn evicted_chunks_memory_is_reused_by_later_decodes() {
        // Room for two 100 KB chunks: every insert past the second evicts one.
        let c = ChunkCache::with_memory_limit(200_000, 64 << 20);
        let mut blocks = std::collections::HashSet::new();
        for k in 0..200u64 {
            let mut b = c.alloc(100_000);
            b.fill(k as u8);
            blocks.insert(b.as_ptr() as usize);
            c.insert(0, k, Arc::new(Chunk::plain(b)));
        }
        // Two cached, one being filled: three blocks serve 200 decodes, one map holds them.
        assert_eq!(blocks.len(), 3, "an evicted chunk's block is reused");
        assert_eq!(c.memory.mapped(), 2 << 20);
        let last = c.get(0, 199).unwrap();
        assert!(last.plain_bytes().unwrap().iter().all(|&x| x == 199));
        assert!(
            c.get(0, 198).unwrap().plain_bytes().unwrap().iter().all(|&x| x == 198),
            "a reused block does not overwrite a cached one"
        );
    }

    #[test]
    fn zero_budget_disables() {
        let c = ChunkCache::new(0);
        c.insert(0, 0, Arc::new(Chunk::plain(ChunkBuf::from(vec![1]))));
        assert!(c.get(0, 0).is_none());
        assert_eq!(c.stats().entries, 0);
    }
}
