//! Element access the batch transforms need: in-place arithmetic on the
//! rows of a float [`HostData`] buffer, in f64 (E0 subtraction, scale and
//! shift, rotation work on a collated batch's buffers without copying a
//! sample out), and exact reads of integer elements.

use std::ops::Range;

use crate::data::HostData;

impl HostData {
    /// Element `i` of an integer buffer, exactly; `None` past the end, for
    /// float and bool buffers, and for a uint64 value above `i64::MAX`.
    ///
    /// ```
    /// use atomzarr::HostData;
    /// assert_eq!(HostData::Int32(vec![8, 1]).get_i64(0), Some(8));
    /// assert_eq!(HostData::Float32(vec![8.0]).get_i64(0), None);
    /// ```
    pub fn get_i64(&self, i: usize) -> Option<i64> {
        Some(match self {
            HostData::Int8(v) => i64::from(*v.get(i)?),
            HostData::Int16(v) => i64::from(*v.get(i)?),
            HostData::Int32(v) => i64::from(*v.get(i)?),
            HostData::Int64(v) => *v.get(i)?,
            HostData::UInt8(v) => i64::from(*v.get(i)?),
            HostData::UInt16(v) => i64::from(*v.get(i)?),
            HostData::UInt32(v) => i64::from(*v.get(i)?),
            HostData::UInt64(v) => return v.get(i).and_then(|&x| i64::try_from(x).ok()),
            _ => return None,
        })
    }

    /// Calls `f` on each `row`-element row of rows `rows` widened to f64,
    /// and stores what it leaves there back in the buffer's own float type.
    ///
    /// ```
    /// use atomzarr::HostData;
    /// let mut d = HostData::Float32(vec![1.0, 2.0, 3.0, 4.0]);
    /// d.update_rows_f64(1..2, 2, |r| r.iter_mut().for_each(|x| *x *= 10.0)).unwrap();
    /// assert_eq!(d, HostData::Float32(vec![1.0, 2.0, 30.0, 40.0]));
    /// assert!(HostData::Int64(vec![1]).update_rows_f64(0..1, 1, |_| {}).is_err());
    /// ```
    ///
    /// # Errors
    /// The reason, as a message, for a non-float buffer or rows past its end
    /// (nothing is changed then).
    pub fn update_rows_f64(
        &mut self,
        rows: Range<usize>,
        row: usize,
        mut f: impl FnMut(&mut [f64]),
    ) -> std::result::Result<(), String> {
        let (lo, hi) = (rows.start * row, rows.end * row);
        if rows.start > rows.end || hi > self.len() {
            return Err(format!(
                "rows {}..{} of {row} beyond the buffer's {} elements",
                rows.start,
                rows.end,
                self.len()
            ));
        }
        let mut buf = vec![0.0f64; row];
        macro_rules! each {
            ($v:expr, $to:expr, $from:expr) => {{
                for chunk in $v[lo..hi].chunks_mut(row.max(1)) {
                    for (b, x) in buf.iter_mut().zip(chunk.iter()) {
                        *b = $to(*x);
                    }
                    f(&mut buf);
                    for (x, b) in chunk.iter_mut().zip(&buf) {
                        *x = $from(*b);
                    }
                }
            }};
        }
        match self {
            HostData::Float32(v) => each!(v, f64::from, |b: f64| b as f32),
            HostData::Float64(v) => each!(v, |x: f64| x, |b: f64| b),
            HostData::Float16(v) => each!(v, half::f16::to_f64, half::f16::from_f64),
            HostData::BFloat16(v) => each!(v, half::bf16::to_f64, half::bf16::from_f64),
            other => return Err(format!("a {} buffer, not a float one", other.dtype())),
        }
        Ok(())
    }
}
