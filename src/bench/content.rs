//! What a read delivered, independent of the path: the order-free content
//! checksum of samples ([`sample_hash`]) and their bytes of field data.

use crate::data::{AtomicData, HostData};

/// FNV-1a, 64 bit: simple enough to re-implement anywhere a checksum must
/// be checked independently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a {
    /// Feeds bytes.
    pub fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    /// Feeds a u64, little endian.
    pub fn write_u64(&mut self, x: u64) {
        self.write(&x.to_le_bytes());
    }

    /// The hash.
    pub fn finish(&self) -> u64 {
        self.0
    }
}

/// The content hash of one sample, as the toolkit returns it (system fields
/// `[1, ...]`, neighbor lists sample-local): [`Fnv1a`] over, for each field in
/// ascending name order, the name's byte length (u64 LE) and UTF-8 bytes, the
/// dtype name's (`float32`, `int64`, `bool`, ...) length and bytes, the rank
/// (u64 LE) and each dimension (u64 LE), the data's byte length (u64 LE) and
/// the data, each element little endian in the stored dtype (bool as one byte,
/// 0 or 1). A read's content checksum is the wrapping sum of its samples'
/// hashes: independent of order, changed by a missing or repeated sample.
///
/// ```
/// use atomzarr::AtomicData;
/// use atomzarr::bench::{Fnv1a, sample_hash};
/// let s = AtomicData::new(vec![8], vec![[1.0, 2.0, 3.0]]).unwrap();
/// // By hand: atomic_numbers then positions.
/// let mut h = Fnv1a::default();
/// for (name, dtype, shape, data) in [
///     ("atomic_numbers", "int64", vec![1u64], 8i64.to_le_bytes().to_vec()),
///     ("positions", "float32", vec![1, 3], [1.0f32, 2.0, 3.0].iter().flat_map(|x| x.to_le_bytes()).collect()),
/// ] {
///     h.write_u64(name.len() as u64);
///     h.write(name.as_bytes());
///     h.write_u64(dtype.len() as u64);
///     h.write(dtype.as_bytes());
///     h.write_u64(shape.len() as u64);
///     shape.iter().for_each(|&d| h.write_u64(d));
///     h.write_u64(data.len() as u64);
///     h.write(&data);
/// }
/// assert_eq!(sample_hash(&s), h.finish());
/// ```
pub fn sample_hash(s: &AtomicData) -> u64 {
    let mut h = Fnv1a::default();
    for (name, f) in &s.fields {
        h.write_u64(name.len() as u64);
        h.write(name.as_bytes());
        let dtype = f.dtype().name();
        h.write_u64(dtype.len() as u64);
        h.write(dtype.as_bytes());
        h.write_u64(f.shape.len() as u64);
        for &d in &f.shape {
            h.write_u64(d as u64);
        }
        let bytes = f.data.as_bytes();
        h.write_u64(bytes.len() as u64);
        if cfg!(target_endian = "little") {
            h.write(bytes);
        } else {
            for e in bytes.chunks(f.dtype().size()) {
                e.iter().rev().for_each(|b| h.write(&[*b]));
            }
        }
    }
    h.finish()
}

fn host_bytes(d: &HostData) -> u64 {
    (d.len() * d.dtype().size()) as u64
}

/// Bytes of field data in one sample.
pub fn sample_bytes(s: &AtomicData) -> u64 {
    s.fields.values().map(|f| host_bytes(&f.data)).sum()
}
