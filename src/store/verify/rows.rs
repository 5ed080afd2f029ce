//! The data half of a check: the pointers and the sample mask read whole
//! and checked (starting at 0, never decreasing), then every other chunk
//! checked against them as it is decoded: each active sample's neighbor
//! indices within its own atoms, the atom and edge masks equal to the
//! sample mask on every row of their sample.

use rayon::prelude::*;

use super::report::Fault;
use crate::data::{DType, HostData};
use crate::error::Result;
use crate::location::Location;
use crate::store::format;
use crate::store::reader::{AtomicDataZarrReader, FieldArray};

/// The pointers and the sample mask, whole; a part that could not be
/// read, or is not in order, is left empty and the checks that need it
/// are skipped (its faults say why).
#[derive(Default)]
pub(crate) struct Whole {
    /// `meta/atoms_ptr`, `num_samples + 1` entries.
    pub atoms: Vec<i64>,
    /// `meta/edges_ptr`, `num_samples + 1` entries.
    pub edges: Vec<i64>,
    /// `meta/samples_mask`, one flag per sample.
    pub active: Vec<bool>,
}

/// What a chunk is checked for beyond its decode.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Check {
    /// Decoded and checksummed only.
    Decode,
    /// `neighbor_list`: indices within their sample.
    Neighbors,
    /// `meta/atoms_mask`: each row's flag is its sample's.
    AtomMask,
    /// `meta/edges_mask`: the same on the edge axis.
    EdgeMask,
}

/// Chunks checked, and the bytes they decoded to.
#[derive(Default, Clone, Copy)]
pub(crate) struct Counted {
    pub chunks: u64,
    pub bytes: u64,
}

impl Counted {
    pub(crate) fn add(self, o: Counted) -> Counted {
        Counted { chunks: self.chunks + o.chunks, bytes: self.bytes + o.bytes }
    }
}

/// Chunk `c` of `f` decoded as i64 values, or the fault of decoding it.
fn values(reader: &AtomicDataZarrReader, f: &FieldArray, c: u64) -> std::result::Result<(Vec<i64>, u64), Fault> {
    let raw = reader.decode_chunk(f, c).map_err(|e| Fault::from_error(reader.location(), &e))?;
    let v = match (f.dtype, bytemuck::try_cast_slice::<u8, i64>(&raw)) {
        (DType::Int64, Ok(v)) => v.to_vec(),
        _ => HostData::from_bytes(f.dtype, &raw).ok().and_then(|d| d.to_i64_vec()).unwrap_or_default(),
    };
    Ok((v, raw.len() as u64))
}

/// The first `len` entries of 1-d array `f`, its chunks decoded in
/// parallel, with the faults of those that fail (then `None`).
fn read_whole(reader: &AtomicDataZarrReader, f: &FieldArray, len: usize) -> (Option<Vec<i64>>, Vec<Fault>, Counted) {
    let cr = f.chunk_rows.max(1);
    let chunks = (len as u64).div_ceil(cr);
    let parts: Vec<std::result::Result<(Vec<i64>, u64), Fault>> =
        (0..chunks).into_par_iter().map(|c| values(reader, f, c)).collect();
    let mut out = Vec::with_capacity(len);
    let (mut faults, mut counted) = (Vec::new(), Counted::default());
    for (c, p) in parts.into_iter().enumerate() {
        match p {
            Ok((v, bytes)) => {
                counted = counted.add(Counted { chunks: 1, bytes });
                out.extend(v.into_iter().take(cr as usize));
            }
            Err(fault) => faults.push(fault.in_chunk(c as u64)),
        }
    }
    if !faults.is_empty() {
        return (None, faults, counted);
    }
    if out.len() < len {
        faults.push(Fault::array(reader.location(), &f.rel, format!("{} entries decoded, {len} needed", out.len())));
        return (None, faults, counted);
    }
    out.truncate(len);
    (Some(out), faults, counted)
}

/// Faults of pointer array `rel` (`v`, read whole, `chunk_rows` per chunk):
/// the first is 0, none is below the one before it. Every decrease is listed.
fn pointer_faults(store: &Location, rel: &str, v: &[i64], chunk_rows: u64) -> Vec<Fault> {
    let mut out = Vec::new();
    if v.first().is_some_and(|&x| x != 0) {
        out.push(Fault::array(store, rel, format!("first pointer is {}, expected 0", v[0])).in_chunk(0).of_sample(0));
    }
    for (p, w) in v.windows(2).enumerate() {
        if w[1] < w[0] {
            let chunk = (p as u64 + 1) / chunk_rows.max(1);
            let reason = format!("pointers decrease at sample {p}: {} then {}", w[0], w[1]);
            out.push(Fault::array(store, rel, reason).in_chunk(chunk).of_sample(p));
        }
    }
    out
}

/// Reads and checks the pointer arrays and the sample mask of a store of
/// `n` samples (`metas`: the `meta/` arrays that opened).
pub(crate) fn read_meta(
    reader: &AtomicDataZarrReader,
    metas: &[(&str, &FieldArray)],
    n: usize,
) -> (Whole, Vec<Fault>, Counted) {
    let store = reader.location();
    let (mut whole, mut faults, mut counted) = (Whole::default(), Vec::new(), Counted::default());
    for &(rel, f) in metas {
        let len = match rel {
            format::ATOMS_PTR | format::EDGES_PTR => n + 1,
            format::SAMPLES_MASK => n,
            _ => continue,
        };
        let (v, mut fs, c) = read_whole(reader, f, len);
        counted = counted.add(c);
        let Some(v) = v else {
            faults.append(&mut fs);
            continue;
        };
        if rel == format::SAMPLES_MASK {
            whole.active = v.into_iter().map(|x| x != 0).collect();
            continue;
        }
        let bad = pointer_faults(store, rel, &v, f.chunk_rows);
        let ok = bad.is_empty();
        faults.extend(bad);
        if ok && rel == format::ATOMS_PTR {
            whole.atoms = v;
        } else if ok {
            whole.edges = v;
        }
    }
    (whole, faults, counted)
}

/// The first sample whose rows (`ptr[p]..ptr[p + 1]`) hold `row`.
fn sample_of(ptr: &[i64], row: u64) -> usize {
    ptr.partition_point(|&v| v <= row as i64).saturating_sub(1)
}

/// Each sample with rows in `rows` (of the axis `ptr` points into), with
/// its part of those rows, in order.
fn samples_in(ptr: &[i64], rows: std::ops::Range<u64>) -> impl Iterator<Item = (usize, std::ops::Range<u64>)> + '_ {
    let n = ptr.len().saturating_sub(1);
    let mut p = if rows.is_empty() { n } else { sample_of(ptr, rows.start) };
    std::iter::from_fn(move || {
        while p < n {
            let (a, b) = ((ptr[p] as u64).max(rows.start), (ptr[p + 1] as u64).min(rows.end));
            p += 1;
            if a >= rows.end {
                return None;
            }
            if a < b {
                return Some((p - 1, a..b));
            }
        }
        None
    })
}

/// Decodes chunk `c` of `f` (`axis_rows` rows in use on its axis) and
/// checks it for `check` against `whole`: its faults, and what it decoded.
pub(crate) fn check_chunk(
    reader: &AtomicDataZarrReader,
    f: &FieldArray,
    c: u64,
    axis_rows: u64,
    check: Check,
    whole: &Whole,
) -> (Vec<Fault>, Counted) {
    if check == Check::Decode {
        // Decoded (length and checksum checked) and dropped: no values needed.
        return match reader.decode_chunk(f, c) {
            Ok(raw) => (vec![], Counted { chunks: 1, bytes: raw.len() as u64 }),
            Err(e) => (vec![Fault::from_error(reader.location(), &e).in_chunk(c)], Counted { chunks: 1, bytes: 0 }),
        };
    }
    let (vals, bytes) = match values(reader, f, c) {
        Ok(v) => v,
        Err(fault) => return (vec![fault.in_chunk(c)], Counted { chunks: 1, bytes: 0 }),
    };
    let counted = Counted { chunks: 1, bytes };
    let cr = f.chunk_rows.max(1);
    let rows = (c * cr).min(axis_rows)..((c + 1) * cr).min(axis_rows);
    let store = reader.location();
    let active = |p: usize| whole.active.get(p).copied().unwrap_or(true);
    let mut faults = Vec::new();
    match check {
        Check::Decode => {}
        Check::Neighbors if !whole.atoms.is_empty() && !whole.edges.is_empty() && f.row_elems > 0 => {
            for (p, r) in samples_in(&whole.edges, rows.clone()) {
                if !active(p) {
                    continue;
                }
                let (lo, hi) = (whole.atoms[p], whole.atoms[p + 1]);
                let at = ((r.start - rows.start) as usize * f.row_elems)..((r.end - rows.start) as usize * f.row_elems);
                let bad = vals.get(at).map_or(Some(i64::MIN), |v| v.iter().copied().find(|&x| x < lo || x >= hi));
                if let Some(x) = bad {
                    let reason = format!(
                        "neighbor index {} outside the sample's {} atoms [0, {})",
                        x.saturating_sub(lo),
                        hi - lo,
                        hi - lo
                    );
                    faults.push(Fault::array(store, &f.rel, reason).in_chunk(c).of_sample(p));
                }
            }
        }
        Check::AtomMask | Check::EdgeMask if !whole.active.is_empty() => {
            let ptr = if check == Check::AtomMask { &whole.atoms } else { &whole.edges };
            for (p, r) in samples_in(ptr, rows.clone()) {
                let at = (r.start - rows.start) as usize..(r.end - rows.start) as usize;
                let want = active(p);
                if vals.get(at).is_none_or(|v| v.iter().any(|&x| (x != 0) != want)) {
                    let reason = format!("a row of the sample is not {want}, as its entry in samples_mask is");
                    faults.push(Fault::array(store, &f.rel, reason).in_chunk(c).of_sample(p));
                }
            }
        }
        _ => {}
    }
    (faults, counted)
}

/// Chunk `c` of string label `index`: the fault of decoding it, if any.
pub(crate) fn check_strings(
    reader: &AtomicDataZarrReader,
    st: &crate::store::reader::State,
    index: usize,
    c: u64,
) -> Result<Counted> {
    reader.decode_string_chunk(st, index, c).map(|_| Counted { chunks: 1, bytes: 0 })
}
