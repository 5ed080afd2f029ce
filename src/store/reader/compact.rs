//! Cached chunks in compact, exact forms.
//!
//! Why: a first epoch over a store that fits the cache keeps every chunk it
//! decodes, and every byte it keeps is fresh memory the kernel faults in and
//! zeroes. On the 2-core reference VM first-touch runs at ~0.8 GB/s even in
//! huge pages (memory touched before: ~24 GB/s), about as slow per byte as
//! zstd decoding the chunk. On bulk stores the neighbor list and its shifts
//! are ~95% of the decoded bytes, and their values repeat a few patterns:
//!
//! - [`Form::Local16`]: `neighbor_list` rows as int16 indices counted from
//!   the first atom of their own sample (sample-local values fit int16
//!   whenever a structure has under 32,768 atoms), 4 bytes per edge instead
//!   of 16 (int64) or 8 (narrowed). One form serves wide and narrowed reads:
//!   the row copy adds the batch offset and widens.
//! - [`Form::Pairs16`]: `neighbor_list` pairs whose senders come in runs
//!   (a list grouped by its first atom, as neighbor-list builders write
//!   them): the receivers as sample-local int16, 2 bytes per edge, and the
//!   senders as one (first row, value) entry per run, ~70 edges each on
//!   bulk cells. Half of `Local16`, which is kept for lists in any order.
//! - [`Form::Dict`]: rows of any other field as codes into a table of the
//!   chunk's distinct rows, one byte each for up to 256 of them, two for up
//!   to 2048. `shifts` (`S·cell`, ~27 images per structure) takes 1-2 bytes
//!   per edge instead of 12; so do atomic numbers, `pbc` and other
//!   low-cardinality fields.
//!
//! Both are exact: a chunk whose values do not fit is kept as decoded
//! ([`Form::Plain`]). Building them is one pass over a freshly decoded chunk
//! (still in the CPU cache), beside a much slower zstd decode.

use crate::data::{DType, HostData};

use super::chunk_memory::ChunkBuf;

/// How a cached chunk holds its rows.
pub(crate) enum Form {
    /// The bytes of the request's dtype (stored, or int32 when narrowed).
    Plain,
    /// `neighbor_list`: int16 values relative to each row's sample's first
    /// atom, for the chunk's first `valid_rows` rows (the rows of samples
    /// the decoding snapshot knew); later rows are not held.
    Local16 { valid_rows: usize },
    /// `neighbor_list` pairs: the buffer holds each row's receiver as int16
    /// relative to its sample's first atom, for the first `valid_rows` rows
    /// (as `Local16`); `runs` holds the senders.
    Pairs16 { valid_rows: usize, runs: SenderRuns },
    /// One code per row, a byte (two when `wide`): the row's index in
    /// `table` (rows of the request's dtype, `row_elems` elements each).
    Dict { table: HostData, wide: bool },
}

/// The senders of a [`Form::Pairs16`] chunk: run `k` covers rows
/// `starts[k]..starts[k + 1]` (the last one up to the chunk's valid rows),
/// each with sender `senders[k]`, sample-local. `starts[0]` is 0.
pub(crate) struct SenderRuns {
    starts: Vec<u32>,
    senders: Vec<i16>,
}

impl SenderRuns {
    /// Bytes held.
    fn len(&self) -> usize {
        4 * self.starts.len() + 2 * self.senders.len()
    }
}

/// The sender runs over rows `lo..hi` of a [`Form::Pairs16`] chunk, as
/// (sender, rows) pairs in row order.
pub(crate) struct Senders<'a> {
    runs: &'a SenderRuns,
    k: usize,
    at: usize,
    hi: usize,
}

impl Iterator for Senders<'_> {
    type Item = (i16, usize);

    fn next(&mut self) -> Option<(i16, usize)> {
        if self.at >= self.hi {
            return None;
        }
        let s = *self.runs.senders.get(self.k)?;
        let end = self.runs.starts.get(self.k + 1).map_or(self.hi, |&e| (e as usize).min(self.hi));
        let n = end.checked_sub(self.at)?;
        (self.k, self.at) = (self.k + 1, end);
        Some((s, n))
    }
}

/// A decoded chunk as the cache keeps it.
pub(crate) struct Chunk {
    buf: ChunkBuf,
    pub(crate) form: Form,
}

/// The rows of one chunk a copy takes, in the chunk's form.
pub(crate) enum Rows<'a> {
    /// Native-endian bytes of the request's dtype.
    Bytes(&'a [u8]),
    /// Sample-local int16 neighbor indices.
    Local16(&'a [i16]),
    /// Sample-local int16 receivers, one per row, and the rows' senders.
    Pairs16 { receivers: &'a [i16], senders: Senders<'a> },
    /// Codes into `table`, one per row.
    Dict { codes: Codes<'a>, table: &'a HostData },
}

/// A dictionary chunk's codes.
pub(crate) enum Codes<'a> {
    /// Up to 256 table rows.
    U8(&'a [u8]),
    /// Up to 2048 table rows.
    U16(&'a [u16]),
}

impl Chunk {
    /// A chunk held as decoded.
    pub(crate) fn plain(buf: ChunkBuf) -> Chunk {
        Chunk { buf, form: Form::Plain }
    }

    /// Bytes held (the cache's budget counts these).
    pub(crate) fn len(&self) -> usize {
        let table = match &self.form {
            Form::Dict { table, .. } => table.len() * table.dtype().size(),
            Form::Pairs16 { runs, .. } => runs.len(),
            _ => 0,
        };
        self.buf.len() + table
    }

    /// The bytes of a [`Form::Plain`] chunk (tests and the decode floor).
    #[cfg(test)]
    pub(crate) fn plain_bytes(&self) -> Option<&[u8]> {
        matches!(self.form, Form::Plain).then_some(&self.buf[..])
    }

    /// Bytes per row in this chunk's form, for rows of `row_bytes` in the
    /// request's dtype and `row_elems` elements.
    #[inline]
    fn held_row_bytes(&self, row_bytes: usize, row_elems: usize) -> usize {
        match self.form {
            Form::Plain => row_bytes,
            Form::Local16 { .. } => 2 * row_elems,
            Form::Pairs16 { .. } => 2,
            Form::Dict { wide, .. } => 1 + usize::from(wide),
        }
    }

    /// Rows `lo..hi` (chunk-relative) in this chunk's form; `None` when they
    /// lie past what the chunk holds.
    #[inline]
    pub(crate) fn rows(&self, lo: usize, hi: usize, row_bytes: usize, row_elems: usize) -> Option<Rows<'_>> {
        let w = self.held_row_bytes(row_bytes, row_elems);
        let bytes = self.buf.get(lo * w..hi * w)?;
        Some(match &self.form {
            Form::Plain => Rows::Bytes(bytes),
            Form::Local16 { valid_rows } => {
                if hi > *valid_rows {
                    return None;
                }
                // Pool blocks and heap vectors are at least 8-byte aligned and
                // `lo * w` is even, so the cast cannot fail on alignment.
                Rows::Local16(bytemuck::try_cast_slice(bytes).ok()?)
            }
            Form::Pairs16 { valid_rows, runs } => {
                if hi > *valid_rows {
                    return None;
                }
                // The run holding row `lo`: `starts[0]` is 0, so there is one.
                let k = runs.starts.partition_point(|&s| s as usize <= lo).checked_sub(1)?;
                Rows::Pairs16 {
                    // Aligned as for `Local16`.
                    receivers: bytemuck::try_cast_slice(bytes).ok()?,
                    senders: Senders { runs, k, at: lo, hi },
                }
            }
            Form::Dict { table, wide: false } => Rows::Dict { codes: Codes::U8(bytes), table },
            Form::Dict { table, wide: true } => {
                Rows::Dict { codes: Codes::U16(bytemuck::try_cast_slice(bytes).ok()?), table }
            }
        })
    }

    /// The held bytes of rows `lo..hi`, clipped to the chunk, for a
    /// prefetch hint.
    pub(crate) fn held_bytes(&self, lo: usize, hi: usize, row_bytes: usize, row_elems: usize) -> &[u8] {
        let w = self.held_row_bytes(row_bytes, row_elems);
        let end = (hi * w).min(self.buf.len());
        self.buf.get((lo * w).min(end)..end).unwrap_or_default()
    }
}

/// Rows of `sample_rows` (physical sample `p` → its rows `r0..r1`, in
/// chunk-relative row numbers) moved to `Local16`: `wide` holds the chunk's
/// int64 values, `row_elems` per row; `first_atom(p)` is the sample's first
/// atom. `None` when a value does not fit int16 after the move.
pub(crate) fn local16(
    wide: &[u8],
    row_elems: usize,
    runs: impl Iterator<Item = (i64, std::ops::Range<usize>)>,
    mut out: ChunkBuf,
) -> Option<Chunk> {
    let vals: &[i64] = bytemuck::try_cast_slice(wide).ok()?;
    let local: &mut [i16] = bytemuck::try_cast_slice_mut(&mut out[..]).ok()?;
    let mut valid_rows = 0;
    for (first_atom, rows) in runs {
        let (a, b) = (rows.start * row_elems, rows.end * row_elems);
        let (src, dst) = (vals.get(a..b)?, local.get_mut(a..b)?);
        // Branch-free, so it vectorizes; the check decides at the end.
        let mut fits = true;
        for (l, &v) in dst.iter_mut().zip(src) {
            let x = v.wrapping_sub(first_atom);
            *l = x as i16;
            fits &= i64::from(*l) == x;
        }
        if !fits {
            return None;
        }
        valid_rows = valid_rows.max(rows.end);
    }
    Some(Chunk { buf: out, form: Form::Local16 { valid_rows } })
}

/// Rows of `sample_rows` as [`Form::Pairs16`], as [`local16`] takes them
/// (`wide`: the chunk's int64 pairs). `None` when a value does not fit
/// int16 after the move, when the samples' rows do not follow each other
/// from the chunk's first row, or when the senders change more often than
/// every [`MIN_RUN`] rows on average (then `Local16` is smaller).
pub(crate) fn pairs16(
    wide: &[u8],
    runs: impl Iterator<Item = (i64, std::ops::Range<usize>)>,
    mut out: ChunkBuf,
) -> Option<Chunk> {
    let vals: &[i64] = bytemuck::try_cast_slice(wide).ok()?;
    let receivers: &mut [i16] = bytemuck::try_cast_slice_mut(&mut out[..]).ok()?;
    let mut senders = SenderRuns { starts: Vec::new(), senders: Vec::new() };
    let mut valid_rows = 0;
    for (first_atom, rows) in runs {
        if rows.is_empty() {
            continue;
        }
        if rows.start != valid_rows {
            return None;
        }
        let src = vals.get(2 * rows.start..2 * rows.end)?;
        let dst = receivers.get_mut(rows.clone())?;
        // Receivers branch-free, so the loop vectorizes; then the senders'
        // runs, one compare per row.
        let mut fits = true;
        for (r, pair) in dst.iter_mut().zip(src.chunks_exact(2)) {
            let x = pair[1].wrapping_sub(first_atom);
            *r = x as i16;
            fits &= i64::from(*r) == x;
        }
        let mut last = senders.senders.last().copied();
        for (k, pair) in src.chunks_exact(2).enumerate() {
            let x = pair[0].wrapping_sub(first_atom);
            let s = x as i16;
            fits &= i64::from(s) == x;
            if last != Some(s) {
                senders.starts.push(u32::try_from(rows.start + k).ok()?);
                senders.senders.push(s);
                last = Some(s);
            }
        }
        // Past a few runs, a list in no order gives way early.
        if !fits || (senders.starts.len() > 64 && senders.starts.len() * MIN_RUN > rows.end) {
            return None;
        }
        valid_rows = rows.end;
    }
    if valid_rows == 0 || senders.starts.len() * MIN_RUN > valid_rows {
        return None;
    }
    out.truncate(2 * valid_rows);
    Some(Chunk { buf: out, form: Form::Pairs16 { valid_rows, runs: senders } })
}

/// Rows per sender run below which [`pairs16`] gives way to [`local16`]. A
/// run costs 6 bytes and saves 2 per row, but copying a run has a cost of
/// its own: runs of a few edges (a molecule's 1-4 per atom) copied slower
/// than int16 pairs, where bulk cells have 40-80 edges per atom.
const MIN_RUN: usize = 16;

/// Slots of [`dict`]'s hash table: a power of two, twice [`DICT_MAX`].
const DICT_SLOTS: usize = 4096;
/// Most distinct rows a dictionary chunk holds.
const DICT_MAX: usize = 2048;

/// `raw` (rows of `row_bytes` bytes of `dtype`) as codes into a table of its
/// distinct rows: one byte per row for up to 256 of them, two for up to
/// 2048; `None` past that (stopping at the first row past it) or for rows
/// wider than 16 bytes. `alloc(n)` gives the code buffer.
pub(crate) fn dict(raw: &[u8], dtype: DType, row_bytes: usize, alloc: impl FnOnce(usize) -> ChunkBuf) -> Option<Chunk> {
    if row_bytes == 0 || !raw.len().is_multiple_of(row_bytes) {
        return None;
    }
    let mut codes = vec![0u16; raw.len() / row_bytes];
    // One instance per row width, so a row is read as a fixed-size array
    // (a `memcpy` call per row measured ~3x slower).
    let table = match row_bytes {
        1 => codes_of::<1>(raw, &mut codes),
        2 => codes_of::<2>(raw, &mut codes),
        3 => codes_of::<3>(raw, &mut codes),
        4 => codes_of::<4>(raw, &mut codes),
        6 => codes_of::<6>(raw, &mut codes),
        8 => codes_of::<8>(raw, &mut codes),
        12 => codes_of::<12>(raw, &mut codes),
        16 => codes_of::<16>(raw, &mut codes),
        _ => None,
    }?;
    let entries = table.len() / row_bytes;
    let table = HostData::from_bytes(dtype, &table).ok()?;
    if entries <= 256 {
        let mut out = alloc(codes.len());
        for (o, &c) in out.iter_mut().zip(&codes) {
            *o = c as u8;
        }
        return Some(Chunk { buf: out, form: Form::Dict { table, wide: false } });
    }
    let mut out = alloc(2 * codes.len());
    out.copy_from_slice(bytemuck::cast_slice(&codes));
    Some(Chunk { buf: out, form: Form::Dict { table, wide: true } })
}

/// [`dict`] for rows of `W` bytes: writes each row's code and returns the
/// table's bytes. Rows are 128-bit keys in an open-addressed table (std's
/// SipHash map took ~4x as long); a row equal to the one before it skips
/// the lookup.
fn codes_of<const W: usize>(raw: &[u8], codes: &mut [u16]) -> Option<Vec<u8>> {
    let mut keys = vec![0u128; DICT_SLOTS];
    let mut slot_code = vec![u16::MAX; DICT_SLOTS];
    let mut table: Vec<u8> = Vec::with_capacity(256 * W);
    let mut n = 0usize;
    let (mut last_key, mut last_code) = (None, 0u16);
    for (code, row) in codes.iter_mut().zip(raw.chunks_exact(W)) {
        let mut key = [0u8; 16];
        key[..W].copy_from_slice(row);
        let key = u128::from_ne_bytes(key);
        if last_key == Some(key) {
            *code = last_code;
            continue;
        }
        let folded = (key as u64) ^ ((key >> 64) as u64).rotate_left(29);
        let mut slot = (folded.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 52) as usize;
        loop {
            let c = slot_code[slot];
            if c == u16::MAX {
                if n == DICT_MAX {
                    return None;
                }
                (keys[slot], slot_code[slot]) = (key, n as u16);
                *code = n as u16;
                table.extend_from_slice(row);
                n += 1;
                break;
            }
            if keys[slot] == key {
                *code = c;
                break;
            }
            slot = (slot + 1) & (DICT_SLOTS - 1);
        }
        (last_key, last_code) = (Some(key), *code);
    }
    Some(table)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buf(n: usize) -> ChunkBuf {
        ChunkBuf::from(vec![0u8; n])
    }

    #[test]
    fn dictionaries_round_trip_with_one_or_two_byte_codes() {
        let rows: Vec<[f32; 3]> = (0..1000).map(|i| [(i % 27) as f32 * 2.5, -((i % 27 % 5) as f32), 0.0]).collect();
        let raw: Vec<u8> = bytemuck::cast_slice(&rows).to_vec();
        let c = dict(&raw, DType::Float32, 12, buf).expect("27 distinct rows");
        let Some(Rows::Dict { codes: Codes::U8(codes), table }) = c.rows(10, 20, 12, 3) else {
            panic!("a dictionary chunk")
        };
        let mut out = HostData::Float32(vec![]);
        assert!(out.extend_from_dict(codes, table, 3));
        assert_eq!(out, HostData::Float32(rows[10..20].iter().flatten().copied().collect()));
        assert!(c.len() < raw.len() / 8, "1 byte per 12-byte row, plus the table");
        // 300 distinct rows take two-byte codes; 3000 are too many.
        let many: Vec<f32> = (0..3000).map(|i| (i % 300) as f32).collect();
        let c = dict(bytemuck::cast_slice(&many), DType::Float32, 4, buf).unwrap();
        let Some(Rows::Dict { codes: Codes::U16(codes), table }) = c.rows(290, 310, 4, 1) else { panic!("u16 codes") };
        let mut out = HostData::Float32(vec![]);
        assert!(out.extend_from_dict(codes, table, 1));
        assert_eq!(out, HostData::Float32(many[290..310].to_vec()));
        let distinct: Vec<f32> = (0..3000).map(|i| i as f32).collect();
        assert!(dict(bytemuck::cast_slice(&distinct), DType::Float32, 4, buf).is_none());
        // -0.0 and 0.0 are different rows: the table keeps bytes, not values.
        let signed = [0.0f32, -0.0, 0.0];
        let c = dict(bytemuck::cast_slice(&signed), DType::Float32, 4, buf).unwrap();
        let Some(Rows::Dict { codes: Codes::U8(codes), table }) = c.rows(0, 3, 4, 1) else { panic!() };
        let mut out = HostData::Float32(vec![]);
        assert!(out.extend_from_dict(codes, table, 1));
        let HostData::Float32(v) = out else { panic!() };
        assert_eq!(v.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), signed.map(f32::to_bits));
    }

    /// The pairs a `Pairs16` chunk gives for rows `lo..hi`, moved to `base`.
    fn pairs_of(c: &Chunk, lo: usize, hi: usize, base: i64) -> Option<Vec<i64>> {
        let Some(Rows::Pairs16 { receivers, senders }) = c.rows(lo, hi, 16, 2) else { return None };
        let mut out = HostData::Int64(vec![]);
        out.extend_pairs16(receivers, senders, base).ok()?;
        let HostData::Int64(v) = out else { return None };
        Some(v)
    }

    #[test]
    fn pairs16_keeps_receivers_and_sender_runs_and_gives_any_row_range_back() {
        // Two samples, atoms 1000..1010 (rows 0..300) and 5000..5010 (rows
        // 300..400): senders in runs of 30 and 10 rows, receivers varied.
        let mut wide: Vec<i64> = Vec::new();
        for r in 0..300i64 {
            wide.extend([1000 + r / 30, 1000 + (r * 7) % 10]);
        }
        for r in 0..100i64 {
            wide.extend([5000 + r / 10, 5000 + (r * 3) % 10]);
        }
        let runs = || [(1000i64, 0..300usize), (5000, 300..400)].into_iter();
        let c = pairs16(bytemuck::cast_slice(&wide), runs(), buf(800)).expect("runs of 10 and 30");
        assert!(c.len() < 800 + 20 * 6 + 1, "2 bytes a row and 6 a run");
        // Any range, moved from the sample's numbering to `base`, starting
        // and ending inside runs and across the samples' boundary (the copy
        // is per sample; the check is that each row comes back).
        for (lo, hi) in [(0, 300), (13, 47), (29, 31), (300, 400), (305, 306), (0, 0), (250, 350)] {
            let got = pairs_of(&c, lo, hi, 100).unwrap();
            let want: Vec<i64> = (lo..hi)
                .flat_map(|r| {
                    let first = if r < 300 { 1000 } else { 5000 };
                    [wide[2 * r] - first + 100, wide[2 * r + 1] - first + 100]
                })
                .collect();
            assert_eq!(got, want, "rows {lo}..{hi}");
        }
        assert!(c.rows(0, 401, 16, 2).is_none(), "rows past the known samples are not held");
        // Narrowed to int32: the same values.
        let Some(Rows::Pairs16 { receivers, senders }) = c.rows(13, 47, 16, 2) else { panic!() };
        let mut out = HostData::Int32(vec![]);
        out.extend_pairs16(receivers, senders, 100).unwrap();
        let want: Vec<i32> = pairs_of(&c, 13, 47, 100).unwrap().iter().map(|&x| x as i32).collect();
        assert_eq!(out, HostData::Int32(want));
    }

    #[test]
    fn pairs16_gives_way_to_local16_when_senders_do_not_run() {
        // Senders alternate every row: a run per row costs more than it saves.
        let wide: Vec<i64> = (0..400i64).flat_map(|r| [r % 2, (r + 1) % 2]).collect();
        assert!(pairs16(bytemuck::cast_slice(&wide), [(0i64, 0..400usize)].into_iter(), buf(800)).is_none());
        let l = local16(bytemuck::cast_slice(&wide), 2, [(0i64, 0..400usize)].into_iter(), buf(1600));
        assert!(matches!(l.map(|c| c.form), Some(Form::Local16 { valid_rows: 400 })));
        // A value that does not fit int16 after the move, a gap between samples.
        let far: Vec<i64> = (0..100i64).flat_map(|r| [r / 10, if r == 50 { 40_000 } else { 1 }]).collect();
        assert!(pairs16(bytemuck::cast_slice(&far), [(0i64, 0..100usize)].into_iter(), buf(200)).is_none());
        let near: Vec<i64> = (0..100i64).flat_map(|r| [r / 10, 1]).collect();
        let gap = [(0i64, 0..40usize), (0, 50..100)].into_iter();
        assert!(pairs16(bytemuck::cast_slice(&near), gap, buf(200)).is_none());
    }

    #[test]
    fn local16_moves_each_run_by_its_first_atom_and_refuses_misfits() {
        // Two samples: atoms 1000..1003 and 70000..70002, rows 0..2 and 2..3.
        let wide: Vec<i64> = vec![1000, 1002, 1001, 1000, 70001, 70000];
        let runs = || [(1000i64, 0..2usize), (70000, 2..3)].into_iter();
        let c = local16(bytemuck::cast_slice(&wide), 2, runs(), buf(12)).unwrap();
        let Some(Rows::Local16(v)) = c.rows(0, 3, 16, 2) else { panic!() };
        assert_eq!(v, [0, 2, 1, 0, 1, 0]);
        assert!(c.rows(0, 4, 16, 2).is_none(), "rows past the known samples are not held");
        let far: Vec<i64> = vec![1000, 40000];
        assert!(local16(bytemuck::cast_slice(&far), 2, [(1000i64, 0..1usize)].into_iter(), buf(4)).is_none());
    }
}
