//! Decoded-chunk cache shared across reads, keyed by (array, inner chunk).
//!
//! Why not zarrs' `ChunkCacheDecodedLruSizeLimit`: it caches at the array's
//! chunk grid, which for a sharded array is the whole shard (500,000 rows in
//! the reference configuration). A shuffled read needs a few rows from many
//! inner chunks; caching shards would decode 50 inner chunks to serve one.
//! Keying by inner chunk keeps the decode granularity and the cache granularity
//! equal. The LRU bookkeeping is the `lru` crate's (zarrs uses it too).

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// A decoded chunk: native-endian bytes of `chunk_rows * row_bytes`.
pub type ChunkBytes = Arc<Vec<u8>>;

/// Default byte budget: lets a store of about 1 GiB decoded stay resident.
pub const DEFAULT_CACHE_BYTES: u64 = 1280 << 20;

/// Hit / miss / size counters of a [`ChunkCache`].
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
    lru: lru::LruCache<(u32, u64), ChunkBytes>,
    bytes: u64,
}

/// A byte-budgeted LRU of decoded chunks. A budget of 0 disables it.
pub struct ChunkCache {
    budget: u64,
    inner: Mutex<Inner>,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl std::fmt::Debug for ChunkCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkCache").field("stats", &self.stats()).finish()
    }
}

impl ChunkCache {
    /// A cache holding at most `budget` bytes of decoded data.
    pub fn new(budget: u64) -> ChunkCache {
        ChunkCache {
            budget,
            inner: Mutex::new(Inner { lru: lru::LruCache::unbounded(), bytes: 0 }),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the LRU inconsistent in a
        // way that matters (worst case a stale byte count), so recover.
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Looks up a chunk, counting a hit or a miss.
    pub fn get(&self, array: u32, chunk: u64) -> Option<ChunkBytes> {
        if self.budget == 0 {
            self.misses.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let found = self.lock().lru.get(&(array, chunk)).cloned();
        let counter = if found.is_some() { &self.hits } else { &self.misses };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Inserts a chunk, evicting least-recently-used ones past the budget.
    /// Chunks larger than the whole budget are not kept.
    pub fn insert(&self, array: u32, chunk: u64, bytes: ChunkBytes) {
        let size = bytes.len() as u64;
        if size > self.budget {
            return;
        }
        let mut g = self.lock();
        if let Some(old) = g.lru.put((array, chunk), bytes) {
            g.bytes -= old.len() as u64;
        }
        g.bytes += size;
        while g.bytes > self.budget {
            match g.lru.pop_lru() {
                Some((_, v)) => g.bytes -= v.len() as u64,
                None => break,
            }
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
            budget: self.budget,
        }
    }

    /// Zeroes the hit and miss counters.
    pub fn reset_counters(&self) {
        self.hits.store(0, Ordering::Relaxed);
        self.misses.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_lru_past_budget_and_counts() {
        let c = ChunkCache::new(100);
        c.insert(0, 0, Arc::new(vec![0; 40]));
        c.insert(0, 1, Arc::new(vec![0; 40]));
        assert!(c.get(0, 0).is_some()); // 0 now most recent
        c.insert(0, 2, Arc::new(vec![0; 40])); // evicts 1
        assert!(c.get(0, 1).is_none());
        assert!(c.get(0, 0).is_some());
        let s = c.stats();
        assert_eq!((s.hits, s.misses, s.bytes, s.entries), (2, 1, 80, 2));
        c.insert(1, 0, Arc::new(vec![0; 101])); // larger than budget: not kept
        assert!(c.get(1, 0).is_none());
    }

    #[test]
    fn zero_budget_disables() {
        let c = ChunkCache::new(0);
        c.insert(0, 0, Arc::new(vec![1]));
        assert!(c.get(0, 0).is_none());
        assert_eq!(c.stats().entries, 0);
    }
}
