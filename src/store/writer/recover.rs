//! [`AtomicDataZarrWriter::open`]: opens a store for writing, after finishing
//! or undoing what an interrupted writer left behind (a defragment stopped
//! between its renames, an add_custom stopped after listing its field, a
//! first write stopped before its commit, temporaries of unfinished file
//! replacements).

use std::path::Path;

use super::{AtomicDataZarrWriter, sync_parent};
use crate::error::{Error, Result};
use crate::store::ZarrWriteConfig;
use crate::store::arrays;
use crate::store::format::{self, StoreGroup};

impl AtomicDataZarrWriter {
    /// Opens an existing store for appending, deleting and defragmenting.
    /// `config` applies to arrays created from now on (new fields). If a
    /// [`defragment`](Self::defragment) was interrupted between its renames
    /// (the store path missing, the original beside it as
    /// `<store>.defrag-old`), the original is put back first; if an
    /// [`add_custom`](Self::add_custom) was interrupted after listing its
    /// field, its finished array is moved into place. Readers report both
    /// states as [`Error::Interrupted`].
    pub fn open(path: impl AsRef<Path>, config: ZarrWriteConfig) -> Result<Self> {
        let path = crate::store::bytes::writable_path(path.as_ref(), "open for append")?;
        config.validate()?;
        if let Some(original) = format::interrupted_defragment(&path) {
            // A defragment stopped between its renames: put the original
            // back (the unfinished copy is dropped; defragment again later).
            log::warn!("{}: finishing an interrupted defragment (original restored)", path.display());
            std::fs::rename(&original, &path).map_err(|e| Error::io(&original, e))?;
            sync_parent(&path)?;
        }
        // Nothing is cleaned or moved below unless `path` is a store.
        // (Temporaries are files, never the array folders this lists, so the
        // cleanup below does not change it.)
        let mut root = format::read_root(&path)?;
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
        Ok(AtomicDataZarrWriter { path, store, config, fail_after: None, progress: false })
    }
}
