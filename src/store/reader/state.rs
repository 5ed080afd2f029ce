//! The [`State`] snapshot of a store and the code that opens it: the root,
//! the pointers and the sample mask read and checked (every size the
//! metadata claims against the files, see [`limits`]), every field array
//! opened, all held in one snapshot that `refresh` swaps whole.

use rayon::prelude::*;
use zarrs::array::{Array, ArrayShardedReadableExtCache};

use super::chunks::DirectDecode;
use super::pointers::PointerPages;
use super::strings::StringArray;
use super::{ChunkSource, FieldArray};
use crate::data::NEIGHBOR_LIST;
use crate::data::{DType, Level};
use crate::error::{Error, Result};
use crate::location::Location;
use crate::store::arrays;
use crate::store::bytes::ByteStorage as Store;
use crate::store::codec::ChainSpec;
use crate::store::format;
use crate::store::limits;

/// An array opened and measured, not yet read.
pub(super) struct Opened {
    array: Array<Store>,
    dtype: DType,
    geometry: limits::Geometry,
    /// Its codec chain, parsed once for the limits and the direct decode.
    chain: ChainSpec,
}

/// The pointer arrays (their last pages read, the totals known) and the
/// sample mask, read and checked.
struct StoredPointers {
    pointers: PointerPages,
    /// The active samples; `None` when nothing is deleted.
    active: Option<super::active::Active>,
}

/// A field array opened at `rel`, with the rows the pointers need of it.
struct OpenedField<'a> {
    name: &'a str,
    level: Level,
    rel: String,
    opened: Opened,
    need: u64,
}

/// The arrays on the atom and the edge axis, with their geometry: some
/// array on each axis must back the pointers' totals.
#[derive(Default)]
struct Axes {
    atom: Vec<(String, limits::Geometry)>,
    edge: Vec<(String, limits::Geometry)>,
}

/// A consistent snapshot of the store (swapped whole by `refresh`).
pub(crate) struct State {
    pub num_samples: usize,
    /// The pointer arrays, paged (see `pointers`).
    pub pointers: PointerPages,
    /// The active samples (logical to physical); `None` when nothing is deleted.
    pub active: Option<super::active::Active>,
    pub fields: Vec<FieldArray>,
    /// The string labels (`strings/`), in name order.
    pub strings: Vec<StringArray>,
}

impl State {
    /// No samples and no arrays (a reader's snapshot before it opens).
    pub(super) fn empty() -> State {
        State { num_samples: 0, pointers: PointerPages::empty(), active: None, fields: vec![], strings: vec![] }
    }

    /// Reads the root, the pointers and the mask through `src`, and opens
    /// every field array; every size the metadata claims is checked against
    /// the files before anything of that size is allocated (see
    /// [`crate::store::limits`]).
    pub(super) fn load(src: &ChunkSource) -> Result<State> {
        let p = &src.location;
        let (root, pending) = root_and_pending(src)?;
        let n = root.num_samples;
        let ptrs = read_pointers(src, n)?;
        let (total_atoms, total_edges) = (ptrs.pointers.atoms.total, ptrs.pointers.edges.total);
        let mut axes = mask_axes(src, total_atoms, total_edges)?;
        let mut opened = Vec::with_capacity(root.fields.len());
        for (name, info) in &root.fields {
            let rel = if pending.as_deref() == Some(name.as_str()) {
                format::pending_path(name)
            } else {
                format::field_path(info.group, name)
            };
            let field = open_field(src, name, info.level, rel, [total_atoms, total_edges, n as u64])?;
            match info.level {
                Level::Atom => axes.atom.push((field.rel.clone(), field.opened.geometry)),
                Level::Edge => axes.edge.push((field.rel.clone(), field.opened.geometry)),
                Level::System => {}
            }
            opened.push(field);
        }
        // The pointer values are claims too: some array on each axis must
        // hold that many rows.
        let backing = |rel: &str, g: &limits::Geometry, enough: u64| backed(src, rel, g, enough);
        for (rel, rows, axis) in
            [(format::ATOMS_PTR, total_atoms, &axes.atom), (format::EDGES_PTR, total_edges, &axes.edge)]
        {
            let arrays: Vec<(&str, limits::Geometry)> = axis.iter().map(|(r, g)| (r.as_str(), *g)).collect();
            limits::check_rows(p, rel, &format!("the last pointer ({rows})"), rows, &arrays, &backing)?;
        }
        let mut fields = Vec::with_capacity(opened.len());
        for f in opened {
            limits::check_field_bytes(p, &f.rel, f.need, &f.opened.geometry, &backing)?;
            fields.push(field_array(src, f.name, &f.rel, f.level, f.opened));
        }
        let strings = StringArray::open_all(src, &root, n as u64, total_atoms)?;
        Ok(State { num_samples: n, pointers: ptrs.pointers, active: ptrs.active, fields, strings })
    }

    /// Rows of every physical sample together on `level`'s axis.
    pub(crate) fn rows_of(&self, level: Level) -> u64 {
        match level {
            Level::Atom => self.pointers.atoms.total,
            Level::Edge => self.pointers.edges.total,
            Level::System => self.num_samples as u64,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.active.as_ref().map_or(self.num_samples, super::active::Active::len)
    }

    pub(super) fn physical(&self, logical: usize) -> usize {
        self.active.as_ref().map_or(logical, |a| a.physical(logical))
    }
}

/// The root attributes (read anew: a refresh forgets what the byte
/// source knew), with every array's metadata prefetched over a network,
/// and the custom field an interrupted `add_custom` left committed but
/// unmoved: its array is read where it is (the next writer moves it).
fn root_and_pending(src: &ChunkSource) -> Result<(format::RootAttrs, Option<String>)> {
    let p = &src.location;
    src.bytes.forget();
    if let Location::Local(local) = p {
        let root = format::read_root(local)?;
        let pending = format::interrupted_add_custom(local, &root).map(|(name, _)| name);
        return Ok((root, pending));
    }
    let root = format::read_root_from(&*src.bytes, p)?;
    let mut keys: Vec<String> = format::META_ARRAYS.iter().map(|(rel, _)| format!("{rel}/zarr.json")).collect();
    for (name, info) in &root.fields {
        keys.push(format!("{}/zarr.json", format::field_path(info.group, name)));
        keys.push(format!("{}/zarr.json", format::pending_path(name)));
    }
    src.bytes.prefetch(&keys);
    let pending = remote_pending(src, &root)?;
    Ok((root, pending))
}

/// Array `rel` opened, with its dtype and checked geometry.
pub(super) fn open_measured(src: &ChunkSource, rel: &str) -> Result<Opened> {
    let array = arrays::open_array(&src.location, &src.store, rel)?;
    let dtype = arrays::array_dtype(&src.location, rel, &array)?;
    let chain = ChainSpec::of(&array);
    let geometry = limits::geometry(&src.location, rel, &array, dtype, &chain)?;
    Ok(Opened { array, dtype, geometry, chain })
}

/// The pointer arrays and the sample mask: shapes and dtypes checked,
/// their files checked to hold `n + 1` (`n`) entries, then read.
fn read_pointers(src: &ChunkSource, n: usize) -> Result<StoredPointers> {
    let p = &src.location;
    let n1 = n as u64 + 1; // read_root keeps num_samples below i64::MAX
    let atoms = open_measured(src, format::ATOMS_PTR)?;
    let edges = open_measured(src, format::EDGES_PTR)?;
    let mask = open_measured(src, format::SAMPLES_MASK)?;
    for (rel, o) in [(format::ATOMS_PTR, &atoms), (format::EDGES_PTR, &edges)] {
        if !matches!(o.dtype, DType::Int64 | DType::Int32 | DType::UInt64 | DType::UInt32) {
            return Err(Error::inconsistent(p, rel, format!("dtype {}, expected int64", o.dtype)));
        }
        let len = o.array.shape().first().copied().unwrap_or(0);
        if o.array.dimensionality() != 1 || len < n1 {
            return Err(Error::inconsistent(
                p,
                rel,
                format!("shape {:?} too short for num_samples {n} (needs {n1} entries)", o.array.shape()),
            ));
        }
    }
    // One bool per sample, or the flags below would index past the pointers.
    if mask.dtype != DType::Bool || mask.array.dimensionality() != 1 {
        return Err(Error::inconsistent(
            p,
            format::SAMPLES_MASK,
            format!("{} array of shape {:?}, expected a 1-d bool array", mask.dtype, mask.array.shape()),
        ));
    }
    let mask_len = mask.array.shape().first().copied().unwrap_or(0);
    if mask_len < n as u64 {
        return Err(Error::inconsistent(p, format::SAMPLES_MASK, format!("{mask_len} entries for {n} samples")));
    }
    // num_samples (and the pointer shapes) are numbers anyone can write:
    // the pointer and mask files must be able to hold that many entries.
    let backing = |rel: &str, g: &limits::Geometry, enough: u64| backed(src, rel, g, enough);
    let geometries = [
        (format::ATOMS_PTR, atoms.geometry),
        (format::EDGES_PTR, edges.geometry),
        (format::SAMPLES_MASK, mask.geometry),
    ];
    limits::check_rows(p, format::ATOMS_PTR, &format!("num_samples {n}"), n1, &geometries, &backing)?;
    // The pointers stay in the store: their last pages give the totals,
    // the others are read as reads need them (see `pointers`).
    let entries = usize::try_from(n1).map_err(|e| Error::inconsistent(p, format::ATOMS_PTR, e.to_string()))?;
    let pointer_array = |rel: &str, o: Opened| field_array(src, rel, rel, Level::System, o);
    let mut pointers = PointerPages::new(
        pointer_array(format::ATOMS_PTR, atoms),
        pointer_array(format::EDGES_PTR, edges),
        entries,
        src.cache.budget(),
    );
    // Over a network the mask and the last pages go together: opening
    // waits for one round trip, not three.
    let (active, pages) = std::thread::scope(|s| {
        let active = s.spawn(|| read_active(src, mask, n));
        let pages = pointers.read_last_pages(src);
        let died = |_| Error::Background("a mask reader thread panicked".into());
        (active.join().unwrap_or_else(|e| Err(died(e))), pages)
    });
    let (active, ()) = (active?, pages?);
    Ok(StoredPointers { pointers, active })
}

/// The active samples from the sample mask `o` of `n` samples: its
/// chunks decoded in parallel, each chunk's flags turned into bits as
/// it is decoded (a whole-mask buffer would be a byte a structure at
/// open: a gigabyte at 1B structures); `None` when every sample is
/// active. Through the decode field chunks take, so checksums are
/// checked: zarrs' `retrieve_array_subset` decodes a partly read chunk
/// with partial decoders, and its crc32c partial decoder skips the check.
fn read_active(src: &ChunkSource, o: Opened, n: usize) -> Result<Option<super::active::Active>> {
    use super::active::{Active, flag_bits, or_bits_at, set_bits};
    let f = field_array(src, format::SAMPLES_MASK, format::SAMPLES_MASK, Level::System, o);
    let cr = usize::try_from(f.chunk_rows.max(1)).unwrap_or(usize::MAX);
    // Per chunk: `None` when all its samples are active, else their bits.
    let parts: Vec<Option<Vec<u64>>> = (0..n.div_ceil(cr))
        .into_par_iter()
        .map(|c| {
            let raw = src.decode_raw(&f, c as u64)?;
            let len = (n - c * cr).min(cr);
            let flags =
                raw.get(..len).ok_or_else(|| src.chunk_error(&f, c as u64, "decoded chunk shorter than its flags"))?;
            Ok((!flags.iter().all(|&b| b != 0)).then(|| flag_bits(flags)))
        })
        .collect::<Result<_>>()?;
    if parts.iter().all(Option::is_none) {
        return Ok(None);
    }
    let mut bits = vec![0u64; n.div_ceil(64)];
    for (c, part) in parts.into_iter().enumerate() {
        match part {
            None => set_bits(&mut bits, c * cr, ((c + 1) * cr).min(n)),
            Some(local) => or_bits_at(&mut bits, c * cr, &local),
        }
    }
    Ok(Some(Active::from_bits(bits, n)))
}

/// The atom and edge masks, where the store has them, each checked to
/// be as long as the pointers' totals.
fn mask_axes(src: &ChunkSource, total_atoms: u64, total_edges: u64) -> Result<Axes> {
    let mut axes = Axes::default();
    for (rel, need, axis) in
        [(format::ATOMS_MASK, total_atoms, &mut axes.atom), (format::EDGES_MASK, total_edges, &mut axes.edge)]
    {
        if src.bytes.size(&format!("{rel}/zarr.json"))?.is_some() {
            let o = open_measured(src, rel)?;
            let len = o.array.shape().first().copied().unwrap_or(0);
            if len < need {
                return Err(Error::inconsistent(&src.location, rel, format!("{len} entries, pointers need {need}")));
            }
            axis.push((rel.to_string(), o.geometry));
        }
    }
    Ok(axes)
}

/// Field `name` at `rel` opened and checked: a neighbor list must be an
/// edge-level index array, and every field must have the rows its level
/// needs (`totals`: atoms, edges, samples).
fn open_field<'a>(
    src: &ChunkSource,
    name: &'a str,
    level: Level,
    rel: String,
    totals: [u64; 3],
) -> Result<OpenedField<'a>> {
    let p = &src.location;
    let opened = open_measured(src, &rel)?;
    let dtype = opened.dtype;
    // Its values are shifted by atom offsets on every read, and
    // checked per sample against the edge pointers.
    if name == NEIGHBOR_LIST && !matches!(dtype, DType::Int64 | DType::Int32 | DType::UInt64 | DType::UInt32) {
        return Err(Error::inconsistent(
            p,
            &rel,
            format!("dtype {dtype} is not an index type (int32/int64/uint32/uint64)"),
        ));
    }
    if name == NEIGHBOR_LIST && level != Level::Edge {
        return Err(Error::inconsistent(p, &rel, format!("listed at {level} level; neighbor lists are edge-level")));
    }
    let need = level.pick(totals[0], totals[1], totals[2]);
    let len = opened.array.shape().first().copied().unwrap_or(0);
    if len < need {
        return Err(Error::inconsistent(p, &rel, format!("{len} rows, but the pointers need {need} ({level} level)")));
    }
    Ok(OpenedField { name, level, rel, opened, need })
}

/// Field `name` (array `rel`) ready for reading, with its checked
/// geometry ([`limits::geometry`]).
pub(super) fn field_array(src: &ChunkSource, name: &str, rel: &str, level: Level, opened: Opened) -> FieldArray {
    let Opened { array, dtype, geometry: g, chain } = opened;
    let trailing: Vec<usize> = array.shape().iter().skip(1).map(|&d| d as usize).collect();
    let shard_cache = ArrayShardedReadableExtCache::new(&array);
    let direct = DirectDecode::of(&array, dtype, &chain);
    FieldArray {
        name: name.to_string(),
        rel: rel.to_string(),
        level,
        dtype,
        trailing,
        row_elems: g.row_elems,
        row_bytes: g.row_bytes,
        chunk_rows: g.chunk_rows,
        array,
        shard_cache,
        id: src.next_array_id(),
        direct,
        shard_indexes: Default::default(),
        wide_only: Default::default(),
        bad_samples: Default::default(),
        any_bad: Default::default(),
    }
}

/// [`format::interrupted_add_custom`] through the byte source: the
/// custom field whose array is still in the pending folder.
fn remote_pending(src: &ChunkSource, root: &format::RootAttrs) -> Result<Option<String>> {
    for (name, info) in &root.fields {
        let placed = format!("{}/zarr.json", format::field_path(info.group, name));
        if src.bytes.size(&placed)?.is_none()
            && src.bytes.size(&format!("{}/zarr.json", format::pending_path(name)))?.is_some()
        {
            return Ok(Some(name.clone()));
        }
    }
    Ok(None)
}

/// Bytes the chunk files of array `rel` can decode to (see
/// [`limits::Backing`]): from a listing where the source lists, else
/// from the sizes of the chunk objects along dimension 0 (plain HTTP),
/// asked one at a time until `enough` is reached.
fn backed(src: &ChunkSource, rel: &str, g: &limits::Geometry, enough: u64) -> Result<u64> {
    if let Some(listed) = src.bytes.list_sizes(rel)? {
        let chunks = listed.into_iter().filter(|(k, _)| !k.ends_with("zarr.json")).map(|(_, len)| len);
        return Ok(limits::backed_by(chunks, g, enough));
    }
    let array = arrays::open_array(&src.location, &src.store, rel)?;
    let files = array.shape().first().copied().unwrap_or(0).div_ceil(g.file_rows.max(1));
    let mut total = 0u64;
    let mut idx = vec![0u64; array.dimensionality()];
    for i in 0..files {
        idx[0] = i;
        if let Some(len) = src.bytes.size(array.chunk_key(&idx).as_str())? {
            total = total.saturating_add(limits::backed_by([len], g, u64::MAX));
            if total >= enough {
                break;
            }
        }
    }
    Ok(total)
}
