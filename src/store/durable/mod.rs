//! Crash-safe storage: every file a writer touches is replaced whole and
//! atomically, never rewritten in place.
//!
//! zarrs' `FilesystemStore` writes a key by truncating its file and writing
//! it again. A process killed (or a machine losing power) in between leaves
//! an empty or torn `zarr.json`, chunk or shard, and an append rewrites the
//! tail chunk of every array, so committed samples were lost that way.
//! [`DurableStore`] sits below zarrs, implementing its storage traits over a
//! `FilesystemStore`, so no write path can forget the protocol:
//!
//! 1. write the new bytes to a temporary file beside the target
//!    (`.<name>.atomzarr-tmp.<pid>.<n>`, a name no reader ever asks for);
//! 2. `fsync` it;
//! 3. `rename` it over the target (atomic on POSIX filesystems);
//! 4. `fsync` the directory, so the rename itself survives a power loss.
//!
//! Inside a [`Transaction`] (one writer step: an append's field data, masks
//! and pointers), steps 2-4 are deferred to [`Transaction::commit`], which
//! syncs all temporaries concurrently, then renames them, then syncs each
//! touched directory, again concurrently: two rounds of sync latency per
//! append rather than two per file. [`Transaction::commit_then_replace`]
//! then renames the commit point (the root `zarr.json`, whose temporary was
//! synced in the first round) and syncs its directory: a third round. Reads made during the transaction see its staged files, so
//! zarrs' read-modify-write of a partly covered chunk stays consistent.
//! A crash at any moment leaves every target either old or new, never torn;
//! temporaries it leaves behind are removed by [`clean_temporaries`], which
//! [`AtomicDataZarrWriter::open`](crate::AtomicDataZarrWriter::open) calls.
//!
//! Why not zarrs' own `AtomicRenameStorageTraits`: it renames keys that
//! already exist, and zarrs' array API never writes through it; the
//! replacement has to happen inside `set` for every key zarrs writes.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use zarrs::filesystem::FilesystemStore;
use zarrs::storage::byte_range::{ByteRange, ByteRangeIterator};
use zarrs::storage::{
    Bytes, ListableStorageTraits, MaybeBytesIterator, OffsetBytesIterator, ReadableStorageTraits, StorageError,
    StoreKey, StoreKeys, StoreKeysPrefixes, StorePrefix, WritableStorageTraits,
};

mod files;

pub use files::{
    TEMP_MARK, clean_temporaries, exchange, link_tree, rename_noreplace, replace_file, sync_dir, sync_parent,
};
use files::{sync_parents, sync_paths, write_temp};

/// Files staged by an open transaction.
#[derive(Default)]
struct Staged {
    /// Target path -> temporary holding its new bytes (written, not synced).
    files: HashMap<PathBuf, PathBuf>,
    /// Targets to remove at commit.
    erased: HashSet<PathBuf>,
    /// Directories created for staged files.
    created: Vec<PathBuf>,
}

/// The zarrs store type this crate reads and writes: a filesystem store
/// whose writes replace files atomically (this module).
pub type Store = DurableStore;

/// A zarrs store over a directory whose writes are atomic file replacements
/// (see the [module docs](self)). Reads go straight to the inner
/// `FilesystemStore` unless a [`Transaction`] has staged the key.
#[derive(Debug)]
pub struct DurableStore {
    root: PathBuf,
    inner: FilesystemStore,
    /// Fast check for the read path: is a transaction open?
    staging_on: AtomicBool,
    staged: Mutex<Option<StagedBox>>,
}

/// `Staged` behind a Debug impl (its maps are not worth printing).
struct StagedBox(Staged);

impl std::fmt::Debug for StagedBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} staged files", self.0.files.len())
    }
}

fn io_err(e: std::io::Error) -> StorageError {
    StorageError::IOError(Arc::new(e))
}

impl DurableStore {
    /// A store over the directory `root`.
    pub fn new(root: impl AsRef<Path>) -> Result<Self, StorageError> {
        let root = root.as_ref().to_path_buf();
        let inner = FilesystemStore::new(&root).map_err(|e| StorageError::Other(e.to_string()))?;
        Ok(DurableStore { root, inner, staging_on: AtomicBool::new(false), staged: Mutex::new(None) })
    }

    fn path_of(&self, key: &StoreKey) -> PathBuf {
        self.root.join(key.as_str())
    }

    fn lock(&self) -> MutexGuard<'_, Option<StagedBox>> {
        // The guarded maps stay consistent across a panic (each update is one
        // insert/remove), so a poisoned lock is still usable.
        self.staged.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Opens a transaction: writes are staged until [`Transaction::commit`];
    /// dropping it uncommitted discards them (targets untouched). One at a
    /// time per store.
    pub fn transaction(&self) -> Transaction<'_> {
        let mut g = self.lock();
        if let Some(old) = g.take() {
            discard(old.0);
        }
        *g = Some(StagedBox(Staged::default()));
        self.staging_on.store(true, Ordering::Release);
        Transaction { store: self, done: false }
    }

    /// The staged state of `path`: `Some(Some(tmp))` staged bytes,
    /// `Some(None)` staged erase, `None` not staged.
    fn staged_of(&self, path: &Path) -> Option<Option<PathBuf>> {
        if !self.staging_on.load(Ordering::Acquire) {
            return None;
        }
        let g = self.lock();
        let st = &g.as_ref()?.0;
        if let Some(tmp) = st.files.get(path) {
            return Some(Some(tmp.clone()));
        }
        st.erased.contains(path).then_some(None)
    }

    /// Writes `value` for `key`: staged inside a transaction, else replaced
    /// durably at once.
    fn put(&self, key: &StoreKey, value: &[u8]) -> Result<(), StorageError> {
        let target = self.path_of(key);
        if self.staging_on.load(Ordering::Acquire) {
            let (tmp, created) = write_temp(&target, value, false).map_err(io_err)?;
            let mut g = self.lock();
            if let Some(StagedBox(st)) = g.as_mut() {
                st.erased.remove(&target);
                st.created.extend(created);
                if let Some(old) = st.files.insert(target, tmp) {
                    let _ = std::fs::remove_file(old);
                }
                return Ok(());
            }
            // The transaction ended between the check and the lock: this
            // write belongs to no transaction, so make it durable by itself.
            drop(g);
            return finish_one(&tmp, &target, &created).map_err(io_err);
        }
        replace_file(&target, value).map_err(io_err)
    }
}

/// Renames one synced-or-not temporary into place durably.
fn finish_one(tmp: &Path, target: &Path, created: &[PathBuf]) -> std::io::Result<()> {
    File::open(tmp)?.sync_all()?;
    std::fs::rename(tmp, target)?;
    sync_parents(target, created)
}

/// Removes the temporaries of an abandoned transaction.
fn discard(st: Staged) {
    for tmp in st.files.into_values() {
        let _ = std::fs::remove_file(tmp);
    }
}

/// A group of staged writes on a [`DurableStore`] (see the module docs).
#[must_use = "a transaction that is not committed discards its writes"]
pub struct Transaction<'a> {
    store: &'a DurableStore,
    done: bool,
}

impl Transaction<'_> {
    /// Makes every staged write durable and visible: syncs all temporaries
    /// concurrently, renames them over their targets, removes erased keys,
    /// then syncs every touched directory. A crash part-way leaves each
    /// target old or new.
    pub fn commit(self) -> std::io::Result<()> {
        self.finish(None)
    }

    /// [`commit`](Self::commit), then replaces `target` (outside the
    /// transaction: the commit point, such as a root `zarr.json`) with
    /// `bytes`, durably, once everything staged is. `target`'s temporary is
    /// written first and synced with the staged files, so this costs one
    /// round of syncs fewer than `commit` followed by [`replace_file`].
    pub fn commit_then_replace(self, target: &Path, bytes: &[u8]) -> std::io::Result<()> {
        self.finish(Some((target, bytes)))
    }

    fn finish(mut self, last: Option<(&Path, &[u8])>) -> std::io::Result<()> {
        self.done = true;
        let staged = self.store.lock().take();
        self.store.staging_on.store(false, Ordering::Release);
        let st = staged.map(|StagedBox(st)| st).unwrap_or_default();
        let pairs: Vec<(PathBuf, PathBuf)> = st.files.into_iter().collect();
        let last = match last {
            Some((target, bytes)) => match write_temp(target, bytes, false) {
                Ok((tmp, created)) => Some((target, tmp, created)),
                Err(e) => {
                    pairs.iter().for_each(|(_, tmp)| drop(std::fs::remove_file(tmp)));
                    return Err(e);
                }
            },
            None => None,
        };
        // Every file synced by itself, many at a time. Not `syncfs`: that
        // writes back every dirty page of the whole filesystem, other
        // programs' too, so an append would wait for whatever else the
        // machine is writing (tens to hundreds of ms on a busy one).
        let temps: Vec<PathBuf> =
            pairs.iter().map(|(_, tmp)| tmp.clone()).chain(last.as_ref().map(|l| l.1.clone())).collect();
        if let Err(e) = sync_paths(&temps) {
            temps.iter().for_each(|tmp| drop(std::fs::remove_file(tmp)));
            return Err(e);
        }
        let mut dirs: BTreeSet<PathBuf> = st.created.iter().filter_map(|d| d.parent().map(Path::to_path_buf)).collect();
        let mut replaced = Retired::default();
        for (target, tmp) in &pairs {
            replaced.hold(target);
            std::fs::rename(tmp, target)?;
            if let Some(p) = target.parent() {
                dirs.insert(p.to_path_buf());
            }
        }
        for target in &st.erased {
            replaced.hold(target);
            match std::fs::remove_file(target) {
                Ok(()) => {
                    if let Some(p) = target.parent() {
                        dirs.insert(p.to_path_buf());
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        let dirs: Vec<PathBuf> = dirs.into_iter().filter(|d| !d.as_os_str().is_empty()).collect();
        sync_paths(&dirs)?;
        if let Some((target, tmp, created)) = last {
            // Only now, with everything it commits durable.
            replaced.hold(target);
            if let Err(e) = std::fs::rename(&tmp, target) {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
            sync_parents(target, &created)?;
        }
        replaced.release();
        Ok(())
    }
}

/// The files a commit replaces or removes, held open across it and closed
/// afterwards on a background thread.
///
/// Why: freeing a file's blocks is the expensive part of replacing it on
/// some filesystems (ext4 mounted with `discard` and no journal discards
/// them synchronously, inside the `rename`): ~1 ms per file on the
/// reference VM, a 30 ms share of a small append. An open file's blocks
/// are freed only when its last descriptor closes, so holding one moves
/// that work out of the commit, as a reader holding the file would.
#[derive(Default)]
struct Retired(Vec<File>);

impl Retired {
    /// Opens `path` (if it exists) to keep its blocks until `release`.
    fn hold(&mut self, path: &Path) {
        if let Ok(f) = File::open(path) {
            self.0.push(f);
        }
    }

    /// Hands the held files to the closing thread (or closes them here if
    /// it cannot be started).
    fn release(self) {
        use std::sync::mpsc::{Sender, channel};
        static CLOSER: Mutex<Option<Sender<Vec<File>>>> = Mutex::new(None);
        if self.0.is_empty() {
            return;
        }
        let mut closer = CLOSER.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if closer.is_none() {
            let (send, recv) = channel::<Vec<File>>();
            let spawned = std::thread::Builder::new().name("atomzarr-close".into()).spawn(move || {
                // Dropping closes; the loop ends with the process.
                for files in recv {
                    drop(files);
                }
            });
            if spawned.is_ok() {
                *closer = Some(send);
            }
        }
        if let Some(send) = closer.as_ref()
            && let Err(returned) = send.send(self.0)
        {
            drop(returned.0);
        }
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if !self.done {
            let staged = self.store.lock().take();
            self.store.staging_on.store(false, Ordering::Release);
            if let Some(StagedBox(st)) = staged {
                discard(st);
            }
        }
    }
}

impl ReadableStorageTraits for DurableStore {
    fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> Result<MaybeBytesIterator<'a>, StorageError> {
        match self.staged_of(&self.path_of(key)) {
            None => self.inner.get_partial_many(key, byte_ranges),
            Some(None) => Ok(None),
            Some(Some(tmp)) => {
                // Staged files are this process's own fresh writes: read whole.
                let bytes = Bytes::from(std::fs::read(&tmp).map_err(io_err)?);
                let len = bytes.len() as u64;
                let parts: Vec<Result<Bytes, StorageError>> = byte_ranges
                    .map(|r: ByteRange| {
                        let (s, e) = (r.start(len), r.end(len));
                        if s > e || e > len {
                            return Err(StorageError::Other(format!(
                                "byte range {r} outside {len} staged bytes of {key}"
                            )));
                        }
                        Ok(bytes.slice(s as usize..e as usize))
                    })
                    .collect();
                Ok(Some(Box::new(parts.into_iter())))
            }
        }
    }

    fn size_key(&self, key: &StoreKey) -> Result<Option<u64>, StorageError> {
        match self.staged_of(&self.path_of(key)) {
            None => self.inner.size_key(key),
            Some(None) => Ok(None),
            Some(Some(tmp)) => Ok(Some(std::fs::metadata(tmp).map_err(io_err)?.len())),
        }
    }

    fn supports_get_partial(&self) -> bool {
        true
    }
}

impl WritableStorageTraits for DurableStore {
    fn set(&self, key: &StoreKey, value: Bytes) -> Result<(), StorageError> {
        self.put(key, &value)
    }

    /// Partial writes become read-modify-write of the whole value, replaced
    /// atomically (an in-place partial write could tear the file). Kept
    /// "supported" so zarrs' partial encoder can write a new shard's touched
    /// inner chunks and index without encoding a shard of fill values first.
    fn set_partial_many(&self, key: &StoreKey, offset_values: OffsetBytesIterator) -> Result<(), StorageError> {
        let mut buf: Vec<u8> = self.get(key)?.map(|b| b.to_vec()).unwrap_or_default();
        for (offset, value) in offset_values {
            let start =
                usize::try_from(offset).map_err(|_| StorageError::Other(format!("offset {offset} too large")))?;
            let end = start
                .checked_add(value.len())
                .ok_or_else(|| StorageError::Other(format!("offset {offset} + {} overflows", value.len())))?;
            if buf.len() < end {
                buf.resize(end, 0);
            }
            buf[start..end].copy_from_slice(&value);
        }
        self.put(key, &buf)
    }

    fn erase(&self, key: &StoreKey) -> Result<(), StorageError> {
        let target = self.path_of(key);
        if self.staging_on.load(Ordering::Acquire) {
            let mut g = self.lock();
            if let Some(StagedBox(st)) = g.as_mut() {
                if let Some(tmp) = st.files.remove(&target) {
                    let _ = std::fs::remove_file(tmp);
                }
                st.erased.insert(target);
                return Ok(());
            }
        }
        match std::fs::remove_file(&target) {
            Ok(()) => target.parent().map_or(Ok(()), sync_dir).map_err(io_err),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err(e)),
        }
    }

    fn erase_prefix(&self, prefix: &StorePrefix) -> Result<(), StorageError> {
        // Removing a whole node is one directory removal; the writer only
        // does it outside transactions (never through zarrs today).
        self.inner.erase_prefix(prefix)
    }

    fn supports_set_partial(&self) -> bool {
        true
    }
}

/// Whether `key` is store data (not a temporary, not the writer lock).
fn is_data_key(key: &StoreKey) -> bool {
    !key.as_str().contains(TEMP_MARK) && key.as_str() != crate::store::lock::LOCK_FILE
}

impl ListableStorageTraits for DurableStore {
    fn list(&self) -> Result<StoreKeys, StorageError> {
        Ok(self.inner.list()?.into_iter().filter(is_data_key).collect())
    }

    fn list_prefix(&self, prefix: &StorePrefix) -> Result<StoreKeys, StorageError> {
        Ok(self.inner.list_prefix(prefix)?.into_iter().filter(is_data_key).collect())
    }

    fn list_dir(&self, prefix: &StorePrefix) -> Result<StoreKeysPrefixes, StorageError> {
        self.inner.list_dir(prefix)
    }

    fn size_prefix(&self, prefix: &StorePrefix) -> Result<u64, StorageError> {
        self.inner.size_prefix(prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> StoreKey {
        StoreKey::new(s).unwrap()
    }

    #[test]
    fn replace_file_creates_parents_and_replaces_whole() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a/b/zarr.json");
        replace_file(&p, b"{}").unwrap();
        replace_file(&p, b"{\"x\": 1}").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"{\"x\": 1}");
    }

    #[test]
    fn staged_writes_are_invisible_on_disk_until_commit_and_readable_meanwhile() {
        let dir = tempfile::tempdir().unwrap();
        let s = DurableStore::new(dir.path()).unwrap();
        s.set(&key("a/c/0"), Bytes::from_static(b"old")).unwrap();
        let t = s.transaction();
        s.set(&key("a/c/0"), Bytes::from_static(b"new!")).unwrap();
        s.set(&key("b/zarr.json"), Bytes::from_static(b"{}")).unwrap();
        assert_eq!(std::fs::read(dir.path().join("a/c/0")).unwrap(), b"old");
        assert!(!dir.path().join("b/zarr.json").exists());
        assert_eq!(s.get(&key("a/c/0")).unwrap().unwrap().as_ref(), b"new!");
        assert_eq!(s.size_key(&key("a/c/0")).unwrap(), Some(4));
        s.set_partial_many(&key("a/c/0"), Box::new([(1u64, Bytes::from_static(b"EW"))].into_iter())).unwrap();
        assert_eq!(s.get(&key("a/c/0")).unwrap().unwrap().as_ref(), b"nEW!");
        t.commit().unwrap();
        assert_eq!(std::fs::read(dir.path().join("a/c/0")).unwrap(), b"nEW!");
        assert_eq!(std::fs::read(dir.path().join("b/zarr.json")).unwrap(), b"{}");
        assert_eq!(clean_temporaries(dir.path()).unwrap(), 0, "commit leaves no temporaries");
    }

    #[test]
    fn an_uncommitted_transaction_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let s = DurableStore::new(dir.path()).unwrap();
        s.set(&key("x"), Bytes::from_static(b"1")).unwrap();
        {
            let _t = s.transaction();
            s.set(&key("x"), Bytes::from_static(b"2")).unwrap();
            s.erase(&key("x")).unwrap();
            assert_eq!(s.get(&key("x")).unwrap(), None);
        }
        assert_eq!(s.get(&key("x")).unwrap().unwrap().as_ref(), b"1");
        assert_eq!(clean_temporaries(dir.path()).unwrap(), 0);
    }

    #[test]
    fn leftover_temporaries_are_cleaned() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("g/c/0");
        let (tmp, _) = write_temp(&target, b"torn", false).unwrap();
        assert!(tmp.exists());
        let s = DurableStore::new(dir.path()).unwrap();
        assert!(s.list().unwrap().is_empty(), "temporaries are not keys");
        assert_eq!(clean_temporaries(dir.path()).unwrap(), 1);
        assert!(!tmp.exists());
    }
}
