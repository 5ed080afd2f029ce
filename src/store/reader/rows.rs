//! The row copy: functions over decoded chunks. Samples assembled and
//! batches collated straight from the decoded chunks (string labels too), with `neighbor_list` moved to sample- or batch-local
//! atom indices on the way.

use super::ChunkSource;
use super::compact::{Codes, Rows};
use super::decode::Decoded;
use super::plan::BatchRows;
use super::strings::StringArray;
use super::{FieldArray, State};
use crate::data::NEIGHBOR_LIST;
use crate::data::chunks_of;
use crate::data::{AtomicData, CollateOptions, CollatedBatch, DType, Field, FieldLayout, HostData};
use crate::data::{StringField, bad_indices};
use crate::error::{Error, Result};
use std::collections::BTreeMap;

/// Hands `sink` the rows `rows` of field `f`, one chunk's run at a
/// time, in the form its chunk is held in.
pub(super) fn for_rows(
    src: &ChunkSource,
    f: &FieldArray,
    dec: &Decoded,
    rows: std::ops::Range<u64>,
    mut sink: impl FnMut(Rows<'_>) -> Result<()>,
) -> Result<()> {
    let c_rows = f.chunk_rows;
    let row_bytes = if dec.width == super::cache::Width::Int32 { f.row_bytes / 2 } else { f.row_bytes };
    for c in chunks_of(&rows, c_rows) {
        let chunk = dec.get(c).ok_or_else(|| src.chunk_error(f, c, "chunk missing from the read plan"))?;
        let lo = rows.start.max(c * c_rows) - c * c_rows;
        let hi = rows.end.min((c + 1) * c_rows) - c * c_rows;
        let held = chunk
            .rows(lo as usize, hi as usize, row_bytes, f.row_elems)
            .ok_or_else(|| src.chunk_error(f, c, "decoded chunk shorter than its rows"))?;
        sink(held)?;
    }
    Ok(())
}

/// Asks the CPU to start loading `rows` of `f` from the decoded chunks
/// (up to 4 KiB), so that copying them a few samples later does not wait
/// on memory. A shuffled batch's rows lie at random places in tens of
/// megabytes of chunks: without it, every sample's copy starts with a
/// cache miss (and the copies of a shuffled epoch were latency-bound).
#[inline]
pub(super) fn prefetch_rows(f: &FieldArray, dec: &Decoded, rows: std::ops::Range<u64>) {
    let row_bytes = if dec.width == super::cache::Width::Int32 { f.row_bytes / 2 } else { f.row_bytes };
    let c = rows.start / f.chunk_rows.max(1);
    let Some(chunk) = dec.get(c) else { return };
    let lo = (rows.start - c * f.chunk_rows) as usize;
    let hi = ((rows.end - c * f.chunk_rows) as usize).min(f.chunk_rows as usize);
    let src = chunk.held_bytes(lo, hi, row_bytes, f.row_elems);
    prefetch(&src[..src.len().min(4096)]);
}

/// Appends the rows `rows` of `f` from the decoded chunks to `dst`.
pub(super) fn copy_rows(
    src: &ChunkSource,
    f: &FieldArray,
    dec: &Decoded,
    rows: std::ops::Range<u64>,
    dst: &mut HostData,
) -> Result<()> {
    for_rows(src, f, dec, rows.clone(), |held| match held {
        Rows::Bytes(b) => {
            dst.extend_from_bytes(b);
            Ok(())
        }
        Rows::Dict { codes: Codes::U8(c), table } if dst.extend_from_dict(c, table, f.row_elems) => Ok(()),
        Rows::Dict { codes: Codes::U16(c), table } if dst.extend_from_dict(c, table, f.row_elems) => Ok(()),
        _ => Err(form_error(src, f, &rows)),
    })
}

/// A chunk of `f` under `rows` held in a form the copy cannot read (a
/// dictionary of another dtype, int16 indices of a non-index field).
fn form_error(src: &ChunkSource, f: &FieldArray, rows: &std::ops::Range<u64>) -> crate::error::Error {
    src.chunk_error(f, rows.start / f.chunk_rows.max(1), "held in a form its copy cannot read")
}

/// Appends neighbor rows `rows` of `f` to `dst`, moved from the
/// numbering of the sample whose first atom is `first_atom` (store-global
/// as stored, sample-local in the compact form) to one starting at `base`.
pub(super) fn copy_neighbors(
    src: &ChunkSource,
    f: &FieldArray,
    dec: &Decoded,
    rows: std::ops::Range<u64>,
    first_atom: i64,
    base: i64,
    dst: &mut HostData,
) -> Result<()> {
    for_rows(src, f, dec, rows.clone(), |held| match held {
        Rows::Bytes(b) => dst.extend_rebased(b, base - first_atom),
        Rows::Local16(v) => dst.extend_local16(v, base),
        Rows::Pairs16 { receivers, senders } => dst.extend_pairs16(receivers, senders, base),
        Rows::Dict { .. } => Err(form_error(src, f, &rows)),
    })
}

/// Appends field `f`'s rows of the samples `physical` (in order) to `dst`.
fn fill_field(
    src: &ChunkSource,
    f: &FieldArray,
    dec: &Decoded,
    rows: &BatchRows<'_>,
    dst: &mut HostData,
) -> Result<()> {
    for k in 0..rows.len() {
        if k + PREFETCH_AHEAD < rows.len() {
            prefetch_rows(f, dec, rows.rows(f.level, k + PREFETCH_AHEAD));
        }
        copy_rows(src, f, dec, rows.rows(f.level, k), dst)?;
    }
    Ok(())
}

/// The sample of `one` (a single sample's rows) from the decoded chunks.
pub(super) fn assemble(src: &ChunkSource, st: &State, dec: &[Decoded], one: BatchRows<'_>) -> Result<AtomicData> {
    let mut s = AtomicData::default();
    for (f, d) in st.fields.iter().zip(dec) {
        let rows = one.rows(f.level, 0);
        let n = (rows.end - rows.start) as usize;
        let mut data = HostData::with_capacity(f.dtype, n * f.row_elems);
        if f.name == NEIGHBOR_LIST {
            // Store-global to sample-local in the copy.
            copy_neighbors(src, f, d, rows, one.atoms[0].start as i64, 0, &mut data)?;
        } else {
            copy_rows(src, f, d, rows, &mut data)?;
        }
        let mut shape = Vec::with_capacity(1 + f.trailing.len());
        shape.push(n);
        shape.extend(&f.trailing);
        s.fields.insert(f.name.clone(), Field { level: f.level, shape, data });
    }
    Ok(s)
}

/// Collates logical samples `batch`, whose rows are `rows`, from the
/// decoded chunks `dec` into `out`, its buffers taken from `buffers`.
#[allow(clippy::too_many_arguments)]
pub(super) fn collate_into(
    src: &ChunkSource,
    buffers: &std::sync::Arc<crate::data::BatchBuffers>,
    st: &State,
    dec: &[Decoded],
    batch: &[usize],
    rows: BatchRows<'_>,
    opts: CollateOptions,
    out: &mut CollatedBatch,
) -> Result<()> {
    let layout: Vec<FieldLayout> = st
        .fields
        .iter()
        .zip(dec)
        .filter(|(f, _)| f.wanted(opts))
        .map(|(f, d)| FieldLayout {
            name: f.name.clone(),
            level: f.level,
            dtype: if d.width == super::cache::Width::Int32 { DType::Int32 } else { f.dtype },
            trailing: f.trailing.clone(),
        })
        .collect();
    out.reset(&layout);
    out.buffers = crate::data::BufferHome::of(buffers);
    let physical = rows.physical;
    let (mut atoms, mut edges) = (0i64, 0i64);
    let skip_edges = opts.skip_edges();
    for k in 0..rows.len() {
        atoms += (rows.atoms[k].end - rows.atoms[k].start) as i64;
        if !skip_edges {
            edges += (rows.edges[k].end - rows.edges[k].start) as i64;
        }
        out.atoms_ptr.push(atoms);
        out.edges_ptr.push(edges);
    }
    for (f, d) in st.fields.iter().zip(dec).filter(|(f, _)| f.wanted(opts)) {
        let dst = match out.fields.get_mut(&f.name) {
            Some(dst) => &mut dst.data,
            None => continue, // reset() created every layout entry
        };
        let rows_total = f.level.pick(atoms as usize, edges as usize, physical.len());
        let need = rows_total * f.row_elems;
        if dst.capacity() == 0 {
            // A new batch: memory a delivered batch gave back, touched
            // before, so writing it faults no fresh pages in. (A reused
            // batch grows its own buffer.)
            *dst = buffers.take(dst.dtype(), need);
        }
        dst.reserve(need);
        if f.name == NEIGHBOR_LIST {
            // Stored indices are store-global (see STORE_FORMAT.md).
            fill_neighbors(src, st, f, d, &rows, batch, &out.atoms_ptr, dst)?;
        } else {
            fill_field(src, f, d, &rows, dst)?;
        }
    }
    out.indices.clear();
    out.indices.extend_from_slice(batch);
    Ok(())
}

/// As [`fill_field`] for `neighbor_list`: sample `k`'s stored
/// (store-global) indices are moved to batch-local (its atoms start at
/// `batch_atoms[k]`). A sample whose chunk check found an index outside
/// its own atoms (one that would point into another structure of the
/// batch) is an error naming logical sample `logical[k]`.
#[allow(clippy::too_many_arguments)]
pub(super) fn fill_neighbors(
    src: &ChunkSource,
    st: &State,
    f: &FieldArray,
    dec: &Decoded,
    rows: &super::plan::BatchRows<'_>,
    logical: &[usize],
    batch_atoms: &[i64],
    dst: &mut HostData,
) -> Result<()> {
    // Every chunk these rows come from was checked when it was decoded.
    let bad = f
        .any_bad
        .load(std::sync::atomic::Ordering::Acquire)
        .then(|| f.bad_samples.read().unwrap_or_else(std::sync::PoisonError::into_inner));
    for (k, &p) in rows.physical.iter().enumerate() {
        if k + PREFETCH_AHEAD < rows.physical.len() {
            prefetch_rows(f, dec, rows.rows(f.level, k + PREFETCH_AHEAD));
        }
        let lo = rows.atoms[k].start as i64;
        let start = dst.len();
        copy_neighbors(src, f, dec, rows.rows(f.level, k), lo, batch_atoms[k], dst)?;
        if bad.as_ref().is_some_and(|b| b.contains(&p)) {
            let n = rows.atoms[k].end - rows.atoms[k].start;
            return Err(bad_indices(dst, start, batch_atoms[k], n, |r| {
                super::neighbors::range_error_in(src, st, logical[k], r)
            }));
        }
    }
    Ok(())
}

/// Appends the string rows of the samples of `samples` (in order) to
/// `out`, one entry per label; `out` is cleared first.
pub(super) fn fill_strings(
    src: &ChunkSource,
    arrays: &[StringArray],
    samples: BatchRows<'_>,
    out: &mut BTreeMap<String, StringField>,
) -> Result<()> {
    out.clear();
    for s in arrays {
        let mut values = Vec::new();
        for k in 0..samples.len() {
            let rows = samples.rows(s.level, k);
            for c in chunks_of(&rows, s.chunk_rows) {
                let chunk = s.chunk(src, c)?;
                let lo = (rows.start.max(c * s.chunk_rows) - c * s.chunk_rows) as usize;
                let hi = (rows.end.min((c + 1) * s.chunk_rows) - c * s.chunk_rows) as usize;
                let part = chunk.get(lo..hi).ok_or_else(|| Error::Chunk {
                    store: src.location.clone(),
                    array: s.rel.clone(),
                    chunk: c,
                    reason: format!("decoded chunk of {} rows, rows {lo}..{hi} wanted", chunk.len()),
                })?;
                values.extend(part.iter().cloned());
            }
        }
        out.insert(s.name.clone(), StringField { level: s.level, values });
    }
    Ok(())
}

/// Samples ahead whose rows [`prefetch_rows`] requests.
pub(super) const PREFETCH_AHEAD: usize = 4;

/// Hints the CPU to load every cache line of `bytes` (a no-op off x86-64).
#[inline]
fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    for line in bytes.chunks(64) {
        // SAFETY: a prefetch is a hint that never faults or changes memory;
        // the address lies in `bytes` anyway.
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(line.as_ptr().cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}
