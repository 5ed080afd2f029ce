//! [`AtomicDataZarrWriter::open`]: opens a store for writing, after finishing
//! or undoing what an interrupted writer left behind (a defragment stopped
//! between its renames, an add_custom stopped after listing its field, a
//! first write stopped before its commit, a delete's copy of `meta/`,
//! temporaries of unfinished file replacements).

use std::path::Path;
use std::time::{Duration, Instant};

use super::{AtomicDataZarrWriter, sync_parent, writable};
use crate::error::{Error, Result};
use crate::store::ZarrWriteConfig;
use crate::store::arrays;
use crate::store::format::{self, StoreGroup};
use crate::store::lock::StoreLock;

impl AtomicDataZarrWriter {
    /// Opens an existing store for appending, deleting and defragmenting.
    /// `config` applies to arrays created from now on (new fields). If a
    /// [`defragment`](Self::defragment) was interrupted between its renames
    /// (the store path missing, the original beside it as
    /// `<store>.defrag-old`), the original is put back first; if an
    /// [`add_custom`](Self::add_custom) was interrupted after listing its
    /// field, its finished array is moved into place. Readers report both
    /// states as [`Error::Interrupted`].
    ///
    /// The writer holds the store's lock until it is dropped: a second
    /// writer gets [`Error::Locked`], or waits up to
    /// [`ZarrWriteConfig::with_lock_timeout`]. Everything above happens
    /// under the lock.
    ///
    /// # Errors
    /// [`Error::RemoteReadOnly`] for a remote URL; [`Error::Config`] when
    /// `config` does not validate; [`Error::NotFound`] or [`Error::Format`] when
    /// `path` is not a store; [`Error::Locked`] when another writer holds it past
    /// the lock timeout; [`Error::Io`] naming the path when recovery cannot proceed.
    pub fn open(location: impl Into<crate::Location>, config: ZarrWriteConfig) -> Result<Self> {
        let location = location.into();
        let path = writable(&location, "open for append")?;
        config.validate()?;
        let lock = Self::lock_existing(&path, config.lock_timeout())?;
        // Nothing is cleaned or moved below unless `path` is a store.
        // (Temporaries are files, never the array folders this lists, so the
        // cleanup below does not change it.)
        let mut root = format::read_root(&path)?;
        // A defragment's copy: no other defragment runs (this writer holds
        // the store's lock), so any copy there was left by a crash.
        let tmp = format::sibling(&path, format::DEFRAG_TMP);
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
        }
        // A delete's copy of `meta/`: left by a crash, before its exchange
        // (the new masks, never committed) or after it (the old ones).
        let deleting = format::sibling(&path, format::DELETING);
        if deleting.exists() {
            std::fs::remove_dir_all(&deleting).map_err(|e| Error::io(&deleting, e))?;
        }
        // A create's build folder: left by a crash when its lock is free;
        // left alone when a create (started before the store appeared) is
        // still running.
        let building = format::sibling(&path, format::CREATING);
        if building.exists()
            && let Ok(stale) = StoreLock::acquire_for(&building, &building, Duration::ZERO)
        {
            std::fs::remove_dir_all(&building).map_err(|e| Error::io(&building, e))?;
            drop(stale);
        }
        // Temporaries of writes a crash stopped before their rename.
        let cleaned = crate::store::durable::clean_temporaries(&path).map_err(|e| Error::io(&path, e))?;
        if cleaned > 0 {
            log::info!("{}: removed {cleaned} temporary files left by an interrupted write", path.display());
        }
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
            // The dropped arrays were in it as unlisted fields.
            root = format::read_root(&path)?;
        }
        // An add_custom that listed its field but had not moved the finished
        // array into place: move it. Anything else pending never got listed
        // (an attempt that stopped earlier) and is dropped.
        while let Some((name, pending)) = format::interrupted_add_custom(&path, &root) {
            log::warn!("{}: finishing an interrupted add_custom of field {name}", path.display());
            let group = root.fields.get(&name).map_or(StoreGroup::Custom, |f| f.group);
            let dst = path.join(format::field_path(group, &name));
            std::fs::rename(&pending, &dst).map_err(|e| Error::io(&pending, e))?;
            sync_parent(&dst)?;
        }
        let pending = path.join(format::PENDING_DIR);
        if pending.exists() {
            std::fs::remove_dir_all(&pending).map_err(|e| Error::io(&pending, e))?;
        }
        let store = arrays::open_store(&path)?;
        Ok(AtomicDataZarrWriter {
            path,
            store,
            config,
            #[cfg(any(test, feature = "testing"))]
            fail_after: None,
            progress: false,
            lock,
            tails: Default::default(),
        })
    }

    /// Takes the writer lock of the existing store at `path`. A defragment
    /// stopped between its renames (the store path missing, the original
    /// beside it as `<store>.defrag-old`) is undone first, under the
    /// original's own lock, which is the store's once it is back in place.
    fn lock_existing(path: &Path, timeout: Duration) -> Result<StoreLock> {
        let start = Instant::now();
        // A running defragment renames the store folder away and back: a
        // look that falls between those renames looks again shortly after.
        let again = || std::thread::sleep(Duration::from_millis(1));
        loop {
            let left = timeout.saturating_sub(start.elapsed());
            let original = format::interrupted_defragment(path);
            let dir = original.as_deref().unwrap_or(path);
            // Never create a lock file in a folder that is not a store.
            if !dir.join("zarr.json").is_file() {
                if format::interrupted_defragment(path).is_some() || path.join("zarr.json").is_file() {
                    again();
                    continue;
                }
                // The error that says what is there instead (read_root fails
                // without a root zarr.json).
                format::read_root(path)?;
                again();
                continue;
            }
            let lock = match StoreLock::acquire_for(dir, path, left) {
                Ok(lock) => lock,
                Err(Error::NotFound { .. }) if path.exists() || format::interrupted_defragment(path).is_some() => {
                    again();
                    continue;
                }
                Err(e) => return Err(e),
            };
            if let Some(original) = original {
                if path.exists() {
                    continue; // restored by a writer that held the lock before us
                }
                // A defragment stopped between its renames: put the original
                // back (the unfinished copy is dropped; defragment again later).
                log::warn!("{}: finishing an interrupted defragment (original restored)", path.display());
                std::fs::rename(&original, path).map_err(|e| Error::io(&original, e))?;
                sync_parent(path)?;
            }
            return Ok(lock);
        }
    }
}
