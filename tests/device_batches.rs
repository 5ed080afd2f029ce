//! Device batches on a CubeCL runtime (Burn's wgpu device; in CI on Mesa's lavapipe,
//! a software Vulkan device on the CPU): every field arrives in the device's
//! dtype for its kind (float f32, int i32, bool u32 on wgpu) with the values
//! of the samples that were written, checked against the samples themselves;
//! staged uploads hand the staging buffer to the device as it is.
//!
//! Run with `cargo test --release --features wgpu --test device_batches`
//! (needs a Vulkan driver; `apt-get install mesa-vulkan-drivers` gives one).

mod common;
#[path = "../examples/gpu_check/expected.rs"]
mod expected;

use std::collections::BTreeMap;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use atomzarr::{
    AtomicBatch, AtomicBatcher, AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, CollatedBatch, DataLoader,
    Dataset, Error, Level, ZarrWriteConfig,
};
use burn::tensor::{Device, DeviceKind, TensorData};
use burn_std::{AccessError, AccessPolicy, AllocationController, AllocationProperty, Bytes};
use expected::Want;

/// The wgpu device the tests run on (lavapipe in CI).
fn wgpu() -> Device {
    Device::wgpu(DeviceKind::DefaultDevice)
}

fn samples(n: usize) -> Vec<AtomicData> {
    expected::samples(n, 7, 11).unwrap()
}

/// Every field of `batch` (typed, dtype-checked, and through
/// `to_host_f64`) and its index tensors equal the samples'; every kind
/// (float, int, bool) was among them.
fn check_batch(batch: &AtomicBatch, all: &[AtomicData], device: &Device, what: &str) {
    let counts = expected::check_batch(batch, all, device).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(counts.keys().copied().collect::<Vec<_>>(), ["bool", "float", "int"], "{what}");
}

#[test]
fn loader_batches_equal_the_samples_on_every_dtype() {
    let device = wgpu();
    let dir = common::tmpdir();
    let path = dir.path().join("d.zarr");
    let all = samples(23);
    AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default()).unwrap().write(&all).unwrap();
    let reader = Arc::new(AtomicDataZarrReader::open(&path).unwrap());
    for (pin, streams) in [(false, 0), (true, 0), (false, 1), (true, 2)] {
        let mut b = DataLoader::builder(Dataset::from_arc(reader.clone()))
            .with_batch_size(5)
            .with_shuffle(true)
            .with_seed(4)
            .with_prefetch_factor(2)
            .with_pin_memory(pin);
        if streams > 0 {
            b = b.with_use_streams(true).with_num_streams(streams);
        }
        let loader = b.build(&device).unwrap();
        let mut seen = 0;
        for batch in loader.iter() {
            check_batch(&batch.unwrap(), &all, &device, &format!("loader pin {pin} streams {streams}"));
            seen += 1;
        }
        assert_eq!(seen, 5);
        loader.sync_uploads().unwrap();
    }
    // Batched from samples (no reader narrowing: int64 is narrowed on upload).
    for pin in [false, true] {
        let idx = [3usize, 0, 22, 7];
        let items: Vec<AtomicData> = idx.iter().map(|&i| all[i].clone()).collect();
        let mut batch: AtomicBatch = AtomicBatcher::new(pin).try_batch(&items, &device).unwrap();
        batch.indices = idx.to_vec();
        check_batch(&batch, &all, &device, &format!("batcher pin {pin}"));
    }
}

#[test]
fn an_int64_beyond_int32_is_a_device_error() {
    let device = wgpu();
    let s = AtomicData::new(vec![1, 1], vec![[0.0; 3]; 2])
        .unwrap()
        .with_custom("big", Level::Atom, vec![2], vec![7i64, 1 << 40])
        .unwrap();
    for pin in [false, true] {
        let batch = CollatedBatch::from_samples(&[0], std::slice::from_ref(&s)).unwrap();
        match AtomicBatch::from_collated(batch, &device, pin) {
            Err(Error::Device { field, reason }) => {
                assert_eq!(field, "big");
                assert!(reason.contains("element 1 = 1099511627776"), "{reason}");
            }
            other => panic!("pin {pin}: expected a device error, got {:?}", other.map(|b| b.num_atoms)),
        }
    }
}

/// What happened to the buffers a stand-in for pinned staging handed out.
#[derive(Default)]
struct Trace {
    /// The thread each buffer was dropped on, by buffer number.
    dropped: Mutex<BTreeMap<usize, ThreadId>>,
    /// Each buffer's bytes right after the staging copy filled it.
    filled: Mutex<BTreeMap<usize, Vec<u8>>>,
}

/// A buffer standing in for a pinned allocation (property `Pinned`, as
/// cubecl-cuda's): it records the thread that releases it.
struct TracedPinned {
    id: usize,
    memory: Vec<u128>,
    trace: Arc<Trace>,
}

impl AllocationController for TracedPinned {
    fn alloc_align(&self) -> usize {
        16
    }
    fn property(&self) -> AllocationProperty {
        AllocationProperty::Pinned
    }
    unsafe fn memory_mut(&mut self, _policy: AccessPolicy) -> Result<&mut [MaybeUninit<u8>], AccessError> {
        let len = self.memory.len() * 16;
        Ok(unsafe { std::slice::from_raw_parts_mut(self.memory.as_mut_ptr().cast(), len) })
    }
    fn memory(&self, _policy: AccessPolicy) -> Result<&[MaybeUninit<u8>], AccessError> {
        Ok(unsafe { std::slice::from_raw_parts(self.memory.as_ptr().cast(), self.memory.len() * 16) })
    }
}

impl Drop for TracedPinned {
    fn drop(&mut self) {
        self.trace.dropped.lock().unwrap().insert(self.id, std::thread::current().id());
    }
}

/// The upload path with pinning, cubecl-cuda's `staging` mirrored on the
/// CPU: each buffer is swapped for a traced "pinned" one filled by
/// `Bytes::copy_into`. The buffers must hold the device's bytes right after
/// that copy (the dtype conversion wrote into them), reach the device as
/// they are (neither `from_data` nor `create_tensor` copies them: such a
/// copy drops them on this thread at once) and be released by the device
/// once its copy ran.
#[test]
fn staged_buffers_reach_the_device_as_they_are() {
    let device = wgpu();
    let all = samples(6);
    let idx = [1usize, 4, 2];
    let items: Vec<AtomicData> = idx.iter().map(|&i| all[i].clone()).collect();
    let host = CollatedBatch::from_samples(&idx, &items).unwrap();
    let trace = Arc::new(Trace::default());
    let next = AtomicUsize::new(0);
    let mut dtypes = Vec::new();
    let mut batch = AtomicBatch::from_collated_staged(host.clone(), &device, |datas| {
        dtypes.extend(datas.iter().map(TensorData::dtype));
        TensorData::with_bytes_mut(datas.iter_mut(), |all| {
            for bytes in all {
                let id = next.fetch_add(1, Ordering::Relaxed);
                let ctl = TracedPinned { id, memory: vec![0u128; bytes.len().div_ceil(16)], trace: trace.clone() };
                // SAFETY: the traced buffer is zero-initialized over `len` bytes.
                let mut pinned = unsafe { Bytes::from_controller(Box::new(ctl), bytes.len()) };
                bytes.copy_into(&mut pinned);
                trace.filled.lock().unwrap().insert(id, pinned.to_vec());
                std::mem::swap(bytes, &mut pinned);
            }
        })
    })
    .unwrap();
    let me = std::thread::current().id();
    let n = next.load(Ordering::Relaxed);
    assert_eq!(n, 3 + host.fields.len());
    assert!(
        trace.dropped.lock().unwrap().values().all(|&t| t != me),
        "a staged buffer was released on the uploading thread: it was copied (or converted) before the device copy"
    );
    // The staged bytes are the device's: index tensors and int fields as
    // i32, float64 as f32, bool as the device's bool.
    let filled = trace.filled.lock().unwrap().clone();
    let i32_bytes = |v: &[i32]| v.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>();
    let want = expected::expected(&all, &idx).unwrap();
    assert_eq!(filled[&0], i32_bytes(&want.graph_index));
    assert_eq!(filled[&1], i32_bytes(&want.atoms_ptr));
    assert_eq!(filled[&2], i32_bytes(&want.edges_ptr));
    for (k, name) in host.fields.keys().enumerate() {
        let bytes: Vec<u8> = match &want.fields[name] {
            Want::Int(v) => i32_bytes(v),
            Want::Float(v) => v.iter().flat_map(|x| x.to_ne_bytes()).collect(),
            Want::Bool(v) => v.iter().flat_map(|&x| u32::from(x).to_ne_bytes()).collect(),
        };
        assert_eq!(filled[&(3 + k)], bytes, "staged bytes of {name} ({:?})", dtypes[3 + k]);
    }
    batch.indices = idx.to_vec();
    check_batch(&batch, &all, &device, "staged");
    device.sync().unwrap();
    drop(batch);
    let dropped = trace.dropped.lock().unwrap();
    assert_eq!(dropped.len(), n, "every staged buffer released once the device copied it");
    assert!(dropped.values().all(|&t| t != me), "released by the device, not the uploading thread");
}
