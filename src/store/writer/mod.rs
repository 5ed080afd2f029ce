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
//!
//! | module | owns |
//! |---|---|
//! | this one | the writer, `create`, and the row writes every operation shares |
//! | `recover` | `open`: finishing or undoing interrupted operations |
//! | `append` | `write`, `append`: sample checks, the append transaction |
//! | `edit` | `add_custom`, `add_filled`, the row rewrite of `atomzarr repair` |
//! | `delete` | `delete`: masks committed in one exchange of `meta/`, then rows zeroed |
//! | `zero` | rows set to zero, each touched chunk rewritten once |
//! | `defragment` | `defragment` |
//! | `tail` | tail chunks that small appends extend without compressing them again |
//! | `strings` | string labels: checks, rows in the append, `add_strings` |
//! | `saved` | `save_split`, `save_stats`: records in the root attributes |

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use zarrs::array::{Array, ArrayBytes, CodecOptions};

use crate::data::{DType, Level};
use crate::error::AppendStep;
use crate::error::{Error, Result};
use crate::progress::Progress;
use crate::store::ZarrWriteConfig;
use crate::store::arrays;
use crate::store::durable::Store;
use crate::store::format::{self, RootAttrs, StoreGroup};
use crate::store::lock::StoreLock;
use tail::{ChunkWrite, TailCodec, Tails};

mod append;
mod defragment;
mod delete;
mod edit;
mod recover;
mod strings;
mod tail;
mod zero;

/// Writes atomic-structure stores in the toolkit's layout.
///
/// A writer holds its store's writer lock ([`crate::store::lock`]) from
/// [`create`](Self::create) or [`open`](Self::open) until it is dropped: one
/// writer per store at a time; a second one gets [`Error::Locked`], or waits
/// up to [`ZarrWriteConfig::with_lock_timeout`]. Readers never wait.
///
/// ```
/// # fn main() -> atomzarr::Result<()> {
/// use atomzarr::{AtomicData, AtomicDataZarrWriter, AtomicDataZarrReader, Codec, Level, Reader, ReaderExt,
///                ZarrArrayConfig, ZarrWriteConfig};
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("s.zarr");
/// let config = ZarrWriteConfig::default()
///     .with_core(ZarrArrayConfig::default().with_codec(Codec::Zstd { level: 3 }).with_chunk_size(64).with_shard_size(256));
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
    #[cfg(any(test, feature = "testing"))]
    fail_after: Option<AppendStep>,
    progress: bool,
    /// The store's writer lock, held for the writer's lifetime.
    lock: StoreLock,
    /// The tail chunks small appends extend (see `tail`).
    tails: Tails,
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

/// Syncs the directory holding `path`, making a rename or creation of
/// `path` durable.
fn sync_parent(path: &Path) -> Result<()> {
    crate::store::durable::sync_parent(path).map_err(|e| Error::io(path, e))
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
    /// half-made store at `path`. The writer lock is taken in that folder
    /// before anything is written and moves with it, so the store is never
    /// at `path` unlocked; two creates of one path race for that lock, and
    /// the loser gets [`Error::Locked`] (or, waiting, [`Error::AlreadyExists`]).
    ///
    /// # Errors
    /// [`Error::RemoteReadOnly`] for a remote URL; [`Error::Config`] when
    /// `config` does not validate; [`Error::AlreadyExists`] when `path` exists;
    /// [`Error::Locked`] when another create of `path` holds the lock;
    /// [`Error::Io`] or [`Error::Zarr`] naming the path when writing fails.
    pub fn create(location: impl Into<crate::Location>, config: ZarrWriteConfig) -> Result<Self> {
        let location = location.into();
        let path = writable(&location, "create")?;
        config.validate()?;
        let building = format::sibling(&path, format::CREATING);
        let lock = Self::lock_new_folder(&path, &building, config.lock_timeout())?;
        for g in ["meta", "core", "custom"] {
            format::write_group(&building, g)?;
        }
        let mut w = AtomicDataZarrWriter {
            store: arrays::open_store(&building)?,
            path: building.clone(),
            config,
            #[cfg(any(test, feature = "testing"))]
            fail_after: None,
            progress: false,
            lock,
            tails: Tails::default(),
        };
        let txn = w.store.transaction();
        for (rel, dtype) in format::META_ARRAYS {
            let is_ptr = dtype == DType::Int64;
            let name = format::meta_name(rel);
            let a = arrays::create_array(
                &w.path,
                &w.store,
                rel,
                dtype,
                vec![u64::from(is_ptr)],
                &w.config.resolve(StoreGroup::Meta, name),
                None,
            )?;
            if is_ptr {
                a.store_array_subset(&[0..1], vec![0i64]).map_err(arr_err(&w.path, rel))?;
            }
        }
        txn.commit().map_err(|e| Error::io(&building, e))?;
        format::write_root(&w.path, &RootAttrs { num_samples: 0, fields: BTreeMap::new(), extra: Default::default() })?;
        match crate::store::durable::rename_noreplace(&building, &path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists || path.exists() => {
                // Something appeared at `path` while this store was built.
                std::fs::remove_dir_all(&building).map_err(|e| Error::io(&building, e))?;
                return Err(Error::AlreadyExists { store: path.into() });
            }
            Err(e) => return Err(Error::io(&path, e)),
        }
        w.store = arrays::open_store(&path)?;
        w.path = path;
        Ok(w)
    }

    /// Makes the empty folder `building` (the sibling a new store at `path`
    /// is built in) and takes its writer lock. A folder already there was
    /// left by a create that crashed (its lock is free: it is removed) or
    /// belongs to a create still running (its lock is held: `Locked`).
    fn lock_new_folder(path: &Path, building: &Path, timeout: std::time::Duration) -> Result<StoreLock> {
        if let Some(parent) = building.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
        // Each pass either returns or loses a folder to some other create
        // (which took it for a leftover, or built in it meanwhile); passes
        // go on for at least the timeout, so a waiting create outlasts any
        // such race.
        let start = std::time::Instant::now();
        for pass in 0u32.. {
            if pass >= 8 && start.elapsed() >= timeout {
                break;
            }
            if pass > 0 {
                std::thread::sleep(std::time::Duration::from_millis(u64::from(pass.min(50))));
            }
            if path.exists() {
                return Err(Error::AlreadyExists { store: path.into() });
            }
            match std::fs::create_dir(building) {
                Ok(()) => match StoreLock::acquire_for(building, path, std::time::Duration::ZERO) {
                    Ok(lock) => return Ok(lock),
                    // Another create saw the folder before we locked it and
                    // took it for a leftover: it holds the lock while it
                    // removes the folder (Locked), or has removed it
                    // (NotFound). Start over.
                    Err(Error::NotFound { .. } | Error::Locked { .. }) => continue,
                    Err(e) => return Err(e),
                },
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let stale = match StoreLock::acquire_for(building, path, timeout) {
                        Ok(lock) => lock,
                        Err(Error::NotFound { .. }) => continue,
                        Err(e) => return Err(e),
                    };
                    // Left by a create that crashed: it never became a store.
                    std::fs::remove_dir_all(building).map_err(|e| Error::io(building, e))?;
                    drop(stale);
                }
                Err(e) => return Err(Error::io(building, e)),
            }
        }
        Err(Error::Locked { store: path.into(), holder: None, waited: timeout })
    }

    /// Shows a progress bar on stderr during defragment and large writes
    /// (without the `progress` feature: `log::info!` lines instead).
    pub fn with_progress(mut self, yes: bool) -> Self {
        self.progress = yes;
        self
    }

    /// The store path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the whole store, under its lock (a writer waiting for the
    /// lock then finds no store, rather than one being removed under it).
    pub(crate) fn remove_store(self) -> Result<()> {
        std::fs::remove_dir_all(&self.path).map_err(|e| Error::io(&self.path, e))?;
        sync_parent(&self.path)
    }

    /// Test hook (feature `testing`): make the next appends fail right
    /// after `step` with [`Error::Injected`] (None: never).
    #[cfg(any(test, feature = "testing"))]
    pub fn fail_after(&mut self, step: Option<AppendStep>) {
        self.fail_after = step;
    }

    #[cfg(any(test, feature = "testing"))]
    fn checkpoint(&self, step: AppendStep) -> Result<()> {
        if self.fail_after == Some(step) { Err(Error::Injected(step)) } else { Ok(()) }
    }

    /// Without the test hook an append passes every step.
    #[cfg(not(any(test, feature = "testing")))]
    fn checkpoint(&self, _step: AppendStep) -> Result<()> {
        Ok(())
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
        arrays::open_array(&self.location(), &self.store, rel)
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
            let dtype = arrays::array_dtype(&self.location(), &rel, &a)?;
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

    /// Opens pointer array `rel`, checked to hold `n + 1` int64 entries.
    fn pointer_array(&self, rel: &str, n: usize) -> Result<Array<Store>> {
        let a = self.open_array(rel)?;
        if a.shape().first().copied().unwrap_or(0) < n as u64 + 1 {
            return Err(Error::inconsistent(&self.path, rel, format!("shorter than num_samples {n} + 1")));
        }
        // Readers take any integer pointer dtype; appending writes int64.
        let dtype = arrays::array_dtype(&self.location(), rel, &a)?;
        if dtype != DType::Int64 {
            return Err(Error::inconsistent(&self.path, rel, format!("dtype {dtype}: appends need int64 pointers")));
        }
        Ok(a)
    }

    /// Reads `meta/*_ptr[0..=n]`.
    fn pointers(&self, rel: &str, n: usize) -> Result<Vec<i64>> {
        let a = self.pointer_array(rel, n)?;
        let v = a.retrieve_array_subset::<Vec<i64>>(&[0..n as u64 + 1]).map_err(arr_err(&self.path, rel))?;
        format::check_pointers(&self.location(), rel, &v, n)?;
        Ok(v)
    }

    /// Reads `meta/*_ptr[n]`, the end of the committed rows on its axis
    /// (checked against `ptr[n-1]`): all an append needs of the pointers.
    fn last_pointer(&self, rel: &str, n: usize) -> Result<i64> {
        let a = self.pointer_array(rel, n)?;
        let from = n.saturating_sub(1) as u64;
        // From the kept tail where it holds them (no chunk decoded).
        let kept = self.tails.rows(rel, from..n as u64 + 1, 8);
        let v = match kept {
            Some(bytes) => {
                bytes.chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap_or_default())).collect()
            }
            None => a.retrieve_array_subset::<Vec<i64>>(&[from..n as u64 + 1]).map_err(arr_err(&self.path, rel))?,
        };
        match v.as_slice() {
            [last] if n == 0 && *last == 0 => Ok(0),
            [before, last] if 0 <= *before && before <= last => Ok(*last),
            _ => Err(Error::inconsistent(
                &self.path,
                rel,
                format!("entries {v:?} end its {n} committed samples (the first must be 0, and none may decrease)"),
            )),
        }
    }

    /// Sets an array's length to `rows.end` and writes `bytes` into `rows`.
    fn write_rows(&self, rel: &str, rows: Range<u64>, bytes: Vec<u8>) -> Result<()> {
        self.write_rows_with(rel, rows, bytes, false)
    }

    /// [`write_rows`](Self::write_rows); `tail`: an append's write, whose
    /// partly covered chunks go through the kept tails (see `tail`).
    fn write_rows_with(&self, rel: &str, rows: Range<u64>, bytes: Vec<u8>, tail: bool) -> Result<()> {
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
        // (Rows of zero bytes, a zero-width trailing dimension, have no tail.)
        let hand = if tail && row_bytes > 0 { TailCodec::of(a) } else { None };
        for_each_io(&chunks, |&c| {
            let (lo, hi) = (rows.start.max(c * chunk_rows), rows.end.min((c + 1) * chunk_rows));
            let data = &bytes[(lo - rows.start) as usize * row_bytes..(hi - rows.start) as usize * row_bytes];
            let mut idx = vec![0u64; shape.len()];
            idx[0] = c;
            // Every chunk of an append the hand encoder can write goes
            // through it: zarrs' zstd codec makes (allocates and zeroes) a
            // compression context per inner chunk, a third of a large
            // write's page faults; `tail::compress` keeps one per thread.
            if let Some(codec) = hand {
                let chunk = ChunkWrite { rel, idx: &idx, rows: chunk_rows, row_bytes, start: lo - c * chunk_rows };
                return self.write_tail(a, &chunk, data, &codec, store_empty);
            }
            let subset: Vec<Range<u64>> = std::iter::once(lo - c * chunk_rows..hi - c * chunk_rows)
                .chain(shape[1..].iter().map(|&d| 0..d))
                .collect();
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
                let absent =
                    self.store.size_key(&a.chunk_key(&idx)).map_err(|e| Error::zarr(&self.path, rel, e))?.is_none();
                options = options.with_experimental_partial_encoding(absent);
            }
            let subset = zarrs::array::ArraySubset::new_with_ranges(&subset);
            a.store_chunk_subset_opt(&idx, &subset, ArrayBytes::new_flen(std::borrow::Cow::Borrowed(data)), &options)
                .map_err(arr_err(&self.path, rel))
        })
    }

    fn bar(&self, len: u64, msg: &'static str) -> Progress {
        Progress::new(self.progress, len, msg)
    }
}

impl AtomicDataZarrWriter {
    /// Rewrites the root attributes with `edit` applied: one atomic, durable
    /// replacement of the root `zarr.json` (how saved splits and statistics
    /// are committed).
    pub(crate) fn update_root(
        &mut self,
        edit: impl FnOnce(&std::path::Path, &mut format::RootAttrs) -> Result<()>,
    ) -> Result<()> {
        let mut root = format::read_root(&self.path)?;
        edit(&self.path, &mut root)?;
        format::write_root(&self.path, &root)
    }

    /// The store, as errors name it.
    fn location(&self) -> crate::Location {
        crate::Location::Local(self.path.clone())
    }
}

/// The local path a writer may change: remote stores are published whole
/// with `copy`, never written in place.
pub(crate) fn writable(location: &crate::Location, operation: &str) -> Result<std::path::PathBuf> {
    match location {
        crate::Location::Local(p) => Ok(p.clone()),
        crate::Location::Url(url) => Err(Error::RemoteReadOnly { url: url.clone(), operation: operation.to_string() }),
    }
}
