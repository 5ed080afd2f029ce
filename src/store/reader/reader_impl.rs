//! [`AtomicDataZarrReader`] as a [`Reader`]: index checks, then the decode
//! and row-copy paths of this folder.

use std::collections::BTreeMap;
use std::sync::Arc;

use rayon::prelude::*;

use super::AtomicDataZarrReader;
use super::plan::{decode_groups, needed_chunks};
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
                if i >= st.len() {
                    return Err(Error::IndexOutOfRange {
                        source_name: self.name.to_string(),
                        index: i as i64,
                        len: st.len(),
                    });
                }
                Ok(st.physical(i))
            })
            .collect::<Result<_>>()?;
        let dec = self.decode_needed(&st, &physical, CollateOptions::default())?;
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
        if index >= st.len() {
            return Err(Error::IndexOutOfRange {
                source_name: self.name.to_string(),
                index: index as i64,
                len: st.len(),
            });
        }
        let p = st.physical(index);
        Ok(((st.atoms_ptr[p + 1] - st.atoms_ptr[p]) as usize, (st.edges_ptr[p + 1] - st.edges_ptr[p]) as usize))
    }

    fn refresh(&self) -> Result<()> {
        let new = self.load_state()?;
        // Appends rewrite the last partial chunk, so cached chunks may be stale.
        self.cache.clear();
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
        if let Some(&bad) = batches.iter().flatten().find(|&&i| i >= len) {
            return Err(Error::IndexOutOfRange { source_name: self.name.to_string(), index: bad as i64, len });
        }
        out.resize_with(batches.len(), CollatedBatch::default);
        let limit = self.window_decode_bytes;
        for g in decode_groups(&st, batches, limit) {
            let physical: Vec<usize> = batches[g.clone()].iter().flatten().map(|&i| st.physical(i)).collect();
            let dec = self.decode_needed(&st, &physical, opts)?;
            out[g.clone()].par_iter_mut().zip(batches[g].par_iter()).try_for_each(|(dst, b)| -> Result<()> {
                self.collate_into(&st, &dec, b, opts, dst)?;
                if !st.strings.is_empty() {
                    let physical: Vec<usize> = b.iter().map(|&i| st.physical(i)).collect();
                    self.fill_strings(&st.strings, st.ptrs(), &physical, &mut dst.strings)?;
                }
                Ok(())
            })?;
        }
        Ok(())
    }

    fn metadata_for(&self, i: usize) -> SampleMetadata {
        SampleMetadata { index: i, physical_index: self.physical_index(i), source: self.name.clone() }
    }

    fn chunked(&self) -> Option<&dyn ChunkedReader> {
        Some(self)
    }

    /// Adds the diagnosis of nvalchemi-toolkit's append bug when it fits
    /// (see [`Error::NeighborIndex`]).
    fn neighbor_index_error(&self, index: usize, value: i64, num_atoms: usize, span: (i64, i64)) -> Error {
        let r = IndexReport { value, num_atoms, min: span.0, max: span.1 };
        self.range_error_in(&self.snapshot(), index, r)
    }
}

impl ChunkedReader for AtomicDataZarrReader {
    /// Blocks of the chunks of the coarsest bulky array. The smallest arrays
    /// that together fit half the cache budget stay resident once decoded
    /// (the per-system ones; on bulk stores, where the neighbor list is
    /// most of the bytes, the per-atom ones too), so their chunking costs
    /// nothing; the others are bulky. When every array fits (the whole store
    /// does) all count, and blocks are as coarse as the coarsest chunking. A
    /// sample belongs to the chunk its first row is in. With no array to
    /// go by (a store without rows), one block per sample.
    fn chunk_blocks(&self) -> Vec<usize> {
        let st = self.snapshot();
        let n = st.num_samples;
        let total = |l: Level| -> u64 {
            match l {
                Level::Atom => st.atoms_ptr[n] as u64,
                Level::Edge => st.edges_ptr[n] as u64,
                Level::System => n as u64,
            }
        };
        let budget = self.cache.stats().budget;
        let mut with_rows: Vec<_> = st.fields.iter().filter(|f| total(f.level) > 0 && f.chunk_rows > 0).collect();
        let size = |f: &&crate::store::reader::FieldArray| total(f.level).saturating_mul(f.row_bytes as u64);
        with_rows.sort_by_key(size);
        let mut resident = 0u64;
        let first_bulky = with_rows
            .iter()
            .position(|f| {
                resident = resident.saturating_add(size(f));
                resident > budget / 2
            })
            .unwrap_or(0);
        let candidates = &with_rows[first_bulky..];
        // Samples per chunk: chunk rows over mean rows per sample.
        let span = |f: &&crate::store::reader::FieldArray| f.chunk_rows as f64 * n as f64 / total(f.level) as f64;
        let Some(coarsest) = candidates.iter().max_by(|a, b| span(a).total_cmp(&span(b))) else {
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

    /// Protects the chunks of `batches` in the cache (see
    /// `ChunkCache::protect`); indices out
    /// of range are ignored (the read itself reports them).
    fn announce_next(&self, batches: &[Vec<usize>]) {
        let st = self.snapshot();
        let len = st.len();
        let physical: Vec<usize> = batches.iter().flatten().filter(|&&i| i < len).map(|&i| st.physical(i)).collect();
        let mut keys = Vec::new();
        for f in &st.fields {
            keys.extend(needed_chunks(st.ptrs(), f.level, f.chunk_rows, &physical).into_iter().map(|c| (f.id, c)));
        }
        self.cache.protect(keys);
    }
}
