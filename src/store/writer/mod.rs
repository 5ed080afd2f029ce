//! [`AtomicDataZarrWriter`]: create, write, append, add custom fields, soft
//! delete and defragment.
//!
//! Every call is crash-safe, against a killed process and a power loss alike.
//! All writes go through [`crate::store::durable::DurableStore`], which replaces each
//! file whole and atomically (temporary, fsync, rename, directory fsync), so
//! no chunk, shard or `zarr.json` is ever torn. An append stages its new
//! arrays (first write), field data, masks and pointers in one transaction,
//! commits it (all syncs at once), and only then writes the root
//! `num_samples`, the commit point. Readers trust only `num_samples` and the
//! pointers below it, and every rewritten tail chunk keeps its committed rows,
//! so a store interrupted at any moment opens at its last committed state;
//! the next append overwrites whatever the interrupted one left past the end.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;
use zarrs::array::{Array, ArrayBytes, CodecOptions};

use crate::store::{StoreGroup, ZarrWriteConfig};
use crate::data::{AtomicData, DType, Field, HostData, Level};
pub use crate::error::AppendStep;
use crate::error::{Error, Result};
use crate::store::format::{self, FieldInfo, RootAttrs, Store};
use crate::source::Reader;
use crate::store::reader::{AtomicDataZarrReader, ReaderOptions};

/// Writes atomic-structure stores in the toolkit's layout.
///
/// ```
/// # fn main() -> atomzarr::Result<()> {
/// use atomzarr::{AtomicData, AtomicDataZarrWriter, AtomicDataZarrReader, Codec, Level, Reader,
///                ZarrArrayConfig, ZarrWriteConfig};
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("s.zarr");
/// let config = ZarrWriteConfig::default()
///     .with_core(ZarrArrayConfig::default().codec(Codec::Zstd { level: 3 }).chunk_size(64).shard_size(256));
/// let mut w = AtomicDataZarrWriter::create(&path, config)?;
/// let mk = |n: usize| AtomicData::new(vec![6; n], vec![[0.5; 3]; n]).unwrap().with_energy(n as f32);
/// w.write(&[mk(2), mk(3)])?;
/// w.append(&[mk(4)])?;
/// w.add_custom("tag", Level::System, &[3], vec![7i32, 8, 9])?;
/// w.delete(&[1])?;
/// let r = AtomicDataZarrReader::open(&path)?;
/// assert_eq!(r.len(), 2);
/// assert_eq!(r.read(1)?.data.num_atoms(), 4);
/// w.defragment(None)?;
/// r.refresh()?;
/// assert_eq!((r.len(), r.num_physical()), (2, 2));
/// # Ok(()) }
/// ```
pub struct AtomicDataZarrWriter {
    path: PathBuf,
    store: Arc<Store>,
    config: ZarrWriteConfig,
    fail_after: Option<AppendStep>,
    progress: bool,
}

/// A field's schema as the store holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Schema {
    group: StoreGroup,
    level: Level,
    dtype: DType,
    trailing: Vec<u64>,
}

/// Runs `f` on every item from a few scoped threads (the caller's among
/// them) and returns the first error in item order. For store writes, which
/// block in fsync: plain threads leave rayon's workers (one per core) to
/// zarrs' parallel chunk encoding while the syncs wait.
fn for_each_io<T: Sync>(items: &[T], f: impl Fn(&T) -> Result<()> + Sync) -> Result<()> {
    /// Enough writes in flight to hide sync latency without a thread per chunk.
    const THREADS: usize = 8;
    let next = std::sync::atomic::AtomicUsize::new(0);
    let work = || {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(item) = items.get(i) else { return done };
            done.push((i, f(item)));
        }
    };
    let mut results: Vec<(usize, Result<()>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (1..THREADS.min(items.len())).map(|_| scope.spawn(work)).collect();
        let mut all = work();
        for h in handles {
            match h.join() {
                Ok(done) => all.extend(done),
                Err(_) => all.push((usize::MAX, Err(Error::Background("store write thread panicked".into())))),
            }
        }
        all
    });
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().try_for_each(|(_, r)| r)
}

/// Field `k` (in name order) of `s`, which must be field `name`.
fn nth_field<'s>(s: &'s AtomicData, k: usize, name: &str, path: &Path) -> Result<&'s Field> {
    s.fields
        .values()
        .nth(k)
        .ok_or_else(|| Error::invalid(path.display().to_string(), format!("field {name} is missing")))
}

/// Syncs the directory holding `path`, making a rename or creation of
/// `path` durable.
fn sync_parent(path: &Path) -> Result<()> {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => crate::store::durable::sync_dir(p).map_err(|e| Error::io(p, e)),
        _ => crate::store::durable::sync_dir(Path::new(".")).map_err(|e| Error::io(path, e)),
    }
}

fn arr_err<'a>(path: &'a Path, rel: &str) -> impl Fn(zarrs::array::ArrayError) -> Error + 'a {
    let rel = rel.to_string();
    move |e| Error::zarr(path, rel.clone(), e)
}

impl AtomicDataZarrWriter {
    /// Creates a new, empty store at `path`. Refuses an existing path.
    ///
    /// The store is built in a sibling folder (`<path>.atomzarr-creating`)
    /// and renamed into place when complete, so a crash never leaves a
    /// half-made store at `path`.
    pub fn create(path: impl AsRef<Path>, config: ZarrWriteConfig) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        config.validate()?;
        if path.exists() {
            return Err(Error::AlreadyExists { store: path });
        }
        let building = format::sibling(&path, format::CREATING);
        if building.exists() {
            // Left by a create that crashed: it never became a store.
            std::fs::remove_dir_all(&building).map_err(|e| Error::io(&building, e))?;
        }
        std::fs::create_dir_all(&building).map_err(|e| Error::io(&building, e))?;
        for g in ["meta", "core", "custom"] {
            format::write_group(&building, g)?;
        }
        let mut w = AtomicDataZarrWriter {
            store: format::open_store(&building)?,
            path: building.clone(),
            config,
            fail_after: None,
            progress: false,
        };
        let txn = w.store.transaction();
        let meta = [
            (format::ATOMS_PTR, DType::Int64),
            (format::EDGES_PTR, DType::Int64),
            (format::SAMPLES_MASK, DType::Bool),
            (format::ATOMS_MASK, DType::Bool),
            (format::EDGES_MASK, DType::Bool),
        ];
        for (rel, dtype) in meta {
            let is_ptr = dtype == DType::Int64;
            let name = rel.trim_start_matches("meta/");
            let a = format::create_array(
                &w.path,
                &w.store,
                rel,
                dtype,
                vec![u64::from(is_ptr)],
                &w.config.resolve(StoreGroup::Meta, name),
            )?;
            if is_ptr {
                a.store_array_subset(&[0..1], vec![0i64]).map_err(arr_err(&w.path, rel))?;
            }
        }
        txn.commit().map_err(|e| Error::io(&building, e))?;
        format::write_root(&w.path, &RootAttrs { num_samples: 0, fields: BTreeMap::new(), extra: Default::default() })?;
        std::fs::rename(&building, &path).map_err(|e| Error::io(&path, e))?;
        sync_parent(&path)?;
        w.store = format::open_store(&path)?;
        w.path = path;
        Ok(w)
    }

    /// Opens an existing store for appending, deleting and defragmenting.
    /// `config` applies to arrays created from now on (new fields). If a
    /// [`defragment`](Self::defragment) was interrupted between its renames
    /// (the store path missing, the original beside it as
    /// `<store>.defrag-old`), the original is put back first; if an
    /// [`add_custom`](Self::add_custom) was interrupted after listing its
    /// field, its finished array is moved into place. Readers report both
    /// states as [`Error::Interrupted`].
    pub fn open(path: impl AsRef<Path>, config: ZarrWriteConfig) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        config.validate()?;
        if let Some(original) = format::interrupted_defragment(&path) {
            // A defragment stopped between its renames: put the original
            // back (the unfinished copy is dropped; defragment again later).
            log::warn!("{}: finishing an interrupted defragment (original restored)", path.display());
            std::fs::rename(&original, &path).map_err(|e| Error::io(&original, e))?;
            sync_parent(&path)?;
        }
        // Nothing is cleaned or moved below unless `path` is a store.
        format::read_root(&path)?;
        for leftover in [format::DEFRAG_TMP, format::CREATING] {
            let tmp = format::sibling(&path, leftover);
            if tmp.exists() {
                std::fs::remove_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
            }
        }
        // Temporaries of writes a crash stopped before their rename.
        let cleaned = crate::store::durable::clean_temporaries(&path).map_err(|e| Error::io(&path, e))?;
        if cleaned > 0 {
            log::info!("{}: removed {cleaned} temporary files left by an interrupted write", path.display());
        }
        let root = format::read_root(&path)?;
        if root.num_samples == 0 && !format::root_lists_fields(&path)? {
            // No committed sample and no listed field: any array in core/ or
            // custom/ is what a first write staged before a crash stopped it
            // short of its commit. Dropping it lets the next write choose
            // the schema afresh (instead of inheriting guessed levels).
            for g in [StoreGroup::Core, StoreGroup::Custom] {
                let dir = path.join(g.name());
                let Ok(entries) = std::fs::read_dir(&dir) else { continue };
                for e in entries.flatten() {
                    if e.path().join("zarr.json").exists() {
                        log::info!("{}: dropping {} of an interrupted first write", path.display(), e.path().display());
                        std::fs::remove_dir_all(e.path()).map_err(|err| Error::io(&e.path(), err))?;
                    }
                }
            }
        }
        let root = format::read_root(&path)?;
        // An add_custom that listed its field but had not moved the finished
        // array into place: move it. Anything else pending never got listed
        // (an attempt that stopped earlier) and is dropped.
        while let Some((name, pending)) = format::interrupted_add_custom(&path, &root) {
            log::warn!("{}: finishing an interrupted add_custom of field {name}", path.display());
            let dst = path.join(format::field_path(StoreGroup::Custom, &name));
            std::fs::rename(&pending, &dst).map_err(|e| Error::io(&pending, e))?;
            sync_parent(&dst)?;
        }
        let pending = path.join(format::PENDING_DIR);
        if pending.exists() {
            std::fs::remove_dir_all(&pending).map_err(|e| Error::io(&pending, e))?;
        }
        let store = format::open_store(&path)?;
        Ok(AtomicDataZarrWriter { path, store, config, fail_after: None, progress: false })
    }

    /// Shows a progress bar on stderr during defragment and large writes.
    pub fn with_progress(mut self, yes: bool) -> Self {
        self.progress = yes;
        self
    }

    /// The store path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Test hook: make the next appends fail right after `step` (None: never).
    #[doc(hidden)]
    pub fn fail_after(&mut self, step: Option<AppendStep>) {
        self.fail_after = step;
    }

    fn checkpoint(&self, step: AppendStep) -> Result<()> {
        if self.fail_after == Some(step) { Err(Error::Injected(step)) } else { Ok(()) }
    }

    /// Whether writes to `rel` keep chunks that hold only the fill value
    /// (the resolved `write_empty_chunks` of its group and field).
    fn write_empty_chunks(&self, rel: &str) -> bool {
        let (group, name) = rel.split_once('/').unwrap_or(("", rel));
        let group = match group {
            "meta" => StoreGroup::Meta,
            "core" => StoreGroup::Core,
            _ => StoreGroup::Custom,
        };
        self.config.resolve(group, name).write_empty_chunks
    }

    fn open_array(&self, rel: &str) -> Result<Array<Store>> {
        format::open_array(&self.path, &self.store, rel)
    }

    /// An array with a row axis (dimension 0), as every store array has.
    fn open_rows_array(&self, rel: &str) -> Result<Array<Store>> {
        let a = self.open_array(rel)?;
        if a.dimensionality() == 0 {
            return Err(Error::inconsistent(&self.path, rel, "zero-dimensional array (store arrays have a row axis)"));
        }
        Ok(a)
    }

    fn store_schema(&self, root: &RootAttrs) -> Result<BTreeMap<String, Schema>> {
        let mut out = BTreeMap::new();
        for (name, info) in &root.fields {
            let rel = format::field_path(info.group, name);
            let a = self.open_array(&rel)?;
            let dtype = format::array_dtype(&self.path, &rel, &a)?;
            if a.dimensionality() == 0 {
                return Err(Error::inconsistent(&self.path, &rel, "zero-dimensional array (fields have a row axis)"));
            }
            out.insert(
                name.clone(),
                Schema { group: info.group, level: info.level, dtype, trailing: a.shape()[1..].to_vec() },
            );
        }
        Ok(out)
    }

    /// Reads `meta/*_ptr[0..=n]`.
    fn pointers(&self, rel: &str, n: usize) -> Result<Vec<i64>> {
        let a = self.open_array(rel)?;
        if a.shape().first().copied().unwrap_or(0) < n as u64 + 1 {
            return Err(Error::inconsistent(&self.path, rel, format!("shorter than num_samples {n} + 1")));
        }
        let v = a.retrieve_array_subset::<Vec<i64>>(&[0..n as u64 + 1]).map_err(arr_err(&self.path, rel))?;
        // The reader's checks: appends and deletes turn these into row ranges.
        if v.first() != Some(&0) {
            return Err(Error::inconsistent(&self.path, rel, format!("first pointer is {:?}, expected 0", v.first())));
        }
        if let Some(i) = v.windows(2).position(|w| w[1] < w[0]) {
            return Err(Error::inconsistent(
                &self.path,
                rel,
                format!("pointers decrease at sample {i}: {} then {}", v[i], v[i + 1]),
            ));
        }
        Ok(v)
    }

    /// First write into an empty store (same as `append`, but refuses a store
    /// that already holds samples, so a second `write` cannot silently append).
    pub fn write(&mut self, samples: &[AtomicData]) -> Result<()> {
        let root = format::read_root(&self.path)?;
        if root.num_samples > 0 {
            return Err(Error::invalid(
                self.path.display().to_string(),
                format!("store already holds {} samples; use append", root.num_samples),
            ));
        }
        self.append(samples)
    }

    /// Appends samples. Every sample must carry exactly the store's fields
    /// with the store's level, dtype and trailing shape (for the first write:
    /// the first sample's); otherwise nothing is written.
    pub fn append(&mut self, samples: &[AtomicData]) -> Result<()> {
        self.append_checked(samples, true)
    }

    /// `append`; `validate_values` false skips the value checks of
    /// [`AtomicData::validate`] (neighbor indices in range, finite positions)
    /// but keeps every structural one. Defragment copies samples that are
    /// already in a store and must keep them exactly as they read (reference
    /// stores hold appended neighbor lists whose sample-local indices are
    /// negative, see tests/store_fixtures.rs).
    fn append_checked(&mut self, samples: &[AtomicData], validate_values: bool) -> Result<()> {
        if samples.is_empty() {
            return Ok(());
        }
        let root = format::read_root(&self.path)?;
        let n = root.num_samples;
        let existing = self.store_schema(&root)?;
        let schema = self.check_samples(samples, &existing, n == 0 && existing.is_empty(), validate_values)?;
        let atoms_ptr = self.pointers(format::ATOMS_PTR, n)?;
        let edges_ptr = self.pointers(format::EDGES_PTR, n)?;
        let (v0, e0) = (atoms_ptr[n] as u64, edges_ptr[n] as u64);

        // New pointers.
        let mut new_atoms = Vec::with_capacity(samples.len());
        let mut new_edges = Vec::with_capacity(samples.len());
        let (mut v, mut e) = (v0 as i64, e0 as i64);
        for s in samples {
            v += s.num_atoms() as i64;
            e += s.num_edges() as i64;
            new_atoms.push(v);
            new_edges.push(e);
        }
        let (v1, e1, n1) = (v as u64, e as u64, (n + samples.len()) as u64);

        // Everything below up to the commit is staged in one transaction:
        // nothing on disk changes until every array's new files are written,
        // and then all of them are synced together and renamed into place.
        let txn = self.store.transaction();
        let mut attrs = root.clone();
        // Schema: a first write creates its arrays (listed at the commit).
        if existing.is_empty() {
            let entries: Vec<(&String, &Schema)> = schema.iter().collect();
            for_each_io(&entries, |&(name, sc)| -> Result<()> {
                let rel = format::field_path(sc.group, name);
                let mut shape = vec![0u64];
                shape.extend(&sc.trailing);
                format::create_array(&self.path, &self.store, &rel, sc.dtype, shape, &self.config.resolve(sc.group, name))?;
                Ok(())
            })?;
            for (name, sc) in &schema {
                attrs.fields.insert(name.clone(), FieldInfo { group: sc.group, level: sc.level });
            }
        }
        self.checkpoint(AppendStep::Schema)?;

        // Field data. Fields are independent arrays (separate files), so they
        // are concatenated and written in parallel: each write ends in an
        // fsync of its own, and overlapping those latencies (and the
        // single-threaded concatenation) is most of the write time. The
        // commit order across steps below is unchanged.
        let bar = self.bar(schema.len() as u64, "append");
        let fields: Vec<(usize, &String, &Schema)> = schema.iter().enumerate().map(|(k, (n, sc))| (k, n, sc)).collect();
        for_each_io(&fields, |&(k, name, sc)| -> Result<()> {
            let rel = format::field_path(sc.group, name);
            let (start, end) = match sc.level {
                Level::Atom => (v0, v1),
                Level::Edge => (e0, e1),
                Level::System => (n as u64, n1),
            };
            // check_samples made every sample's field names equal the schema's
            // and both maps iterate in name order, so a sample's k-th field is
            // `name`: positional access skips a string-compared map lookup per
            // sample and field (a tenth of a write's CPU in profiles).
            let field = |s| nth_field(s, k, name, &self.path);
            // Concatenate straight into the byte buffer zarrs takes (no
            // intermediate typed buffer and copy).
            let mut total = 0;
            for s in samples {
                total += field(s)?.data.len();
            }
            let mut bytes = Vec::with_capacity(total * sc.dtype.size());
            for (i, s) in samples.iter().enumerate() {
                let f = field(s)?;
                if name == "neighbor_list" {
                    let mut shifted = f.data.clone();
                    let base = if i == 0 { v0 as i64 } else { new_atoms[i - 1] };
                    shifted.add_offset(base)?;
                    bytes.extend_from_slice(shifted.as_bytes());
                } else {
                    bytes.extend_from_slice(f.data.as_bytes());
                }
            }
            self.write_rows(&rel, start..end, bytes)?;
            bar.inc(1);
            Ok(())
        })?;
        bar.finish_and_clear();
        self.checkpoint(AppendStep::FieldData)?;

        // Masks (independent arrays: in parallel, as above).
        let masks = [
            (format::SAMPLES_MASK, n as u64..n1),
            (format::ATOMS_MASK, v0..v1),
            (format::EDGES_MASK, e0..e1),
        ];
        for_each_io(&masks, |(rel, range)| self.write_rows(rel, range.clone(), vec![1u8; (range.end - range.start) as usize]))?;
        self.checkpoint(AppendStep::Masks)?;

        // Pointers (in parallel, as above).
        let ptrs = [(format::ATOMS_PTR, &new_atoms), (format::EDGES_PTR, &new_edges)];
        for_each_io(&ptrs, |(rel, vals)| self.write_rows(rel, n as u64 + 1..n1 + 1, bytemuck::cast_slice(vals.as_slice()).to_vec()))?;
        self.checkpoint(AppendStep::Pointers)?;

        // Make the staged files durable and visible, then commit: readers
        // see the new samples only once `num_samples` says so.
        txn.commit().map_err(|e| Error::io(&self.path, e))?;
        attrs.num_samples = n1 as usize;
        format::write_root(&self.path, &attrs)?;
        self.checkpoint(AppendStep::NumSamples)?;
        Ok(())
    }

    /// Sets an array's length to `rows.end` and writes `bytes` into `rows`.
    fn write_rows(&self, rel: &str, rows: Range<u64>, bytes: Vec<u8>) -> Result<()> {
        let mut a = self.open_rows_array(rel)?;
        let mut shape = a.shape().to_vec();
        if shape[0] != rows.end {
            shape[0] = rows.end;
            a.set_shape(shape.clone()).map_err(|e| Error::zarr(&self.path, rel, e))?;
            a.store_metadata().map_err(|e| Error::zarr(&self.path, rel, e))?;
        }
        if rows.is_empty() {
            return Ok(());
        }
        // One store call per outer chunk (shard), each on its own thread:
        // zarrs encodes a chunk's inner chunks on rayon, and a write outside
        // a transaction ends in an fsync on the calling thread (a rayon
        // worker inside `store_array_subset`), which would stall encoding on
        // 2 cores. Plain threads keep the workers encoding meanwhile. Same
        // chunks, same bytes, same read-modify-write of a partly covered chunk.
        let mut first = vec![0u64; shape.len()];
        first[0] = rows.start;
        let chunk_rows = a
            .chunk_grid()
            .chunk_indices(&first)
            .ok()
            .flatten()
            .and_then(|idx| a.chunk_shape(&idx).ok())
            .and_then(|s| s.first().map(|n| n.get()))
            .ok_or_else(|| Error::inconsistent(&self.path, rel, "cannot determine the chunk shape"))?;
        let row_bytes = bytes.len() / (rows.end - rows.start) as usize;
        let chunks: Vec<u64> = (rows.start / chunk_rows..=(rows.end - 1) / chunk_rows).collect();
        let a = &a;
        let sharded = zarrs::array::ArrayShardedExt::is_exclusively_sharded(a);
        let store_empty = self.write_empty_chunks(rel);
        for_each_io(&chunks, |&c| {
            let (lo, hi) = (rows.start.max(c * chunk_rows), rows.end.min((c + 1) * chunk_rows));
            let data = &bytes[(lo - rows.start) as usize * row_bytes..(hi - rows.start) as usize * row_bytes];
            let mut idx = vec![0u64; shape.len()];
            idx[0] = c;
            let subset: Vec<Range<u64>> =
                std::iter::once(lo - c * chunk_rows..hi - c * chunk_rows).chain(shape[1..].iter().map(|&d| 0..d)).collect();
            // A new shard that the rows fill only from its start (the tail
            // shard of a write): the full read-modify-write would build the
            // whole shard of fill values (500,000 rows in the reference
            // layout, for a few thousand rows of data) and scan every empty
            // inner chunk. zarrs' partial encoder writes just the inner chunks
            // the rows touch plus the index, in one write: the same shard as
            // far as any reader can tell. Only for shards with no file yet, so
            // nothing is appended to existing shard data.
            let mut options = CodecOptions::default().with_store_empty_chunks(store_empty);
            if sharded && lo == c * chunk_rows && hi < (c + 1) * chunk_rows {
                use zarrs::storage::ReadableStorageTraits;
                let absent = self.store.size_key(&a.chunk_key(&idx)).map_err(|e| Error::zarr(&self.path, rel, e))?.is_none();
                options = options.with_experimental_partial_encoding(absent);
            }
            let subset = zarrs::array::ArraySubset::new_with_ranges(&subset);
            a.store_chunk_subset_opt(&idx, &subset, ArrayBytes::new_flen(std::borrow::Cow::Borrowed(data)), &options)
                .map_err(arr_err(&self.path, rel))
        })
    }

    /// Checks samples against each other and the store; returns the schema.
    fn check_samples(
        &self,
        samples: &[AtomicData],
        existing: &BTreeMap<String, Schema>,
        first_write: bool,
        validate_values: bool,
    ) -> Result<BTreeMap<String, Schema>> {
        let ctx = |i: usize| format!("{}: append sample {i}", self.path.display());
        let schema: BTreeMap<String, Schema> = if first_write {
            samples[0]
                .fields
                .iter()
                .map(|(name, f)| {
                    let sc = Schema {
                        group: format::group_for_new_field(name),
                        level: f.level,
                        dtype: f.dtype(),
                        trailing: f.trailing_shape().iter().map(|&d| d as u64).collect(),
                    };
                    (name.clone(), sc)
                })
                .collect()
        } else {
            existing.clone()
        };
        if schema.is_empty() {
            return Err(Error::invalid(ctx(0), "sample has no fields"));
        }
        if first_write {
            for name in schema.keys() {
                format::check_field_name(name).map_err(|r| Error::invalid(ctx(0), r))?;
            }
        }
        // Samples are checked in parallel (validation is a large serial share
        // of a write otherwise); `find_first` keeps the error of the lowest
        // failing index, as a sequential loop would report it.
        let check = |i: usize, s: &AtomicData| -> Result<()> {
            // Equal key sequences (the usual case) need no map lookups; the
            // lookups below only name the offending field.
            let same_keys = s.fields.len() == schema.len() && s.fields.keys().zip(schema.keys()).all(|(a, b)| a == b);
            if !same_keys {
                if let Some(extra) = s.fields.keys().find(|k| !schema.contains_key(*k)) {
                    return Err(Error::invalid(ctx(i), format!("field {extra} is not in the store")));
                }
                if let Some(missing) = schema.keys().find(|k| !s.fields.contains_key(*k)) {
                    return Err(Error::invalid(ctx(i), format!("field {missing} is missing")));
                }
            }
            // Same key sets, both sorted: the zip pairs each field with its schema.
            for ((name, f), sc) in s.fields.iter().zip(schema.values()) {
                let trailing: Vec<u64> = f.trailing_shape().iter().map(|&d| d as u64).collect();
                if f.level != sc.level || f.dtype() != sc.dtype || trailing != sc.trailing {
                    return Err(Error::invalid(
                        ctx(i),
                        format!(
                            "field {name} is {} {} {:?}, the store has {} {} {:?}",
                            f.level, f.dtype(), trailing, sc.level, sc.dtype, sc.trailing
                        ),
                    ));
                }
                if f.data.len() != f.shape.iter().product::<usize>() {
                    return Err(Error::invalid(ctx(i), format!("field {name}: shape {:?} vs {} elements", f.shape, f.data.len())));
                }
                // Stored neighbor lists are offset by the atom count; refuse a
                // dtype that cannot take the offset now, before the first
                // write creates a schema that could never be appended to.
                if name == "neighbor_list"
                    && !matches!(f.dtype(), DType::Int32 | DType::Int64 | DType::UInt32 | DType::UInt64)
                {
                    return Err(Error::invalid(
                        ctx(i),
                        format!("neighbor_list: dtype {} is not an index type (int32/int64/uint32/uint64)", f.dtype()),
                    ));
                }
            }
            if validate_values {
                s.validate().map_err(|r| Error::invalid(ctx(i), r))?;
            } else {
                // Row counts must still agree per axis, or the pointers would lie.
                let (v, e) = (s.num_atoms(), s.num_edges());
                for (name, f) in &s.fields {
                    let want = match f.level {
                        Level::Atom => v,
                        Level::Edge => e,
                        Level::System => 1,
                    };
                    if f.rows() != want {
                        return Err(Error::invalid(ctx(i), format!("{name}: {} rows, expected {want} ({} level)", f.rows(), f.level)));
                    }
                }
            }
            Ok(())
        };
        if let Some(Err(e)) = samples.par_iter().enumerate().map(|(i, s)| check(i, s)).find_first(Result::is_err) {
            return Err(e);
        }
        Ok(schema)
    }

    /// Adds a custom field to every physical sample: `data` has `shape[0]`
    /// rows = samples (system), total atoms (atom) or total edges (edge).
    pub fn add_custom(&mut self, name: &str, level: Level, shape: &[usize], data: impl Into<HostData>) -> Result<()> {
        let field = Field::new(level, shape.to_vec(), data)?;
        let mut root = format::read_root(&self.path)?;
        format::check_field_name(name).map_err(|r| Error::invalid(format!("{}: add_custom", self.path.display()), r))?;
        if root.fields.contains_key(name) {
            return Err(Error::invalid(format!("{}: add_custom", self.path.display()), format!("field {name} already exists")));
        }
        let n = root.num_samples;
        let need = match level {
            Level::System => n as u64,
            Level::Atom => self.pointers(format::ATOMS_PTR, n)?[n] as u64,
            Level::Edge => self.pointers(format::EDGES_PTR, n)?[n] as u64,
        };
        if field.rows() as u64 != need {
            return Err(Error::invalid(
                format!("{}: add_custom {name}", self.path.display()),
                format!("{} rows, the store has {need} on the {level} axis", field.rows()),
            ));
        }
        // Crash safety: the array is written in full under PENDING_DIR (which
        // readers never look at), then listed in the root attributes (the
        // commit point), then moved into `custom/` by one rename. A crash
        // before the listing leaves only pending data, which the next
        // `open` drops; a crash after it leaves a finished array that `open`
        // moves into place (readers say so meanwhile).
        let rel = format::field_path(StoreGroup::Custom, name);
        let pending_rel = format::pending_path(name);
        let pending = self.path.join(&pending_rel);
        if pending.exists() {
            // An earlier attempt that never got listed; its chunks must go
            // (all-zero chunks are not written, so a stale one would shadow them).
            std::fs::remove_dir_all(&pending).map_err(|e| Error::io(&pending, e))?;
        }
        let mut shape: Vec<u64> = vec![0];
        shape.extend(field.trailing_shape().iter().map(|&d| d as u64));
        let resolved = self.config.resolve(StoreGroup::Custom, name);
        let txn = self.store.transaction();
        format::create_array(&self.path, &self.store, &pending_rel, field.dtype(), shape, &resolved)?;
        self.write_rows(&pending_rel, 0..need, field.data.as_bytes().to_vec())?;
        txn.commit().map_err(|e| Error::io(&pending, e))?;
        root.fields.insert(name.to_string(), FieldInfo { group: StoreGroup::Custom, level });
        format::write_root(&self.path, &root)?;
        let dst = self.path.join(&rel);
        if let Some(parent) = dst.parent() {
            std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
        std::fs::rename(&pending, &dst).map_err(|e| Error::io(&pending, e))?;
        sync_parent(&dst)?;
        // Only the now-empty pending folder; leave it if anything else is there.
        let _ = std::fs::remove_dir(self.path.join(format::PENDING_DIR));
        Ok(())
    }

    /// Soft-deletes physical samples: masks set false first (so readers stop
    /// seeing them), then their rows zeroed. Pointers are unchanged.
    /// Already-deleted samples are left as they are.
    pub fn delete(&mut self, physical: &[usize]) -> Result<()> {
        let root = format::read_root(&self.path)?;
        let n = root.num_samples;
        if let Some(&bad) = physical.iter().find(|&&i| i >= n) {
            return Err(Error::IndexOutOfRange { source_name: self.path.display().to_string(), index: bad as i64, len: n });
        }
        let atoms = self.pointers(format::ATOMS_PTR, n)?;
        let edges = self.pointers(format::EDGES_PTR, n)?;
        let mut idx: Vec<usize> = physical.to_vec();
        idx.sort_unstable();
        idx.dedup();
        let ranges = |level: Level| -> Vec<Range<u64>> {
            let mut out: Vec<Range<u64>> = Vec::new();
            for &p in &idx {
                let r = match level {
                    Level::Atom => atoms[p] as u64..atoms[p + 1] as u64,
                    Level::Edge => edges[p] as u64..edges[p + 1] as u64,
                    Level::System => p as u64..p as u64 + 1,
                };
                match out.last_mut() {
                    Some(last) if last.end == r.start => last.end = r.end,
                    _ if r.is_empty() => {}
                    _ => out.push(r),
                }
            }
            out
        };
        // Two transactions: the masks (readers stop seeing the samples as
        // soon as they land), then the zeroed rows. A crash between them
        // leaves deleted samples whose rows still hold data, which nothing
        // reads; a crash inside one leaves its files all old or all new.
        let txn = self.store.transaction();
        for (rel, level) in [
            (format::SAMPLES_MASK, Level::System),
            (format::ATOMS_MASK, Level::Atom),
            (format::EDGES_MASK, Level::Edge),
        ] {
            for r in ranges(level) {
                self.zero_rows(rel, r)?;
            }
        }
        txn.commit().map_err(|e| Error::io(&self.path, e))?;
        let txn = self.store.transaction();
        for (name, info) in &root.fields {
            let rel = format::field_path(info.group, name);
            for r in ranges(info.level) {
                self.zero_rows(&rel, r)?;
            }
        }
        txn.commit().map_err(|e| Error::io(&self.path, e))
    }

    fn zero_rows(&self, rel: &str, rows: Range<u64>) -> Result<()> {
        let a = self.open_rows_array(rel)?;
        let dtype = format::array_dtype(&self.path, rel, &a)?;
        let row: u64 = a.shape()[1..].iter().product();
        let bytes = vec![0u8; ((rows.end - rows.start) * row) as usize * dtype.size()];
        let mut subset = vec![rows];
        subset.extend(a.shape()[1..].iter().map(|&d| 0..d));
        let options = CodecOptions::default().with_store_empty_chunks(self.write_empty_chunks(rel));
        a.store_array_subset_opt(&subset, ArrayBytes::new_flen(bytes), &options).map_err(arr_err(&self.path, rel))
    }

    /// Rewrites the store without its deleted samples (every mask reset).
    /// `config` replaces the write configuration; `None` keeps each array's
    /// current codec, chunk and shard. The new store is written beside the old
    /// one and swapped in by renames, so an interruption loses nothing (see
    /// [`AtomicDataZarrWriter::open`] for the one state that needs a step back).
    pub fn defragment(&mut self, config: Option<ZarrWriteConfig>) -> Result<()> {
        let root = format::read_root(&self.path)?;
        let replaces_config = config.is_some();
        let config = match config {
            Some(c) => c,
            None => self.current_config(&root)?,
        };
        let reader = AtomicDataZarrReader::open_with(&self.path, ReaderOptions { cache_bytes: 0 })?;
        let tmp = format::sibling(&self.path, format::DEFRAG_TMP);
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
        }
        let mut out = AtomicDataZarrWriter::create(&tmp, config.clone())?;
        let groups: BTreeMap<String, StoreGroup> = root.fields.iter().map(|(k, v)| (k.clone(), v.group)).collect();
        let len = reader.len();
        let bar = self.bar(len as u64, "defragment");
        const STEP: usize = 4096;
        for start in (0..len).step_by(STEP) {
            let idx: Vec<usize> = (start..(start + STEP).min(len)).collect();
            let samples = reader.load_many(&idx)?;
            out.append_grouped(&samples, &groups)?;
            bar.inc(idx.len() as u64);
        }
        bar.finish_and_clear();
        // Keep the root's other attributes.
        let mut new_root = format::read_root(&tmp)?;
        new_root.extra = root.extra.clone();
        if len == 0 {
            // No samples: carry the schema over anyway so appends still check it.
            for (name, info) in &root.fields {
                let rel = format::field_path(info.group, name);
                let a = self.open_array(&rel)?;
                let dtype = format::array_dtype(&self.path, &rel, &a)?;
                let mut shape = a.shape().to_vec();
                shape[0] = 0;
                format::create_array(&tmp, &out.store, &rel, dtype, shape, &config.resolve(info.group, name))?;
                new_root.fields.insert(name.clone(), info.clone());
            }
        }
        format::write_root(&tmp, &new_root)?;
        // Swap in the new store. Where the filesystem can exchange two
        // directories atomically, the store path is never missing and the
        // old store ends up at `tmp`; elsewhere two renames leave a moment
        // with only `<store>.defrag-old`, which readers report and
        // `open` undoes.
        if crate::store::durable::exchange(&tmp, &self.path).map_err(|e| Error::io(&self.path, e))? {
            std::fs::remove_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
        } else {
            let old = format::sibling(&self.path, format::DEFRAG_OLD);
            if old.exists() {
                std::fs::remove_dir_all(&old).map_err(|e| Error::io(&old, e))?;
            }
            std::fs::rename(&self.path, &old).map_err(|e| Error::io(&self.path, e))?;
            std::fs::rename(&tmp, &self.path).map_err(|e| Error::io(&tmp, e))?;
            sync_parent(&self.path)?;
            std::fs::remove_dir_all(&old).map_err(|e| Error::io(&old, e))?;
        }
        self.store = format::open_store(&self.path)?;
        if replaces_config {
            // "config replaces the write configuration": arrays created from
            // now on (add_custom) follow it too.
            self.config = config;
        }
        Ok(())
    }

    /// As `append`, placing fields in the given groups on a first write.
    fn append_grouped(&mut self, samples: &[AtomicData], groups: &BTreeMap<String, StoreGroup>) -> Result<()> {
        let root = format::read_root(&self.path)?;
        if root.fields.is_empty() && !samples.is_empty() {
            // Pre-create the arrays in their original groups, then append.
            let mut attrs = root.clone();
            for (name, f) in &samples[0].fields {
                let group = groups.get(name).copied().unwrap_or_else(|| format::group_for_new_field(name));
                let rel = format::field_path(group, name);
                let mut shape = vec![0u64];
                shape.extend(f.trailing_shape().iter().map(|&d| d as u64));
                format::create_array(&self.path, &self.store, &rel, f.dtype(), shape, &self.config.resolve(group, name))?;
                attrs.fields.insert(name.clone(), FieldInfo { group, level: f.level });
            }
            format::write_root(&self.path, &attrs)?;
        }
        self.append_checked(samples, false)
    }

    /// The configuration that reproduces every array's current settings.
    fn current_config(&self, root: &RootAttrs) -> Result<ZarrWriteConfig> {
        // Not layered over `self.config`: an inferred "no shard_size" means
        // unsharded, and must not inherit the writer's group default.
        let mut c = ZarrWriteConfig::default();
        for rel in [format::ATOMS_PTR, format::EDGES_PTR, format::SAMPLES_MASK, format::ATOMS_MASK, format::EDGES_MASK] {
            let a = self.open_array(rel)?;
            c.field_overrides.insert(rel.trim_start_matches("meta/").to_string(), format::infer_config(&a));
        }
        for (name, info) in &root.fields {
            let a = self.open_array(&format::field_path(info.group, name))?;
            c.field_overrides.insert(name.clone(), format::infer_config(&a));
        }
        Ok(c)
    }

    fn bar(&self, len: u64, msg: &'static str) -> ProgressBar {
        if !self.progress {
            return ProgressBar::hidden();
        }
        let b = ProgressBar::new(len);
        if let Ok(style) = ProgressStyle::with_template("{msg:>12} {bar:40} {pos}/{len} {elapsed}") {
            b.set_style(style);
        }
        b.set_message(msg);
        b
    }

    /// Rewrites rows `rows` of the existing array `rel` with `bytes` (used by
    /// `atomzarr repair`). `rows.end` must be the array's length: the row
    /// writer sets the length to it, and a shorter array would lose its tail.
    pub(crate) fn overwrite_rows(&self, rel: &str, rows: Range<u64>, bytes: Vec<u8>) -> Result<()> {
        let len = self.open_rows_array(rel)?.shape()[0];
        if rows.end != len || rows.start > rows.end {
            return Err(Error::invalid(
                format!("{}, array {rel}", self.path.display()),
                format!("overwrite of rows {rows:?} must end at the array's length {len}"),
            ));
        }
        self.write_rows(rel, rows, bytes)
    }
}
