//! Changes to the samples already in a store: `add_custom` (a new custom
//! field for every sample), `delete` (soft: masks first, then zeroed rows),
//! and the row rewrite behind `atomzarr repair`.

use std::ops::Range;

use zarrs::array::{ArrayBytes, CodecOptions};

use super::{AtomicDataZarrWriter, arr_err, sync_parent};
use crate::data::{Field, HostData, Level, Pointers};
use crate::error::{Error, Result};
use crate::store::arrays;
use crate::store::format::{self, FieldInfo, StoreGroup};

impl AtomicDataZarrWriter {
    /// Adds a custom field to every physical sample: `data` has `shape[0]`
    /// rows = samples (system), total atoms (atom) or total edges (edge).
    pub fn add_custom(&mut self, name: &str, level: Level, shape: &[usize], data: impl Into<HostData>) -> Result<()> {
        let field = Field::new(level, shape.to_vec(), data)?;
        let mut root = format::read_root(&self.path)?;
        format::check_field_name(name)
            .map_err(|r| Error::invalid(format!("{}: add_custom", self.path.display()), r))?;
        if root.fields.contains_key(name) {
            return Err(Error::invalid(
                format!("{}: add_custom", self.path.display()),
                format!("field {name} already exists"),
            ));
        }
        let n = root.num_samples;
        let (atoms, edges) = (self.pointers(format::ATOMS_PTR, n)?, self.pointers(format::EDGES_PTR, n)?);
        let need = Pointers { atoms: &atoms, edges: &edges }.total(level, n);
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
        arrays::create_array(&self.path, &self.store, &pending_rel, field.dtype(), shape, &resolved)?;
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
        // Zeroed rows may lie in kept tail chunks.
        self.tails.clear();
        let root = format::read_root(&self.path)?;
        let n = root.num_samples;
        if let Some(&bad) = physical.iter().find(|&&i| i >= n) {
            return Err(Error::IndexOutOfRange {
                source_name: self.path.display().to_string(),
                index: bad as i64,
                len: n,
            });
        }
        let atoms = self.pointers(format::ATOMS_PTR, n)?;
        let edges = self.pointers(format::EDGES_PTR, n)?;
        let mut idx: Vec<usize> = physical.to_vec();
        idx.sort_unstable();
        idx.dedup();
        let ranges = |level: Level| -> Vec<Range<u64>> {
            let mut out: Vec<Range<u64>> = Vec::new();
            for &p in &idx {
                let r = Pointers { atoms: &atoms, edges: &edges }.rows(level, p);
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
        let dtype = arrays::array_dtype(&self.path, rel, &a)?;
        let row: u64 = a.shape()[1..].iter().product();
        let bytes = vec![0u8; ((rows.end - rows.start) * row) as usize * dtype.size()];
        let mut subset = vec![rows];
        subset.extend(a.shape()[1..].iter().map(|&d| 0..d));
        let options = CodecOptions::default().with_store_empty_chunks(self.write_empty_chunks(rel));
        a.store_array_subset_opt(&subset, ArrayBytes::new_flen(bytes), &options).map_err(arr_err(&self.path, rel))
    }

    /// Rewrites rows `rows` of the existing array `rel` with `bytes` (used by
    /// `atomzarr repair`). `rows.end` must be the array's length: the row
    /// writer sets the length to it, and a shorter array would lose its tail.
    pub(crate) fn overwrite_rows(&self, rel: &str, rows: Range<u64>, bytes: Vec<u8>) -> Result<()> {
        self.tails.clear();
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
