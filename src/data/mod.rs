//! The host data model: a sample ([`AtomicData`]) is a set of named
//! [`Field`]s, each with a [`Level`] (atom / edge / system), a [`DType`], a
//! shape and a typed host buffer ([`HostData`]).
//!
//! Shapes follow the store contract: atom fields are `[n_atoms, ...]`, edge
//! fields `[n_edges, ...]`, and system fields keep a leading dimension of 1
//! (`energy` is `[1, 1]`, `cell` is `[1, 3, 3]`).

use std::collections::BTreeMap;
use std::fmt;

use half::{bf16, f16};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

pub mod collate;
pub mod synth;

pub use collate::{CollateOptions, CollatedBatch, CollatedField};
pub(crate) use collate::bad_indices;

/// Which axis a field lives on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// One row per atom.
    Atom,
    /// One row per edge (neighbor pair).
    Edge,
    /// One row per sample (structure).
    System,
}

impl Level {
    /// The name used in the store's `fields` attribute.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Atom => "atom",
            Level::Edge => "edge",
            Level::System => "system",
        }
    }

    /// Parses `"atom"`, `"edge"` or `"system"`.
    pub fn parse(s: &str) -> Option<Level> {
        match s {
            "atom" => Some(Level::Atom),
            "edge" => Some(Level::Edge),
            "system" => Some(Level::System),
            _ => None,
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Element types a field can hold (the Zarr v3 core numeric types).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// `bool`
    Bool,
    /// `int8`
    Int8,
    /// `int16`
    Int16,
    /// `int32`
    Int32,
    /// `int64`
    Int64,
    /// `uint8`
    UInt8,
    /// `uint16`
    UInt16,
    /// `uint32`
    UInt32,
    /// `uint64`
    UInt64,
    /// `float16`
    Float16,
    /// `bfloat16`
    BFloat16,
    /// `float32`
    Float32,
    /// `float64`
    Float64,
}

impl DType {
    /// Every supported dtype.
    pub const ALL: [DType; 13] = [
        DType::Bool,
        DType::Int8,
        DType::Int16,
        DType::Int32,
        DType::Int64,
        DType::UInt8,
        DType::UInt16,
        DType::UInt32,
        DType::UInt64,
        DType::Float16,
        DType::BFloat16,
        DType::Float32,
        DType::Float64,
    ];

    /// The Zarr v3 (and numpy) name: `bool`, `int32`, `float32`, ...
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::Int8 => "int8",
            DType::Int16 => "int16",
            DType::Int32 => "int32",
            DType::Int64 => "int64",
            DType::UInt8 => "uint8",
            DType::UInt16 => "uint16",
            DType::UInt32 => "uint32",
            DType::UInt64 => "uint64",
            DType::Float16 => "float16",
            DType::BFloat16 => "bfloat16",
            DType::Float32 => "float32",
            DType::Float64 => "float64",
        }
    }

    /// Parses a Zarr v3 data type name.
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::Bool | DType::Int8 | DType::UInt8 => 1,
            DType::Int16 | DType::UInt16 | DType::Float16 | DType::BFloat16 => 2,
            DType::Int32 | DType::UInt32 | DType::Float32 => 4,
            DType::Int64 | DType::UInt64 | DType::Float64 => 8,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

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

    /// Builds a buffer from native-endian bytes.
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
    pub fn extend_from(&mut self, other: &HostData) -> Result<()> {
        if self.dtype() != other.dtype() {
            return Err(Error::invalid(
                "concatenate",
                format!("dtype {} vs {}", self.dtype(), other.dtype()),
            ));
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

    /// Adds `offset` to every element of an integer buffer (used to move
    /// neighbor lists between sample-local and store-global atom indices).
    pub(crate) fn add_offset(&mut self, offset: i64) -> Result<()> {
        self.add_offset_from(0, offset)
    }

    /// Appends int64 values given as native-endian bytes, each plus `offset`
    /// (wrapping, as [`HostData::add_offset`]). Fusing the offset into the
    /// copy saves a second pass over neighbor lists.
    pub(crate) fn extend_i64_offset(dst: &mut Vec<i64>, bytes: &[u8], offset: i64) {
        match bytemuck::try_cast_slice::<u8, i64>(bytes) {
            Ok(src) => dst.extend(src.iter().map(|&x| x.wrapping_add(offset))),
            Err(_) => dst.extend(bytes.chunks_exact(8).map(|c| i64_ne(c).wrapping_add(offset))),
        }
    }

    /// As [`HostData::extend_i64_offset`] for int32 values.
    pub(crate) fn extend_i32_offset(dst: &mut Vec<i32>, bytes: &[u8], offset: i64) {
        let offset = offset as i32;
        match bytemuck::try_cast_slice::<u8, i32>(bytes) {
            Ok(src) => dst.extend(src.iter().map(|&x| x.wrapping_add(offset))),
            Err(_) => dst.extend(bytes.chunks_exact(4).map(|c| (i64_ne(c) as i32).wrapping_add(offset))),
        }
    }

    /// Appends neighbor indices given as native-endian bytes of this
    /// buffer's dtype, each moved by `r.offset`, and checks each against its
    /// sample's atoms (`r.lo..r.lo + r.n` in the source's numbering) in the
    /// same pass. Returns whether every value was in range; the values are
    /// appended either way (the caller turns a `false` into an error, see
    /// [`HostData::index_report`]). Offsets wrap, as [`HostData::add_offset`]:
    /// a wrapped value is out of range and reported, never a panic.
    ///
    /// Used where samples are collated one by one (the generic and the
    /// validated batch paths, mixed MultiDataset batches); the Zarr reader
    /// checks each neighbor chunk once, when it decodes it.
    pub(crate) fn extend_indices_checked(&mut self, bytes: &[u8], r: IndexRange) -> Result<bool> {
        Ok(match self {
            HostData::Int64(v) => extend_i64_checked(v, bytes, r),
            HostData::Int32(v) => extend_i32_checked(v, bytes, r),
            HostData::UInt64(_) | HostData::UInt32(_) => {
                // Rare dtypes: copy, move, then check (a second pass).
                let start = self.len();
                self.extend_from_bytes(bytes);
                self.add_offset_from(start, r.offset)?;
                self.index_report(start..self.len(), r.lo.wrapping_add(r.offset), r.n).is_none()
            }
            other => {
                return Err(Error::invalid(
                    "neighbor_list",
                    format!("dtype {} is not an index type (int32/int64/uint32/uint64)", other.dtype()),
                ));
            }
        })
    }

    /// For the indices `range` of this buffer, of a sample whose atoms are
    /// `base..base + n` here: `None` when all lie in range, else the first
    /// value outside and the smallest and largest value, all relative to
    /// `base` (sample-local, as `read` returns them).
    pub(crate) fn index_report(&self, range: std::ops::Range<usize>, base: i64, n: u64) -> Option<IndexReport> {
        let vals = self.to_i64_in(range)?;
        let local = |x: i64| x.wrapping_sub(base);
        let value = vals.iter().map(|&x| local(x)).find(|&x| x < 0 || x as u64 >= n)?;
        let min = vals.iter().map(|&x| local(x)).min().unwrap_or(value);
        let max = vals.iter().map(|&x| local(x)).max().unwrap_or(value);
        Some(IndexReport { value, num_atoms: n as usize, min, max })
    }

    /// Elements `range` as i64 (integer buffers; `None` otherwise or when
    /// the range is out of bounds).
    fn to_i64_in(&self, range: std::ops::Range<usize>) -> Option<Vec<i64>> {
        Some(match self {
            HostData::Int64(v) => v.get(range)?.to_vec(),
            HostData::Int32(v) => v.get(range)?.iter().map(|&x| i64::from(x)).collect(),
            // Values above i64::MAX wrap, as in `to_i64_vec`.
            HostData::UInt64(v) => v.get(range)?.iter().map(|&x| x as i64).collect(),
            HostData::UInt32(v) => v.get(range)?.iter().map(|&x| i64::from(x)).collect(),
            _ => return None,
        })
    }

    /// Native-endian int64 values narrowed to int32 (native-endian bytes),
    /// or `None` when a value does not fit.
    pub(crate) fn narrow_i64_bytes(bytes: &[u8]) -> Option<Vec<u8>> {
        let wide: std::borrow::Cow<'_, [i64]> = match bytemuck::try_cast_slice::<u8, i64>(bytes) {
            Ok(src) => src.into(),
            Err(_) => bytes.chunks_exact(8).map(i64_ne).collect::<Vec<_>>().into(),
        };
        narrow_i64(&wide).map(|v| bytemuck::cast_slice(&v).to_vec())
    }

    /// As [`HostData::add_offset`], for elements `start..` only.
    pub(crate) fn add_offset_from(&mut self, start: usize, offset: i64) -> Result<()> {
        if offset == 0 && matches!(self, HostData::Int64(_) | HostData::Int32(_) | HostData::UInt64(_) | HostData::UInt32(_)) {
            return Ok(());
        }
        // Wrapping: stored values come from disk and may be anything; a bad
        // value must come out as a bad index (which validation reports), not
        // as an overflow panic.
        if start > self.len() {
            return Err(Error::invalid("neighbor_list", format!("offset start {start} past {} elements", self.len())));
        }
        match self {
            HostData::Int64(v) => v[start..].iter_mut().for_each(|x| *x = x.wrapping_add(offset)),
            HostData::Int32(v) => v[start..].iter_mut().for_each(|x| *x = x.wrapping_add(offset as i32)),
            HostData::UInt64(v) => v[start..].iter_mut().for_each(|x| *x = x.wrapping_add_signed(offset)),
            HostData::UInt32(v) => v[start..].iter_mut().for_each(|x| *x = x.wrapping_add_signed(offset as i32)),
            other => {
                return Err(Error::invalid(
                    "neighbor_list",
                    format!("dtype {} is not an index type (int32/int64/uint32/uint64)", other.dtype()),
                ));
            }
        }
        Ok(())
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

/// One named array of a sample: level, shape and data.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// Atom, edge or system.
    pub level: Level,
    /// Full shape; `shape[0]` is the row count on the level's axis.
    pub shape: Vec<usize>,
    /// Flat row-major data; `data.len() == shape.iter().product()`.
    pub data: HostData,
}

impl Field {
    /// A field, checking that `shape` matches the element count.
    ///
    /// ```
    /// use atomzarr::{Field, Level};
    /// let f = Field::new(Level::Atom, vec![2, 3], vec![0f32; 6]).unwrap();
    /// assert_eq!(f.rows(), 2);
    /// assert!(Field::new(Level::Atom, vec![2, 3], vec![0f32; 5]).is_err());
    /// ```
    pub fn new(level: Level, shape: Vec<usize>, data: impl Into<HostData>) -> Result<Field> {
        let data = data.into();
        let n: usize = shape.iter().product();
        if shape.is_empty() {
            return Err(Error::invalid("field", "shape must have at least one dimension (rows)"));
        }
        if n != data.len() {
            return Err(Error::invalid(
                "field",
                format!("shape {shape:?} holds {n} elements but data has {}", data.len()),
            ));
        }
        Ok(Field { level, shape, data })
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }

    /// Rows on the level's axis (`shape[0]`).
    pub fn rows(&self) -> usize {
        self.shape.first().copied().unwrap_or(0)
    }

    /// Shape without the leading row dimension.
    pub fn trailing_shape(&self) -> &[usize] {
        self.shape.get(1..).unwrap_or(&[])
    }

    /// Elements per row.
    pub fn row_len(&self) -> usize {
        self.trailing_shape().iter().product()
    }
}

/// One atomic structure: named fields on the atom, edge and system axes.
///
/// Build one with the typed constructors, then hand a list to the writer:
///
/// ```
/// use atomzarr::AtomicData;
/// let s = AtomicData::new(vec![1, 8, 1], vec![[0.0, 0.0, 0.0], [0.96, 0.0, 0.0], [-0.24, 0.93, 0.0]])
///     .unwrap()
///     .with_energy(-14.2)
///     .with_forces(vec![[0.0; 3]; 3])
///     .unwrap()
///     .with_neighbor_list(vec![[0, 1], [1, 0]], None)
///     .unwrap();
/// assert_eq!(s.num_atoms(), 3);
/// assert_eq!(s.num_edges(), 2);
/// assert_eq!(s.field("energy").unwrap().shape, vec![1, 1]);
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AtomicData {
    /// Fields by name (sorted, which keeps dumps and comparisons stable).
    pub fields: BTreeMap<String, Field>,
}

fn flat3<const N: usize>(v: Vec<[f32; N]>) -> Vec<f32> {
    v.into_iter().flatten().collect()
}

impl AtomicData {
    /// A structure from atomic numbers and positions (Å), the two fields
    /// every sample has.
    pub fn new(atomic_numbers: Vec<i64>, positions: Vec<[f32; 3]>) -> Result<AtomicData> {
        let n = atomic_numbers.len();
        if positions.len() != n {
            return Err(Error::invalid(
                "AtomicData::new",
                format!("{n} atomic numbers but {} positions", positions.len()),
            ));
        }
        let mut d = AtomicData::default();
        d.fields.insert("atomic_numbers".into(), Field::new(Level::Atom, vec![n], atomic_numbers)?);
        d.fields.insert("positions".into(), Field::new(Level::Atom, vec![n, 3], flat3(positions))?);
        Ok(d)
    }

    /// Adds (or replaces) any field.
    pub fn with_field(mut self, name: impl Into<String>, field: Field) -> AtomicData {
        self.fields.insert(name.into(), field);
        self
    }

    /// Adds a per-atom 3-vector field (`forces`, `velocities`, ...).
    pub fn with_atom_vectors(self, name: &str, v: Vec<[f32; 3]>) -> Result<AtomicData> {
        let n = v.len();
        self.check_rows(name, Level::Atom, n)?;
        Ok(self.with_field(name, Field::new(Level::Atom, vec![n, 3], flat3(v))?))
    }

    /// Adds a per-atom scalar field (`charges`, `atomic_masses`, ...).
    pub fn with_atom_scalars(self, name: &str, v: impl Into<HostData>) -> Result<AtomicData> {
        let v = v.into();
        let n = v.len();
        self.check_rows(name, Level::Atom, n)?;
        Ok(self.with_field(name, Field::new(Level::Atom, vec![n], v)?))
    }

    /// Forces `[n_atoms, 3]`.
    pub fn with_forces(self, forces: Vec<[f32; 3]>) -> Result<AtomicData> {
        self.with_atom_vectors("forces", forces)
    }

    /// Velocities `[n_atoms, 3]`.
    pub fn with_velocities(self, v: Vec<[f32; 3]>) -> Result<AtomicData> {
        self.with_atom_vectors("velocities", v)
    }

    /// Partial charges `[n_atoms]`.
    pub fn with_charges(self, q: Vec<f32>) -> Result<AtomicData> {
        self.with_atom_scalars("charges", q)
    }

    /// Total energy, stored `[1, 1]` float32.
    pub fn with_energy(self, energy: f32) -> AtomicData {
        self.with_system("energy", vec![1, 1], vec![energy])
    }

    /// Cell vectors (rows), stored `[1, 3, 3]` float32.
    pub fn with_cell(self, cell: [[f32; 3]; 3]) -> AtomicData {
        self.with_system("cell", vec![1, 3, 3], flat3(cell.to_vec()))
    }

    /// Periodic boundary flags, stored `[1, 3]` bool.
    pub fn with_pbc(self, pbc: [bool; 3]) -> AtomicData {
        self.with_system("pbc", vec![1, 3], pbc.to_vec())
    }

    /// Stress (Voigt-free 3x3), stored `[1, 3, 3]` float32.
    pub fn with_stress(self, stress: [[f32; 3]; 3]) -> AtomicData {
        self.with_system("stress", vec![1, 3, 3], flat3(stress.to_vec()))
    }

    /// Any system-level field; `shape[0]` should be 1.
    fn with_system(self, name: &str, shape: Vec<usize>, data: impl Into<HostData>) -> AtomicData {
        let data = data.into();
        // The shapes above are constructed to match their data, so this cannot fail.
        let field = Field { level: Level::System, shape, data };
        self.with_field(name, field)
    }

    /// Neighbor list `[n_edges, 2]` of sample-local atom indices (int64) and,
    /// optionally, periodic `shifts` `[n_edges, 3]` (Å, so that
    /// `r_ij = r_j - r_i + shift_ij`).
    pub fn with_neighbor_list(
        self,
        pairs: Vec<[i64; 2]>,
        shifts: Option<Vec<[f32; 3]>>,
    ) -> Result<AtomicData> {
        let e = pairs.len();
        let mut d = self.with_field(
            "neighbor_list",
            Field::new(Level::Edge, vec![e, 2], pairs.into_iter().flatten().collect::<Vec<_>>())?,
        );
        if let Some(s) = shifts {
            if s.len() != e {
                return Err(Error::invalid("shifts", format!("{} shifts for {e} edges", s.len())));
            }
            d = d.with_field("shifts", Field::new(Level::Edge, vec![e, 3], flat3(s))?);
        }
        Ok(d)
    }

    /// Adds a custom field at `level` with its full shape.
    pub fn with_custom(
        self,
        name: &str,
        level: Level,
        shape: Vec<usize>,
        data: impl Into<HostData>,
    ) -> Result<AtomicData> {
        let field = Field::new(level, shape, data)?;
        if level != Level::System {
            self.check_rows(name, level, field.rows())?;
        }
        Ok(self.with_field(name, field))
    }

    fn check_rows(&self, name: &str, level: Level, n: usize) -> Result<()> {
        let have = match level {
            Level::Atom => self.fields.values().find(|f| f.level == Level::Atom).map(Field::rows),
            Level::Edge => self.fields.values().find(|f| f.level == Level::Edge).map(Field::rows),
            Level::System => Some(1),
        };
        match have {
            Some(h) if h != n => Err(Error::invalid(
                name,
                format!("{n} rows but the sample has {h} on the {level} axis"),
            )),
            _ => Ok(()),
        }
    }

    /// A field by name.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.get(name)
    }

    /// Atom count (rows of the first atom field; 0 if none).
    pub fn num_atoms(&self) -> usize {
        self.fields.values().find(|f| f.level == Level::Atom).map_or(0, Field::rows)
    }

    /// Edge count (rows of the first edge field; 0 if none).
    pub fn num_edges(&self) -> usize {
        self.fields.values().find(|f| f.level == Level::Edge).map_or(0, Field::rows)
    }

    /// The first neighbor index outside `[0, num_atoms)`, if any, with the
    /// smallest and largest index (`None` also when there is no integer
    /// neighbor list: [`AtomicData::validate`] reports that).
    pub(crate) fn neighbor_report(&self) -> Option<IndexReport> {
        let nl = &self.fields.get("neighbor_list")?.data;
        nl.index_report(0..nl.len(), 0, self.num_atoms() as u64)
    }

    /// Checks the invariants the Dataset validates: atom fields agree on the
    /// atom count, edge fields on the edge count, system fields have one row,
    /// neighbor indices lie in `[0, n_atoms)`, positions are finite.
    pub fn validate(&self) -> std::result::Result<(), String> {
        let n = self.num_atoms();
        let e = self.num_edges();
        for (name, f) in &self.fields {
            if f.data.len() != f.shape.iter().product::<usize>() {
                return Err(format!("{name}: shape {:?} does not match {} elements", f.shape, f.data.len()));
            }
            match f.level {
                Level::Atom if f.rows() != n => {
                    return Err(format!("{name}: {} rows, expected {n} atoms", f.rows()));
                }
                Level::Edge if f.rows() != e => {
                    return Err(format!("{name}: {} rows, expected {e} edges", f.rows()));
                }
                Level::System if f.rows() != 1 => {
                    return Err(format!("{name}: system field with {} rows, expected 1", f.rows()));
                }
                _ => {}
            }
        }
        if let Some(nl) = self.fields.get("neighbor_list") {
            let idx = nl
                .data
                .to_i64_vec()
                .ok_or_else(|| format!("neighbor_list: dtype {} is not an integer type", nl.dtype()))?;
            if let Some(bad) = idx.iter().find(|&&i| i < 0 || i as usize >= n) {
                return Err(format!("neighbor_list: index {bad} outside [0, {n})"));
            }
        }
        if let Some(p) = self.fields.get("positions")
            && p.data.to_f64_vec().iter().any(|x| !x.is_finite())
        {
            return Err("positions: non-finite value".into());
        }
        Ok(())
    }
}

/// `v` as int32 when every value fits (the one rule every narrowing path
/// follows, see `CollateOptions::narrow_int64`), else `None`.
pub(crate) fn narrow_i64(v: &[i64]) -> Option<Vec<i32>> {
    v.iter().all(|&x| i32::try_from(x).is_ok()).then(|| v.iter().map(|&x| x as i32).collect())
}

/// An i64 from up to 8 native-endian bytes (zero-padded, so 4 bytes read
/// as a little-endian i32's bit pattern on little-endian hosts; callers pass
/// `chunks_exact`).
fn i64_ne(c: &[u8]) -> i64 {
    let mut a = [0u8; 8];
    let n = c.len().min(8);
    a[..n].copy_from_slice(&c[..n]);
    i64::from_ne_bytes(a)
}

/// Where one sample's neighbor indices must point while they are copied into
/// a batch: its atoms are `lo..lo + n` in the source's numbering (store-global
/// for a store, batch-local for a batch), and `offset` moves a value into the
/// destination's numbering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IndexRange {
    pub lo: i64,
    pub n: u64,
    pub offset: i64,
}

/// An out-of-range neighbor index of one sample, sample-local: the first bad
/// value, the sample's atom count and the smallest and largest index (what
/// the append-bug diagnosis needs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IndexReport {
    pub value: i64,
    pub num_atoms: usize,
    pub min: i64,
    pub max: i64,
}

/// Folds index `x` of a sample whose atoms are `lo..=lo + last` into `acc`:
/// `acc` turns negative once any `x` lies outside. `d = x - lo` and
/// `last - d` are both non-negative exactly when `x` is in range, so the
/// sign bit of their OR says it; no wrapping value aliases into range
/// while `lo + last < 2^63` (any store of fewer than 2^62 atoms).
/// Subtractions and ORs vectorize on baseline x86-64, where a 64-bit
/// compare does not.
#[inline(always)]
pub(crate) fn fold_index(acc: i64, x: i64, lo: i64, last: i64) -> i64 {
    let d = x.wrapping_sub(lo);
    acc | d | last.wrapping_sub(d)
}

/// [`HostData::extend_indices_checked`] for int64.
fn extend_i64_checked(dst: &mut Vec<i64>, bytes: &[u8], r: IndexRange) -> bool {
    let last = (r.n as i64).wrapping_sub(1);
    let mut acc = if r.n > i64::MAX as u64 { -1 } else { 0 };
    let mut step = |x: i64| {
        acc = fold_index(acc, x, r.lo, last);
        x.wrapping_add(r.offset)
    };
    match bytemuck::try_cast_slice::<u8, i64>(bytes) {
        Ok(src) => dst.extend(src.iter().map(|&x| step(x))),
        Err(_) => dst.extend(bytes.chunks_exact(8).map(|c| step(i64_ne(c)))),
    }
    acc >= 0
}

/// [`HostData::extend_indices_checked`] for int32 (the range check in
/// i64, so no value can alias into range by wrapping).
fn extend_i32_checked(dst: &mut Vec<i32>, bytes: &[u8], r: IndexRange) -> bool {
    let offset = r.offset as i32;
    let last = (r.n as i64).wrapping_sub(1);
    let mut acc = if r.n > i64::MAX as u64 { -1 } else { 0 };
    let mut step = |x: i32| {
        acc = fold_index(acc, i64::from(x), r.lo, last);
        x.wrapping_add(offset)
    };
    match bytemuck::try_cast_slice::<u8, i32>(bytes) {
        Ok(src) => dst.extend(src.iter().map(|&x| step(x))),
        Err(_) => dst.extend(bytes.chunks_exact(4).map(|c| step(i64_ne(c) as i32))),
    }
    // The int32 offset must be the int64 one, or a value moved by a
    // truncated offset would be wrong though in range.
    acc >= 0 && i64::from(offset) == r.offset
}
