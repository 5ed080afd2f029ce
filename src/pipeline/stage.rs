//! Host fields as device tensor data: each field is written once, already in
//! the device's dtype, into the buffer the device copies from.
//!
//! A Burn device fixes one dtype per tensor kind ([`DeviceSettings`]): on
//! CUDA and wgpu floats are f32, ints i32 and bools u8 or u32. `Tensor::from_data`
//! converts any other dtype into a fresh pageable `Vec`, and a field staged in
//! pinned memory before that conversion loses its pinning. So the conversion
//! happens here, before `from_data`:
//!
//! * without staging, into a new host buffer of the device dtype (a field
//!   already in it is moved, not copied);
//! * with staging (`pin_memory`), inside the staging copy itself: the buffer
//!   handed to [`Device::staging`] is a [`Converting`] allocation whose
//!   `copy_into` narrows (int64 to int32, float64 to float32, bool to u8)
//!   straight into the pinned buffer the backend reserved. One pass reads the
//!   host data and writes the device's bytes; `from_data` then converts
//!   nothing and the pinned buffer goes to the device copy as it is.
//!
//! Staging is Burn's own API ([`Device::staging`]): on CubeCL backends (CUDA,
//! wgpu) it swaps each buffer for a page-locked one from the calling thread's
//! stream pool, on CPU backends it leaves them alone.
//!
//! A value the device dtype cannot hold (an int64 beyond int32) is an
//! [`Error::Device`] naming the field and the element, never a wrapped value.

use std::mem::MaybeUninit;
use std::sync::{Arc, Mutex};

use burn::tensor::{BoolStore, DType, Device, DeviceSettings, TensorData};
use burn_std::{AccessError, AccessPolicy, AllocationController, AllocationProperty, Bytes};
use half::{bf16, f16};

use crate::data::{BufferHome, HostData};
use crate::error::{Error, Result};

/// The element kind a host field has on a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Float,
    Int,
    Bool,
}

/// The kind of a host buffer.
pub(crate) fn kind(d: &HostData) -> Kind {
    match d {
        HostData::Bool(_) => Kind::Bool,
        HostData::Float16(_) | HostData::BFloat16(_) | HostData::Float32(_) | HostData::Float64(_) => Kind::Float,
        _ => Kind::Int,
    }
}

/// The dtype `device` creates tensors of `kind` in.
pub(crate) fn device_dtype(settings: &DeviceSettings, kind: Kind) -> DType {
    match kind {
        Kind::Float => settings.float_dtype.into(),
        Kind::Int => settings.int_dtype.into(),
        Kind::Bool => settings.bool_dtype.into(),
    }
}

/// The device settings of `device` (its float, int and bool dtypes).
pub(crate) fn settings(device: &Device) -> DeviceSettings {
    device.settings()
}

/// Whether `src` already has `dtype`'s bytes (bool is one byte, 0 or 1, so
/// it already is a `u8` bool).
fn same_bytes(src: &HostData, dtype: DType) -> bool {
    let own = match src {
        HostData::Bool(_) => return matches!(dtype, DType::Bool(BoolStore::Native | BoolStore::U8)),
        HostData::Int8(_) => DType::I8,
        HostData::Int16(_) => DType::I16,
        HostData::Int32(_) => DType::I32,
        HostData::Int64(_) => DType::I64,
        HostData::UInt8(_) => DType::U8,
        HostData::UInt16(_) => DType::U16,
        HostData::UInt32(_) => DType::U32,
        HostData::UInt64(_) => DType::U64,
        HostData::Float16(_) => DType::F16,
        HostData::BFloat16(_) => DType::BF16,
        HostData::Float32(_) => return matches!(dtype, DType::F32 | DType::Flex32),
        HostData::Float64(_) => DType::F64,
    };
    own == dtype
}

/// The first element of a field that `dtype` cannot hold.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Unfit {
    index: usize,
    value: String,
}

impl Unfit {
    fn into_error(self, field: &str, dtype: DType) -> Error {
        Error::Device {
            field: field.to_string(),
            reason: format!("element {} = {} does not fit the device's {dtype:?}", self.index, self.value),
        }
    }
}

/// Writes `v` into `out` element by element through `conv` (`None`: the
/// value does not fit).
fn write_each<S: Copy + std::fmt::Display, const N: usize>(
    v: &[S],
    out: &mut [u8],
    conv: impl Fn(S) -> Option<[u8; N]>,
) -> std::result::Result<(), Unfit> {
    for (i, (o, &x)) in out.chunks_exact_mut(N).zip(v).enumerate() {
        match conv(x) {
            Some(b) => o.copy_from_slice(&b),
            None => return Err(Unfit { index: i, value: x.to_string() }),
        }
    }
    Ok(())
}

/// Integer elements as `T` (checked), for every integer host type.
macro_rules! ints_as {
    ($src:expr, $out:expr, $t:ty) => {
        match $src {
            HostData::Int8(v) => write_each(v, $out, |x| <$t>::try_from(x).ok().map(<$t>::to_ne_bytes)),
            HostData::Int16(v) => write_each(v, $out, |x| <$t>::try_from(x).ok().map(<$t>::to_ne_bytes)),
            HostData::Int32(v) => write_each(v, $out, |x| <$t>::try_from(x).ok().map(<$t>::to_ne_bytes)),
            HostData::Int64(v) => write_each(v, $out, |x| <$t>::try_from(x).ok().map(<$t>::to_ne_bytes)),
            HostData::UInt8(v) => write_each(v, $out, |x| <$t>::try_from(x).ok().map(<$t>::to_ne_bytes)),
            HostData::UInt16(v) => write_each(v, $out, |x| <$t>::try_from(x).ok().map(<$t>::to_ne_bytes)),
            HostData::UInt32(v) => write_each(v, $out, |x| <$t>::try_from(x).ok().map(<$t>::to_ne_bytes)),
            HostData::UInt64(v) => write_each(v, $out, |x| <$t>::try_from(x).ok().map(<$t>::to_ne_bytes)),
            _ => Err(Unfit { index: 0, value: "a non-integer field".into() }),
        }
    };
}

/// Float elements through `f64` as `T` (rounded to nearest, as a cast).
macro_rules! floats_as {
    ($src:expr, $out:expr, $conv:expr) => {
        match $src {
            HostData::Float16(v) => write_each(v, $out, |x| Some($conv(x.to_f64()))),
            HostData::BFloat16(v) => write_each(v, $out, |x| Some($conv(x.to_f64()))),
            HostData::Float32(v) => write_each(v, $out, |x| Some($conv(f64::from(x)))),
            HostData::Float64(v) => write_each(v, $out, |x| Some($conv(x))),
            _ => Err(Unfit { index: 0, value: "a non-float field".into() }),
        }
    };
}

/// Writes `src` as `dtype` into `out` (`src.len() * dtype.size()` bytes):
/// a plain copy when the bytes already match, else one converting pass.
pub(crate) fn write_as(src: &HostData, dtype: DType, out: &mut [u8]) -> std::result::Result<(), Unfit> {
    if out.len() != src.len() * dtype.size() {
        return Err(Unfit { index: 0, value: format!("{} bytes for {} elements", out.len(), src.len()) });
    }
    if same_bytes(src, dtype) {
        out.copy_from_slice(src.as_bytes());
        return Ok(());
    }
    match (src, dtype) {
        // The loader's common cases, one vectorized pass each.
        (HostData::Int64(v), DType::I32) => {
            if HostData::narrow_i64_into(src.as_bytes(), out) {
                Ok(())
            } else {
                let i = v.iter().position(|&x| i32::try_from(x).is_err()).unwrap_or(0);
                Err(Unfit { index: i, value: v.get(i).map(i64::to_string).unwrap_or_default() })
            }
        }
        (HostData::Float64(v), DType::F32 | DType::Flex32) => write_each(v, out, |x| Some((x as f32).to_ne_bytes())),
        (HostData::Bool(v), DType::Bool(BoolStore::U32)) => write_each(v, out, |x| Some(u32::from(x).to_ne_bytes())),
        (_, DType::I64) => ints_as!(src, out, i64),
        (_, DType::I32) => ints_as!(src, out, i32),
        (_, DType::I16) => ints_as!(src, out, i16),
        (_, DType::I8) => ints_as!(src, out, i8),
        (_, DType::U64) => ints_as!(src, out, u64),
        (_, DType::U32) => ints_as!(src, out, u32),
        (_, DType::U16) => ints_as!(src, out, u16),
        (_, DType::U8) => ints_as!(src, out, u8),
        (_, DType::F64) => floats_as!(src, out, f64::to_ne_bytes),
        (_, DType::F32 | DType::Flex32) => floats_as!(src, out, |x: f64| (x as f32).to_ne_bytes()),
        (_, DType::F16) => floats_as!(src, out, |x: f64| f16::from_f64(x).to_ne_bytes()),
        (_, DType::BF16) => floats_as!(src, out, |x: f64| bf16::from_f64(x).to_ne_bytes()),
        (_, other) => Err(Unfit { index: 0, value: format!("{} data (no conversion to {other:?})", src.dtype()) }),
    }
}

/// A zeroed host buffer of `n` elements of `dtype`, aligned for it.
fn zeroed(dtype: DType, n: usize) -> Bytes {
    match dtype.size() {
        8 => Bytes::from_elems(vec![0u64; n]),
        4 => Bytes::from_elems(vec![0u32; n]),
        2 => Bytes::from_elems(vec![0u16; n]),
        _ => Bytes::from_elems(vec![0u8; n * dtype.size()]),
    }
}

/// The host buffer as it is, moved into `Bytes` (no copy).
fn moved(data: HostData) -> Bytes {
    match data {
        HostData::Bool(v) => Bytes::from_elems(v),
        HostData::Int8(v) => Bytes::from_elems(v),
        HostData::Int16(v) => Bytes::from_elems(v),
        HostData::Int32(v) => Bytes::from_elems(v),
        HostData::Int64(v) => Bytes::from_elems(v),
        HostData::UInt8(v) => Bytes::from_elems(v),
        HostData::UInt16(v) => Bytes::from_elems(v),
        HostData::UInt32(v) => Bytes::from_elems(v),
        HostData::UInt64(v) => Bytes::from_elems(v),
        HostData::Float16(v) => Bytes::from_elems(v),
        HostData::BFloat16(v) => Bytes::from_elems(v),
        HostData::Float32(v) => Bytes::from_elems(v),
        HostData::Float64(v) => Bytes::from_elems(v),
    }
}

/// `data` as tensor data of `dtype` in a plain host buffer: moved when its
/// bytes already are `dtype`'s (lent, when it came from a home's free buffers: it
/// goes back there when the tensor drops it), else converted into a new
/// buffer (and `data` goes back to `home` at once).
pub(crate) fn host_tensor_data(name: &str, data: HostData, dtype: DType, home: &BufferHome) -> Result<TensorData> {
    let n = data.len();
    let bytes = if same_bytes(&data, dtype) {
        lent(data, home)
    } else {
        let mut out = zeroed(dtype, n);
        write_as(&data, dtype, &mut out).map_err(|u| u.into_error(name, dtype))?;
        home.give(data);
        out
    };
    Ok(TensorData::from_bytes(bytes, [n], dtype))
}

/// `data`'s bytes as they are: lent from its `home` when it has one,
/// else moved (see [`Lent`]).
fn lent(data: HostData, home: &BufferHome) -> Bytes {
    if home.get().is_none() || matches!(data, HostData::Bool(_)) {
        return moved(data);
    }
    let len = data.as_bytes().len();
    let controller = Box::new(Lent { data: Some(data), home: home.clone() });
    // SAFETY: `memory()` is the buffer's `len` initialized bytes.
    unsafe { Bytes::from_controller(controller, len) }
}

/// Host bytes as the `MaybeUninit` view an allocation hands out.
fn uninit(b: &[u8]) -> &[MaybeUninit<u8>] {
    // SAFETY: the same bytes, read as `MaybeUninit<u8>` (same layout).
    unsafe { std::slice::from_raw_parts(b.as_ptr().cast(), b.len()) }
}

/// Mutable host bytes as an allocation's view (empty where there are none).
fn uninit_mut(b: Option<&mut [u8]>) -> &mut [MaybeUninit<u8>] {
    match b {
        // SAFETY: initialized bytes are valid `MaybeUninit<u8>`, and callers
        // only write initialized data back (the trait's contract).
        Some(b) => unsafe { std::slice::from_raw_parts_mut(b.as_mut_ptr().cast(), b.len()) },
        None => &mut [],
    }
}

/// A batch buffer from a reader's free buffers, lent to a tensor: the tensor reads
/// and writes its bytes in place, and the buffer goes back when
/// the tensor (every clone of it) is dropped, so free buffers never hand out
/// memory a tensor still holds.
struct Lent {
    data: Option<HostData>,
    home: BufferHome,
}

impl AllocationController for Lent {
    fn alloc_align(&self) -> usize {
        self.data.as_ref().map_or(1, |d| d.dtype().size().max(1))
    }

    fn property(&self) -> AllocationProperty {
        // Not `Native`: the bytes are not to be detached into a `Vec` (that
        // would take them from the free buffers); a backend that needs its own copy
        // makes one.
        AllocationProperty::Other
    }

    unsafe fn memory_mut(&mut self, _policy: AccessPolicy) -> std::result::Result<&mut [MaybeUninit<u8>], AccessError> {
        // Bool buffers are never lent (see `lent`): they have no byte view.
        Ok(uninit_mut(self.data.as_mut().and_then(HostData::as_bytes_mut)))
    }

    fn memory(&self, _policy: AccessPolicy) -> std::result::Result<&[MaybeUninit<u8>], AccessError> {
        Ok(uninit(self.data.as_ref().map_or(&[][..], HostData::as_bytes)))
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        if let Some(d) = self.data.take() {
            self.home.give(d);
        }
    }
}

/// A host buffer posing as an allocation of `dtype` whose `copy_into` (what
/// a backend's staging calls to fill its pinned buffer) writes the converted
/// values. Only built when `dtype` is no wider than the host type, so the
/// host bytes cover the length it claims.
struct Converting {
    src: HostData,
    /// Where `src` goes back to once the backend is done with it.
    home: BufferHome,
    dtype: DType,
    /// The first unfit element met by `copy_into` (it cannot return one).
    unfit: Arc<Mutex<Option<Unfit>>>,
}

impl AllocationController for Converting {
    fn alloc_align(&self) -> usize {
        self.src.dtype().size().max(1)
    }

    fn property(&self) -> AllocationProperty {
        // Not `Pinned` or `File`: a backend with staging copies it.
        AllocationProperty::Other
    }

    unsafe fn memory_mut(&mut self, _policy: AccessPolicy) -> std::result::Result<&mut [MaybeUninit<u8>], AccessError> {
        // Bool buffers have no mutable byte view; `prepare` never wraps one.
        Ok(uninit_mut(self.src.as_bytes_mut()))
    }

    fn memory(&self, _policy: AccessPolicy) -> std::result::Result<&[MaybeUninit<u8>], AccessError> {
        Ok(uninit(self.src.as_bytes()))
    }

    unsafe fn copy_into(&self, buf: &mut [u8]) {
        if let Err(u) = write_as(&self.src, self.dtype, buf)
            && let Ok(mut slot) = self.unfit.lock()
        {
            slot.get_or_insert(u);
        }
    }
}

impl Drop for Converting {
    fn drop(&mut self) {
        // Staging copied it into the backend's pinned buffer (CubeCL pools
        // those), or `Staged::finish` converted it: either way it is free.
        self.home.give(std::mem::replace(&mut self.src, HostData::Bool(Vec::new())));
    }
}

/// A field handed to staging: what [`Staged::finish`] needs to complete it.
pub(crate) struct Staged {
    name: String,
    /// Set while the data may still be the host buffer (not yet converted):
    /// its address and the conversion's error slot.
    source: Option<(*const u8, Arc<Mutex<Option<Unfit>>>)>,
}

// SAFETY: the raw pointer is only compared, never dereferenced.
unsafe impl Send for Staged {}

/// A field prepared for staging: its host buffer posing as the device dtype
/// when it can (see [`Converting`]), else converted now.
pub(crate) fn prepare(name: &str, data: HostData, dtype: DType, home: &BufferHome) -> Result<(TensorData, Staged)> {
    let n = data.len();
    if n == 0 || same_bytes(&data, dtype) || dtype.size() > data.dtype().size() {
        // Nothing to convert (staging copies the bytes as they are), or a
        // widening, which the host bytes cannot stand in for: convert first.
        // (So a `Converting` never holds bool data: bool to u8 is the same
        // bytes, bool to u32 a widening.)
        let data = host_tensor_data(name, data, dtype, home)?;
        return Ok((data, Staged { name: name.to_string(), source: None }));
    }
    let unfit = Arc::new(Mutex::new(None));
    let src_ptr = data.as_bytes().as_ptr();
    let len = n * dtype.size();
    let controller = Box::new(Converting { src: data, home: home.clone(), dtype, unfit: unfit.clone() });
    // SAFETY: `dtype` is no wider than the host type here, so the host
    // buffer holds at least `len` initialized bytes.
    let bytes = unsafe { Bytes::from_controller(controller, len) };
    Ok((TensorData::from_bytes(bytes, [n], dtype), Staged { name: name.to_string(), source: Some((src_ptr, unfit)) }))
}

impl Staged {
    /// After staging: data the backend did not copy (it has no staging, or
    /// declined) is converted into a host buffer now; a conversion that met
    /// a value the device dtype cannot hold is an error.
    pub(crate) fn finish(self, data: TensorData) -> Result<TensorData> {
        let Some((src_ptr, unfit)) = self.source else { return Ok(data) };
        let data = if std::ptr::eq(data.bytes().as_ptr(), src_ptr) {
            let (bytes, shape, dtype) = data.into_parts();
            let mut out = zeroed(dtype, shape.num_elements());
            // Runs `Converting::copy_into` into the new buffer.
            bytes.copy_into(&mut out);
            TensorData::from_bytes(out, shape, dtype)
        } else {
            data
        };
        let unfit = unfit.lock().map_err(|_| Error::Background("staging conversion panicked".into()))?.take();
        match unfit {
            Some(u) => Err(u.into_error(&self.name, data.dtype())),
            None => Ok(data),
        }
    }
}
