//! Absent values in a batch: what a label reads as in a sample that does
//! not have it (docs/LABELS.md, "Labels a mixture's children lack").
//!
//! A float is NaN, so that it can never pass for a value; a signed integer
//! is −2³¹ (its type's minimum when narrower), an unsigned one 2³¹ − 1 (its
//! type's maximum when narrower): values no count, charge or atomic number
//! takes, and that still fit a device's int32 (a batch's int64 fields
//! become int32 on such a device); a bool is false. The
//! batch's `<name>_present` flag says which graphs hold the label, whatever
//! the dtype.

use half::{bf16, f16};

use crate::data::{DType, HostData};

/// The absent value of an int64 (and int32) label: −2³¹.
pub const ABSENT_I64: i64 = i32::MIN as i64;
/// The absent value of a uint32 label: 2³¹ − 1.
const ABSENT_U32: u32 = i32::MAX as u32;
/// The absent value of a uint64 label: 2³¹ − 1.
const ABSENT_U64: u64 = i32::MAX as u64;

/// `len` absent values of `dtype`.
///
/// ```
/// use atomzarr::data::absent;
/// use atomzarr::{DType, HostData};
/// assert!(absent::values(DType::Float32, 2).get_f64(1).unwrap().is_nan());
/// assert_eq!(absent::values(DType::Int64, 1), HostData::Int64(vec![-(1 << 31)]));
/// assert_eq!(absent::values(DType::UInt8, 1), HostData::UInt8(vec![u8::MAX]));
/// ```
pub fn values(dtype: DType, len: usize) -> HostData {
    let mut d = HostData::with_capacity(dtype, len);
    extend(&mut d, len);
    d
}

/// Appends `len` absent values to `data`.
pub fn extend(data: &mut HostData, len: usize) {
    let n = data.len() + len;
    match data {
        HostData::Bool(v) => v.resize(n, false),
        HostData::Int8(v) => v.resize(n, i8::MIN),
        HostData::Int16(v) => v.resize(n, i16::MIN),
        HostData::Int32(v) => v.resize(n, i32::MIN),
        HostData::Int64(v) => v.resize(n, ABSENT_I64),
        HostData::UInt8(v) => v.resize(n, u8::MAX),
        HostData::UInt16(v) => v.resize(n, u16::MAX),
        HostData::UInt32(v) => v.resize(n, ABSENT_U32),
        HostData::UInt64(v) => v.resize(n, ABSENT_U64),
        HostData::Float16(v) => v.resize(n, f16::NAN),
        HostData::BFloat16(v) => v.resize(n, bf16::NAN),
        HostData::Float32(v) => v.resize(n, f32::NAN),
        HostData::Float64(v) => v.resize(n, f64::NAN),
    }
}

/// Overwrites elements `range` of `data` with absent values (a range past
/// the end is cut to it).
pub fn set(data: &mut HostData, range: std::ops::Range<usize>) {
    fn fill<T: Copy>(v: &mut [T], range: std::ops::Range<usize>, x: T) {
        let end = range.end.min(v.len());
        if let Some(s) = v.get_mut(range.start.min(end)..end) {
            s.fill(x);
        }
    }
    match data {
        HostData::Bool(v) => fill(v, range, false),
        HostData::Int8(v) => fill(v, range, i8::MIN),
        HostData::Int16(v) => fill(v, range, i16::MIN),
        HostData::Int32(v) => fill(v, range, i32::MIN),
        HostData::Int64(v) => fill(v, range, ABSENT_I64),
        HostData::UInt8(v) => fill(v, range, u8::MAX),
        HostData::UInt16(v) => fill(v, range, u16::MAX),
        HostData::UInt32(v) => fill(v, range, ABSENT_U32),
        HostData::UInt64(v) => fill(v, range, ABSENT_U64),
        HostData::Float16(v) => fill(v, range, f16::NAN),
        HostData::BFloat16(v) => fill(v, range, bf16::NAN),
        HostData::Float32(v) => fill(v, range, f32::NAN),
        HostData::Float64(v) => fill(v, range, f64::NAN),
    }
}

/// Whether any element of `range` is NaN (never, for integer and bool
/// data): a float label with a NaN in a graph's rows is absent there (the
/// store's convention for a frame without the label).
pub fn any_nan(data: &HostData, range: std::ops::Range<usize>) -> bool {
    fn any<T: Copy>(v: &[T], range: std::ops::Range<usize>, nan: impl Fn(T) -> bool) -> bool {
        let end = range.end.min(v.len());
        v.get(range.start.min(end)..end).is_some_and(|s| s.iter().any(|&x| nan(x)))
    }
    match data {
        HostData::Float16(v) => any(v, range, |x: f16| x.is_nan()),
        HostData::BFloat16(v) => any(v, range, |x: bf16| x.is_nan()),
        HostData::Float32(v) => any(v, range, f32::is_nan),
        HostData::Float64(v) => any(v, range, f64::is_nan),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_and_any_nan_stay_inside_the_range() {
        let mut d = HostData::Float32(vec![1.0, 2.0, 3.0, 4.0]);
        assert!(!any_nan(&d, 0..4));
        set(&mut d, 1..3);
        assert!(!any_nan(&d, 0..1) && any_nan(&d, 1..2) && !any_nan(&d, 3..9));
        let mut i = HostData::Int32(vec![5, 6]);
        set(&mut i, 1..10);
        assert_eq!(i, HostData::Int32(vec![5, i32::MIN]));
        assert!(!any_nan(&i, 0..2));
    }
}
