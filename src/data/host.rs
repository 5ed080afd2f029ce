//! [`HostData`]: a typed, flat host buffer, with byte-level views and copies.

use half::{bf16, f16};

use crate::data::DType;
use crate::error::{Error, Result};

/// Calls `$body` with `$v` bound to the typed vector inside a [`HostData`].
/// Bool is handled by the caller because `bool` is not `bytemuck::Pod`.
macro_rules! for_each_pod {
    ($data:expr, $v:ident => $body:expr, Bool($b:ident) => $bool_body:expr) => {
        match $data {
            HostData::Bool($b) => $bool_body,
            HostData::Int8($v) => $body,
            HostData::Int16($v) => $body,
            HostData::Int32($v) => $body,
            HostData::Int64($v) => $body,
            HostData::UInt8($v) => $body,
            HostData::UInt16($v) => $body,
            HostData::UInt32($v) => $body,
            HostData::UInt64($v) => $body,
            HostData::Float16($v) => $body,
            HostData::BFloat16($v) => $body,
            HostData::Float32($v) => $body,
            HostData::Float64($v) => $body,
        }
    };
}

/// A typed, flat (row-major) host buffer.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub enum HostData {
    Bool(Vec<bool>),
    Int8(Vec<i8>),
    Int16(Vec<i16>),
    Int32(Vec<i32>),
    Int64(Vec<i64>),
    UInt8(Vec<u8>),
    UInt16(Vec<u16>),
    UInt32(Vec<u32>),
    UInt64(Vec<u64>),
    Float16(Vec<f16>),
    BFloat16(Vec<bf16>),
    Float32(Vec<f32>),
    Float64(Vec<f64>),
}

impl HostData {
    /// An empty buffer of `dtype` with room for `capacity` elements.
    pub fn with_capacity(dtype: DType, capacity: usize) -> HostData {
        match dtype {
            DType::Bool => HostData::Bool(Vec::with_capacity(capacity)),
            DType::Int8 => HostData::Int8(Vec::with_capacity(capacity)),
            DType::Int16 => HostData::Int16(Vec::with_capacity(capacity)),
            DType::Int32 => HostData::Int32(Vec::with_capacity(capacity)),
            DType::Int64 => HostData::Int64(Vec::with_capacity(capacity)),
            DType::UInt8 => HostData::UInt8(Vec::with_capacity(capacity)),
            DType::UInt16 => HostData::UInt16(Vec::with_capacity(capacity)),
            DType::UInt32 => HostData::UInt32(Vec::with_capacity(capacity)),
            DType::UInt64 => HostData::UInt64(Vec::with_capacity(capacity)),
            DType::Float16 => HostData::Float16(Vec::with_capacity(capacity)),
            DType::BFloat16 => HostData::BFloat16(Vec::with_capacity(capacity)),
            DType::Float32 => HostData::Float32(Vec::with_capacity(capacity)),
            DType::Float64 => HostData::Float64(Vec::with_capacity(capacity)),
        }
    }

    /// `len` zeros (false for bool) of `dtype`.
    pub fn zeros(dtype: DType, len: usize) -> HostData {
        let mut d = HostData::with_capacity(dtype, len);
        d.resize_zeroed(len);
        d
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            HostData::Bool(_) => DType::Bool,
            HostData::Int8(_) => DType::Int8,
            HostData::Int16(_) => DType::Int16,
            HostData::Int32(_) => DType::Int32,
            HostData::Int64(_) => DType::Int64,
            HostData::UInt8(_) => DType::UInt8,
            HostData::UInt16(_) => DType::UInt16,
            HostData::UInt32(_) => DType::UInt32,
            HostData::UInt64(_) => DType::UInt64,
            HostData::Float16(_) => DType::Float16,
            HostData::BFloat16(_) => DType::BFloat16,
            HostData::Float32(_) => DType::Float32,
            HostData::Float64(_) => DType::Float64,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        for_each_pod!(self, v => v.len(), Bool(b) => b.len())
    }

    /// Elements it has room for without reallocating.
    pub fn capacity(&self) -> usize {
        for_each_pod!(self, v => v.capacity(), Bool(b) => b.capacity())
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops the elements, keeps the allocation (buffers are reused across batches).
    pub fn clear(&mut self) {
        for_each_pod!(self, v => v.clear(), Bool(b) => b.clear())
    }

    /// Grows (with zeros) or shrinks to `len` elements.
    pub fn resize_zeroed(&mut self, len: usize) {
        for_each_pod!(self, v => v.resize(len, bytemuck::Zeroable::zeroed()), Bool(b) => b.resize(len, false))
    }

    /// Reserves room for `additional` more elements.
    pub fn reserve(&mut self, additional: usize) {
        for_each_pod!(self, v => v.reserve(additional), Bool(b) => b.reserve(additional))
    }

    /// The elements as native-endian bytes.
    pub fn as_bytes(&self) -> &[u8] {
        for_each_pod!(self, v => bytemuck::cast_slice(v.as_slice()), Bool(b) => {
            // SAFETY: `bool` is one byte holding 0 or 1, so viewing `[bool]` as
            // `[u8]` is sound (the reverse is not, see `extend_from_bytes`).
            unsafe { std::slice::from_raw_parts(b.as_ptr().cast::<u8>(), b.len()) }
        })
    }

    /// The elements as mutable native-endian bytes; `None` for bool (writing
    /// arbitrary bytes into a `bool` would be undefined behaviour).
    pub fn as_bytes_mut(&mut self) -> Option<&mut [u8]> {
        for_each_pod!(self, v => Some(bytemuck::cast_slice_mut(v.as_mut_slice())), Bool(_b) => None)
    }

    /// Appends elements given as native-endian bytes (what zarrs decodes to).
    /// `bytes.len()` must be a multiple of the element size; any non-zero byte
    /// is `true` for bool.
    pub fn extend_from_bytes(&mut self, bytes: &[u8]) {
        let size = self.dtype().size();
        debug_assert_eq!(bytes.len() % size, 0);
        // Aligned input (the usual case: decoded chunks are allocator-aligned
        // and rows start at multiples of the element size) is copied once;
        // zero-filling first and then overwriting cost a second pass.
        macro_rules! typed {
            ($v:expr) => {
                if let Ok(src) = bytemuck::try_cast_slice(bytes) {
                    $v.extend_from_slice(src);
                    return;
                }
            };
        }
        match self {
            HostData::Bool(b) => b.extend(bytes.iter().map(|&x| x != 0)),
            HostData::Int8(v) => typed!(v),
            HostData::Int16(v) => typed!(v),
            HostData::Int32(v) => typed!(v),
            HostData::Int64(v) => typed!(v),
            HostData::UInt8(v) => typed!(v),
            HostData::UInt16(v) => typed!(v),
            HostData::UInt32(v) => typed!(v),
            HostData::UInt64(v) => typed!(v),
            HostData::Float16(v) => typed!(v),
            HostData::BFloat16(v) => typed!(v),
            HostData::Float32(v) => typed!(v),
            HostData::Float64(v) => typed!(v),
        }
        match self {
            HostData::Bool(_) => {}
            _ => {
                let old = self.len();
                self.resize_zeroed(old + bytes.len() / size);
                if let Some(dst) = self.as_bytes_mut() {
                    dst[old * size..].copy_from_slice(bytes);
                }
            }
        }
    }

    /// Appends one row of `table` per code: row `c` is `table`'s elements
    /// `c * row_elems..(c + 1) * row_elems`. `false`, appending nothing,
    /// when `table` is of another dtype or a code lies past it.
    pub(crate) fn extend_from_dict<C: Copy + Into<usize>>(
        &mut self,
        codes: &[C],
        table: &HostData,
        row_elems: usize,
    ) -> bool {
        macro_rules! typed {
            ($($var:ident),*) => {
                match (self, table) {
                    $((HostData::$var(dst), HostData::$var(t)) => expand_rows(dst, codes, t, row_elems),)*
                    _ => false,
                }
            };
        }
        typed!(Bool, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64, Float16, BFloat16, Float32, Float64)
    }

    /// Builds a buffer from native-endian bytes.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the byte count is not a multiple of
    /// `dtype`'s size.
    pub fn from_bytes(dtype: DType, bytes: &[u8]) -> Result<HostData> {
        if !bytes.len().is_multiple_of(dtype.size()) {
            return Err(Error::invalid(
                format!("{dtype} buffer"),
                format!("{} bytes is not a multiple of {}", bytes.len(), dtype.size()),
            ));
        }
        let mut d = HostData::with_capacity(dtype, bytes.len() / dtype.size());
        d.extend_from_bytes(bytes);
        Ok(d)
    }

    /// Appends `other`'s elements; errors when dtypes differ.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the dtypes differ (nothing is appended).
    pub fn extend_from(&mut self, other: &HostData) -> Result<()> {
        if self.dtype() != other.dtype() {
            return Err(Error::invalid("concatenate", format!("dtype {} vs {}", self.dtype(), other.dtype())));
        }
        match (self, other) {
            (HostData::Bool(a), HostData::Bool(b)) => a.extend_from_slice(b),
            (this, other) => this.extend_from_bytes(other.as_bytes()),
        }
        Ok(())
    }

    /// Element `i` widened to f64 (bool as 0/1); `None` past the end.
    pub fn get_f64(&self, i: usize) -> Option<f64> {
        Some(match self {
            HostData::Bool(v) => f64::from(u8::from(*v.get(i)?)),
            HostData::Int8(v) => f64::from(*v.get(i)?),
            HostData::Int16(v) => f64::from(*v.get(i)?),
            HostData::Int32(v) => f64::from(*v.get(i)?),
            HostData::Int64(v) => *v.get(i)? as f64,
            HostData::UInt8(v) => f64::from(*v.get(i)?),
            HostData::UInt16(v) => f64::from(*v.get(i)?),
            HostData::UInt32(v) => f64::from(*v.get(i)?),
            HostData::UInt64(v) => *v.get(i)? as f64,
            HostData::Float16(v) => v.get(i)?.to_f64(),
            HostData::BFloat16(v) => v.get(i)?.to_f64(),
            HostData::Float32(v) => f64::from(*v.get(i)?),
            HostData::Float64(v) => *v.get(i)?,
        })
    }

    /// All elements widened to f64 (bool as 0/1, i64 rounded above 2^53).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        (0..self.len()).filter_map(|i| self.get_f64(i)).collect()
    }

    /// All elements as i64 for integer and bool buffers; `None` for floats.
    pub fn to_i64_vec(&self) -> Option<Vec<i64>> {
        Some(match self {
            HostData::Bool(v) => v.iter().map(|&x| i64::from(x)).collect(),
            HostData::Int8(v) => v.iter().map(|&x| i64::from(x)).collect(),
            HostData::Int16(v) => v.iter().map(|&x| i64::from(x)).collect(),
            HostData::Int32(v) => v.iter().map(|&x| i64::from(x)).collect(),
            HostData::Int64(v) => v.clone(),
            HostData::UInt8(v) => v.iter().map(|&x| i64::from(x)).collect(),
            HostData::UInt16(v) => v.iter().map(|&x| i64::from(x)).collect(),
            HostData::UInt32(v) => v.iter().map(|&x| i64::from(x)).collect(),
            // Values above i64::MAX wrap; atom indices and counts never get there.
            HostData::UInt64(v) => v.iter().map(|&x| x as i64).collect(),
            _ => return None,
        })
    }
}

macro_rules! impl_from_vec {
    ($($t:ty => $variant:ident),*) => {
        $(impl From<Vec<$t>> for HostData {
            fn from(v: Vec<$t>) -> Self { HostData::$variant(v) }
        })*
    };
}
impl_from_vec!(bool => Bool, i8 => Int8, i16 => Int16, i32 => Int32, i64 => Int64,
    u8 => UInt8, u16 => UInt16, u32 => UInt32, u64 => UInt64, f16 => Float16,
    bf16 => BFloat16, f32 => Float32, f64 => Float64);

/// [`HostData::extend_from_dict`] on one element type; rows of 1-4 elements
/// are copied as fixed-size arrays (a `memcpy` call per 12-byte row measured
/// ~3x slower).
fn expand_rows<T: Copy + Default, C: Copy + Into<usize>>(dst: &mut Vec<T>, codes: &[C], table: &[T], k: usize) -> bool {
    if k == 0 || codes.iter().any(|&c| (c.into() + 1) * k > table.len()) {
        return codes.is_empty() || k == 0;
    }
    // Codes were checked against the table above, so indexing cannot fail.
    // The table viewed as rows in place: building a row vector here copied
    // the whole table for every sample (most of a small-chunk read's time).
    // Many rows are laid out 64 at a time in a stack buffer and appended with
    // one copy each: sizing the output first would zero-fill it, a pass of
    // its own (a fifth of a warm bulk epoch). A few rows (a small sample's)
    // go straight into the sized output: filling the buffer costs more.
    fn fixed<T: Copy + Default, C: Copy + Into<usize>, const K: usize>(dst: &mut Vec<T>, codes: &[C], table: &[T]) {
        let (rows, _) = table.as_chunks::<K>();
        if codes.len() < 64 {
            let start = dst.len();
            dst.resize(start + codes.len() * K, T::default());
            for (o, &c) in dst[start..].as_chunks_mut::<K>().0.iter_mut().zip(codes) {
                *o = rows[c.into()];
            }
            return;
        }
        dst.reserve(codes.len() * K);
        let mut buf = [[T::default(); K]; 64];
        for part in codes.chunks(64) {
            for (o, &c) in buf.iter_mut().zip(part) {
                *o = rows[c.into()];
            }
            dst.extend_from_slice(buf[..part.len()].as_flattened());
        }
    }
    match k {
        1 => fixed::<T, C, 1>(dst, codes, table),
        2 => fixed::<T, C, 2>(dst, codes, table),
        3 => fixed::<T, C, 3>(dst, codes, table),
        4 => fixed::<T, C, 4>(dst, codes, table),
        _ => {
            let start = dst.len();
            dst.resize(start + codes.len() * k, T::default());
            for (o, &c) in dst[start..].chunks_exact_mut(k).zip(codes) {
                let c: usize = c.into();
                o.copy_from_slice(&table[c * k..(c + 1) * k]);
            }
        }
    }
    true
}
