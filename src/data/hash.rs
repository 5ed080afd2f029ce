//! Version-stable hashes for reproducible data preparation: where a group of
//! samples falls in a split ([`split_unit`]) and which random rotation a
//! sample gets in an epoch ([`sample_uniforms`]).
//!
//! Both are written out below so that anyone can re-derive them in another
//! language; they never change within a hash version (splits record theirs,
//! [`SPLIT_HASH`]). No RNG crate is used on purpose: a crate's stream may
//! change between its versions, these numbers must not.
//!
//! **The split hash** (version `fnv1a64-splitmix64/1`), of a `seed` (u64) and
//! a group key (a UTF-8 string):
//!
//! 1. `h = FNV-1a 64` (offset basis `0xcbf29ce484222325`, prime
//!    `0x100000001b3`: for each byte `h = (h ^ byte) * prime mod 2^64`) over
//!    the 8 bytes of `seed` in little-endian order, then, continuing from
//!    that `h`, over the key's UTF-8 bytes;
//! 2. `z = SplitMix64(h)`: `z = h + 0x9e3779b97f4a7c15`,
//!    `z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9`,
//!    `z = (z ^ (z >> 27)) * 0x94d049bb133111eb`, `z ^ (z >> 31)`, all mod 2^64;
//! 3. `u = (z >> 11) / 2^53`, a double in `[0, 1)`.
//!
//! The group goes to the first part whose cumulative fraction (summed in
//! double precision in the order given) exceeds `u`, the last part if none
//! does. In Python (`scripts/split_hash.py`, which wrote the fixture
//! `assets/split/hash_vectors.json` that the tests compare with):
//!
//! ```python
//! M = (1 << 64) - 1
//! def fnv1a64(h, data):
//!     for b in data:
//!         h = ((h ^ b) * 0x100000001B3) & M
//!     return h
//! def splitmix64(x):
//!     z = (x + 0x9E3779B97F4A7C15) & M
//!     z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
//!     z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
//!     return z ^ (z >> 31)
//! def split_unit(seed, key):
//!     h = fnv1a64(fnv1a64(0xCBF29CE484222325, seed.to_bytes(8, "little")), key.encode())
//!     return (splitmix64(h) >> 11) / 2.0**53
//! def part(seed, key, fractions):          # [("train", 0.8), ("val", 0.1), ("test", 0.1)]
//!     u, c = split_unit(seed, key), 0.0
//!     for name, f in fractions:
//!         c += f
//!         if u < c:
//!             return name
//!     return fractions[-1][0]
//! ```
//!
//! ```
//! use atomzarr::data::hash::split_unit;
//! // The first test vector of assets/split/hash_vectors.json.
//! assert_eq!(split_unit(0, "mp-149"), 0.9451729116030195);
//! ```

/// The name and version of the split hash, recorded with every saved split.
pub const SPLIT_HASH: &str = "fnv1a64-splitmix64/1";

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a 64 of `bytes`, continuing from state `h`.
fn fnv1a64(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(FNV_PRIME);
    }
    h
}

/// SplitMix64's output function of state `x` (its increment added first):
/// every input bit affects every output bit.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The top 53 bits of `z` as a double in `[0, 1)`.
pub fn unit_f64(z: u64) -> f64 {
    (z >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// The split hash of `(seed, key)` as a double in `[0, 1)` (see the module
/// docs for the algorithm).
pub fn split_unit(seed: u64, key: &str) -> f64 {
    let h = fnv1a64(fnv1a64(FNV_OFFSET, &seed.to_le_bytes()), key.as_bytes());
    unit_f64(splitmix64(h))
}

/// Three independent uniforms in `[0, 1)` for sample `index` in `epoch`
/// under `seed`: `x = S(S(S(seed) ^ epoch) ^ index)`, `u_k = (S(x + k) >>
/// 11) / 2^53` for `k = 1, 2, 3`, with `S` = [`splitmix64`] and `+` mod
/// 2^64. What the random rotation of a sample is drawn from, so a resumed
/// run (same seed, epoch, index) gets the same one.
///
/// ```
/// use atomzarr::data::hash::sample_uniforms;
/// let u = sample_uniforms(7, 3, 12);
/// assert_eq!(u, sample_uniforms(7, 3, 12));
/// assert_ne!(u, sample_uniforms(7, 4, 12));
/// assert!(u.iter().all(|x| (0.0..1.0).contains(x)));
/// ```
pub fn sample_uniforms(seed: u64, epoch: u64, index: u64) -> [f64; 3] {
    let x = splitmix64(splitmix64(splitmix64(seed) ^ epoch) ^ index);
    [1u64, 2, 3].map(|k| unit_f64(splitmix64(x.wrapping_add(k))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_matches_the_published_vectors() {
        // From the FNV reference (isthe.com/chongo/tech/comp/fnv): FNV-1a 64.
        assert_eq!(fnv1a64(FNV_OFFSET, b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(FNV_OFFSET, b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a64(FNV_OFFSET, b"foobar"), 0x85944171f73967e8);
    }

    #[test]
    fn splitmix_matches_the_reference_stream() {
        // The reference splitmix64.c (Vigna) seeded with 0: its first outputs
        // are S(0), S(gamma), ... with S this function of the pre-increment state.
        assert_eq!(splitmix64(0), 0xe220a8397b1dcdaf);
        assert_eq!(splitmix64(0x9e3779b97f4a7c15), 0x6e789e6aa1b965f4);
    }
}
