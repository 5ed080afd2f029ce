//! Decoding the chunks a request needs: each once, in parallel over
//! (array, chunk), through the chunk source's cache, checked (neighbor
//! indices), narrowed to int32 when the request asks for it, and kept in a
//! compact form where one fits.

use std::sync::Arc;

use rayon::prelude::*;

use super::State;
use super::cache::{ArrayKey, Chunk, ChunkBuf, ChunkBytes, Width};
use super::chunks::{ChunkSource, FieldArray};
use super::compact::{self, Form};
use super::plan::{BatchRows, Needed};
use super::pointers::EdgeRun;
use crate::data::{CollateOptions, DType, HostData, NEIGHBOR_LIST};
use crate::error::{Error, Result};

/// Decodes one inner chunk of `f` in `width` and offers it to the cache.
/// `Ok(None)`: a value did not fit int32 (the array is then marked
/// wide-only; the read takes it as stored from then on).
///
/// Why narrow the cached chunk rather than each batch: narrowing costs
/// several instructions per value at the baseline x86-64 target, and done
/// per batch it slowed a warm epoch by ~15%; done here it runs once per
/// chunk, and the cached chunk is half the size.
fn decode_chunk_as(
    src: &ChunkSource,
    st: &State,
    f: &FieldArray,
    chunk: u64,
    width: Width,
) -> Result<Option<ChunkBytes>> {
    let raw = src.decode_raw(f, chunk)?;
    keep_decoded(src, st, f, chunk, width, raw)
}

/// A freshly decoded chunk of `f`, its neighbor indices checked, in
/// `width` and offered to the cache (see
/// [`Self::decode_chunk_as`]).
pub(super) fn keep_decoded(
    src: &ChunkSource,
    st: &State,
    f: &FieldArray,
    chunk: u64,
    width: Width,
    raw: ChunkBuf,
) -> Result<Option<ChunkBytes>> {
    // Counted here, on the read path (local or fetched), not in
    // `decode_raw`, which the decode floor also calls.
    src.cache.count_decode(raw.len() as u64);
    // The samples of a neighbor chunk, for its check and compact form.
    let runs = if f.name == NEIGHBOR_LIST { st.pointers.edge_runs(src, f.chunk_rows, chunk)? } else { Vec::new() };
    super::neighbors::verify_neighbors(st, f, &runs, &raw);
    if let Some(c) = compact(src, f, &runs, width, &raw) {
        let c = Arc::new(c);
        src.cache.insert(ArrayKey { array: f.id, width }, chunk, c.clone());
        return Ok(Some(c));
    }
    if width == Width::Stored {
        let raw = Arc::new(Chunk::plain(raw));
        src.cache.insert(f.id, chunk, raw.clone());
        return Ok(Some(raw));
    }
    // The wide chunk's block goes back to the chunk memory for the next decode.
    let mut narrow = src.cache.alloc(raw.len() / 2);
    match HostData::narrow_i64_into(&raw, &mut narrow) {
        true => {
            let narrow = Arc::new(Chunk::plain(narrow));
            src.cache.insert(ArrayKey { array: f.id, width: Width::Int32 }, chunk, narrow.clone());
            Ok(Some(narrow))
        }
        false => {
            if !f.wide_only.swap(true, std::sync::atomic::Ordering::Relaxed) {
                log::info!(
                    "{}, array {}: chunk {chunk} holds a value outside int32; the array is read as int64 from now on",
                    src.location,
                    f.rel
                );
            }
            src.cache.insert(f.id, chunk, Arc::new(Chunk::plain(raw)));
            Ok(None)
        }
    }
}

/// Freshly decoded chunk `chunk` of `f` in a compact form (see
/// `compact`), if its values allow one: `neighbor_list` (int64) as
/// sample-local int16 receivers and sender runs, else as sample-local
/// int16 pairs, other fields as a dictionary of at most 2,048
/// distinct rows (its table narrowed to int32 for a narrowed request).
fn compact(src: &ChunkSource, f: &FieldArray, runs: &[EdgeRun], width: Width, raw: &[u8]) -> Option<Chunk> {
    let narrowed = width == Width::Int32;
    if f.name == NEIGHBOR_LIST {
        if f.dtype != DType::Int64 {
            return None;
        }
        let runs = || runs.iter().map(|r| (r.atoms.start as i64, r.rows.clone()));
        if f.row_elems == 2
            && let Some(c) = compact::pairs16(raw, runs(), src.cache.alloc(raw.len() / 8))
        {
            return Some(c);
        }
        return compact::local16(raw, f.row_elems, runs(), src.cache.alloc(raw.len() / 4));
    }
    // Dictionaries pay off on chunks of many rows; a system chunk of a
    // small store is not worth the pass.
    if f.chunk_rows < 1024 || f.row_bytes > 16 || (narrowed && f.dtype != DType::Int64) {
        return None;
    }
    let mut c = compact::dict(raw, f.dtype, f.row_bytes, |n| src.cache.alloc(n))?;
    if narrowed {
        let Form::Dict { table, .. } = &mut c.form else { return None };
        let HostData::Int64(wide) = table else { return None };
        *table = HostData::Int32(crate::data::narrow_i64(wide)?);
    }
    Some(c)
}

/// Decodes every chunk of `st` that holds rows, in parallel, without
/// the cache (see `AtomicDataZarrReader::decode_every_chunk`).
pub(super) fn decode_all(src: &ChunkSource, st: &State) -> Result<crate::source::DecodeCounters> {
    let tasks: Vec<(usize, u64)> = st
        .fields
        .iter()
        .enumerate()
        .filter(|(_, f)| f.row_bytes > 0)
        .flat_map(|(fi, f)| {
            let rows = st.rows_of(f.level);
            (0..rows.div_ceil(f.chunk_rows.max(1))).map(move |c| (fi, c))
        })
        .collect();
    let sizes: Vec<u64> = tasks
        .par_iter()
        .map(|&(fi, c)| src.decode_raw(&st.fields[fi], c).map(|raw| raw.len() as u64))
        .collect::<Result<_>>()?;
    Ok(crate::source::DecodeCounters {
        decoded_bytes: sizes.iter().sum(),
        sample_bytes: 0,
        chunks_decoded: sizes.len() as u64,
    })
}

/// Decodes every chunk the samples of `rows` need, once each, in
/// parallel over (array, chunk), for a read laid out as `opts` with no
/// bound on what it holds. Returns, per field, its sorted chunk ids and
/// bytes.
pub(super) fn decode_needed(
    src: &ChunkSource,
    st: &State,
    rows: &BatchRows<'_>,
    opts: CollateOptions,
) -> Result<Vec<Decoded>> {
    let mut need = Needed::of(st, rows, opts);
    loop {
        match decode(src, st, &mut need, u64::MAX, rows.sample_bytes(st))? {
            Decode::Done(dec) => return Ok(dec),
            // An array turned out not to fit int32: read it as stored.
            Decode::Widened => need.widths = super::plan::widths(st, opts),
            Decode::OverBound => {
                return Err(Error::Internal("a read without a decode bound refused its decode".into()));
            }
        }
    }
}

/// Decodes the chunks of `need`, through the cache. Cached chunks cost
/// nothing more to hold, and neither do those the cache has room to
/// keep; when the rest would decode to more than `bound` bytes the read
/// is [`Decode::OverBound`] and nothing is decoded (the caller reads
/// fewer batches at a time). The first window of a shuffled epoch over
/// a store that fits the cache decodes the whole store at once: read in
/// groups it would copy one batch at a time while the other cores wait.
/// `sample_bytes`: the request's bytes of samples, for the decode
/// counters.
/// On [`Decode::Done`] the chunk ids are moved out of `need` into the
/// result.
pub(super) fn decode(
    src: &ChunkSource,
    st: &State,
    need: &mut Needed,
    bound: u64,
    sample_bytes: u64,
) -> Result<Decode> {
    let tasks: Vec<(usize, u64)> =
        need.chunks.iter().enumerate().flat_map(|(fi, ids)| ids.iter().map(move |&c| (fi, c))).collect();
    // Cache lookups first, on this thread: only decodes are worth rayon's
    // hand-off, and a request whose chunks are all cached (a warm epoch,
    // or `read(i)` one sample at a time) then wakes no worker at all.
    let mut found: Vec<Option<ChunkBytes>> =
        tasks.iter().map(|&(fi, c)| src.cached(&st.fields[fi], c, need.widths[fi])).collect();
    let missing: Vec<usize> = (0..tasks.len()).filter(|&i| found[i].is_none()).collect();
    let missing_bytes: u64 = missing.iter().map(|&i| st.fields[tasks[i].0].chunk_bytes()).fold(0, u64::saturating_add);
    // The cache's room only matters past the bound (reading it takes the
    // cache's lock, which a warm window need not).
    if missing_bytes > bound && missing_bytes - bound > src.cache.room() {
        return Ok(Decode::OverBound);
    }
    let decode = |&i: &usize| decode_chunk_as(src, st, &st.fields[tasks[i].0], tasks[i].1, need.widths[tasks[i].0]);
    let decoded: Vec<Option<ChunkBytes>> = if src.bytes.is_remote() && !missing.is_empty() {
        // Round trips, not decoding, bound a remote read: see `fetch`.
        let wanted: Vec<(usize, u64)> = missing.iter().map(|&i| tasks[i]).collect();
        let widths = &need.widths;
        let keep = |fi: usize, c: u64, raw: ChunkBuf| keep_decoded(src, st, &st.fields[fi], c, widths[fi], raw);
        super::chunks::fetch_and_decode(src, &st.fields, &wanted, &keep)?
    } else if missing.len() > 1 {
        missing.par_iter().map(decode).collect::<Result<_>>()?
    } else {
        missing.iter().map(decode).collect::<Result<_>>()?
    };
    if decoded.iter().any(Option::is_none) {
        // An array turned out not to fit int32 and is now wide-only
        // (everything decoded so far is cached).
        return Ok(Decode::Widened);
    }
    for (i, b) in missing.into_iter().zip(decoded) {
        found[i] = b;
    }
    // Every slot is filled (hits above, misses just now); a gap would be a
    // bug here, reported rather than misaligning the split below.
    let mut results: Vec<ChunkBytes> = found
        .into_iter()
        .map(|b| b.ok_or_else(|| Error::Internal("read plan left a chunk undecoded".into())))
        .collect::<Result<_>>()?;
    let mut out = Vec::with_capacity(need.chunks.len());
    for (ids, &width) in need.chunks.iter_mut().zip(&need.widths).rev() {
        let bytes = results.split_off(results.len() - ids.len());
        out.push(Decoded::new(std::mem::take(ids), bytes, width));
    }
    out.reverse();
    src.cache.count_request(sample_bytes);
    Ok(Decode::Done(out))
}

/// What [`decode`] did.
pub(super) enum Decode {
    /// Every chunk decoded (or found cached): per field, its chunk ids and bytes.
    Done(Vec<Decoded>),
    /// The chunks the cache does not hold are over the bound and over the
    /// cache's room: nothing decoded.
    OverBound,
    /// An array asked for as int32 holds a value outside int32 and is read
    /// as stored from now on: the request's widths must be made again.
    Widened,
}

/// The decoded chunks of one array for one request.
pub(super) struct Decoded {
    ids: Vec<u64>,
    bytes: Vec<ChunkBytes>,
    /// `ids[0]` and, for each chunk id from it, the chunk's place in
    /// `bytes` (`u32::MAX`: not in this request); empty when the ids are
    /// too sparse for a table. A shuffled window holds hundreds of chunks of
    /// an array and looks one up twice per sample: a binary search there
    /// cost more than the copy.
    table: (u64, Vec<u32>),
    /// The width the chunks were read in.
    pub(super) width: Width,
}

/// Chunks a request holds below which a binary search is as fast as a table.
const TABLE_FROM: usize = 8;

impl Decoded {
    fn new(ids: Vec<u64>, bytes: Vec<ChunkBytes>, width: Width) -> Decoded {
        let mut table = (0, Vec::new());
        if let (Some(&lo), Some(&hi)) = (ids.first(), ids.last()) {
            let span = (hi - lo) as usize + 1;
            // At most four slots per chunk held (and ids fit u32 places).
            if ids.len() >= TABLE_FROM && span <= 4 * ids.len() && ids.len() < u32::MAX as usize {
                let mut slots = vec![u32::MAX; span];
                for (at, &c) in ids.iter().enumerate() {
                    slots[(c - lo) as usize] = at as u32;
                }
                table = (lo, slots);
            }
        }
        Decoded { ids, bytes, table, width }
    }

    #[inline]
    pub(super) fn get(&self, chunk: u64) -> Option<&ChunkBytes> {
        let (lo, slots) = &self.table;
        if !slots.is_empty() {
            let at = *slots.get(usize::try_from(chunk.checked_sub(*lo)?).ok()?)?;
            return self.bytes.get(at as usize);
        }
        self.ids.binary_search(&chunk).ok().map(|i| &self.bytes[i])
    }
}
