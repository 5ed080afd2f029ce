//! The bytes of a stored chunk, in one place: the crc32c that ends a chunk
//! or a shard index, the shard index itself, and zstd frames (decoded with
//! one context per thread, encoded whole or flushed open).
//!
//! The reader's direct path, the writer's tail and the size limits use
//! these; nothing else in the crate calls `crc32c` or `zstd` (zarrs' own
//! codec chain aside). Each function answers with a [`Fault`] or an I/O
//! error, and the caller names the store, array and chunk in its `Error`.

use std::cell::RefCell;
use std::ops::Range;

/// Why stored bytes were refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fault {
    /// A crc32c does not match the bytes it covers.
    Checksum(String),
    /// The bytes are not what their layout says (too short, an index entry
    /// outside the shard).
    Malformed(String),
}

/// The index entry of an inner chunk that was never written.
pub(crate) const MISSING: (u64, u64) = (u64::MAX, u64::MAX);

/// Bytes of one shard index entry: offset and size, two little-endian u64.
const ENTRY_BYTES: usize = 16;

/// The crc32c of `bytes`.
pub(crate) fn crc32c(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

/// Appends the crc32c of `out[from..]` to `out`, little endian (the
/// `crc32c` codec's layout).
pub(crate) fn push_crc32c(out: &mut Vec<u8>, from: usize) {
    let crc = crc32c(&out[from.min(out.len())..]);
    out.extend_from_slice(&crc.to_le_bytes());
}

/// The payload of `encoded`, which ends in the crc32c of the payload, once
/// that checksum matches.
pub(crate) fn strip_crc32c(encoded: &[u8]) -> Result<&[u8], Fault> {
    let Some((payload, tail)) = encoded.split_last_chunk::<4>() else {
        return Err(Fault::Malformed(format!(
            "encoded chunk of {} bytes is shorter than its crc32c checksum",
            encoded.len()
        )));
    };
    let (stored, computed) = (u32::from_le_bytes(*tail), crc32c(payload));
    if stored != computed {
        return Err(Fault::Checksum(format!(
            "crc32c of its {} encoded bytes is {computed:#010x}, stored {stored:#010x}",
            payload.len()
        )));
    }
    Ok(payload)
}

/// The bytes of the index of a shard of `inner` chunks: 16 per entry, then
/// 4 of crc32c when `crc`.
pub(crate) fn shard_index_len(inner: u64, crc: bool) -> u64 {
    inner * ENTRY_BYTES as u64 + if crc { 4 } else { 0 }
}

/// Parses a shard index: `raw` holds `inner` entries of (offset, size) and,
/// when `crc`, their crc32c. Each entry is [`MISSING`] or lies inside
/// `data`, the bytes of the shard file that hold chunks.
pub(crate) fn parse_shard_index(raw: &[u8], inner: u64, crc: bool, data: Range<u64>) -> Result<Vec<(u64, u64)>, Fault> {
    let entries = usize::try_from(inner).ok().and_then(|n| n.checked_mul(ENTRY_BYTES));
    let Some(entries) = entries.filter(|&e| e <= raw.len()) else {
        return Err(Fault::Malformed(format!("{} index bytes, expected {}", raw.len(), shard_index_len(inner, crc))));
    };
    let (body, sum) = raw.split_at(entries);
    if crc {
        let Some(stored) = sum.first_chunk::<4>().map(|s| u32::from_le_bytes(*s)) else {
            return Err(Fault::Malformed(format!("{} index bytes, expected {}", raw.len(), entries + 4)));
        };
        let computed = crc32c(body);
        if stored != computed {
            return Err(Fault::Checksum(format!("crc32c is {computed:#010x}, stored {stored:#010x}")));
        }
    }
    body.chunks_exact(ENTRY_BYTES)
        .map(|e| {
            let word = |b: &[u8]| b.try_into().map(u64::from_le_bytes).unwrap_or(u64::MAX);
            let entry = (word(&e[..8]), word(&e[8..]));
            let inside = entry.0 >= data.start && entry.0.checked_add(entry.1).is_some_and(|end| end <= data.end);
            if entry == MISSING || inside {
                Ok(entry)
            } else {
                Err(Fault::Malformed(format!(
                    "inner chunk at {}+{} outside the shard's data (bytes {}..{})",
                    entry.0, entry.1, data.start, data.end
                )))
            }
        })
        .collect()
}

thread_local! {
    /// One zstd decompression context per thread, reused across chunks.
    static ZSTD_DCTX: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
    /// One compression context and output buffer per thread: a fresh
    /// context allocates and zeroes its tables (hundreds of KiB at level
    /// 3) and a fresh output buffer its bound, and at the mmap threshold the
    /// `atomzarr` binary sets for writes, each of those was a new mapping,
    /// page-faulted in and unmapped per chunk.
    static ZSTD_CCTX: RefCell<(Option<zstd::zstd_safe::CCtx<'static>>, Vec<u8>)> =
        const { RefCell::new((None, Vec::new())) };
}

/// Decompresses one zstd frame into `out`, returning the decoded length (a
/// frame larger than `out` is an error).
pub(crate) fn zstd_decode_into(encoded: &[u8], out: &mut [u8]) -> std::io::Result<usize> {
    ZSTD_DCTX.with(|cell| {
        let mut slot = cell.borrow_mut();
        let dctx = match slot.as_mut() {
            Some(d) => d,
            None => slot.insert(zstd::bulk::Decompressor::new()?),
        };
        dctx.decompress_to_buffer(encoded, out)
    })
}

/// Decompresses one zstd frame of at most `cap` bytes into a new buffer
/// (a larger frame is an error, never a larger allocation).
pub(crate) fn zstd_decode(encoded: &[u8], cap: usize) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(cap);
    ZSTD_DCTX.with(|cell| {
        let mut slot = cell.borrow_mut();
        let dctx = match slot.as_mut() {
            Some(d) => d,
            None => slot.insert(zstd::bulk::Decompressor::new()?),
        };
        dctx.decompress_to_buffer(encoded, &mut out)
    })?;
    Ok(out)
}

/// `decoded` compressed at `level` as the start of a frame whose content
/// size is `chunk_bytes`, without zstd's own checksum: ended (`end`: the
/// frame is complete) or flushed (the blocks stop exactly at the end of
/// `decoded`, the frame stays open for more). The result has room for a
/// crc32c the caller may append.
pub(crate) fn zstd_encode(decoded: &[u8], level: i32, chunk_bytes: usize, end: bool) -> std::io::Result<Vec<u8>> {
    use zstd::zstd_safe::zstd_sys::ZSTD_EndDirective;
    use zstd::zstd_safe::{CCtx, CParameter, InBuffer, OutBuffer, ResetDirective};
    let err = |code: usize| std::io::Error::other(format!("zstd: {}", zstd::zstd_safe::get_error_name(code)));
    ZSTD_CCTX.with(|scratch| {
        let mut scratch = scratch.borrow_mut();
        let (cctx, out) = &mut *scratch;
        let cctx = match cctx {
            Some(c) => c,
            None => {
                cctx.insert(CCtx::try_create().ok_or_else(|| std::io::Error::other("zstd: no compression context"))?)
            }
        };
        // A context left mid-frame by an earlier error starts clean.
        cctx.reset(ResetDirective::SessionAndParameters).map_err(err)?;
        cctx.set_parameter(CParameter::CompressionLevel(level)).map_err(err)?;
        cctx.set_parameter(CParameter::ContentSizeFlag(true)).map_err(err)?;
        cctx.set_parameter(CParameter::ChecksumFlag(false)).map_err(err)?;
        cctx.set_pledged_src_size(Some(chunk_bytes as u64)).map_err(err)?;
        let directive = if end { ZSTD_EndDirective::ZSTD_e_end } else { ZSTD_EndDirective::ZSTD_e_flush };
        out.clear();
        out.reserve(zstd::zstd_safe::compress_bound(decoded.len()) + 32);
        let mut input = InBuffer::around(decoded);
        loop {
            let pos = out.len();
            if out.capacity() - pos < 64 {
                out.reserve(out.capacity().max(1024));
            }
            let mut output = OutBuffer::around_pos(out, pos);
            let left = cctx.compress_stream2(&mut output, &mut input, directive).map_err(err)?;
            if left == 0 && input.pos() == decoded.len() {
                let mut exact = Vec::with_capacity(out.len() + 4);
                exact.extend_from_slice(out);
                return Ok(exact);
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An index of `entries` with its crc32c, as a shard file ends.
    fn index(entries: &[(u64, u64)]) -> Vec<u8> {
        let mut out: Vec<u8> = entries.iter().flat_map(|(o, s)| [o.to_le_bytes(), s.to_le_bytes()]).flatten().collect();
        push_crc32c(&mut out, 0);
        out
    }

    #[test]
    fn shard_index_entries_are_checked_against_checksum_and_data() {
        let raw = index(&[(0, 10), MISSING, (10, 5)]);
        assert_eq!(parse_shard_index(&raw, 3, true, 0..15), Ok(vec![(0, 10), MISSING, (10, 5)]));
        assert!(matches!(parse_shard_index(&raw, 3, true, 0..14), Err(Fault::Malformed(m)) if m.contains("10+5")));
        assert!(matches!(parse_shard_index(&raw, 3, true, 1..15), Err(Fault::Malformed(_))));
        let mut flipped = raw.clone();
        flipped[3] ^= 1;
        assert!(matches!(parse_shard_index(&flipped, 3, true, 0..15), Err(Fault::Checksum(_))));
        assert!(matches!(parse_shard_index(&raw[..40], 3, true, 0..15), Err(Fault::Malformed(_))));
        assert!(matches!(parse_shard_index(&raw, 4, true, 0..15), Err(Fault::Malformed(_))));
        assert_eq!(shard_index_len(3, true), raw.len() as u64);
    }

    #[test]
    fn crc32c_framing_and_zstd_round_trip() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let mut frame = zstd_encode(&data, 3, data.len(), true).unwrap();
        push_crc32c(&mut frame, 0);
        let payload = strip_crc32c(&frame).unwrap();
        assert_eq!(zstd_decode(payload, data.len()).unwrap(), data);
        let mut out = vec![0u8; data.len()];
        assert_eq!(zstd_decode_into(payload, &mut out).unwrap(), data.len());
        assert_eq!(out, data);
        assert!(zstd_decode(payload, data.len() - 1).is_err(), "a frame larger than its bound");
        let n = frame.len();
        frame[n - 1] ^= 0x80;
        assert!(matches!(strip_crc32c(&frame), Err(Fault::Checksum(_))));
        assert!(matches!(strip_crc32c(&[1, 2, 3]), Err(Fault::Malformed(_))));
    }
}
