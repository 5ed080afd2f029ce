//! Recycled batch memory: the buffers of delivered batches come back to a
//! bounded store of free buffers when their consumer is done with them, and
//! later batches are written into them.
//!
//! Why: a read window of a bulk store is ~200 MB of output (neighbor lists
//! and shifts of 64 cells of ~7,000 edges, 16 batches). Written into fresh
//! allocations, each window's every page is a minor fault that the kernel
//! zero-fills (glibc serves such sizes with `mmap` and unmaps them on free),
//! ~135,000 faults per epoch of the 4,000-cell bulk store: most of a warm
//! epoch's time. A buffer taken from it was touched before.
//!
//! A buffer goes back when the device tensor made from it is dropped (the
//! tensor's bytes hold it lent, see `pipeline/stage.rs`), so free buffers
//! never hold memory a consumer still holds: a batch kept alive keeps its
//! buffers to itself.

use std::sync::{Arc, Mutex, Weak};

use super::{DType, HostData};

/// A bounded store of empty [`HostData`] buffers, by dtype and capacity.
///
/// ```
/// use atomzarr::DType;
/// use atomzarr::data::BatchBuffers;
/// let free = BatchBuffers::new(64 << 20);
/// let a = free.take(DType::Float32, 100_000);
/// assert!(a.is_empty() && a.capacity() >= 100_000);
/// free.give(a);
/// assert_eq!(free.held_bytes(), 400_000);
/// // The next request of that dtype that fits gets that buffer back.
/// let b = free.take(DType::Float32, 50_000);
/// assert!(b.is_empty() && b.capacity() >= 100_000);
/// assert_eq!(free.held_bytes(), 0);
/// // Another dtype: a new buffer; more than any free one holds: the
/// // largest, grown.
/// free.give(b);
/// assert!(free.take(DType::Int64, 10).capacity() >= 10);
/// assert_eq!(free.held_bytes(), 400_000);
/// assert!(free.take(DType::Float32, 200_000).capacity() >= 200_000);
/// assert_eq!(free.held_bytes(), 0);
/// ```
#[derive(Debug)]
pub struct BatchBuffers {
    limit: usize,
    free: Mutex<Free>,
}

#[derive(Debug, Default)]
struct Free {
    bufs: Vec<HostData>,
    bytes: usize,
}

/// Bytes of free batch buffers each reader keeps: about three read windows of a bulk
/// store (two in flight, one being consumed).
pub const DEFAULT_BATCH_BUFFER_BYTES: usize = 512 << 20;

/// Buffers smaller than this are not kept: the heap recycles them well.
const MIN_KEPT_BYTES: usize = 64 << 10;

impl BatchBuffers {
    /// Free buffers holding at most `limit` bytes of free buffers (0: none).
    pub fn new(limit: usize) -> Arc<BatchBuffers> {
        Arc::new(BatchBuffers { limit, free: Mutex::new(Free::default()) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Free> {
        // A list of empty buffers: nothing a panic could leave half-done.
        self.free.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// An empty buffer of `dtype` with room for at least `n` elements: the
    /// smallest free one of that dtype that holds `n`, else the largest free
    /// one of that dtype grown to `n`, else a new one.
    pub fn take(&self, dtype: DType, n: usize) -> HostData {
        if n * dtype.size() >= MIN_KEPT_BYTES {
            let mut free = self.lock();
            let best = free
                .bufs
                .iter()
                .enumerate()
                .filter(|(_, b)| b.dtype() == dtype && b.capacity() >= n)
                .min_by_key(|(_, b)| b.capacity())
                .map(|(i, _)| i);
            // Else the largest of that dtype, grown: its pages stay mapped
            // (a grown allocation of this size is moved by remapping), and
            // a free buffer too small for every request would sit idle.
            let pick = best.or_else(|| {
                free.bufs
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| b.dtype() == dtype)
                    .max_by_key(|(_, b)| b.capacity())
                    .map(|(i, _)| i)
            });
            if let Some(i) = pick {
                let mut b = free.bufs.swap_remove(i);
                free.bytes -= capacity_bytes(&b);
                drop(free);
                b.reserve(n);
                return b;
            }
        }
        HostData::with_capacity(dtype, n)
    }

    /// Takes `data` back, emptied, if it is worth keeping and there is
    /// room (else it is freed).
    pub fn give(&self, mut data: HostData) {
        let bytes = capacity_bytes(&data);
        if bytes < MIN_KEPT_BYTES || matches!(data, HostData::Bool(_)) {
            return;
        }
        data.clear();
        let mut free = self.lock();
        if free.bytes + bytes <= self.limit {
            free.bytes += bytes;
            free.bufs.push(data);
        }
    }

    /// Bytes of the free buffers held.
    pub fn held_bytes(&self) -> usize {
        self.lock().bytes
    }

    /// The most bytes of free buffers it holds.
    pub fn limit(&self) -> usize {
        self.limit
    }
}

fn capacity_bytes(d: &HostData) -> usize {
    d.capacity() * d.dtype().size()
}

/// Where a batch's buffers go back to: the free buffers of the reader that wrote
/// them (`None`: nowhere, they are freed). Compares equal to any other, so
/// two batches with the same contents are equal wherever their memory came
/// from.
#[derive(Debug, Clone, Default)]
pub struct BufferHome(pub(crate) Option<Weak<BatchBuffers>>);

impl PartialEq for BufferHome {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl BufferHome {
    /// The home `free`.
    pub fn of(free: &Arc<BatchBuffers>) -> BufferHome {
        BufferHome(Some(Arc::downgrade(free)))
    }

    /// Gives `data` back to the home's free buffers, if there is one and it still exists.
    pub fn give(&self, data: HostData) {
        if let Some(free) = self.get() {
            free.give(data);
        }
    }

    /// An empty buffer of `dtype` with room for `n` elements: from the home's free buffers
    /// when there is one (see [`BatchBuffers::take`]), else new.
    pub fn take(&self, dtype: DType, n: usize) -> HostData {
        match self.get() {
            Some(free) => free.take(dtype, n),
            None => HostData::with_capacity(dtype, n),
        }
    }

    /// The home's free buffers, if there is one and they still exist.
    pub fn get(&self) -> Option<Arc<BatchBuffers>> {
        self.0.as_ref().and_then(Weak::upgrade)
    }
}
