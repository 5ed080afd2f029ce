//! Opening a store for reading: the root, the pointers and the sample mask
//! read and checked (every size the metadata claims against the files, see
//! [`limits`]), every field array opened, all held in one [`State`]
//! snapshot that `refresh` swaps whole.

use std::sync::RwLock;

use zarrs::array::{Array, ArrayShardedReadableExtCache};

use super::AtomicDataZarrReader;
use super::direct::{DirectDecode, ShardIndex};
use super::plan::{Pointers, chunks_of};
use crate::data::NEIGHBOR_LIST;
use crate::data::{CollateOptions, DType, HostData, Level};
use crate::error::{Error, Result};
use crate::store::arrays;
use crate::store::bytes::SourceStorage as Store;
use crate::store::format;
use crate::store::limits;

/// One field array, opened.
pub(crate) struct FieldArray {
    pub name: String,
    pub rel: String,
    pub level: Level,
    pub dtype: DType,
    pub trailing: Vec<usize>,
    pub row_elems: usize,
    pub row_bytes: usize,
    pub chunk_rows: u64,
    pub array: Array<Store>,
    pub shard_cache: ArrayShardedReadableExtCache,
    /// Cache key of this array; unique within a reader's lifetime.
    pub id: u32,
    /// Set when inner chunks can be decoded without zarrs' codec pipeline.
    pub direct: Option<DirectDecode>,
    /// Shard indexes read by the direct path, by shard number.
    pub shard_indexes: std::sync::Mutex<std::collections::HashMap<u64, ShardIndex>>,
    /// Set once a chunk of this int64 array held a value outside int32: the
    /// array is then never narrowed (see [`CollateOptions::narrow_int64`]).
    pub wide_only: std::sync::atomic::AtomicBool,
    /// `neighbor_list` only: physical samples seen with an index outside
    /// their own atoms. Each chunk is checked once, when it is decoded (see
    /// [`AtomicDataZarrReader::verify_neighbors`]), so batches copied from
    /// cached chunks pay nothing for the check; batch paths refuse these
    /// samples, `read` and `read_many` return them as stored.
    pub bad_samples: RwLock<std::collections::BTreeSet<usize>>,
    /// Whether `bad_samples` is non-empty (read without the lock per batch).
    pub any_bad: std::sync::atomic::AtomicBool,
}

impl FieldArray {
    /// Whether this request reads the array's chunks narrowed to int32.
    pub(super) fn narrowed(&self, opts: CollateOptions) -> bool {
        opts.narrow_int64() && self.dtype == DType::Int64 && !self.wide_only.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// A consistent snapshot of the store (swapped whole by `refresh`).
pub(crate) struct State {
    pub num_samples: usize,
    pub atoms_ptr: Vec<i64>,
    pub edges_ptr: Vec<i64>,
    /// Physical index of each logical index; `None` when nothing is deleted.
    pub active: Option<Vec<usize>>,
    pub fields: Vec<FieldArray>,
    /// The string labels (`strings/`), in name order.
    pub strings: Vec<super::strings::StringArray>,
}

impl State {
    pub(super) fn len(&self) -> usize {
        self.active.as_ref().map_or(self.num_samples, Vec::len)
    }

    pub(super) fn physical(&self, logical: usize) -> usize {
        self.active.as_ref().map_or(logical, |a| a[logical])
    }

    pub(super) fn ptrs(&self) -> Pointers<'_> {
        Pointers { atoms: &self.atoms_ptr, edges: &self.edges_ptr }
    }

    /// Bytes of field data (stored dtypes) of physical samples `physical`.
    pub(super) fn sample_bytes(&self, physical: &[usize]) -> u64 {
        let mut per = [0u64; 3]; // atom, edge, system row bytes
        for f in &self.fields {
            per[match f.level {
                Level::Atom => 0,
                Level::Edge => 1,
                Level::System => 2,
            }] += f.row_bytes as u64;
        }
        let ptrs = self.ptrs();
        physical
            .iter()
            .map(|&p| {
                let rows = |l: Level| {
                    let r = ptrs.rows(l, p);
                    r.end - r.start
                };
                rows(Level::Atom) * per[0] + rows(Level::Edge) * per[1] + per[2]
            })
            .sum()
    }
}

impl AtomicDataZarrReader {
    /// Reads the root, the pointers and the mask, and opens every field
    /// array; every size the metadata claims is checked against the files
    /// before anything of that size is allocated (see [`crate::store::limits`]).
    pub(super) fn load_state(&self) -> Result<State> {
        let p = &self.path;
        let remote = self.bytes.is_remote();
        // A refresh reads the metadata again.
        self.bytes.forget();
        let root = if remote { format::read_root_from(&*self.bytes, p)? } else { format::read_root(p)? };
        if remote {
            let mut keys: Vec<String> = format::META_ARRAYS.iter().map(|(rel, _)| format!("{rel}/zarr.json")).collect();
            for (name, info) in &root.fields {
                keys.push(format!("{}/zarr.json", format::field_path(info.group, name)));
                keys.push(format!("{}/zarr.json", format::pending_path(name)));
            }
            self.bytes.prefetch(&keys);
        }
        // An add_custom that listed its field (its commit point) but had not
        // yet moved the finished array into `custom/`: the field is
        // committed, so read it where it is (the next writer moves it).
        let pending = if remote {
            self.remote_pending(&root)?
        } else {
            format::interrupted_add_custom(p, &root).map(|(name, _)| name)
        };
        let backing = |rel: &str, g: &limits::Geometry, enough: u64| self.backed(rel, g, enough);
        let n = root.num_samples;
        let n1 = n as u64 + 1; // read_root keeps num_samples below i64::MAX
        let open = |rel: &str| -> Result<(Array<Store>, DType, limits::Geometry)> {
            let a = arrays::open_array(p, &self.store, rel)?;
            let dt = arrays::array_dtype(p, rel, &a)?;
            let g = limits::geometry(p, rel, &a, dt)?;
            Ok((a, dt, g))
        };
        let (atoms_arr, atoms_dt, atoms_g) = open(format::ATOMS_PTR)?;
        let (edges_arr, edges_dt, edges_g) = open(format::EDGES_PTR)?;
        let (mask_arr, mask_dt, mask_g) = open(format::SAMPLES_MASK)?;
        for (rel, a, dt) in [(format::ATOMS_PTR, &atoms_arr, atoms_dt), (format::EDGES_PTR, &edges_arr, edges_dt)] {
            if !matches!(dt, DType::Int64 | DType::Int32 | DType::UInt64 | DType::UInt32) {
                return Err(Error::inconsistent(p, rel, format!("dtype {dt}, expected int64")));
            }
            let len = a.shape().first().copied().unwrap_or(0);
            if a.dimensionality() != 1 || len < n1 {
                return Err(Error::inconsistent(
                    p,
                    rel,
                    format!("shape {:?} too short for num_samples {n} (needs {n1} entries)", a.shape()),
                ));
            }
        }
        // One bool per sample, or the flags below would index past the pointers.
        if mask_dt != DType::Bool || mask_arr.dimensionality() != 1 {
            return Err(Error::inconsistent(
                p,
                format::SAMPLES_MASK,
                format!("{mask_dt} array of shape {:?}, expected a 1-d bool array", mask_arr.shape()),
            ));
        }
        let mask_len = mask_arr.shape().first().copied().unwrap_or(0);
        if mask_len < n as u64 {
            return Err(Error::inconsistent(p, format::SAMPLES_MASK, format!("{mask_len} entries for {n} samples")));
        }
        // num_samples (and the pointer shapes) are numbers anyone can write:
        // the pointer and mask files must be able to hold that many entries.
        limits::check_rows(
            p,
            format::ATOMS_PTR,
            &format!("num_samples {n}"),
            n1,
            &[(format::ATOMS_PTR, atoms_g), (format::EDGES_PTR, edges_g), (format::SAMPLES_MASK, mask_g)],
            &backing,
        )?;
        let read_i64 = |rel: &str, a: Array<Store>, dt: DType| -> Result<Vec<i64>> {
            // Through the checksummed decode path (see `read_rows`).
            let raw = self.read_rows(a, rel, dt, 0..n1)?;
            let data = HostData::from_bytes(dt, &raw).map_err(|e| Error::inconsistent(p, rel, e.to_string()))?;
            let v = data.to_i64_vec().unwrap_or_default();
            format::check_pointers(p, rel, &v, n)?;
            Ok(v)
        };
        let read_mask = |a: Array<Store>| self.read_rows(a, format::SAMPLES_MASK, mask_dt, 0..n as u64);
        // Over a network, the three reads (each a shard index, then its
        // chunks) go together: opening waits for one round trip, not three.
        let (atoms_ptr, edges_ptr, mask) = if remote {
            std::thread::scope(|s| {
                let atoms = s.spawn(|| read_i64(format::ATOMS_PTR, atoms_arr, atoms_dt));
                let edges = s.spawn(|| read_i64(format::EDGES_PTR, edges_arr, edges_dt));
                let mask = read_mask(mask_arr);
                let died = |_| Error::Background("a pointer reader thread panicked".into());
                (atoms.join().unwrap_or_else(|e| Err(died(e))), edges.join().unwrap_or_else(|e| Err(died(e))), mask)
            })
        } else {
            let atoms = read_i64(format::ATOMS_PTR, atoms_arr, atoms_dt);
            let edges = read_i64(format::EDGES_PTR, edges_arr, edges_dt);
            (atoms, edges, read_mask(mask_arr))
        };
        let (atoms_ptr, edges_ptr) = (atoms_ptr?, edges_ptr?);
        // Non-decreasing from 0, so the last pointer is the (non-negative) total.
        let total_atoms = atoms_ptr[n] as u64;
        let total_edges = edges_ptr[n] as u64;

        let mask = mask?;
        if mask.len() != n {
            return Err(Error::inconsistent(
                p,
                format::SAMPLES_MASK,
                format!("{} flags decoded for {n} samples", mask.len()),
            ));
        }
        let active = if mask.iter().all(|&b| b != 0) {
            None
        } else {
            Some(mask.iter().enumerate().filter(|(_, b)| **b != 0).map(|(i, _)| i).collect())
        };
        // Every array on the atom (edge) axis can back the pointers' totals.
        let mut atom_axis: Vec<(String, limits::Geometry)> = Vec::new();
        let mut edge_axis: Vec<(String, limits::Geometry)> = Vec::new();
        for (rel, need, axis) in
            [(format::ATOMS_MASK, total_atoms, &mut atom_axis), (format::EDGES_MASK, total_edges, &mut edge_axis)]
        {
            if self.bytes.size(&format!("{rel}/zarr.json"))?.is_some() {
                let (a, _, g) = open(rel)?;
                let len = a.shape().first().copied().unwrap_or(0);
                if len < need {
                    return Err(Error::inconsistent(p, rel, format!("{len} entries, pointers need {need}")));
                }
                axis.push((rel.to_string(), g));
            }
        }

        let mut opened = Vec::with_capacity(root.fields.len());
        for (name, info) in &root.fields {
            let rel = if pending.as_deref() == Some(name.as_str()) {
                format::pending_path(name)
            } else {
                format::field_path(info.group, name)
            };
            let (array, dtype, g) = open(&rel)?;
            // Its values are shifted by atom offsets on every read, and
            // checked per sample against the edge pointers.
            if name == NEIGHBOR_LIST && !matches!(dtype, DType::Int64 | DType::Int32 | DType::UInt64 | DType::UInt32) {
                return Err(Error::inconsistent(
                    p,
                    &rel,
                    format!("dtype {dtype} is not an index type (int32/int64/uint32/uint64)"),
                ));
            }
            if name == NEIGHBOR_LIST && info.level != Level::Edge {
                return Err(Error::inconsistent(
                    p,
                    &rel,
                    format!("listed at {} level; neighbor lists are edge-level", info.level),
                ));
            }
            let need = info.level.pick(total_atoms, total_edges, n as u64);
            let len = array.shape().first().copied().unwrap_or(0);
            if len < need {
                return Err(Error::inconsistent(
                    p,
                    &rel,
                    format!("{len} rows, but the pointers need {need} ({} level)", info.level),
                ));
            }
            match info.level {
                Level::Atom => atom_axis.push((rel.clone(), g)),
                Level::Edge => edge_axis.push((rel.clone(), g)),
                Level::System => {}
            }
            opened.push((name, info, rel, array, dtype, g, need));
        }
        // The pointer values are claims too: some array on each axis must
        // hold that many rows.
        for (what, rows, axis) in [("atoms_ptr", total_atoms, &atom_axis), ("edges_ptr", total_edges, &edge_axis)] {
            let arrays: Vec<(&str, limits::Geometry)> = axis.iter().map(|(r, g)| (r.as_str(), *g)).collect();
            let rel = if what == "atoms_ptr" { format::ATOMS_PTR } else { format::EDGES_PTR };
            limits::check_rows(p, rel, &format!("the last pointer ({rows})"), rows, &arrays, &backing)?;
        }

        let mut fields = Vec::with_capacity(opened.len());
        for (name, info, rel, array, dtype, g, need) in opened {
            limits::check_field_bytes(p, &rel, need, &g, &backing)?;
            fields.push(self.field_array(name, &rel, info.level, dtype, array, g));
        }
        let strings = self.open_strings(&root, n as u64, total_atoms)?;
        Ok(State { num_samples: n, atoms_ptr, edges_ptr, active, fields, strings })
    }

    /// Field `name` (array `rel`) ready for reading, with its checked
    /// geometry ([`limits::geometry`]).
    fn field_array(
        &self,
        name: &str,
        rel: &str,
        level: Level,
        dtype: DType,
        array: Array<Store>,
        g: limits::Geometry,
    ) -> FieldArray {
        let trailing: Vec<usize> = array.shape().iter().skip(1).map(|&d| d as usize).collect();
        let shard_cache = ArrayShardedReadableExtCache::new(&array);
        let direct = DirectDecode::plan(&array, dtype);
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
            id: self.next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            direct,
            shard_indexes: Default::default(),
            wide_only: Default::default(),
            bad_samples: Default::default(),
            any_bad: Default::default(),
        }
    }

    /// [`format::interrupted_add_custom`] through the byte source: the
    /// custom field whose array is still in the pending folder.
    fn remote_pending(&self, root: &format::RootAttrs) -> Result<Option<String>> {
        for (name, info) in &root.fields {
            let placed = format!("{}/zarr.json", format::field_path(info.group, name));
            if self.bytes.size(&placed)?.is_none()
                && self.bytes.size(&format!("{}/zarr.json", format::pending_path(name)))?.is_some()
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
    fn backed(&self, rel: &str, g: &limits::Geometry, enough: u64) -> Result<u64> {
        if let Some(listed) = self.bytes.list_sizes(rel)? {
            let chunks = listed.into_iter().filter(|(k, _)| !k.ends_with("zarr.json")).map(|(_, len)| len);
            return Ok(limits::backed_by(chunks, g, enough));
        }
        let array = arrays::open_array(&self.path, &self.store, rel)?;
        let files = array.shape().first().copied().unwrap_or(0).div_ceil(g.file_rows.max(1));
        let mut total = 0u64;
        let mut idx = vec![0u64; array.dimensionality()];
        for i in 0..files {
            idx[0] = i;
            if let Some(len) = self.bytes.size(array.chunk_key(&idx).as_str())? {
                total = total.saturating_add(limits::backed_by([len], g, u64::MAX));
                if total >= enough {
                    break;
                }
            }
        }
        Ok(total)
    }

    /// Rows `rows` of a 1-d array (pointers, mask), chunk by chunk through
    /// the decode that field data takes, so their checksums are checked:
    /// zarrs' `retrieve_array_subset` decodes a partly read chunk with
    /// partial decoders, and its crc32c partial decoder skips the check.
    fn read_rows(&self, array: Array<Store>, rel: &str, dtype: DType, rows: std::ops::Range<u64>) -> Result<Vec<u8>> {
        let g = limits::geometry(&self.path, rel, &array, dtype)?;
        let f = self.field_array(rel, rel, Level::System, dtype, array, g);
        let mut out = Vec::new();
        for c in chunks_of(&rows, f.chunk_rows) {
            let raw = self.decode_raw(&f, c)?;
            let lo = rows.start.max(c * f.chunk_rows) - c * f.chunk_rows;
            let hi = rows.end.min((c + 1) * f.chunk_rows) - c * f.chunk_rows;
            let part = raw
                .get(lo as usize * f.row_bytes..hi as usize * f.row_bytes)
                .ok_or_else(|| self.chunk_error(&f, c, "decoded chunk shorter than its rows"))?;
            out.extend_from_slice(part);
        }
        Ok(out)
    }
}
