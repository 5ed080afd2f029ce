//! `delete`: soft deletes, in two commits, the toolkit's layout kept (masks
//! off, rows zeroed, pointers unchanged).
//!
//! 1. The masks. Their new chunks are written into a copy of the store's
//!    `meta/` beside the store (`<store>.atomzarr-deleting`: hard links to
//!    every file it keeps, so the copy costs a few links, not the data),
//!    synced, and swapped with `meta/` in one `RENAME_EXCHANGE`. Readers and
//!    a crash see every mask entry of the call switched off, or none: the
//!    three masks of a large delete span many chunk files, which one
//!    transaction would rename one at a time. Where the filesystem cannot
//!    exchange, the masks are one transaction on the store (each file old
//!    or new, not all together).
//! 2. The rows of the deleted samples, zeroed in one transaction. A crash
//!    in it leaves some of those rows zeroed and others not, all of
//!    samples already masked, which nothing reads.
//!
//! Both rewrite each touched chunk once, whatever the number of samples
//! in it (`zero`).

use std::ops::Range;

use super::AtomicDataZarrWriter;
use crate::data::{Level, Pointers};
use crate::error::{Error, Result};
use crate::store::arrays;
use crate::store::format;

impl AtomicDataZarrWriter {
    /// Soft-deletes physical samples: masks set false first (so readers stop
    /// seeing them), then their rows zeroed. Pointers are unchanged.
    /// Already-deleted samples are left as they are.
    ///
    /// One call costs about a rewrite of the chunks its samples' rows lie in
    /// (each touched chunk is decoded, zeroed and written once): delete many
    /// samples in one call rather than one call each. The masks of a call
    /// are committed together (see the module docs), so a crash leaves
    /// every sample of the call deleted, or none.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] when an index is not below the physical sample
    /// count (nothing is deleted then); [`Error::Checksum`] or [`Error::Chunk`]
    /// naming the chunk when a chunk to rewrite is corrupt; [`Error::Zarr`] or
    /// [`Error::Io`] when writing fails.
    pub fn delete(&mut self, physical: &[usize]) -> Result<()> {
        // Zeroed rows may lie in kept tail chunks.
        self.tails.clear();
        let root = format::read_root(&self.path)?;
        let n = root.num_samples;
        Error::check_indices(|| self.path.display().to_string(), physical, n)?;
        let mut idx: Vec<usize> = physical.to_vec();
        idx.sort_unstable();
        idx.dedup();
        if idx.is_empty() {
            return Ok(());
        }
        let atoms = self.pointers(format::ATOMS_PTR, n)?;
        let edges = self.pointers(format::EDGES_PTR, n)?;
        let ptrs = Pointers { atoms: &atoms, edges: &edges };
        // Each axis's rows of the samples, adjacent ones merged.
        let ranges = |level: Level| -> Vec<Range<u64>> {
            let mut out: Vec<Range<u64>> = Vec::new();
            for &p in &idx {
                let r = ptrs.rows(level, p);
                match out.last_mut() {
                    Some(last) if last.end == r.start => last.end = r.end,
                    _ if r.is_empty() => {}
                    _ => out.push(r),
                }
            }
            out
        };
        let (system, atom, edge) = (ranges(Level::System), ranges(Level::Atom), ranges(Level::Edge));
        let rows_of = |level: Level| match level {
            Level::System => system.as_slice(),
            Level::Atom => atom.as_slice(),
            Level::Edge => edge.as_slice(),
        };
        self.commit_masks(&[
            (format::SAMPLES_MASK, rows_of(Level::System)),
            (format::ATOMS_MASK, rows_of(Level::Atom)),
            (format::EDGES_MASK, rows_of(Level::Edge)),
        ])?;
        let fields: Vec<(String, Level)> =
            root.fields.iter().map(|(name, info)| (format::field_path(info.group, name), info.level)).collect();
        let jobs: Vec<(&str, &[Range<u64>])> =
            fields.iter().map(|(rel, level)| (rel.as_str(), rows_of(*level))).collect();
        let txn = self.store.transaction();
        self.zero_rows(&self.store, &jobs)?;
        txn.commit().map_err(|e| Error::io(&self.path, e))
    }

    /// Soft-deletes logical samples (numbered as a reader of the store's
    /// current commit numbers them: `dump`, `read`, `filter`) in one
    /// [`delete`](Self::delete) call; returns their physical indices,
    /// ascending. Under this writer's lock no other writer can renumber
    /// them between the mapping and the delete.
    ///
    /// ```
    /// # fn main() -> atomzarr::Result<()> {
    /// use atomzarr::{AtomicDataZarrReader, AtomicDataZarrWriter, Reader, ZarrWriteConfig};
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("d.zarr");
    /// let mut w = AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default())?;
    /// w.write(&atomzarr::data::synth::generate(6, 2, 4, 0)?)?;
    /// w.delete(&[0])?;
    /// assert_eq!(w.delete_logical(&[0, 2])?, vec![1, 3]); // logical 0 is physical 1 now
    /// assert_eq!(AtomicDataZarrReader::open(&path)?.len(), 3);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] when an index is not below the active
    /// sample count (nothing is deleted then); the errors of opening the
    /// store's reader and of [`delete`](Self::delete).
    pub fn delete_logical(&mut self, logical: &[usize]) -> Result<Vec<usize>> {
        use crate::source::{Reader, SampleIndex};
        let options = crate::store::reader::ReaderOptions::default().with_cache_bytes(0);
        let reader = crate::store::reader::AtomicDataZarrReader::open_opt(&self.path, options)?;
        Error::check_indices(|| self.path.display().to_string(), logical, reader.len())?;
        let mut physical: Vec<usize> = logical.iter().map(|&i| reader.metadata(i).physical_index).collect();
        physical.sort_unstable();
        physical.dedup();
        self.delete(&physical)?;
        Ok(physical)
    }

    /// Zeroes the `masks` rows and commits them all at once: in a linked
    /// copy of `meta/` exchanged with the store's (see the module docs).
    fn commit_masks(&self, masks: &[(&str, &[Range<u64>])]) -> Result<()> {
        let copy = format::sibling(&self.path, format::DELETING);
        if copy.exists() {
            // Left by a crash since this writer opened the store.
            std::fs::remove_dir_all(&copy).map_err(|e| Error::io(&copy, e))?;
        }
        let swapped = self.masks_in_copy(&copy, masks);
        // After an exchange the copy holds the old `meta/`; before one, masks
        // that were never committed. Either way it goes; if removing it
        // fails, the next `open` removes it (the masks are committed or not
        // regardless).
        if copy.exists()
            && let Err(e) = std::fs::remove_dir_all(&copy)
        {
            log::warn!("{}: could not remove {}: {e}", self.path.display(), copy.display());
        }
        if swapped? {
            return Ok(());
        }
        let txn = self.store.transaction();
        self.zero_rows(&self.store, masks)?;
        txn.commit().map_err(|e| Error::io(&self.path, e))
    }

    /// Writes the new masks into `copy`, a linked copy of `meta/`, and
    /// exchanges it with the store's. `Ok(false)`: the filesystem cannot
    /// exchange them, and the store is unchanged.
    fn masks_in_copy(&self, copy: &std::path::Path, masks: &[(&str, &[Range<u64>])]) -> Result<bool> {
        let meta = self.path.join("meta");
        let copy_meta = copy.join("meta");
        std::fs::create_dir(copy).map_err(|e| Error::io(copy, e))?;
        crate::store::durable::link_tree(&meta, &copy_meta).map_err(|e| Error::io(&copy_meta, e))?;
        let store = arrays::open_store(copy)?;
        let txn = store.transaction();
        self.zero_rows(&store, masks)?;
        txn.commit().map_err(|e| Error::io(&copy_meta, e))?;
        match crate::store::durable::exchange(&copy_meta, &meta) {
            Ok(done) => Ok(done),
            // A store folder on a filesystem of its own: no exchange with a sibling.
            Err(e) if e.kind() == std::io::ErrorKind::CrossesDevices => Ok(false),
            Err(e) => Err(Error::io(&meta, e)),
        }
    }
}
