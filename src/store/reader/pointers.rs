//! The pointer arrays (`meta/atoms_ptr`, `meta/edges_ptr`) paged: a reader
//! holds the pages (chunks) of them its reads touch, in a compact form, and
//! never the whole arrays.
//!
//! Why: the arrays are 16 bytes per structure of the whole store. Read
//! whole at open, every data-parallel rank of a 100M-structure store held
//! 1.6 GB of them and read them before its first batch, though it reads an
//! eighth of the store. Paged, opening reads the last page of each (the
//! totals), a read decodes the pages of its samples (a rank's region), and a
//! page is held as the value at every 16th entry and each entry's offset
//! from it in one byte (two, four): 1.25-2.25 bytes per structure and array
//! instead of 8, within [`PAGE_BYTES`] per array.
//!
//! Checks: a page is checked when decoded (entry 0 of the array is 0, the
//! values non-decreasing and within the last pointer), and against the
//! first and last values of its neighbors, which every decoded page leaves
//! behind: two adjacent pages out of order are refused when the second of
//! them is decoded, and so is a sample whose rows would run backwards.

use std::ops::Range;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use rayon::prelude::*;

use super::active::Active;
use super::{ChunkSource, FieldArray};
use crate::data::{DType, HostData, Level};
use crate::error::{Error, Result};
use crate::store::format;

/// Least bytes of decoded pages one pointer array keeps (least recently
/// used pages go first): a rank's region of a 100M-structure store on 8
/// ranks holds ~16 MB of each. A reader keeps up to an eighth of its chunk
/// cache's budget per array if that is more: a full permutation (which the
/// default shuffle reads only when the store fits the cache) touches every
/// page in every window, and pages that do not stay would be decoded again
/// window after window.
pub(crate) const PAGE_BYTES: usize = 32 << 20;

/// Entries per stored value (mark) of a page: the offsets from a mark of
/// 16 small structures (2-4 atoms: at most 64 rows) fit a byte.
const MARK_EVERY: usize = 16;

/// Not known yet (a page's first or last value before it is decoded).
const UNKNOWN: i64 = i64::MIN;

/// One page of a pointer array in compact form: the value at every
/// [`MARK_EVERY`]th entry (less the page's first) and each entry's offset
/// from the mark before it, in the narrowest type that holds the page's
/// largest such offset. A lookup is two loads and two adds.
pub(super) struct Page {
    /// Value of entry 0.
    first: i64,
    /// Values at entries 0, 16, 32, ... of the page, less `first`.
    marks: Vec<u32>,
    offsets: Offsets,
    len: usize,
}

/// Each entry's value less its mark's.
enum Offsets {
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
    /// A page spanning more than u32 rows: the values themselves.
    Values(Vec<i64>),
}

impl Page {
    /// `values` (non-decreasing, checked by the caller) in compact form.
    fn of(values: &[i64]) -> Page {
        let first = values.first().copied().unwrap_or(0);
        let span = values.last().map_or(0, |&l| l.abs_diff(first));
        let off = |j: usize| values[j].abs_diff(values[j - j % MARK_EVERY]);
        let max = (0..values.len()).map(off).max().unwrap_or(0);
        let offsets = if span > u64::from(u32::MAX) {
            Offsets::Values(values.to_vec())
        } else if max <= u64::from(u8::MAX) {
            Offsets::U8((0..values.len()).map(|j| off(j) as u8).collect())
        } else if max <= u64::from(u16::MAX) {
            Offsets::U16((0..values.len()).map(|j| off(j) as u16).collect())
        } else {
            Offsets::U32((0..values.len()).map(|j| off(j) as u32).collect())
        };
        let marks = match offsets {
            Offsets::Values(_) => Vec::new(),
            // Within u32: the span is.
            _ => values.iter().step_by(MARK_EVERY).map(|&v| v.abs_diff(first) as u32).collect(),
        };
        Page { first, marks, offsets, len: values.len() }
    }

    /// Entries held.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The value of entry `j` (`j < len()`).
    #[inline]
    pub(super) fn get(&self, j: usize) -> i64 {
        let base = || self.first.wrapping_add(i64::from(self.marks[j / MARK_EVERY]));
        match &self.offsets {
            Offsets::U8(o) => base().wrapping_add(i64::from(o[j])),
            Offsets::U16(o) => base().wrapping_add(i64::from(o[j])),
            Offsets::U32(o) => base().wrapping_add(i64::from(o[j])),
            Offsets::Values(v) => v[j],
        }
    }

    /// Bytes held.
    fn bytes(&self) -> usize {
        let offsets = match &self.offsets {
            Offsets::U8(o) => o.len(),
            Offsets::U16(o) => 2 * o.len(),
            Offsets::U32(o) => 4 * o.len(),
            Offsets::Values(v) => 8 * v.len(),
        };
        4 * self.marks.len() + offsets + std::mem::size_of::<Page>()
    }
}

/// One pointer array, paged.
pub(crate) struct PagedArray {
    /// Its path in the store.
    rel: &'static str,
    /// The array, opened (its chunks are the pages); `None` only in the
    /// empty snapshot a reader holds before its first open.
    array: Option<FieldArray>,
    /// Entries of the array the store uses (`num_samples + 1`).
    entries: usize,
    /// Entries per page.
    page_rows: usize,
    /// The last pointer: rows of all samples together.
    pub(super) total: u64,
    /// First and last value of every page, once a decode has seen them.
    ends: Vec<[AtomicI64; 2]>,
    held: Mutex<Held>,
    /// Bytes of pages kept (see [`PAGE_BYTES`]).
    budget: usize,
}

/// The decoded pages an array keeps, by page id, with their last use.
#[derive(Default)]
struct Held {
    pages: Vec<Option<(Arc<Page>, u64)>>,
    bytes: usize,
    tick: u64,
}

impl PagedArray {
    /// Pages covering the entries used.
    fn pages(&self) -> usize {
        self.entries.div_ceil(self.page_rows)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        // The map of pages stays valid whatever a panicking reader did.
        self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Page `c` if held (marked used).
    fn cached(&self, c: usize) -> Option<Arc<Page>> {
        let mut held = self.lock();
        held.tick += 1;
        let tick = held.tick;
        let slot = held.pages.get_mut(c)?.as_mut()?;
        slot.1 = tick;
        Some(slot.0.clone())
    }

    /// Keeps page `c`, dropping the least recently used pages past
    /// [`PAGE_BYTES`] (the newest always stays).
    fn keep(&self, c: usize, page: Arc<Page>) {
        let mut held = self.lock();
        if held.pages.len() < self.pages() {
            held.pages.resize_with(self.pages(), || None);
        }
        held.tick += 1;
        let tick = held.tick;
        let bytes = page.bytes();
        let Some(slot) = held.pages.get_mut(c) else { return };
        if let Some(old) = slot.replace((page, tick)) {
            held.bytes -= old.0.bytes();
        }
        held.bytes += bytes;
        while held.bytes > self.budget {
            let victim = held
                .pages
                .iter()
                .enumerate()
                .filter_map(|(i, s)| s.as_ref().map(|(_, t)| (i, *t)))
                .filter(|&(i, _)| i != c)
                .min_by_key(|&(_, t)| t);
            let Some((i, _)) = victim else { break };
            if let Some((p, _)) = held.pages[i].take() {
                held.bytes -= p.bytes();
            }
        }
    }

    /// Bytes of the decoded pages held.
    fn bytes_held(&self) -> usize {
        self.lock().bytes
    }

    fn end(&self, c: usize, which: usize) -> Option<i64> {
        let v = self.ends.get(c)?[which].load(Ordering::SeqCst);
        (v != UNKNOWN).then_some(v)
    }
}

/// The two pointer arrays of a snapshot, paged.
pub(crate) struct PointerPages {
    pub(super) atoms: PagedArray,
    pub(super) edges: PagedArray,
}

impl PointerPages {
    /// The arrays `atoms` and `edges`, `entries` used of each, pages not
    /// read yet (see [`PointerPages::read_last_pages`]), for a
    /// reader whose chunk cache's budget is `cache_bytes`.
    pub(super) fn new(atoms: FieldArray, edges: FieldArray, entries: usize, cache_bytes: u64) -> PointerPages {
        let budget = PAGE_BYTES.max(usize::try_from(cache_bytes / 8).unwrap_or(usize::MAX));
        Self::of_arrays(Some(atoms), Some(edges), entries, budget)
    }

    /// No samples and no arrays (a reader's snapshot before it opens).
    pub(super) fn empty() -> PointerPages {
        Self::of_arrays(None, None, 1, PAGE_BYTES)
    }

    fn of_arrays(atoms: Option<FieldArray>, edges: Option<FieldArray>, entries: usize, budget: usize) -> PointerPages {
        let paged = |rel: &'static str, array: Option<FieldArray>| {
            let page_rows = array.as_ref().map_or(1, |a| usize::try_from(a.chunk_rows.max(1)).unwrap_or(usize::MAX));
            let pages = entries.div_ceil(page_rows);
            PagedArray {
                rel,
                array,
                entries,
                page_rows,
                total: 0,
                ends: (0..pages).map(|_| [AtomicI64::new(UNKNOWN), AtomicI64::new(UNKNOWN)]).collect(),
                held: Mutex::new(Held::default()),
                budget,
            }
        };
        PointerPages { atoms: paged(format::ATOMS_PTR, atoms), edges: paged(format::EDGES_PTR, edges) }
    }

    /// The array of `level` (atoms or edges).
    fn of(&self, level: Level) -> &PagedArray {
        if level == Level::Edge { &self.edges } else { &self.atoms }
    }

    /// Bytes of decoded pages held, both arrays.
    pub(crate) fn bytes_held(&self) -> usize {
        self.atoms.bytes_held() + self.edges.bytes_held()
    }
}

/// The pages a list of samples needs, each fetched once (with one lock),
/// so that a window's rows are then looked up without locks.
pub(super) struct PageSet {
    level: Level,
    /// Entries per page, and its log2 when a power of two (a shift, not a
    /// division, per lookup).
    rows: usize,
    shift: Option<u32>,
    /// Page id of `pages[0]`.
    lo: usize,
    pages: Vec<Option<Arc<Page>>>,
}

impl PageSet {
    #[inline]
    fn split(&self, j: usize) -> (usize, usize) {
        match self.shift {
            Some(s) => (j >> s, j & (self.rows - 1)),
            None => (j / self.rows, j % self.rows),
        }
    }

    #[inline]
    fn get(&self, j: usize) -> Option<i64> {
        let (c, r) = self.split(j);
        let page = self.pages.get(c.checked_sub(self.lo)?)?.as_ref()?;
        (r < page.len()).then(|| page.get(r))
    }

    /// The rows of physical sample `p` (one of the samples the set was made
    /// for), checked to run forwards.
    #[inline]
    pub(super) fn rows(&self, src: &ChunkSource, pages: &PointerPages, p: usize) -> Result<Range<u64>> {
        let (Some(a), Some(b)) = (self.get(p), self.get(p + 1)) else {
            return Err(Error::Internal(format!("pointer page of sample {p} not fetched")));
        };
        if b < a {
            return Err(pages.pointers_decrease(src, self.level, p, a, b));
        }
        Ok(a as u64..b as u64)
    }
}

/// Hands out entries of one pointer array in any order, keeping the page
/// of the last one at hand (a window's lookups take the lock once per
/// change of page, not per entry).
pub(super) struct Cursor<'a> {
    src: &'a ChunkSource,
    pages: &'a PointerPages,
    level: Level,
    page: Option<(usize, Arc<Page>)>,
}

impl Cursor<'_> {
    fn page_of(&mut self, c: usize) -> Result<&Page> {
        if self.page.as_ref().is_none_or(|(held, _)| *held != c) {
            let page = self.pages.page(self.src, self.level, c)?;
            self.page = Some((c, page));
        }
        // Set just above.
        match &self.page {
            Some((_, p)) => Ok(p),
            None => Err(Error::Internal("pointer page vanished".into())),
        }
    }

    /// Entry `j` of the array.
    pub(super) fn get(&mut self, j: usize) -> Result<i64> {
        let rows = self.pages.of(self.level).page_rows;
        let page = self.page_of(j / rows)?;
        if j % rows >= page.len() {
            return Err(Error::Internal(format!("pointer {j} past the pointers in use")));
        }
        Ok(page.get(j % rows))
    }

    /// The rows of physical sample `p` (entries `p` and `p + 1`), checked to
    /// run forwards.
    pub(super) fn rows(&mut self, p: usize) -> Result<Range<u64>> {
        // The page stays at hand: the second entry rarely needs another.
        let (a, b) = (self.get(p)?, self.get(p + 1)?);
        if b < a {
            return Err(self.pages.pointers_decrease(self.src, self.level, p, a, b));
        }
        Ok(a as u64..b as u64)
    }

    /// The first entry `j` in `lo..hi` whose value is above `row` (`hi` if
    /// none): a binary search, over the pages first (by their first values,
    /// learned or decoded), then in the page.
    pub(super) fn first_above(&mut self, row: u64, lo: usize, hi: usize) -> Result<usize> {
        let arr = self.pages.of(self.level);
        let rows = arr.page_rows;
        // Pages are searched through their first entries.
        let (mut a, mut b) = (lo / rows, hi.div_ceil(rows));
        while b - a > 1 {
            let mid = (a + b) / 2;
            let first = match arr.end(mid, 0) {
                Some(v) => v,
                None => self.get(mid * rows)?,
            };
            if first as u64 > row { b = mid } else { a = mid }
        }
        let (mut x, mut y) = ((a * rows).max(lo), ((a + 1) * rows).min(hi));
        while x < y {
            let mid = (x + y) / 2;
            if self.get(mid)? as u64 > row { y = mid } else { x = mid + 1 }
        }
        Ok(x)
    }
}

impl PointerPages {
    /// Samples the pointers describe (entries less one).
    pub(super) fn num_samples(&self) -> usize {
        self.atoms.entries.saturating_sub(1)
    }

    /// A cursor over the `level` pointer array, its pages decoded through `src`.
    pub(super) fn cursor<'a>(&'a self, src: &'a ChunkSource, level: Level) -> Cursor<'a> {
        Cursor { src, pages: self, level, page: None }
    }

    /// The pages of the `level` pointer array that physical samples
    /// `physical` need (both of each sample's entries).
    pub(super) fn page_set(&self, src: &ChunkSource, level: Level, physical: &[usize]) -> Result<PageSet> {
        let rows = self.of(level).page_rows;
        let shift = rows.is_power_of_two().then(|| rows.trailing_zeros());
        let mut set = PageSet { level, rows, shift, lo: 0, pages: Vec::new() };
        let (Some(&min), Some(&max)) = (physical.iter().min(), physical.iter().max()) else { return Ok(set) };
        set.lo = set.split(min).0;
        set.pages = (set.lo..=set.split(max + 1).0).map(|_| None).collect();
        for &p in physical {
            for c in [set.split(p).0, set.split(p + 1).0] {
                if set.pages[c - set.lo].is_none() {
                    set.pages[c - set.lo] = Some(self.page(src, level, c)?);
                }
            }
        }
        Ok(set)
    }

    /// Page `c` of the `level` pointer array: held, or decoded, checked and kept.
    pub(super) fn page(&self, src: &ChunkSource, level: Level, c: usize) -> Result<Arc<Page>> {
        let arr = self.of(level);
        if let Some(p) = arr.cached(c) {
            return Ok(p);
        }
        let page = Arc::new(Page::of(&self.page_values(src, level, c)?));
        arr.keep(c, page.clone());
        Ok(page)
    }

    /// The entries of page `c` of the `level` pointer array, decoded and
    /// checked (see the module's notes), not kept.
    pub(super) fn page_values(&self, src: &ChunkSource, level: Level, c: usize) -> Result<Vec<i64>> {
        let arr = self.of(level);
        let Some(f) = &arr.array else {
            return Err(Error::inconsistent(&src.location, arr.rel, "the store is not open"));
        };
        let start = c.saturating_mul(arr.page_rows);
        if start >= arr.entries {
            return Err(src.chunk_error(f, c as u64, format!("page past the {} pointers in use", arr.entries)));
        }
        let len = (arr.entries - start).min(arr.page_rows);
        let raw = src.decode_raw(f, c as u64)?;
        let mut values: Vec<i64> = match (f.dtype, bytemuck::try_cast_slice::<u8, i64>(&raw)) {
            (DType::Int64, Ok(v)) => v.get(..len).map(<[i64]>::to_vec).unwrap_or_default(),
            _ => HostData::from_bytes(f.dtype, &raw).ok().and_then(|d| d.to_i64_vec()).unwrap_or_default(),
        };
        if values.len() < len {
            return Err(src.chunk_error(f, c as u64, "decoded page shorter than its pointers"));
        }
        values.truncate(len);
        let total = arr.total as i64;
        if start == 0 && values.first() != Some(&0) {
            return Err(Error::inconsistent(
                &src.location,
                &f.rel,
                format!("first pointer is {:?}, expected 0", values.first()),
            ));
        }
        // The last page is read at open, before the total is known.
        let last_page = start + len == arr.entries;
        for (j, w) in values.windows(2).enumerate() {
            if w[1] < w[0] {
                return Err(self.pointers_decrease(src, level, start + j, w[0], w[1]));
            }
        }
        if let (Some(&lo), Some(&hi)) = (values.first(), values.last())
            && (lo < 0 || (!last_page && hi > total))
        {
            let (at, v) = if lo < 0 { (start, lo) } else { (start + len - 1, hi) };
            return Err(Error::inconsistent(
                &src.location,
                &f.rel,
                format!("pointer {at} is {v}, outside 0..={total} (the last pointer)"),
            ));
        }
        self.check_neighbors(src, level, c, &values)?;
        Ok(values)
    }

    /// Records page `c`'s first and last values and checks them against
    /// its neighbors' (where a decode has seen them): the pages of an array
    /// are in order.
    fn check_neighbors(&self, src: &ChunkSource, level: Level, c: usize, values: &[i64]) -> Result<()> {
        let arr = self.of(level);
        let (Some(&first), Some(&last), Some(ends)) = (values.first(), values.last(), arr.ends.get(c)) else {
            return Ok(());
        };
        ends[0].store(first, Ordering::SeqCst);
        ends[1].store(last, Ordering::SeqCst);
        // Stored, then loaded (sequentially consistent): of two neighbors
        // decoded at once, at least one sees the other.
        let start = c * arr.page_rows;
        if let Some(before) = c.checked_sub(1).and_then(|b| arr.end(b, 1))
            && before > first
        {
            return Err(self.pointers_decrease(src, level, start - 1, before, first));
        }
        if let Some(after) = arr.end(c + 1, 0)
            && after < last
        {
            return Err(self.pointers_decrease(src, level, start + values.len() - 1, last, after));
        }
        Ok(())
    }

    /// The error of pointers `p` and `p + 1` of `level` decreasing (`a`
    /// then `b`).
    pub(super) fn pointers_decrease(&self, src: &ChunkSource, level: Level, p: usize, a: i64, b: i64) -> Error {
        Error::inconsistent(&src.location, self.of(level).rel, format!("pointers decrease at sample {p}: {a} then {b}"))
    }

    /// Reads the last page of each pointer array (checked), and sets the
    /// totals from them.
    pub(super) fn read_last_pages(&mut self, src: &ChunkSource) -> Result<()> {
        for level in [Level::Atom, Level::Edge] {
            let arr = self.of(level);
            let c = arr.pages().saturating_sub(1);
            let values = self.page_values(src, level, c)?;
            let total = values.last().copied().unwrap_or(0);
            let page = Arc::new(Page::of(&values));
            let arr = if level == Level::Edge { &mut self.edges } else { &mut self.atoms };
            // Non-negative: checked with the page.
            arr.total = total as u64;
            arr.keep(c, page);
        }
        Ok(())
    }

    /// Every entry of the `level` pointer array (for whole-store tools:
    /// repair), pages decoded in parallel and not kept.
    pub(crate) fn values(&self, src: &ChunkSource, level: Level) -> Result<Vec<i64>> {
        let pages: Vec<Vec<i64>> = (0..self.of(level).pages())
            .into_par_iter()
            .map(|c| self.page_values(src, level, c))
            .collect::<Result<_>>()?;
        Ok(pages.concat())
    }

    /// Entries `1..=upto` of the atom pointers whose values are at most
    /// `max`: the leading ones (the array is non-decreasing), what the
    /// append-bug diagnosis looks for.
    pub(super) fn leading_atom_pointers(&self, src: &ChunkSource, upto: usize, max: i64) -> Result<Vec<i64>> {
        let mut cur = self.cursor(src, Level::Atom);
        let mut out = vec![0];
        for j in 1..=upto.min(self.num_samples()) {
            let v = cur.get(j)?;
            if v > max {
                break;
            }
            out.push(v);
        }
        Ok(out)
    }

    /// The first entry of every run of samples whose first row (on `level`'s
    /// axis) lies in one `chunk_rows`-row chunk, as logical indices: the
    /// pages are decoded in parallel, searched and dropped (not kept).
    pub(super) fn blocks_by_first_row(
        &self,
        src: &ChunkSource,
        active: Option<&Active>,
        level: Level,
        chunk_rows: u64,
    ) -> Result<Vec<usize>> {
        let arr = self.of(level);
        let n = self.num_samples();
        let rows = arr.page_rows;
        let chunk_rows = chunk_rows.max(1);
        // Active samples before each page (logical index of its first active one).
        let before: Vec<usize> = match active {
            None => (0..arr.pages()).map(|c| c * rows).collect(),
            Some(a) => a.counts_before((0..arr.pages()).map(|c| c * rows)),
        };
        let per_page: Vec<Vec<(usize, u64)>> = (0..arr.pages())
            .into_par_iter()
            .map(|c| -> Result<Vec<(usize, u64)>> {
                let values = self.page_values(src, level, c)?;
                let start = c * rows;
                let end = (start + values.len()).min(n);
                let mut out = Vec::new();
                let mut logical = before[c];
                match active {
                    None => {
                        // Where the chunk of the first row changes: a search per chunk.
                        let mut j = start;
                        while j < end {
                            let id = values[j - start] as u64 / chunk_rows;
                            out.push((j, id));
                            let next = (id + 1).saturating_mul(chunk_rows);
                            j += values[j - start..end - start].partition_point(|&v| (v as u64) < next);
                        }
                    }
                    Some(a) => {
                        let mut last = None;
                        for p in start..end {
                            if !a.contains(p) {
                                continue;
                            }
                            let id = values[p - start] as u64 / chunk_rows;
                            if last != Some(id) {
                                out.push((logical, id));
                                last = Some(id);
                            }
                            logical += 1;
                        }
                    }
                }
                Ok(out)
            })
            .collect::<Result<_>>()?;
        let mut starts = Vec::new();
        let mut last = None;
        for (logical, id) in per_page.into_iter().flatten() {
            if last != Some(id) {
                starts.push(logical);
                last = Some(id);
            }
        }
        Ok(starts)
    }

    /// The physical samples with rows in inner chunk `chunk` of an edge
    /// array chunked by `chunk_rows`, in order, each with its rows there
    /// (chunk-relative; empty for a sample without edges) and its atom rows.
    pub(super) fn edge_runs(&self, src: &ChunkSource, chunk_rows: u64, chunk: u64) -> Result<Vec<EdgeRun>> {
        let n = self.num_samples();
        let c0 = chunk * chunk_rows;
        let c1 = (c0 + chunk_rows).min(self.edges.total);
        let mut edges = self.cursor(src, Level::Edge);
        let mut atoms = self.cursor(src, Level::Atom);
        // The first sample whose edges end past the chunk's first row.
        let first = edges.first_above(c0, 1, n + 1)?.saturating_sub(1);
        let mut runs = Vec::new();
        for p in first..n {
            let e = edges.rows(p)?;
            if e.start >= c1 {
                break;
            }
            let r0 = e.start.max(c0) - c0;
            let r1 = e.end.min(c1).max(c0) - c0;
            runs.push(EdgeRun { sample: p, rows: r0 as usize..r1 as usize, atoms: atoms.rows(p)? });
        }
        Ok(runs)
    }
}

#[derive(Clone)]
/// A sample's rows in one edge chunk ([`PointerPages::edge_runs`]).
pub(super) struct EdgeRun {
    /// Physical sample.
    pub(super) sample: usize,
    /// Its rows in the chunk (chunk-relative).
    pub(super) rows: Range<usize>,
    /// Its atom rows.
    pub(super) atoms: Range<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_returns_every_value_in_each_step_width() {
        let cases: Vec<Vec<i64>> = vec![
            (0..1000)
                .scan(0, |acc, i| {
                    *acc += i % 7;
                    Some(*acc)
                })
                .collect(),
            (0..1000).map(|i| i * 300).collect(),
            (0..100).map(|i| i * 100_000).collect(),
            (0..40).map(|i| i * (1 << 40)).collect(),
            vec![5],
            vec![0, 0, 0, 0],
        ];
        for values in cases {
            let page = Page::of(&values);
            assert_eq!(page.len(), values.len());
            for (j, &v) in values.iter().enumerate() {
                assert_eq!(page.get(j), v, "entry {j}");
            }
        }
    }

    #[test]
    fn small_increments_take_a_byte_and_a_quarter_an_entry() {
        let values: Vec<i64> = (0..131_072).map(|i| i * 3).collect();
        let bytes = Page::of(&values).bytes();
        assert!(bytes <= values.len() * 5 / 4 + 256, "{bytes} bytes");
    }
}
