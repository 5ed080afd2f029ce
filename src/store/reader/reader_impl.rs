//! [`AtomicDataZarrReader`] as a [`Reader`]: index checks, then the decode
//! and row-copy paths of this folder.

use std::collections::BTreeMap;
use std::sync::Arc;

use rayon::prelude::*;

use super::AtomicDataZarrReader;
use super::plan::{AnnouncedWindow, WindowRows, decode_groups, needed_chunks_per_field};
use crate::data::{AtomicData, CollateOptions, CollatedBatch, IndexReport, Level};
use crate::error::{Error, Result};
use crate::source::{ChunkedReader, DecodeCounters, Reader, SampleMetadata};

impl Reader for AtomicDataZarrReader {
    fn len(&self) -> usize {
        self.snapshot().len()
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn field_levels(&self) -> BTreeMap<String, Level> {
        self.snapshot().fields.iter().map(|f| (f.name.clone(), f.level)).collect()
    }

    fn load_many(&self, indices: &[usize]) -> Result<Vec<AtomicData>> {
        let st = self.snapshot();
        let physical: Vec<usize> = indices
            .iter()
            .map(|&i| {
                Error::check_indices(|| self.name.to_string(), [&i], st.len())?;
                Ok(st.physical(i))
            })
            .collect::<Result<_>>()?;
        let rows = WindowRows::new(&st, physical.clone());
        let dec = self.decode_needed(&st, &rows.all(), CollateOptions::default())?;
        // A few samples are copied faster than rayon hands them out.
        let mut samples: Vec<AtomicData> = if physical.len() < 16 {
            physical.iter().map(|&p| self.assemble(&st, &dec, p)).collect::<Result<_>>()?
        } else {
            physical.par_iter().map(|&p| self.assemble(&st, &dec, p)).collect::<Result<_>>()?
        };
        if !st.strings.is_empty() {
            for (s, &p) in samples.iter_mut().zip(&physical) {
                self.fill_strings(&st.strings, st.ptrs(), &[p], &mut s.strings)?;
            }
        }
        Ok(samples)
    }

    fn string_levels(&self) -> BTreeMap<String, Level> {
        self.snapshot().strings.iter().map(|s| (s.name.clone(), s.level)).collect()
    }

    fn physical_index(&self, index: usize) -> usize {
        let st = self.snapshot();
        if index < st.len() { st.physical(index) } else { index }
    }

    fn get_metadata(&self, index: usize) -> Result<(usize, usize)> {
        let st = self.snapshot();
        Error::check_indices(|| self.name.to_string(), [&index], st.len())?;
        let p = st.physical(index);
        Ok(((st.atoms_ptr[p + 1] - st.atoms_ptr[p]) as usize, (st.edges_ptr[p + 1] - st.edges_ptr[p]) as usize))
    }

    fn refresh(&self) -> Result<()> {
        let new = self.load_state()?;
        // Appends rewrite the last partial chunk, so cached chunks may be stale.
        self.cache.clear();
        self.announced.clear();
        *self.state.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(new);
        Ok(())
    }

    fn load_collated_opt(
        &self,
        batches: &[Vec<usize>],
        opts: CollateOptions,
        out: &mut Vec<CollatedBatch>,
    ) -> Result<()> {
        let st = self.snapshot();
        let len = st.len();
        Error::check_indices(|| self.name.to_string(), batches.iter().flatten(), len)?;
        out.resize_with(batches.len(), CollatedBatch::default);
        if batches.is_empty() {
            return Ok(());
        }
        // The window's rows and plan, made once (by `announce_next` when the
        // loader announced it): they drive the decode and every batch's copy.
        let (rows, plans) = match self.announced.take(&st, batches) {
            Some(AnnouncedWindow { rows, mut plans, .. }) => {
                for (f, p) in st.fields.iter().zip(&mut plans) {
                    if !f.wanted(opts) {
                        p.clear();
                    }
                }
                (rows, plans)
            }
            None => {
                let rows = WindowRows::new(&st, batches.iter().flatten().map(|&i| st.physical(i)).collect());
                let plans = needed_chunks_per_field(&st, &rows.all(), |f| f.wanted(opts));
                (rows, plans)
            }
        };
        let mut bounds = Vec::with_capacity(batches.len());
        let mut at = 0;
        for b in batches {
            bounds.push(at..at + b.len());
            at += b.len();
        }
        let collate = |dec: &[super::decode::Decoded], group: std::ops::Range<usize>, out: &mut [CollatedBatch]| {
            out.par_iter_mut().zip(group.into_par_iter()).try_for_each(|(dst, b)| -> Result<()> {
                let part = rows.part(bounds[b].clone());
                self.collate_into(&st, dec, &batches[b], part, opts, dst)?;
                if !st.strings.is_empty() {
                    self.fill_strings(&st.strings, st.ptrs(), part.physical, &mut dst.strings)?;
                }
                Ok(())
            })
        };
        // Nearly always the whole window at once; when the chunks it must
        // decode (those the cache does not hold) are over the window bound,
        // a group of batches at a time.
        let limit = if batches.len() <= 1 { u64::MAX } else { self.window_decode_bytes };
        if let Some(dec) = self.decode_planned(&st, &rows.all(), plans, opts, limit)? {
            return collate(&dec, 0..batches.len(), out);
        }
        for g in decode_groups(&st, &rows, &bounds, self.window_decode_bytes) {
            let (Some(first), Some(last)) = (bounds.get(g.start), g.end.checked_sub(1).and_then(|e| bounds.get(e)))
            else {
                continue; // an empty group reads nothing
            };
            let dec = self.decode_needed(&st, &rows.part(first.start..last.end), opts)?;
            collate(&dec, g.clone(), &mut out[g])?;
        }
        Ok(())
    }

    fn metadata_for(&self, i: usize) -> SampleMetadata {
        SampleMetadata { index: i, physical_index: self.physical_index(i), source: self.name.clone() }
    }

    fn chunked(&self) -> Option<&dyn ChunkedReader> {
        Some(self)
    }

    fn batch_home(&self) -> crate::data::BufferHome {
        crate::data::BufferHome::of(&self.buffers)
    }

    /// Adds the diagnosis of nvalchemi-toolkit's append bug when it fits
    /// (see [`Error::NeighborIndex`]).
    fn neighbor_index_error(&self, index: usize, value: i64, num_atoms: usize, span: (i64, i64)) -> Error {
        let r = IndexReport { value, num_atoms, min: span.0, max: span.1 };
        self.range_error_in(&self.snapshot(), index, r)
    }
}

impl AtomicDataZarrReader {
    /// The fields with rows and a chunk grid, with their decoded bytes,
    /// smallest first, and the index of the first bulky one: the smallest
    /// fields that together hold at most [`RESIDENT_SHARE`]`⁻¹` of the
    /// store's decoded bytes are resident (the per-system arrays, on bulk
    /// stores the per-atom ones too), the others bulky. The split depends
    /// on the store alone, not on the cache, so the blocks built on it (and
    /// a shuffle's order) do not change with the cache size.
    fn sized_fields<'a>(
        &self,
        st: &'a crate::store::reader::State,
    ) -> (Vec<(&'a crate::store::reader::FieldArray, u64)>, usize) {
        let mut sized: Vec<_> = st
            .fields
            .iter()
            .filter(|f| st.rows_of(f.level) > 0 && f.chunk_rows > 0)
            .map(|f| (f, st.rows_of(f.level).saturating_mul(f.row_bytes as u64)))
            .collect();
        sized.sort_by_key(|&(_, b)| b);
        let total: u64 = sized.iter().map(|&(_, b)| b).sum();
        let mut resident = 0u64;
        let first_bulky = sized
            .iter()
            .position(|&(_, b)| {
                resident = resident.saturating_add(b);
                resident > total / RESIDENT_SHARE
            })
            .unwrap_or(sized.len());
        (sized, first_bulky)
    }
}

/// The smallest arrays holding together at most `1 / RESIDENT_SHARE` of a
/// store's decoded bytes count as resident: a cache that holds the store's
/// pool of blocks holds them too, so their chunking costs nothing.
const RESIDENT_SHARE: u64 = 8;

impl ChunkedReader for AtomicDataZarrReader {
    /// Blocks of the chunks of the coarsest bulky array. The smallest arrays
    /// that together hold at most an eighth of the store's decoded bytes are
    /// resident (the per-system ones; on bulk stores, where the neighbor
    /// list is most of the bytes, the per-atom ones too), so their chunking
    /// costs nothing; the others are bulky. A sample belongs to the chunk its
    /// first row is in. With no array to go by (a store without rows), one
    /// block per sample. The blocks depend on the store alone.
    fn chunk_blocks(&self) -> Vec<usize> {
        let st = self.snapshot();
        let n = st.num_samples;
        let (sized, first_bulky) = self.sized_fields(&st);
        let total = |f: &crate::store::reader::FieldArray| st.rows_of(f.level);
        let candidates = &sized[first_bulky..];
        // Samples per chunk: chunk rows over mean rows per sample.
        let span = |f: &crate::store::reader::FieldArray| f.chunk_rows as f64 * n as f64 / total(f) as f64;
        let Some(&(coarsest, _)) = candidates.iter().max_by(|a, b| span(a.0).total_cmp(&span(b.0))) else {
            return (0..st.len()).collect();
        };
        let ptrs = st.ptrs();
        let mut starts = Vec::new();
        let mut last = None;
        for logical in 0..st.len() {
            let id = ptrs.rows(coarsest.level, st.physical(logical)).start / coarsest.chunk_rows;
            if last != Some(id) {
                starts.push(logical);
                last = Some(id);
            }
        }
        starts
    }

    fn decode_counters(&self) -> DecodeCounters {
        self.cache.decode_counters()
    }

    fn cache_fit(&self) -> crate::source::CacheFit {
        let st = self.snapshot();
        let (sized, first_bulky) = self.sized_fields(&st);
        crate::source::CacheFit {
            decoded_bytes: sized.iter().map(|&(_, b)| b).sum(),
            resident_bytes: sized[..first_bulky].iter().map(|&(_, b)| b).sum(),
            cache_bytes: self.cache.budget(),
        }
    }

    /// The chunk memory may map the budget plus two read windows' chunks,
    /// as at open.
    fn set_cache_bytes(&self, bytes: u64) {
        self.cache.set_budget(bytes, bytes.saturating_add(self.window_decode_bytes.saturating_mul(2)));
    }

    /// Protects the chunks of `batches` in the cache (see
    /// `ChunkCache::protect`); indices out
    /// of range are ignored (the read itself reports them).
    fn announce_next(&self, batches: &[Vec<usize>]) {
        let st = self.snapshot();
        let len = st.len();
        let logical: Vec<usize> = batches.iter().flatten().copied().collect();
        let in_range = logical.iter().all(|&i| i < len);
        let physical: Vec<usize> = logical.iter().filter(|&&i| i < len).map(|&i| st.physical(i)).collect();
        let rows = WindowRows::new(&st, physical);
        let plans = needed_chunks_per_field(&st, &rows.all(), |_| true);
        let mut keys = Vec::new();
        for (f, ids) in st.fields.iter().zip(&plans) {
            keys.extend(ids.iter().map(|&c| (f.id, c)));
        }
        self.cache.protect(keys);
        if in_range {
            self.announced.put(AnnouncedWindow { state: st, logical, rows, plans });
        }
    }
}
