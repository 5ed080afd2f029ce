//! Rows set to zero where they are, grouped by chunk: every chunk (every
//! shard, for sharded arrays) that holds some of the rows is read, decoded,
//! zeroed, encoded and written once, however many row ranges fall in it.
//! `delete` zeroes its samples' mask entries and field rows this way, so
//! its cost follows the chunks it touches, not the samples it deletes.
//!
//! Chunks go through the encoders an append uses. Chains the writer encodes
//! by hand (`tail`: `bytes` + `zstd` [+ `crc32c`], row shards) are decoded
//! and compressed here, with one zstd context per thread; a shard's inner
//! chunks that hold none of the rows are copied into its new file byte for
//! byte. Any other chain goes through zarrs, one array subset per chunk. So
//! every rewritten chunk carries its crc32c when its chain ends in one, and
//! a chunk whose checksum fails is refused, never written back under a
//! fresh checksum.
//!
//! Chunks are separate files, so they are rewritten in parallel (rayon):
//! inside a transaction a write only stages a temporary file, with no
//! fsync, so no rayon worker waits on the disk here.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use rayon::prelude::*;
use zarrs::array::{Array, ArrayBytes, CodecOptions};
use zarrs::storage::{ReadableStorageTraits, WritableStorageTraits};

use super::tail::{self, ShardSpec, TailCodec};
use super::{AtomicDataZarrWriter, arr_err};
use crate::error::{Error, Result};
use crate::store::arrays;
use crate::store::chunk_bytes::{Fault, MISSING};
use crate::store::codec::ChainSpec;
use crate::store::durable::Store;

/// One array whose rows are zeroed, and how its chunks are rewritten.
struct Zeroing {
    rel: String,
    array: Array<Store>,
    /// Bytes per row (every trailing dimension).
    row_bytes: usize,
    /// Rows per chunk along dimension 0 (per shard, when sharded).
    chunk_rows: u64,
    /// The hand encoding, where the chain has one and a chunk holds whole rows.
    hand: Option<TailCodec>,
    /// Chunks of fill values are written (else removed, as zarrs does).
    store_empty: bool,
}

/// Rows `rows` (sorted, disjoint) cut at chunk boundaries: each chunk that
/// holds some of them, with its rows counted from the chunk's first row.
pub(super) fn by_chunk(rows: &[Range<u64>], chunk_rows: u64) -> Vec<(u64, Vec<Range<u64>>)> {
    let mut out: Vec<(u64, Vec<Range<u64>>)> = Vec::new();
    for r in rows {
        let mut lo = r.start;
        while lo < r.end {
            let c = lo / chunk_rows;
            let hi = r.end.min((c + 1) * chunk_rows);
            let local = lo - c * chunk_rows..hi - c * chunk_rows;
            match out.last_mut() {
                Some((last, ranges)) if *last == c => ranges.push(local),
                _ => out.push((c, vec![local])),
            }
            lo = hi;
        }
    }
    out
}

/// Zeroes `rows` (counted from the start of `bytes`) of `row_bytes` each.
fn zero(bytes: &mut [u8], rows: &[Range<u64>], row_bytes: usize) {
    for r in rows {
        bytes[r.start as usize * row_bytes..r.end as usize * row_bytes].fill(0);
    }
}

impl AtomicDataZarrWriter {
    /// Sets rows to zero in several arrays of `store` (this store, or the
    /// copy of its `meta/` a delete commits its masks with): for each
    /// `(array, rows)`, `rows` sorted and disjoint. Every touched chunk is
    /// rewritten once; the writes are staged in `store`'s open transaction.
    pub(super) fn zero_rows(&self, store: &Arc<Store>, arrays: &[(&str, &[Range<u64>])]) -> Result<()> {
        let mut plans = Vec::new();
        let mut jobs: Vec<(usize, u64, Vec<Range<u64>>)> = Vec::new();
        for &(rel, rows) in arrays {
            if rows.iter().all(|r| r.is_empty()) {
                continue;
            }
            let plan = self.zeroing(store, rel)?;
            if plan.row_bytes == 0 {
                continue;
            }
            let len = plan.array.shape()[0];
            if let Some(r) = rows.iter().find(|r| r.end > len) {
                return Err(Error::inconsistent(&self.path, rel, format!("rows {r:?} to zero past its {len} rows")));
            }
            jobs.extend(by_chunk(rows, plan.chunk_rows).into_iter().map(|(c, r)| (plans.len(), c, r)));
            plans.push(plan);
        }
        // One job per chunk over every array together, so that one large
        // array keeps both cores busy as well as many small ones do.
        jobs.par_iter().try_for_each(|(k, c, rows)| {
            let plan = &plans[*k];
            match plan.hand {
                Some(codec) => match codec.shard {
                    Some(spec) => self.zero_in_shard(store, plan, &codec, spec, *c, rows),
                    None => self.zero_in_chunk(store, plan, &codec, *c, rows),
                },
                None => self.zero_through_zarrs(plan, *c, rows),
            }
        })
    }

    /// How array `rel` of `store` is zeroed.
    fn zeroing(&self, store: &Arc<Store>, rel: &str) -> Result<Zeroing> {
        let array = arrays::open_array(&self.location(), store, rel)?;
        if array.dimensionality() == 0 {
            return Err(Error::inconsistent(&self.path, rel, "zero-dimensional array (store arrays have a row axis)"));
        }
        let dtype = arrays::array_dtype(&self.location(), rel, &array)?;
        let shape = array.shape().to_vec();
        let row_bytes = shape[1..].iter().product::<u64>() as usize * dtype.size();
        let chunk: Vec<u64> = array
            .chunk_shape(&vec![0; shape.len()])
            .map_err(arr_err(&self.path, rel))?
            .iter()
            .map(|d| d.get())
            .collect();
        // By hand only where a chunk is whole rows of a regular grid: the
        // encoders in `tail` work on runs of rows.
        let whole_rows = chunk.get(1..) == shape.get(1..) && ChainSpec::of(&array).regular;
        let hand = if whole_rows { TailCodec::of(&array) } else { None };
        Ok(Zeroing {
            rel: rel.to_string(),
            row_bytes,
            chunk_rows: chunk[0],
            hand,
            store_empty: self.write_empty_chunks(rel),
            array,
        })
    }

    /// An unsharded chunk by hand: decoded (its crc32c checked), zeroed,
    /// compressed whole.
    fn zero_in_chunk(
        &self,
        store: &Arc<Store>,
        plan: &Zeroing,
        codec: &TailCodec,
        c: u64,
        rows: &[Range<u64>],
    ) -> Result<()> {
        let rel = plan.rel.as_str();
        let mut idx = vec![0u64; plan.array.dimensionality()];
        idx[0] = c;
        let key = plan.array.chunk_key(&idx);
        let chunk_bytes = plan.chunk_rows as usize * plan.row_bytes;
        let mut decoded = match store.get(&key).map_err(|e| Error::zarr(&self.path, rel, e))? {
            Some(encoded) => codec.decode(&encoded, chunk_bytes).map_err(|why| self.fault(rel, c, why))?,
            // No file: fill values, already zero when the fill byte is.
            None if codec.fill == 0 => return Ok(()),
            None => vec![codec.fill; chunk_bytes],
        };
        zero(&mut decoded, rows, plan.row_bytes);
        if !plan.store_empty && decoded.iter().all(|&b| b == codec.fill) {
            return store.erase(&key).map_err(|e| Error::zarr(&self.path, rel, e));
        }
        let encoded = codec.encode_whole(&decoded).map_err(|e| Error::zarr(&self.path, rel, e))?;
        store.set(&key, encoded.into()).map_err(|e| Error::zarr(&self.path, rel, e))
    }

    /// A shard by hand: the inner chunks that hold rows decoded, zeroed and
    /// compressed again, the others' bytes copied, one new shard file.
    fn zero_in_shard(
        &self,
        store: &Arc<Store>,
        plan: &Zeroing,
        codec: &TailCodec,
        ShardSpec { inner_rows, index_crc32c }: ShardSpec,
        shard: u64,
        rows: &[Range<u64>],
    ) -> Result<()> {
        let rel = plan.rel.as_str();
        let per_shard = plan.chunk_rows / inner_rows;
        let inner_bytes = inner_rows as usize * plan.row_bytes;
        let mut idx = vec![0u64; plan.array.dimensionality()];
        idx[0] = shard;
        let key = plan.array.chunk_key(&idx);
        let old = store.get(&key).map_err(|e| Error::zarr(&self.path, rel, e))?;
        let index = match &old {
            None if codec.fill == 0 => return Ok(()),
            None => vec![MISSING; per_shard as usize],
            Some(bytes) => tail::parse_index(bytes, per_shard, index_crc32c)
                .map_err(|why| self.fault(rel, shard * per_shard, why))?,
        };
        let stored = |k: u64| -> Option<&[u8]> {
            let (offset, size) = index[k as usize];
            let bytes = old.as_deref()?;
            ((offset, size) != MISSING).then(|| &bytes[offset as usize..(offset + size) as usize])
        };
        let fresh: BTreeMap<u64, Option<Vec<u8>>> = by_chunk(rows, inner_rows)
            .into_par_iter()
            .map(|(k, inner)| -> Result<(u64, Option<Vec<u8>>)> {
                let global = shard * per_shard + k;
                let mut decoded = match stored(k) {
                    Some(enc) => codec.decode(enc, inner_bytes).map_err(|why| self.fault(rel, global, why))?,
                    None => vec![codec.fill; inner_bytes],
                };
                zero(&mut decoded, &inner, plan.row_bytes);
                if !plan.store_empty && decoded.iter().all(|&b| b == codec.fill) {
                    return Ok((k, None));
                }
                Ok((k, Some(codec.encode_whole(&decoded).map_err(|e| Error::zarr(&self.path, rel, e))?)))
            })
            .collect::<Result<_>>()?;
        let capacity = old.as_ref().map_or(0, |b| b.len());
        match tail::shard_file(per_shard, &fresh, stored, index_crc32c, capacity) {
            Some(out) => store.set(&key, out.into()).map_err(|e| Error::zarr(&self.path, rel, e)),
            None => store.erase(&key).map_err(|e| Error::zarr(&self.path, rel, e)),
        }
    }

    /// Any other chain: the chunk's rows (up to the array's end) read and
    /// stored again through zarrs, which writes each chunk (or shard) they
    /// span once.
    fn zero_through_zarrs(&self, plan: &Zeroing, c: u64, rows: &[Range<u64>]) -> Result<()> {
        let rel = plan.rel.as_str();
        let shape = plan.array.shape();
        let (lo, hi) = (c * plan.chunk_rows, ((c + 1) * plan.chunk_rows).min(shape[0]));
        let subset: Vec<Range<u64>> = std::iter::once(lo..hi).chain(shape[1..].iter().map(|&d| 0..d)).collect();
        let got: ArrayBytes<'static> = plan
            .array
            .retrieve_array_subset_opt(&subset, &CodecOptions::default())
            .map_err(arr_err(&self.path, rel))?;
        let mut bytes = got.into_fixed().map_err(|e| Error::zarr(&self.path, rel, e))?.into_owned();
        zero(&mut bytes, rows, plan.row_bytes);
        let options = CodecOptions::default().with_store_empty_chunks(plan.store_empty);
        plan.array
            .store_array_subset_opt(&subset, ArrayBytes::new_flen(bytes), &options)
            .map_err(arr_err(&self.path, rel))
    }

    /// The error of stored bytes refused in (inner) chunk `chunk` of `rel`.
    fn fault(&self, rel: &str, chunk: u64, why: Fault) -> Error {
        let (store, array) = (self.location(), rel.to_string());
        match why {
            Fault::Checksum(reason) => Error::Checksum { store, array, chunk, reason },
            Fault::Malformed(reason) => Error::Chunk { store, array, chunk, reason },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::by_chunk;

    #[test]
    fn rows_are_cut_at_chunk_boundaries_and_grouped_per_chunk() {
        let got = by_chunk(&[0..2, 3..4, 9..21, 21..21, 25..26], 10);
        assert_eq!(got, vec![(0, vec![0..2, 3..4, 9..10]), (1, vec![0..10]), (2, vec![0..1, 5..6])]);
        assert!(by_chunk(&[], 4).is_empty());
    }
}
