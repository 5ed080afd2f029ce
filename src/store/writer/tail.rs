//! Tail chunks that small appends extend without compressing them again.
//!
//! An append rewrites the last, partly filled chunk of every array (files
//! are replaced whole, never patched, for crash safety). Through zarrs that
//! is a decode and a zstd compression of the whole chunk, ~1 MiB per array
//! in the default layout, for what may be a few rows: about 35 ms of CPU
//! for a 10-sample append to a 100,000-sample store. Here the writer keeps,
//! per array, the decoded rows of its tail chunk as last committed, and
//! encodes the chunk as one standard zstd frame (RFC 8878) in three parts:
//!
//! 1. the frame header (content size: the whole chunk) and the compressed
//!    blocks of the first rows, made by libzstd and ended with a flush, so
//!    they end exactly at a row boundary;
//! 2. `Raw` blocks holding the rows appended since, as they are;
//! 3. `RLE` blocks of the fill byte up to the chunk's end (rows past the
//!    array's end, which Zarr reads as the fill value).
//!
//! then the `crc32c` of those bytes when the chain ends in the checksum
//! codec. Every zstd decoder reads such a frame (raw and RLE blocks are the
//! format's two basic block types); zarr-python and this crate's reader
//! read it like any other. An append of a few rows adds a raw block and
//! copies the rest: its cost follows the rows appended, not the chunk.
//! When the raw part passes 1/8 of the chunk the rows are compressed again
//! whole, and a chunk that fills up is compressed whole as one frame, so a
//! store holds at most one such chunk per array, at most 1/8 uncompressed.
//!
//! Only for chains this module can encode by hand: `bytes` (little endian,
//! on a little-endian host), `zstd` without its content checksum, an
//! optional `crc32c`, unsharded, with a fill value of one repeated byte.
//! Anything else goes through zarrs as before.
//!
//! The kept rows equal the committed ones because this writer holds the
//! store's lock: appends only add rows past the committed end, and the
//! operations that change committed rows (delete, repair) or replace arrays
//! (defragment) drop what is kept. An append stages its new tails and keeps
//! them only once it has committed; a failed one drops them, and the next
//! append reads its tail from the store, decoding the whole chunk, which
//! checks its checksum: corrupt bytes are refused, never written back under
//! a fresh checksum. (A chunk corrupted on disk after this writer wrote it
//! is rewritten from the rows the writer kept, which are what it committed.)

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::Value;
use zarrs::array::Array;

use crate::store::arrays::is_crc32c;

/// The zstd frame magic number (little endian on disk).
const ZSTD_MAGIC: u32 = 0xFD2F_B528;
/// Largest block the format allows (a frame's window may lower it).
const MAX_BLOCK: usize = 128 << 10;
/// Uncompressed rows beyond which the tail is compressed again whole, as a
/// fraction of the chunk.
const RAW_SHARE: usize = 8;

/// How an array's chunks are encoded by hand (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TailCodec {
    /// zstd level as the array's metadata states it (0: zstd's default).
    level: i32,
    /// The chain ends in `crc32c`.
    crc32c: bool,
    /// The fill value: one byte, repeated.
    fill: u8,
}

impl TailCodec {
    /// The hand encoding of `array`'s chunks, if its metadata allows one.
    pub(super) fn of<T: ?Sized>(array: &Array<T>) -> Option<TailCodec> {
        if !cfg!(target_endian = "little") {
            return None;
        }
        let fill = array.fill_value().as_ne_bytes();
        let (&first, rest) = fill.split_first()?;
        if rest.iter().any(|&b| b != first) {
            return None;
        }
        let elem = fill.len();
        let meta = serde_json::to_value(array.metadata()).ok()?;
        let codecs = meta.get("codecs")?.as_array()?;
        let name = |c: &Value| c.as_str().or_else(|| c.get("name").and_then(Value::as_str)).map(str::to_owned);
        let little = |c: &Value| {
            name(c).as_deref() == Some("bytes")
                && match c.pointer("/configuration/endian").and_then(Value::as_str) {
                    Some(e) => e == "little",
                    None => elem == 1,
                }
        };
        let zstd_level = |c: &Value| -> Option<i32> {
            if name(c).as_deref() != Some("zstd")
                || c.pointer("/configuration/checksum").and_then(Value::as_bool).unwrap_or(false)
            {
                return None;
            }
            i32::try_from(c.pointer("/configuration/level").and_then(Value::as_i64).unwrap_or(0)).ok()
        };
        let (level, crc32c) = match codecs.as_slice() {
            [b, z] if little(b) => (zstd_level(z)?, false),
            [b, z, k] if little(b) && is_crc32c(k) => (zstd_level(z)?, true),
            _ => return None,
        };
        Some(TailCodec { level, crc32c, fill: first })
    }

    /// The fill byte.
    pub(super) fn fill(&self) -> u8 {
        self.fill
    }
}

/// One array's tail chunk as last committed: its decoded rows (the chunk's
/// first rows, nothing past them) and the compressed head of the frame.
#[derive(Debug)]
pub(super) struct Tail {
    /// The chunk's index along dimension 0.
    chunk: u64,
    /// The decoded bytes of the chunk's first rows.
    decoded: Vec<u8>,
    /// Frame header and compressed blocks of `decoded[..packed]`.
    head: Vec<u8>,
    packed: usize,
    /// Largest block this frame may hold.
    max_block: usize,
}

impl Tail {
    /// A tail of chunk `chunk` holding `decoded` (its first rows); nothing
    /// compressed yet.
    pub(super) fn new(chunk: u64, decoded: Vec<u8>) -> Tail {
        Tail { chunk, decoded, head: Vec::new(), packed: 0, max_block: 0 }
    }

    /// The decoded bytes of its rows.
    pub(super) fn decoded(&self) -> &[u8] {
        &self.decoded
    }

    /// Appends rows.
    pub(super) fn extend(&mut self, rows: &[u8]) {
        self.decoded.extend_from_slice(rows);
    }

    /// The whole encoded chunk of `chunk_bytes` decoded bytes: the rows,
    /// then the fill byte. A full chunk is one ordinary compressed frame.
    pub(super) fn encode(&mut self, codec: &TailCodec, chunk_bytes: usize) -> std::io::Result<Vec<u8>> {
        let n = self.decoded.len();
        if n > chunk_bytes {
            return Err(std::io::Error::other(format!("{n} tail bytes in a chunk of {chunk_bytes}")));
        }
        let mut out = if n == chunk_bytes {
            self.head.clear();
            self.packed = 0;
            compress(&self.decoded, codec.level, chunk_bytes, true)?
        } else {
            if self.head.is_empty() || n - self.packed > chunk_bytes / RAW_SHARE {
                self.head = compress(&self.decoded, codec.level, chunk_bytes, false)?;
                self.packed = n;
                self.max_block = max_block(&self.head, chunk_bytes)?;
            }
            let raw = &self.decoded[self.packed..];
            let fill = chunk_bytes - n;
            let blocks = raw.len().div_ceil(self.max_block) + fill.div_ceil(self.max_block);
            let mut out = Vec::with_capacity(self.head.len() + raw.len() + blocks * 4 + 4);
            out.extend_from_slice(&self.head);
            for part in raw.chunks(self.max_block) {
                push_block_header(&mut out, false, BlockType::Raw, part.len());
                out.extend_from_slice(part);
            }
            let mut left = fill;
            while left > 0 {
                let size = left.min(self.max_block);
                left -= size;
                push_block_header(&mut out, left == 0, BlockType::Rle, size);
                out.push(codec.fill);
            }
            out
        };
        if codec.crc32c {
            let crc = crc32c::crc32c(&out);
            out.extend_from_slice(&crc.to_le_bytes());
        }
        Ok(out)
    }
}

#[derive(Clone, Copy)]
enum BlockType {
    Raw = 0,
    Rle = 1,
}

/// A block header: 3 bytes, little endian: last-block flag, type, size.
fn push_block_header(out: &mut Vec<u8>, last: bool, kind: BlockType, size: usize) {
    let v = u32::from(last) | ((kind as u32) << 1) | ((size as u32) << 3);
    out.extend_from_slice(&v.to_le_bytes()[..3]);
}

/// `decoded` compressed as the start of a frame whose content size is
/// `chunk_bytes`: ended (`end`: the frame is complete) or flushed (the
/// blocks stop exactly at the end of `decoded`, the frame stays open).
fn compress(decoded: &[u8], level: i32, chunk_bytes: usize, end: bool) -> std::io::Result<Vec<u8>> {
    use zstd::zstd_safe::zstd_sys::ZSTD_EndDirective;
    use zstd::zstd_safe::{CCtx, CParameter, InBuffer, OutBuffer};
    let err = |code: usize| std::io::Error::other(format!("zstd: {}", zstd::zstd_safe::get_error_name(code)));
    let mut cctx = CCtx::try_create().ok_or_else(|| std::io::Error::other("zstd: no compression context"))?;
    cctx.set_parameter(CParameter::CompressionLevel(level)).map_err(err)?;
    cctx.set_parameter(CParameter::ContentSizeFlag(true)).map_err(err)?;
    cctx.set_parameter(CParameter::ChecksumFlag(false)).map_err(err)?;
    cctx.set_pledged_src_size(Some(chunk_bytes as u64)).map_err(err)?;
    let directive = if end { ZSTD_EndDirective::ZSTD_e_end } else { ZSTD_EndDirective::ZSTD_e_flush };
    let mut out: Vec<u8> = Vec::with_capacity(zstd::zstd_safe::compress_bound(decoded.len()) + 32);
    let mut input = InBuffer::around(decoded);
    loop {
        let pos = out.len();
        if out.capacity() - pos < 64 {
            out.reserve(out.capacity().max(1024));
        }
        let mut output = OutBuffer::around_pos(&mut out, pos);
        let left = cctx.compress_stream2(&mut output, &mut input, directive).map_err(err)?;
        if left == 0 && input.pos() == decoded.len() {
            return Ok(out);
        }
    }
}

/// The largest block the frame that starts with `head` may hold:
/// `min(window size, 128 KiB)` (RFC 8878, 3.1.1.2), from its header.
fn max_block(head: &[u8], chunk_bytes: usize) -> std::io::Result<usize> {
    let bad = |why: &str| std::io::Error::other(format!("zstd frame header: {why}"));
    if head.len() < 6 || u32::from_le_bytes([head[0], head[1], head[2], head[3]]) != ZSTD_MAGIC {
        return Err(bad("no zstd frame"));
    }
    let fhd = head[4];
    let single_segment = fhd & 0x20 != 0;
    if fhd & 0x04 != 0 || fhd & 0x03 != 0 {
        return Err(bad("content checksum or dictionary"));
    }
    let window = if single_segment {
        chunk_bytes
    } else {
        let wd = head[5];
        let log = 10 + u32::from(wd >> 3);
        let base = 1usize << log;
        base + (base / 8) * usize::from(wd & 7)
    };
    Ok(window.min(MAX_BLOCK).max(1))
}

/// The tails this writer keeps (see the module docs): committed ones, and
/// those an append in progress has staged.
#[derive(Debug, Default)]
pub(super) struct Tails {
    committed: Mutex<HashMap<String, Tail>>,
    staged: Mutex<HashMap<String, Tail>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Each update is one insert, remove or clear: a poisoned map is whole.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Tails {
    /// Takes the committed tail of array `rel` if it is chunk `chunk` with
    /// exactly `len` decoded bytes (else the caller reads the chunk).
    pub(super) fn take(&self, rel: &str, chunk: u64, len: usize) -> Option<Tail> {
        let mut map = lock(&self.committed);
        let tail = map.remove(rel)?;
        (tail.chunk == chunk && tail.decoded.len() == len).then_some(tail)
    }

    /// The decoded bytes of rows `rows` of array `rel`, if its committed
    /// tail holds them (`chunk_rows` rows per chunk, `row_bytes` per row).
    pub(super) fn rows(
        &self,
        rel: &str,
        rows: std::ops::Range<u64>,
        chunk_rows: u64,
        row_bytes: usize,
    ) -> Option<Vec<u8>> {
        let map = lock(&self.committed);
        let tail = map.get(rel)?;
        let first = tail.chunk.checked_mul(chunk_rows)?;
        let (a, b) = (rows.start.checked_sub(first)? as usize, rows.end.checked_sub(first)? as usize);
        tail.decoded.get(a * row_bytes..b * row_bytes).map(<[u8]>::to_vec)
    }

    /// Stages the new tail of array `rel` (kept once the append commits).
    pub(super) fn stage(&self, rel: &str, tail: Tail) {
        lock(&self.staged).insert(rel.to_string(), tail);
    }

    /// The append committed: its staged tails are the committed ones.
    pub(super) fn commit(&self) {
        let staged = std::mem::take(&mut *lock(&self.staged));
        lock(&self.committed).extend(staged);
    }

    /// Forgets everything (committed rows changed, or an append failed).
    pub(super) fn clear(&self) {
        lock(&self.staged).clear();
        lock(&self.committed).clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codec(crc32c: bool) -> TailCodec {
        TailCodec { level: 3, crc32c, fill: 0 }
    }

    fn decode(encoded: &[u8], crc: bool, size: usize) -> Vec<u8> {
        let body = if crc {
            let (body, sum) = encoded.split_at(encoded.len() - 4);
            assert_eq!(crc32c::crc32c(body).to_le_bytes(), sum, "crc32c of the frame");
            body
        } else {
            encoded
        };
        zstd::bulk::decompress(body, size).unwrap()
    }

    #[test]
    fn appended_rows_read_back_through_libzstd_at_every_size() {
        // Rows that compress and rows that do not; chunks smaller than a
        // block and larger than several; appends crossing the repack point.
        for chunk_bytes in [48usize, 1000, 300_000, 1 << 20] {
            for crc in [false, true] {
                let mut want: Vec<u8> = Vec::new();
                let mut tail = Tail::new(0, Vec::new());
                let mut seed = 7u64;
                let mut step = 1usize;
                while want.len() < chunk_bytes {
                    let add = step.min(chunk_bytes - want.len());
                    step = step * 3 + 5;
                    let rows: Vec<u8> = (0..add)
                        .map(|i| {
                            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                            if i % 3 == 0 { (seed >> 56) as u8 } else { (i % 7) as u8 }
                        })
                        .collect();
                    tail.extend(&rows);
                    want.extend_from_slice(&rows);
                    let encoded = tail.encode(&codec(crc), chunk_bytes).unwrap();
                    let mut full = want.clone();
                    full.resize(chunk_bytes, 0);
                    assert_eq!(decode(&encoded, crc, chunk_bytes), full, "chunk {chunk_bytes}, {} rows", want.len());
                }
            }
        }
    }

    #[test]
    fn a_small_append_adds_about_its_own_size() {
        let chunk_bytes = 1 << 20;
        let rows: Vec<u8> = (0..200_000u32).flat_map(|i| (i as f32).sin().to_le_bytes()).collect();
        let mut tail = Tail::new(0, rows[..400_000].to_vec());
        let first = tail.encode(&codec(true), chunk_bytes).unwrap().len();
        tail.extend(&rows[400_000..401_200]);
        let second = tail.encode(&codec(true), chunk_bytes).unwrap().len();
        assert!(second <= first + 1200 + 8, "{first} -> {second}");
        assert!(second >= first + 1200, "the new rows are stored raw: {first} -> {second}");
    }
}
