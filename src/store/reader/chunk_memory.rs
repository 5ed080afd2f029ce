//! Memory for decoded chunks: buffers carved from large anonymous maps that
//! the kernel may back with transparent huge pages, and recycled by size.
//!
//! Why not the global allocator: a first epoch keeps every chunk it decodes
//! (the cache), so it touches tens of megabytes of fresh memory, one 4 KiB
//! page fault at a time. On the 2-core reference machine (a Firecracker VM)
//! a fault costs ~2 µs, and the ~12,000 faults of the reference 10k store's
//! 49 MB were a third of the epoch's CPU time. Maps of 32 MiB advised
//! `MADV_HUGEPAGE` fault once per 2 MiB (64 MiB touched: 24 ms in 4 KiB
//! pages, 3 ms in huge pages), and a block freed by the cache is reused by the
//! next chunk of its size instead of going back to the system. No allocator
//! crate offers huge-page-advised buffers through a stable Rust API (custom
//! `Vec` allocators are unstable; mimalloc's large-page option is process-wide
//! and needs its own global allocator), so this module carves them itself.
//!
//! Bounds: a chunk memory maps at most its limit (the cache budget plus two read
//! windows, see the reader); past it, a request reuses a free block up to
//! twice its size or falls back to the heap. Maps grow from one huge page
//! to 32 MiB, so a reader of a small store holds ~2 MiB. Blocks are page multiples of
//! 64 KiB and up (smaller chunks go to the heap, where glibc recycles them
//! well); maps are returned to the system when the chunk memory and every buffer
//! from it are gone.

use std::collections::HashMap;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

/// Bytes of the largest map the chunk memory carves blocks from (the first is one
/// huge page, each next one as large as all before it, up to this), so a
/// reader that decodes little keeps little.
const REGION_BYTES: usize = 32 << 20;
/// Huge page size the maps are aligned to (x86-64 and aarch64 with 4 KiB pages).
const HUGE_PAGE: usize = 2 << 20;
/// Block sizes are multiples of this.
const PAGE: usize = 4096;
/// Smaller buffers come from the heap.
const MIN_CARVED: usize = 64 << 10;

/// A decoded chunk's bytes: a carved block or a heap vector. Derefs to the
/// bytes; a carved block goes back to its chunk memory when dropped.
pub struct ChunkBuf(Repr);

enum Repr {
    Heap(Vec<u8>),
    Carved { ptr: NonNull<u8>, len: usize, class: usize, memory: Arc<ChunkMemory> },
}

// SAFETY: a carved block is owned by exactly one `ChunkBuf` (the chunk memory hands
// it out once and takes it back on drop), like a `Box<[u8]>`; the map it
// lies in lives as long as the `Arc<ChunkMemory>` the buffer holds.
unsafe impl Send for ChunkBuf {}
// SAFETY: shared access only reads the bytes (see `Send`).
unsafe impl Sync for ChunkBuf {}

impl std::ops::Deref for ChunkBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.0 {
            Repr::Heap(v) => v,
            // SAFETY: `ptr..ptr + len` lies in a live map (see `Send`), is
            // initialized (maps are zero-filled, blocks only ever hold bytes)
            // and is this buffer's alone.
            Repr::Carved { ptr, len, .. } => unsafe { std::slice::from_raw_parts(ptr.as_ptr(), *len) },
        }
    }
}

impl std::ops::DerefMut for ChunkBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        match &mut self.0 {
            Repr::Heap(v) => v,
            // SAFETY: as in `Deref`, and `&mut self` makes the access unique.
            Repr::Carved { ptr, len, .. } => unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), *len) },
        }
    }
}

impl Drop for ChunkBuf {
    fn drop(&mut self) {
        if let Repr::Carved { ptr, class, memory, .. } = &self.0 {
            memory.release(*ptr, *class);
        }
    }
}

impl From<Vec<u8>> for ChunkBuf {
    fn from(v: Vec<u8>) -> Self {
        ChunkBuf(Repr::Heap(v))
    }
}

impl std::fmt::Debug for ChunkBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = if matches!(self.0, Repr::Heap(_)) { "heap" } else { "carved" };
        write!(f, "ChunkBuf({kind}, {} bytes)", self.len())
    }
}

impl ChunkBuf {
    /// Shortens the buffer to `len` bytes (no-op if it is not longer).
    pub(crate) fn truncate(&mut self, new_len: usize) {
        match &mut self.0 {
            Repr::Heap(v) => v.truncate(new_len),
            Repr::Carved { len, .. } => *len = new_len.min(*len),
        }
    }

    /// Whether the bytes lie in a chunk memory's block (else on the heap).
    #[cfg(test)]
    pub(crate) fn is_carved(&self) -> bool {
        matches!(self.0, Repr::Carved { .. })
    }
}

/// Recycled, huge-page-advised blocks for decoded chunks (module docs).
pub(crate) struct ChunkMemory {
    /// Bytes the chunk memory may map; a mixture's shared budget moves it (see
    /// [`ChunkMemory::set_limit`]).
    limit: std::sync::atomic::AtomicUsize,
    state: Mutex<MappedBlocks>,
}

#[derive(Default)]
struct MappedBlocks {
    /// Every map, kept until the chunk memory drops (blocks point into them).
    maps: Vec<memmap2::MmapMut>,
    /// Uncarved bytes of the newest map: start address and length.
    tail: Option<(usize, usize)>,
    /// Free blocks by size class (block bytes): their start addresses.
    free: HashMap<usize, Vec<usize>>,
    /// Bytes mapped so far (without the alignment slack).
    mapped: usize,
}

impl std::fmt::Debug for ChunkMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkMemory").field("limit", &self.limit()).field("mapped", &self.mapped()).finish()
    }
}

impl ChunkMemory {
    /// A memory that maps at most `limit` bytes (rounded down to whole maps).
    pub(crate) fn new(limit: u64) -> Arc<ChunkMemory> {
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        Arc::new(ChunkMemory { limit: limit.into(), state: Mutex::new(MappedBlocks::default()) })
    }

    /// Bytes the chunk memory may map.
    pub(crate) fn limit(&self) -> usize {
        self.limit.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Changes the bytes the chunk memory may map from now on (maps already made
    /// stay until the chunk memory drops; their blocks keep being reused).
    pub(crate) fn set_limit(&self, limit: u64) {
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        self.limit.store(limit, std::sync::atomic::Ordering::Relaxed);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MappedBlocks> {
        // The state is a free list and a bump pointer, each updated in one
        // step: a panic elsewhere cannot leave it half-changed.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Bytes mapped so far.
    pub(crate) fn mapped(&self) -> usize {
        self.lock().mapped
    }

    /// A buffer of `len` bytes whose contents are unspecified (zeros or
    /// bytes of an earlier chunk): the caller overwrites all of it.
    pub(crate) fn alloc(self: &Arc<Self>, len: usize) -> ChunkBuf {
        let class = len.div_ceil(PAGE) * PAGE;
        if len < MIN_CARVED || class > REGION_BYTES {
            return ChunkBuf::from(vec![0u8; len]);
        }
        match self.take(class) {
            Some((addr, class)) => {
                // `take` only returns addresses inside a map, never 0.
                let Some(ptr) = NonNull::new(addr as *mut u8) else { return ChunkBuf::from(vec![0u8; len]) };
                ChunkBuf(Repr::Carved { ptr, len, class, memory: self.clone() })
            }
            None => ChunkBuf::from(vec![0u8; len]),
        }
    }

    /// A block of at least `class` bytes: a free one of that class, a new
    /// one carved from the maps, or (at the limit) a free one up to twice
    /// the size. Returns its address and its own class.
    fn take(&self, class: usize) -> Option<(usize, usize)> {
        let mut st = self.lock();
        if let Some(addr) = st.free.get_mut(&class).and_then(Vec::pop) {
            return Some((addr, class));
        }
        if let Some((start, left)) = st.tail
            && left >= class
        {
            st.tail = Some((start + class, left - class));
            return Some((start, class));
        }
        let size = st.mapped.clamp(HUGE_PAGE, REGION_BYTES).max(class.next_multiple_of(HUGE_PAGE));
        if st.mapped + size <= self.limit()
            && let Some(start) = Self::map_region(&mut st, size)
        {
            st.tail = Some((start + class, size - class));
            return Some((start, class));
        }
        let bigger =
            st.free.iter().filter(|(c, v)| **c > class && **c <= 2 * class && !v.is_empty()).map(|(c, _)| *c).min()?;
        st.free.get_mut(&bigger).and_then(Vec::pop).map(|addr| (addr, bigger))
    }

    /// Maps a new region of `size` bytes, advised for huge pages; its first
    /// usable address.
    fn map_region(st: &mut MappedBlocks, size: usize) -> Option<usize> {
        // Over-map by one huge page so the region can start on a huge-page
        // boundary (only aligned 2 MiB ranges can be huge pages).
        let mut map = match memmap2::MmapMut::map_anon(size + HUGE_PAGE) {
            Ok(m) => m,
            Err(e) => {
                log::debug!("chunk memory: mapping {size} bytes failed ({e}); using the heap");
                return None;
            }
        };
        let base = map.as_mut_ptr() as usize;
        let start = base.next_multiple_of(HUGE_PAGE);
        #[cfg(target_os = "linux")]
        if let Err(e) = map.advise_range(memmap2::Advice::HugePage, start - base, size) {
            // Only slower: the region is then backed by small pages.
            log::debug!("chunk memory: MADV_HUGEPAGE refused ({e})");
        }
        st.maps.push(map);
        st.mapped += size;
        Some(start)
    }

    fn release(&self, ptr: NonNull<u8>, class: usize) {
        self.lock().free.entry(class).or_default().push(ptr.as_ptr() as usize);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_recycled_by_size_and_keep_their_bytes() {
        let memory = ChunkMemory::new(1 << 30);
        let mut a = memory.alloc(100_000);
        assert!(a.is_carved() && a.len() == 100_000);
        a.iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
        let mut b = memory.alloc(100_000);
        b.fill(7);
        assert!(a.iter().enumerate().all(|(i, &x)| x == i as u8), "a second block must not overlap the first");
        let addr = a.as_ptr();
        drop(a);
        let c = memory.alloc(99_000); // same 4 KiB class (100 KB rounds to 25 pages)
        assert_eq!(c.as_ptr(), addr, "a freed block is reused by the next request of its size");
        assert_eq!(memory.mapped(), HUGE_PAGE, "the first map is one huge page");
        assert!(b.iter().all(|&x| x == 7));
    }

    #[test]
    fn small_huge_and_over_limit_requests_use_the_heap() {
        let memory = ChunkMemory::new(REGION_BYTES as u64);
        assert!(!memory.alloc(1000).is_carved());
        assert!(!memory.alloc(REGION_BYTES + 1).is_carved());
        // Fill the maps the limit allows (2 + 2 + 4 + 8 + 16 MiB), then ask for more.
        let held: Vec<ChunkBuf> = (0..REGION_BYTES / (1 << 20)).map(|_| memory.alloc(1 << 20)).collect();
        assert!(held.iter().all(ChunkBuf::is_carved));
        let over = memory.alloc(1 << 20);
        assert!(!over.is_carved() && over.len() == 1 << 20 && over.iter().all(|&b| b == 0));
        assert_eq!(memory.mapped(), REGION_BYTES, "the limit holds");
        // At the limit, a free block up to twice the size serves a smaller request.
        drop(held);
        let smaller = memory.alloc(600 << 10);
        assert!(smaller.is_carved() && smaller.len() == 600 << 10);
        assert!(!memory.alloc(300 << 10).is_carved(), "no free block within twice the size: the heap");
    }

    #[test]
    fn a_buffer_outlives_its_chunk_memory_handle() {
        let memory = ChunkMemory::new(1 << 30);
        let mut buf = memory.alloc(1 << 20);
        drop(memory);
        buf.fill(3);
        buf.truncate(10);
        assert_eq!(&buf[..], &[3u8; 10]);
    }
}
