//! Remote stores: the chunks a request needs, fetched with many requests in
//! flight and decoded as they arrive.
//!
//! Each request to object storage or an HTTP server costs a round trip
//! (milliseconds), so a remote read fetching one inner chunk at a time is
//! bound by latency. The planner already knows every chunk a request needs:
//! this module reads the shard indexes it lacks (once per shard, then
//! cached, all at once), merges the byte ranges of neighbouring inner
//! chunks of one shard into one request when the gap between them is at most
//! the source's [`merge_gap`](crate::store::bytes::ByteSource::merge_gap),
//! hands the requests to [`ByteSource::fetch_many`] (which keeps up to its
//! concurrency in flight), and decodes each chunk on rayon as soon as its
//! bytes arrive.

use std::ops::Range;
use std::sync::{OnceLock, mpsc};

use super::direct::{Located, ShardLayout};
use super::{ChunkSource, FieldArray};
use crate::error::{Error, Result};
use crate::store::bytes::{Bytes, RangeRequest};
use crate::store::reader::cache::{ChunkBuf, ChunkBytes};

/// What becomes of a decoded chunk: `(field, chunk, bytes)` to the chunk
/// as a request keeps it (`None`: the array turned wide-only).
pub(crate) type Keep<'a> = dyn Fn(usize, u64, ChunkBuf) -> Result<Option<ChunkBytes>> + Sync + 'a;

/// Largest merged request (bytes): merging stops here, so one response
/// never holds a whole large shard.
const MAX_MERGED: u64 = 64 << 20;

/// Per request, the slots it serves and their bytes in its response
/// (`None`: the whole response).
pub(super) type Parts = Vec<Vec<(usize, Option<Range<usize>>)>>;

/// A merged request being built: key, start, end, and its members (slot, start, end).
type Open<'a> = (&'a str, u64, u64, Vec<(usize, u64, u64)>);

/// The requests for `located` chunks (slots): ranged reads of one object
/// merged when at most `gap` bytes apart (never when `gap` is `None`). Returns the requests and, per
/// request, the slots it serves with their bytes in its response (`None`:
/// the whole response).
pub(super) fn merge(located: &[(usize, &Located)], gap: Option<u64>) -> (Vec<RangeRequest>, Parts) {
    let mut requests = Vec::new();
    let mut parts: Parts = Vec::new();
    let mut ranged: Vec<(&str, u64, u64, usize)> = Vec::new();
    for &(slot, loc) in located {
        match loc {
            Located::At { key, range: Some(r) } => ranged.push((key, r.start, r.end, slot)),
            Located::At { key, range: None } => {
                requests.push(RangeRequest { key: key.clone(), range: None });
                parts.push(vec![(slot, None)]);
            }
            Located::Elsewhere => {}
        }
    }
    ranged.sort_unstable();
    let mut open: Option<Open<'_>> = None;
    let mut close = |o: Open<'_>| {
        let (key, start, end, members) = o;
        requests.push(RangeRequest { key: key.to_string(), range: Some(start..end) });
        parts.push(
            members.into_iter().map(|(slot, s, e)| (slot, Some((s - start) as usize..(e - start) as usize))).collect(),
        );
    };
    for (key, s, e, slot) in ranged {
        match &mut open {
            Some((k, start, end, members))
                if gap.is_some_and(|gap| {
                    *k == key && s <= end.saturating_add(gap) && e.max(*end) - *start <= MAX_MERGED
                }) =>
            {
                *end = (*end).max(e);
                members.push((slot, s, e));
            }
            _ => {
                if let Some(o) = open.take() {
                    close(o);
                }
                open = Some((key, s, e, vec![(slot, s, e)]));
            }
        }
    }
    if let Some(o) = open.take() {
        close(o);
    }
    (requests, parts)
}

/// The result of one wanted chunk, as `decode_chunk_as` returns it.
type Slot = OnceLock<Result<Option<ChunkBytes>>>;

/// One `fetch_and_decode` call: what it wants, where each chunk lies, and
/// a result slot per wanted chunk, filled from rayon jobs.
struct Fetch<'a> {
    src: &'a ChunkSource,
    fields: &'a [FieldArray],
    wanted: &'a [(usize, u64)],
    /// What becomes of a decoded chunk (field, chunk, bytes): the
    /// request's checks, width and cache (see `decode::keep_decoded`).
    keep: &'a Keep<'a>,
    located: Vec<Located>,
    results: Vec<Slot>,
}

impl Fetch<'_> {
    fn set(&self, slot: usize, r: Result<Option<ChunkBytes>>) {
        let _ = self.results[slot].set(r);
    }

    /// Decodes `slot` through zarrs (fill values, layouts the direct path
    /// does not read).
    fn decode_through_zarrs(&self, slot: usize) {
        let (fi, c) = self.wanted[slot];
        let f = &self.fields[fi];
        let r = self.src.decode_raw(f, c).and_then(|raw| (self.keep)(fi, c, raw));
        self.set(slot, r);
    }

    /// Decodes the encoded bytes of `slot`.
    fn decode(&self, slot: usize, encoded: Bytes) {
        let (fi, c) = self.wanted[slot];
        let f = &self.fields[fi];
        let expected = f.chunk_bytes() as usize;
        let r = self
            .src
            .decode_encoded(f, c, &encoded, expected)
            .and_then(|raw| self.src.check_len(f, c, raw))
            .and_then(|raw| (self.keep)(fi, c, raw));
        self.set(slot, r);
    }

    /// The error of the chunk in `slot`.
    fn chunk_error(&self, slot: usize, why: String) -> Error {
        let (fi, c) = self.wanted[slot];
        self.src.chunk_error(&self.fields[fi], c, why)
    }

    /// Hands the response `got` to request `key` to a decode job per member
    /// chunk (`members`: slot and bytes in the response). An error fails
    /// the whole fetch.
    fn deliver<'s>(
        &'s self,
        s: &rayon::Scope<'s>,
        key: &str,
        members: &'s [(usize, Option<Range<usize>>)],
        got: Result<Option<Bytes>>,
    ) -> Result<()> {
        let bytes = match got {
            Ok(Some(b)) => b,
            Ok(None) if members.iter().all(|(_, sub)| sub.is_none()) => {
                // An unsharded chunk never written: its fill value, through zarrs.
                for &(slot, _) in members {
                    s.spawn(move |_| self.decode_through_zarrs(slot));
                }
                return Ok(());
            }
            Ok(None) => return Err(self.chunk_error(members[0].0, format!("object {key} vanished"))),
            Err(e) => {
                let (fi, c) = self.wanted[members[0].0];
                return Err(self.src.read_error(&self.fields[fi], c, e));
            }
        };
        for (slot, sub) in members.iter().cloned() {
            let part = match sub {
                None => bytes.clone(),
                Some(r) if r.end <= bytes.len() => bytes.slice(r),
                Some(r) => {
                    let why = format!("{} bytes received from {key}, the chunk ends at {}", bytes.len(), r.end);
                    self.set(slot, Err(self.chunk_error(slot, why)));
                    continue;
                }
            };
            s.spawn(move |_| {
                if let Located::At { key, range } = &self.located[slot] {
                    self.src.bytes.keep(key, range.as_ref(), &part);
                }
                self.decode(slot, part)
            });
        }
        Ok(())
    }
}

/// Decodes chunks `wanted` ((field, chunk) pairs of `fields`) of a remote
/// store as described in the module docs, each handed to `keep`. One entry
/// per wanted chunk, as `keep` returns it (`None`: the array turned
/// wide-only).
pub(crate) fn fetch_and_decode(
    src: &ChunkSource,
    fields: &[FieldArray],
    wanted: &[(usize, u64)],
    keep: &Keep<'_>,
) -> Result<Vec<Option<ChunkBytes>>> {
    read_shard_indexes(src, fields, wanted)?;
    // Every index is cached now: locating makes no request.
    let located: Vec<Located> = wanted.iter().map(|&(fi, c)| src.locate(&fields[fi], c)).collect::<Result<_>>()?;
    let job = Fetch { src, fields, wanted, keep, located, results: wanted.iter().map(|_| Slot::new()).collect() };
    // Chunks the source's disk cache holds are decoded without a request.
    let mut held: Vec<(usize, Bytes)> = Vec::new();
    let mut slots: Vec<(usize, &Located)> = Vec::with_capacity(job.located.len());
    for (slot, loc) in job.located.iter().enumerate() {
        if let Located::At { key, range } = loc
            && let Some(b) = src.bytes.cached(key, range.as_ref())
        {
            held.push((slot, b));
            continue;
        }
        slots.push((slot, loc));
    }
    let (requests, parts) = merge(&slots, src.bytes.merge_gap());
    let mut failure: Option<Error> = None;
    rayon::in_place_scope(|s| {
        let job = &job;
        // Chunks the direct path does not read go through zarrs meanwhile.
        for (slot, loc) in job.located.iter().enumerate() {
            if *loc == Located::Elsewhere {
                s.spawn(move |_| job.decode_through_zarrs(slot));
            }
        }
        for (slot, b) in held {
            s.spawn(move |_| job.decode(slot, b));
        }
        let (tx, rx) = mpsc::channel();
        let keys: Vec<String> = requests.iter().map(|r| r.key.clone()).collect();
        src.bytes.fetch_many(requests, tx);
        for (ri, got) in rx {
            if let Err(e) = job.deliver(s, &keys[ri], &parts[ri], got) {
                failure = Some(e);
                break;
            }
        }
    });
    if let Some(e) = failure {
        return Err(e);
    }
    job.results
        .into_iter()
        .map(|r| r.into_inner().unwrap_or_else(|| Err(Error::Internal("remote fetch left a chunk undecoded".into()))))
        .collect()
}

/// Reads the shard indexes `wanted` needs that are not cached yet, up to
/// the source's concurrency at a time (each is one suffix request).
fn read_shard_indexes(src: &ChunkSource, fields: &[FieldArray], wanted: &[(usize, u64)]) -> Result<()> {
    let mut shards: Vec<(usize, u64)> = wanted
        .iter()
        .filter_map(|&(fi, c)| {
            let f = &fields[fi];
            let (shard, _) = f.direct.as_ref()?.shard_of(c)?;
            let known = f.shard_indexes.lock().unwrap_or_else(std::sync::PoisonError::into_inner).contains_key(&shard);
            (!known).then_some((fi, c))
        })
        .collect();
    shards.sort_unstable();
    shards.dedup_by_key(|&mut (fi, c)| (fi, fields[fi].direct.as_ref().and_then(|d| d.shard_of(c)).map(|s| s.0)));
    if shards.is_empty() {
        return Ok(());
    }
    // Indexes at the end of their shard: one suffix request each, all
    // in flight together; any other layout one at a time.
    let mut suffixes: Vec<(usize, u64, ShardLayout)> = Vec::new();
    for &(fi, c) in &shards {
        let f = &fields[fi];
        let Some((shard, layout)) = f.direct.as_ref().and_then(|d| d.shard_of(c)) else { continue };
        if layout.index_at_end() {
            suffixes.push((fi, shard, layout));
        } else {
            src.shard_index(f, shard, layout)?;
        }
    }
    let requests: Vec<(String, u64)> =
        suffixes.iter().map(|&(fi, shard, layout)| (src.shard_key(&fields[fi], shard), layout.index_len())).collect();
    let found = src.bytes.get_suffixes(&requests);
    for ((fi, shard, layout), got) in suffixes.into_iter().zip(found) {
        let f = &fields[fi];
        let got = got.map_err(|e| src.read_error(f, shard * layout.inner_per_shard(), e))?;
        src.parse_shard_index(f, shard, layout, got)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(key: &str, r: Range<u64>) -> Located {
        Located::At { key: key.into(), range: Some(r) }
    }

    #[test]
    fn merges_neighbours_within_the_gap_only() {
        let l = [at("s/0", 100..200), at("s/0", 0..100), at("s/0", 250..300), at("t/0", 300..310), Located::Elsewhere];
        let slots: Vec<(usize, &Located)> = l.iter().enumerate().collect();
        let (req, parts) = merge(&slots, Some(0));
        let ranges: Vec<_> = req.iter().map(|r| (r.key.as_str(), r.range.clone().unwrap())).collect();
        assert_eq!(ranges, vec![("s/0", 0..200), ("s/0", 250..300), ("t/0", 300..310)]);
        assert_eq!(parts[0], vec![(1, Some(0..100)), (0, Some(100..200))]);
        let (req, parts) = merge(&slots, Some(50));
        assert_eq!(merge(&slots, None).0.len(), 4, "no merging: one request per chunk");
        assert_eq!(req.len(), 2, "a 50-byte gap is bridged, another object never");
        assert_eq!(parts[0], vec![(1, Some(0..100)), (0, Some(100..200)), (2, Some(250..300))]);
        let whole = [Located::At { key: "c/0".into(), range: None }];
        let (req, parts) = merge(&[(0, &whole[0])], Some(1 << 20));
        assert_eq!((req[0].range.clone(), parts[0].clone()), (None, vec![(0, None)]));
    }
}
