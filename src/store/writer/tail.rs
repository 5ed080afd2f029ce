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
//! Sharded arrays keep the tail inner chunk the same way, and the writer
//! rebuilds the tail shard file from the old one: its other inner chunks'
//! bytes copied as they are, the new ones, then the index (with its
//! `crc32c`). zarrs decodes and compresses every inner chunk of a shard it
//! rewrites (500,000 rows per array in the reference layout); this copies
//! them. Files are still replaced whole, so an append to a sharded store
//! writes its tail shards in full.
//!
//! Every other chunk an append writes whole goes through the same encoder
//! (one frame per chunk, with the thread's own zstd context): zarrs' zstd
//! codec allocates and zeroes a fresh context per chunk, which made up a
//! third of a large write's page faults and nearly half its CPU time.
//!
//! Only for chains this module can encode by hand: `bytes` (little endian,
//! on a little-endian host), `zstd` without its content checksum, an
//! optional `crc32c`; sharded only along the rows, with the index at the
//! end in `bytes` (+ `crc32c`); a fill value of one repeated byte. Anything
//! else goes through zarrs as before.
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

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use rayon::prelude::*;
use zarrs::array::{Array, ArrayBytes, CodecOptions};
use zarrs::storage::{ReadableStorageTraits, WritableStorageTraits};

use super::{AtomicDataZarrWriter, arr_err};
use crate::error::{Error, Result};
use crate::store::chunk_bytes::{self, Fault, MISSING};
use crate::store::codec::ChainSpec;
use crate::store::durable::Store;
use crate::threads::lock;

/// The zstd frame magic number (little endian on disk).
const ZSTD_MAGIC: u32 = 0xFD2F_B528;
/// Largest block the format allows (a frame's window may lower it).
const MAX_BLOCK: usize = 128 << 10;
/// Uncompressed rows beyond which the tail is compressed again whole, as a
/// fraction of the chunk.
const RAW_SHARE: usize = 8;

/// How an array's (inner) chunks are encoded by hand (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TailCodec {
    /// zstd level as the array's metadata states it (0: zstd's default).
    level: i32,
    /// The chain ends in `crc32c`.
    crc32c: bool,
    /// The fill value: one byte, repeated.
    pub(super) fill: u8,
    /// Set for sharded arrays.
    pub(super) shard: Option<ShardSpec>,
}

/// The shards of a sharded array: split along the rows only, index at the
/// end, in `bytes` (+ `crc32c`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ShardSpec {
    /// Rows per inner chunk.
    pub(super) inner_rows: u64,
    /// The index ends in a crc32c.
    pub(super) index_crc32c: bool,
}

impl TailCodec {
    /// The hand encoding of `array`'s chunks, if its metadata allows one:
    /// `bytes` (little endian) + `zstd` (no frame checksum) [+ `crc32c`],
    /// a fill value of one repeated byte, shards (if any) split along the
    /// rows with their index at the end.
    pub(super) fn of<T: ?Sized>(array: &Array<T>) -> Option<TailCodec> {
        let fill = array.fill_value().as_ne_bytes();
        let (&first, rest) = fill.split_first()?;
        if rest.iter().any(|&b| b != first) {
            return None;
        }
        let chain = ChainSpec::of(array);
        let shard = match chain.sharding() {
            None => None,
            Some(_) => {
                let r = chain.row_shards().filter(|r| r.index_at_end)?;
                Some(ShardSpec { inner_rows: r.inner_rows, index_crc32c: r.index_crc32c })
            }
        };
        let hand = chain.by_hand(fill.len())?;
        let level = match hand.zstd {
            Some((level, false)) => level,
            _ => return None,
        };
        Some(TailCodec { level, crc32c: hand.crc32c, fill: first, shard })
    }

    /// One full (inner) chunk, compressed as one frame.
    pub(super) fn encode_whole(&self, decoded: &[u8]) -> std::io::Result<Vec<u8>> {
        let mut out = chunk_bytes::zstd_encode(decoded, self.level, decoded.len(), true)?;
        if self.crc32c {
            chunk_bytes::push_crc32c(&mut out, 0);
        }
        Ok(out)
    }

    /// Decodes one encoded (inner) chunk of `size` bytes, checking its
    /// crc32c first.
    pub(super) fn decode(&self, encoded: &[u8], size: usize) -> std::result::Result<Vec<u8>, Fault> {
        let body = if self.crc32c { chunk_bytes::strip_crc32c(encoded)? } else { encoded };
        let out = chunk_bytes::zstd_decode(body, size).map_err(|e| Fault::Malformed(format!("zstd: {e}")))?;
        if out.len() != size {
            return Err(Fault::Malformed(format!("decodes to {} bytes, expected {size}", out.len())));
        }
        Ok(out)
    }
}

/// One array's tail chunk as last committed: its decoded rows (the chunk's
/// first rows, nothing past them) and the compressed head of the frame.
#[derive(Debug)]
pub(super) struct Tail {
    /// The (inner) chunk's index along dimension 0.
    chunk: u64,
    /// The array row its first row is.
    first_row: u64,
    /// The decoded bytes of the chunk's first rows.
    decoded: Vec<u8>,
    /// Frame header and compressed blocks of `decoded[..packed]`.
    head: Vec<u8>,
    packed: usize,
    /// Largest block this frame may hold.
    max_block: usize,
}

impl Tail {
    /// A tail of (inner) chunk `chunk` of `rows` rows holding `decoded`
    /// (its first rows); nothing compressed yet.
    fn new(chunk: u64, rows: u64, decoded: Vec<u8>) -> Tail {
        Tail { chunk, first_row: chunk * rows, decoded, head: Vec::new(), packed: 0, max_block: 0 }
    }

    /// Appends rows.
    fn extend(&mut self, rows: &[u8]) {
        self.decoded.extend_from_slice(rows);
    }

    /// The whole encoded chunk of `chunk_bytes` decoded bytes: the rows,
    /// then the fill byte. A full chunk is one ordinary compressed frame.
    fn encode(&mut self, codec: &TailCodec, chunk_bytes: usize) -> std::io::Result<Vec<u8>> {
        let n = self.decoded.len();
        if n > chunk_bytes {
            return Err(std::io::Error::other(format!("{n} tail bytes in a chunk of {chunk_bytes}")));
        }
        let mut out = if n == chunk_bytes {
            self.head.clear();
            self.packed = 0;
            chunk_bytes::zstd_encode(&self.decoded, codec.level, chunk_bytes, true)?
        } else {
            if self.head.is_empty() || n - self.packed > chunk_bytes / RAW_SHARE {
                self.head = chunk_bytes::zstd_encode(&self.decoded, codec.level, chunk_bytes, false)?;
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
            chunk_bytes::push_crc32c(&mut out, 0);
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
    Ok(window.clamp(1, MAX_BLOCK))
}

/// The tails this writer keeps (see the module docs): committed ones, and
/// those an append in progress has staged.
#[derive(Debug, Default)]
pub(super) struct Tails {
    committed: Mutex<HashMap<String, Tail>>,
    staged: Mutex<HashMap<String, Tail>>,
}

impl Tails {
    /// Takes the committed tail of array `rel` if it is chunk `chunk` with
    /// exactly `len` decoded bytes (else the caller reads the chunk).
    fn take(&self, rel: &str, chunk: u64, len: usize) -> Option<Tail> {
        let mut map = lock(&self.committed);
        let tail = map.remove(rel)?;
        (tail.chunk == chunk && tail.decoded.len() == len).then_some(tail)
    }

    /// The decoded bytes of rows `rows` of array `rel`, if its committed
    /// tail holds them (`row_bytes` per row).
    pub(super) fn rows(&self, rel: &str, rows: std::ops::Range<u64>, row_bytes: usize) -> Option<Vec<u8>> {
        let map = lock(&self.committed);
        let tail = map.get(rel)?;
        let (a, b) = (rows.start.checked_sub(tail.first_row)? as usize, rows.end.checked_sub(tail.first_row)? as usize);
        tail.decoded.get(a * row_bytes..b * row_bytes).map(<[u8]>::to_vec)
    }

    /// Stages the new tail of array `rel` (kept once the append commits).
    fn stage(&self, rel: &str, tail: Tail) {
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

/// One partly covered chunk (shard, for sharded arrays) of a row write.
pub(super) struct ChunkWrite<'a> {
    /// The array.
    pub(super) rel: &'a str,
    /// The chunk's grid indices.
    pub(super) idx: &'a [u64],
    /// Rows per chunk, and bytes per row.
    pub(super) rows: u64,
    pub(super) row_bytes: usize,
    /// The first row written, within the chunk.
    pub(super) start: u64,
}

impl AtomicDataZarrWriter {
    /// Writes `data`, the rows from `chunk.start` to the end of the array
    /// or of the chunk, into a chunk: a whole one compressed as one frame,
    /// a partly covered one through its kept tail (see the module docs).
    pub(super) fn write_tail(
        &self,
        a: &Array<Store>,
        chunk: &ChunkWrite<'_>,
        data: &[u8],
        codec: &TailCodec,
        store_empty: bool,
    ) -> Result<()> {
        if let Some(spec) = codec.shard {
            return self.write_shard_tail(a, chunk, data, codec, spec, store_empty);
        }
        let (rel, c) = (chunk.rel, chunk.idx[0]);
        let key = a.chunk_key(chunk.idx);
        let chunk_bytes = chunk.rows as usize * chunk.row_bytes;
        if chunk.start == 0 && data.len() == chunk_bytes {
            // A whole chunk: one frame, nothing kept.
            if !store_empty && data.iter().all(|&b| b == codec.fill) {
                return self.store.erase(&key).map_err(|e| Error::zarr(&self.path, rel, e));
            }
            let encoded = codec.encode_whole(data).map_err(|e| Error::zarr(&self.path, rel, e))?;
            return self.store.set(&key, encoded.into()).map_err(|e| Error::zarr(&self.path, rel, e));
        }
        let head = chunk.start as usize * chunk.row_bytes;
        let mut tail = match self.tails.take(rel, c, head) {
            Some(t) => t,
            None if chunk.start == 0 => Tail::new(c, chunk.rows, Vec::new()),
            None => {
                // Not kept (the first append to it since this writer opened
                // the store): its committed rows from the store. The whole
                // chunk is decoded, which checks its crc32c (zarrs' partial
                // decoders skip it), so corrupt bytes are refused, never
                // written back under a fresh checksum.
                let got: ArrayBytes<'static> =
                    a.retrieve_chunk_opt(chunk.idx, &CodecOptions::default()).map_err(arr_err(&self.path, rel))?;
                let mut raw = got.into_fixed().map_err(|e| Error::zarr(&self.path, rel, e))?.into_owned();
                raw.truncate(head);
                Tail::new(c, chunk.rows, raw)
            }
        };
        tail.extend(data);
        let encoded = tail.encode(codec, chunk_bytes).map_err(|e| Error::zarr(&self.path, rel, e))?;
        if !store_empty && tail.decoded.iter().all(|&b| b == codec.fill) {
            // As zarrs does with a chunk of fill values: no file.
            self.store.erase(&key).map_err(|e| Error::zarr(&self.path, rel, e))?;
        } else {
            self.store.set(&key, encoded.into()).map_err(|e| Error::zarr(&self.path, rel, e))?;
        }
        if tail.decoded.len() < chunk_bytes {
            self.tails.stage(rel, tail);
        }
        Ok(())
    }

    /// [`write_tail`](Self::write_tail) for a shard: the inner chunks the
    /// rows touch encoded through the kept tail, the others' bytes copied
    /// from the old shard file.
    fn write_shard_tail(
        &self,
        a: &Array<Store>,
        chunk: &ChunkWrite<'_>,
        data: &[u8],
        codec: &TailCodec,
        spec: ShardSpec,
        store_empty: bool,
    ) -> Result<()> {
        let (rel, shard) = (chunk.rel, chunk.idx[0]);
        let per_shard = chunk.rows / spec.inner_rows;
        let inner_bytes = spec.inner_rows as usize * chunk.row_bytes;
        let key = a.chunk_key(chunk.idx);
        let old = self.store.get(&key).map_err(|e| Error::zarr(&self.path, rel, e))?;
        let bad = |inner: u64, why: Fault| {
            let (store, array, chunk) = (self.path.clone(), rel.to_string(), shard * per_shard + inner);
            match why {
                Fault::Checksum(reason) => Error::Checksum { store: store.into(), array, chunk, reason },
                Fault::Malformed(reason) => Error::Chunk { store: store.into(), array, chunk, reason },
            }
        };
        let index = match &old {
            None => vec![MISSING; per_shard as usize],
            Some(bytes) => parse_index(bytes, per_shard, spec.index_crc32c).map_err(|why| bad(0, why))?,
        };
        let stored = |k: u64| -> Option<&[u8]> {
            let (offset, size) = index[k as usize];
            let bytes = old.as_deref()?;
            ((offset, size) != MISSING).then(|| &bytes[offset as usize..(offset + size) as usize])
        };
        // The inner chunks the rows touch, encoded anew.
        let rows = (data.len() / chunk.row_bytes) as u64;
        let (lo, hi) = (chunk.start, chunk.start + rows);
        // In parallel: a large write fills many inner chunks of its last
        // shard, each compressed whole.
        let touched: Vec<u64> = (lo / spec.inner_rows..=(hi - 1) / spec.inner_rows).collect();
        let fresh: BTreeMap<u64, Option<Vec<u8>>> = touched
            .par_iter()
            .map(|&k| -> Result<(u64, Option<Vec<u8>>)> {
                let (from, to) = (lo.max(k * spec.inner_rows), hi.min((k + 1) * spec.inner_rows));
                let part = &data[((from - lo) as usize) * chunk.row_bytes..((to - lo) as usize) * chunk.row_bytes];
                let empty = |rows: &[u8]| !store_empty && rows.iter().all(|&b| b == codec.fill);
                if part.len() == inner_bytes {
                    let encoded = codec.encode_whole(part).map_err(|e| Error::zarr(&self.path, rel, e))?;
                    return Ok((k, (!empty(part)).then_some(encoded)));
                }
                let start = (from - k * spec.inner_rows) as usize * chunk.row_bytes;
                let global = shard * per_shard + k;
                let mut tail = match self.tails.take(rel, global, start) {
                    Some(t) => t,
                    None if start == 0 => Tail::new(global, spec.inner_rows, Vec::new()),
                    None => {
                        // As for unsharded chunks: decoded whole, crc32c checked.
                        let mut decoded = match stored(k) {
                            Some(enc) => codec.decode(enc, inner_bytes).map_err(|why| bad(k, why))?,
                            None => vec![codec.fill; inner_bytes],
                        };
                        decoded.truncate(start);
                        Tail::new(global, spec.inner_rows, decoded)
                    }
                };
                tail.extend(part);
                let encoded = tail.encode(codec, inner_bytes).map_err(|e| Error::zarr(&self.path, rel, e))?;
                let kept = (!empty(&tail.decoded)).then_some(encoded);
                if tail.decoded.len() < inner_bytes {
                    self.tails.stage(rel, tail);
                }
                Ok((k, kept))
            })
            .collect::<Result<_>>()?;
        let capacity = old.as_ref().map_or(0, |b| b.len()) + data.len();
        match shard_file(per_shard, &fresh, stored, spec.index_crc32c, capacity) {
            Some(out) => self.store.set(&key, out.into()).map_err(|e| Error::zarr(&self.path, rel, e)),
            None => self.store.erase(&key).map_err(|e| Error::zarr(&self.path, rel, e)),
        }
    }
}

/// A shard file: its inner chunks in order, each the `fresh` one (`None`:
/// absent) or else the `stored` one, then the index (with its crc32c when
/// `index_crc32c`). `None` when every inner chunk is absent. `capacity` is
/// the expected size, less the index.
pub(super) fn shard_file<'a>(
    per_shard: u64,
    fresh: &'a BTreeMap<u64, Option<Vec<u8>>>,
    stored: impl Fn(u64) -> Option<&'a [u8]>,
    index_crc32c: bool,
    capacity: usize,
) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(capacity + 64);
    let mut entries = Vec::with_capacity(per_shard as usize);
    for k in 0..per_shard {
        let bytes = match fresh.get(&k) {
            Some(new) => new.as_deref(),
            None => stored(k),
        };
        entries.push(match bytes {
            Some(b) => {
                let at = out.len() as u64;
                out.extend_from_slice(b);
                (at, b.len() as u64)
            }
            None => MISSING,
        });
    }
    if entries.iter().all(|&e| e == MISSING) {
        return None;
    }
    let index_at = out.len();
    for (offset, size) in &entries {
        out.extend_from_slice(&offset.to_le_bytes());
        out.extend_from_slice(&size.to_le_bytes());
    }
    if index_crc32c {
        chunk_bytes::push_crc32c(&mut out, index_at);
    }
    Some(out)
}

/// A shard file's index (at its end): `(offset, size)` per inner chunk,
/// checked against its crc32c and the file's data bytes.
pub(super) fn parse_index(file: &[u8], per_shard: u64, crc: bool) -> std::result::Result<Vec<(u64, u64)>, Fault> {
    let len = chunk_bytes::shard_index_len(per_shard, crc);
    let Some(data_end) = (file.len() as u64).checked_sub(len) else {
        return Err(Fault::Malformed(format!("shard file of {} bytes, shorter than its {len}-byte index", file.len())));
    };
    chunk_bytes::parse_shard_index(&file[data_end as usize..], per_shard, crc, 0..data_end).map_err(|fault| match fault
    {
        Fault::Checksum(m) => Fault::Checksum(format!("shard index: {m}")),
        Fault::Malformed(m) => Fault::Malformed(format!("shard index: {m}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codec(crc32c: bool) -> TailCodec {
        TailCodec { level: 3, crc32c, fill: 0, shard: None }
    }

    fn decode(encoded: &[u8], crc: bool, size: usize) -> Vec<u8> {
        let body = if crc { chunk_bytes::strip_crc32c(encoded).expect("crc32c of the frame") } else { encoded };
        chunk_bytes::zstd_decode(body, size).unwrap()
    }

    #[test]
    fn appended_rows_read_back_through_libzstd_at_every_size() {
        // Rows that compress and rows that do not; chunks smaller than a
        // block and larger than several; appends crossing the repack point.
        for chunk_bytes in [48usize, 1000, 300_000, 1 << 20] {
            for crc in [false, true] {
                let mut want: Vec<u8> = Vec::new();
                let mut tail = Tail::new(0, 1, Vec::new());
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
        let mut tail = Tail::new(0, 1, rows[..400_000].to_vec());
        let first = tail.encode(&codec(true), chunk_bytes).unwrap().len();
        tail.extend(&rows[400_000..401_200]);
        let second = tail.encode(&codec(true), chunk_bytes).unwrap().len();
        assert!(second <= first + 1200 + 8, "{first} -> {second}");
        assert!(second >= first + 1200, "the new rows are stored raw: {first} -> {second}");
    }
}
