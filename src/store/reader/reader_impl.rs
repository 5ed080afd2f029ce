//! [`AtomicDataZarrReader`] as a [`Reader`] with its capabilities: the
//! decode and row-copy paths of this folder behind the contract.

use std::sync::Arc;

use rayon::prelude::*;

use super::cache::Width;
use super::decode::{self, Decode, Decoded};
use super::plan::{Needed, WindowPlan, WindowRows, widths};
use super::{AtomicDataZarrReader, State, rows};
use crate::data::{AtomicData, CollateOptions, CollatedBatch, Level};
use crate::error::{Error, Result};
use crate::source::{Capabilities, ChunkedReader, DecodeCounters, PlannedReader, Prepared, RowWindow};
use crate::source::{ReadPlan, Reader, SampleIndex, SampleMetadata, Schema};

impl Reader for AtomicDataZarrReader {
    fn len(&self) -> usize {
        self.snapshot().len()
    }

    fn name(&self) -> &str {
        &self.chunks.name
    }

    fn schema(&self) -> Schema {
        let st = self.snapshot();
        Schema {
            fields: st.fields.iter().map(|f| (f.name.clone(), f.level)).collect(),
            strings: st.strings.iter().map(|s| (s.name.clone(), s.level)).collect(),
        }
    }

    fn load_many(&self, indices: &[usize]) -> Result<Vec<AtomicData>> {
        let st = self.snapshot();
        // The raw read refuses an index the snapshot does not have.
        Error::check_indices(|| self.chunks.name.to_string(), indices, st.len())?;
        let physical: Vec<usize> = indices.iter().map(|&i| st.physical(i)).collect();
        let rows = WindowRows::new(&self.chunks, &st, physical)?;
        let dec = decode::decode_needed(&self.chunks, &st, &rows.all(), CollateOptions::default())?;
        let one = |k: usize| rows.part(k..k + 1);
        // A few samples are copied faster than rayon hands them out.
        let mut samples: Vec<AtomicData> = if rows.physical.len() < 16 {
            (0..rows.physical.len()).map(|k| rows::assemble(&self.chunks, &st, &dec, one(k))).collect::<Result<_>>()?
        } else {
            (0..rows.physical.len())
                .into_par_iter()
                .map(|k| rows::assemble(&self.chunks, &st, &dec, one(k)))
                .collect::<Result<_>>()?
        };
        if !st.strings.is_empty() {
            for (k, s) in samples.iter_mut().enumerate() {
                rows::fill_strings(&self.chunks, &st.strings, one(k), &mut s.strings)?;
            }
        }
        Ok(samples)
    }

    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities { index: Some(self), planned: Some(self), chunked: Some(self) }
    }
}

/// Physical indices from the delete mask, sizes from the pointer arrays.
impl SampleIndex for AtomicDataZarrReader {
    fn metadata(&self, index: usize) -> SampleMetadata {
        SampleMetadata { index, physical_index: self.snapshot().physical(index), source: self.chunks.name.clone() }
    }

    fn sizes(&self, index: usize) -> Result<(usize, usize)> {
        let st = self.snapshot();
        let p = st.physical(index);
        let count = |r: std::ops::Range<u64>| (r.end - r.start) as usize;
        Ok((
            count(st.pointers.cursor(&self.chunks, Level::Atom).rows(p)?),
            count(st.pointers.cursor(&self.chunks, Level::Edge).rows(p)?),
        ))
    }

    fn reload(&self) -> Result<()> {
        self.refresh()
    }
}

impl PlannedReader for AtomicDataZarrReader {
    /// Finds each sample's rows and the chunks every array needs
    /// (a `WindowPlan`, against the reader's current snapshot), and keeps
    /// those chunks in the cache until the read starts (or the plan is
    /// dropped): the DataLoader plans a window on its own thread while a
    /// read thread is busy with the one before, which must not evict them
    /// first.
    fn prepare(&self, plan: &mut ReadPlan) -> Result<()> {
        let st = self.snapshot();
        // A refresh between the check and this snapshot: the indices were
        // checked against another length.
        plan.check_length(&self.chunks.name, st.len())?;
        let mut window = WindowPlan::new(&self.chunks, self.window_decode_bytes, st, plan.batches(), plan.options())?;
        window.kept = Some(self.chunks.cache.protect(window.chunk_keys()));
        let WindowPlan { state, rows: WindowRows { physical, atoms, edges }, bounds, need, decode_bound, kept } =
            window;
        plan.set_prepared(Prepared::Rows(RowWindow {
            snapshot: state,
            physical,
            atoms,
            edges,
            bounds,
            narrowed: need.widths.iter().map(|&w| w == Width::Int32).collect(),
            chunks: need.chunks,
            decode_bound,
            kept: kept.map(|k| Box::new(k) as Box<dyn Send>),
        }));
        Ok(())
    }

    /// Decodes the plan's chunks (those the cache does not hold), then
    /// copies every batch's rows from them, batches in parallel. A plan
    /// this reader did not prepare against its current snapshot (another
    /// reader's, or one made before `refresh`) is an
    /// [`Error::PlanMismatch`]. When the chunks to decode are over the
    /// plan's decode bound and the cache's room, a group of batches at a
    /// time.
    fn read_prepared(&self, mut plan: ReadPlan, out: &mut Vec<CollatedBatch>) -> Result<()> {
        let st = self.snapshot();
        let prepared = match plan.take_prepared() {
            Prepared::Rows(w) if w.prepared_against(&st) => w,
            Prepared::Rows(_) => {
                return Err(Error::plan_mismatch(&self.chunks.name, "planned against another snapshot of a store"));
            }
            _ => return Err(Error::plan_mismatch(&self.chunks.name, "planned by a reader of another kind")),
        };
        let (batches, opts) = plan.into_parts();
        let RowWindow { physical, atoms, edges, bounds, chunks, narrowed, decode_bound, kept, .. } = prepared;
        // The read holds the chunks it finds or decodes until it has copied
        // them: other windows planned meanwhile need the protection now.
        drop(kept);
        let narrow = narrowed.iter().map(|&n| if n { Width::Int32 } else { Width::Stored }).collect();
        let mut window = WindowPlan {
            state: st.clone(),
            rows: WindowRows { physical, atoms, edges },
            bounds,
            need: Needed { chunks, widths: narrow },
            decode_bound,
            kept: None,
        };
        out.resize_with(batches.len(), CollatedBatch::default);
        if batches.is_empty() {
            return Ok(());
        }
        // The whole window at once, unless its chunks to decode are over the
        // bound (then a group of batches at a time, below).
        let whole = loop {
            let sample_bytes = window.rows.all().sample_bytes(&st);
            match decode::decode(&self.chunks, &st, &mut window.need, window.decode_bound, sample_bytes)? {
                Decode::Done(dec) => break Some(dec),
                Decode::OverBound => break None,
                // An array turned out not to fit int32: read it as stored.
                Decode::Widened => window.need.widths = widths(&st, opts),
            }
        };
        let w = &window;
        let collate = |dec: &[Decoded], group: std::ops::Range<usize>, out: &mut [CollatedBatch]| {
            out.par_iter_mut().zip(group.into_par_iter()).try_for_each(|(dst, b)| -> Result<()> {
                let part = w.rows.part(w.bounds[b].clone());
                rows::collate_into(&self.chunks, &self.buffers, &st, dec, &batches[b], part, opts, dst)?;
                if !st.strings.is_empty() {
                    rows::fill_strings(&self.chunks, &st.strings, part, &mut dst.strings)?;
                }
                Ok(())
            })
        };
        if let Some(dec) = whole {
            return collate(&dec, 0..batches.len(), out);
        }
        for g in w.groups() {
            let dec = decode::decode_needed(&self.chunks, &st, &w.rows_of(&g), opts)?;
            collate(&dec, g.clone(), &mut out[g])?;
        }
        Ok(())
    }
}

impl AtomicDataZarrReader {
    /// Loads the store's state again (what [`ReaderExt::refresh`](crate::ReaderExt::refresh)
    /// does for this reader; opening starts with it). Plans made before
    /// are not the reader's any more: they were made against the old
    /// snapshot.
    pub(crate) fn refresh(&self) -> Result<()> {
        let new = State::load(&self.chunks)?;
        // Appends rewrite the last partial chunk, so cached chunks may be stale.
        self.chunks.cache.clear();
        *self.state.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(new);
        Ok(())
    }

    /// The fields with rows and a chunk grid, with their decoded bytes,
    /// smallest first, and the index of the first bulky one: the smallest
    /// fields that together hold at most [`RESIDENT_SHARE`]`⁻¹` of the
    /// store's decoded bytes are resident (the per-system arrays, on bulk
    /// stores the per-atom ones too), the others bulky. The split depends
    /// on the store alone, not on the cache, so the blocks built on it (and
    /// a shuffle's order) do not change with the cache size.
    fn sized_fields<'a>(&self, st: &'a State) -> (Vec<(&'a super::FieldArray, u64)>, usize) {
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
/// block pool holds them too, so their chunking costs nothing.
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
        let total = |f: &super::FieldArray| st.rows_of(f.level);
        let candidates = &sized[first_bulky..];
        // Samples per chunk: chunk rows over mean rows per sample.
        let span = |f: &super::FieldArray| f.chunk_rows as f64 * n as f64 / total(f) as f64;
        let Some(&(coarsest, _)) = candidates.iter().max_by(|a, b| span(a.0).total_cmp(&span(b.0))) else {
            return (0..st.len()).collect();
        };
        let blocks = match coarsest.level {
            Level::System => {
                // Row p is sample p: the chunk boundaries, moved past deleted samples.
                let cr = coarsest.chunk_rows.max(1) as usize;
                let mut starts: Vec<usize> = match &st.active {
                    None => (0..n).step_by(cr).collect(),
                    Some(a) => a.counts_before((0..n).step_by(cr)),
                };
                starts.dedup();
                starts.retain(|&s| s < st.len());
                Ok(starts)
            }
            level => st.pointers.blocks_by_first_row(&self.chunks, st.active.as_ref(), level, coarsest.chunk_rows),
        };
        blocks.unwrap_or_else(|e| {
            // The reads that meet the bad pointers will fail with this error;
            // the order just loses its blocks.
            log::warn!("{}: blocks of the chunks not found ({e}); one block for the store", self.chunks.name);
            vec![0]
        })
    }

    fn decode_counters(&self) -> DecodeCounters {
        self.chunks.cache.decode_counters()
    }

    fn cache_bytes_held(&self) -> u64 {
        self.chunks.cache.stats().bytes
    }

    fn cache_fit(&self) -> crate::source::CacheFit {
        let st = self.snapshot();
        let (sized, first_bulky) = self.sized_fields(&st);
        crate::source::CacheFit {
            decoded_bytes: sized.iter().map(|&(_, b)| b).sum(),
            resident_bytes: sized[..first_bulky].iter().map(|&(_, b)| b).sum(),
            cache_bytes: self.chunks.cache.budget(),
        }
    }

    /// The chunk memory may map the budget plus two read windows' chunks,
    /// as at open.
    fn set_cache_bytes(&self, bytes: u64) {
        self.chunks.cache.set_budget(bytes, bytes.saturating_add(self.window_decode_bytes.saturating_mul(2)));
    }
}
