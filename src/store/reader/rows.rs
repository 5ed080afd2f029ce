//! Row copy: samples assembled and batches collated straight from the
//! decoded chunks, with `neighbor_list` moved to sample- or batch-local
//! atom indices on the way.

use super::AtomicDataZarrReader;
use super::decode::Decoded;
use super::plan::{Pointers, chunks_of};
use super::state::{FieldArray, State};
use crate::data::NEIGHBOR_LIST;
use crate::data::{AtomicData, CollatedBatch, DType, Field, FieldLayout, HostData};
use crate::error::Result;

impl AtomicDataZarrReader {
    /// Hands `sink` the bytes of `rows` of field `f`, one chunk's run at a time.
    pub(super) fn for_rows(
        &self,
        f: &FieldArray,
        dec: &Decoded,
        rows: std::ops::Range<u64>,
        mut sink: impl FnMut(&[u8]),
    ) -> Result<()> {
        let c_rows = f.chunk_rows;
        let row_bytes = if dec.narrowed { f.row_bytes / 2 } else { f.row_bytes };
        for c in chunks_of(&rows, c_rows) {
            let bytes = dec.get(c).ok_or_else(|| self.chunk_error(f, c, "chunk missing from the read plan"))?;
            let lo = rows.start.max(c * c_rows) - c * c_rows;
            let hi = rows.end.min((c + 1) * c_rows) - c * c_rows;
            let (a, b) = (lo as usize * row_bytes, hi as usize * row_bytes);
            let src = bytes.get(a..b).ok_or_else(|| self.chunk_error(f, c, "decoded chunk shorter than its rows"))?;
            sink(src);
        }
        Ok(())
    }

    /// Appends the rows `rows` of `f` from the decoded chunks to `dst`.
    pub(super) fn copy_rows(
        &self,
        f: &FieldArray,
        dec: &Decoded,
        rows: std::ops::Range<u64>,
        dst: &mut HostData,
    ) -> Result<()> {
        self.for_rows(f, dec, rows, |src| dst.extend_from_bytes(src))
    }

    /// Appends field `f`'s rows of the samples `physical` (in order) to `dst`.
    fn fill_field(
        &self,
        f: &FieldArray,
        dec: &Decoded,
        ptrs: &Pointers,
        physical: &[usize],
        dst: &mut HostData,
    ) -> Result<()> {
        for &p in physical {
            self.copy_rows(f, dec, ptrs.rows(f.level, p), dst)?;
        }
        Ok(())
    }

    pub(super) fn assemble(&self, st: &State, dec: &[Decoded], p: usize) -> Result<AtomicData> {
        let mut s = AtomicData::default();
        for (f, d) in st.fields.iter().zip(dec) {
            let rows = st.ptrs().rows(f.level, p);
            let n = (rows.end - rows.start) as usize;
            let mut data = HostData::with_capacity(f.dtype, n * f.row_elems);
            if f.name == NEIGHBOR_LIST {
                // Store-global to sample-local in the copy.
                let mut rebased = Ok(());
                self.for_rows(f, d, rows, |src| {
                    if rebased.is_ok() {
                        rebased = data.extend_rebased(src, -st.atoms_ptr[p]);
                    }
                })?;
                rebased?;
            } else {
                self.copy_rows(f, d, rows, &mut data)?;
            }
            let mut shape = Vec::with_capacity(1 + f.trailing.len());
            shape.push(n);
            shape.extend(&f.trailing);
            s.fields.insert(f.name.clone(), Field { level: f.level, shape, data });
        }
        Ok(s)
    }

    pub(super) fn collate_into(
        &self,
        st: &State,
        dec: &[Decoded],
        batch: &[usize],
        out: &mut CollatedBatch,
    ) -> Result<()> {
        let layout: Vec<FieldLayout> = st
            .fields
            .iter()
            .zip(dec)
            .map(|(f, d)| FieldLayout {
                name: f.name.clone(),
                level: f.level,
                dtype: if d.narrowed { DType::Int32 } else { f.dtype },
                trailing: f.trailing.clone(),
            })
            .collect();
        out.reset(&layout);
        let ptrs = st.ptrs();
        let physical: Vec<usize> = batch.iter().map(|&i| st.physical(i)).collect();
        let (mut atoms, mut edges) = (0i64, 0i64);
        for &p in &physical {
            atoms += ptrs.atoms[p + 1] - ptrs.atoms[p];
            edges += ptrs.edges[p + 1] - ptrs.edges[p];
            out.atoms_ptr.push(atoms);
            out.edges_ptr.push(edges);
        }
        for (f, d) in st.fields.iter().zip(dec) {
            let dst = match out.fields.get_mut(&f.name) {
                Some(dst) => &mut dst.data,
                None => continue, // reset() created every layout entry
            };
            let rows_total = f.level.pick(atoms as usize, edges as usize, physical.len());
            dst.reserve(rows_total * f.row_elems);
            if f.name == NEIGHBOR_LIST {
                // Stored indices are store-global (see STORE_FORMAT.md).
                self.fill_neighbors(st, f, d, &physical, batch, &out.atoms_ptr, dst)?;
            } else {
                self.fill_field(f, d, &ptrs, &physical, dst)?;
            }
        }
        out.indices.clear();
        out.indices.extend_from_slice(batch);
        Ok(())
    }
}
