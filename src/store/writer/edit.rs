//! Changes to the samples already in a store: `add_custom` and
//! `add_filled` (a new field for every sample), and the row rewrite behind
//! `atomzarr repair`. (`delete` has a file of its own.)

use std::ops::Range;

use super::{AtomicDataZarrWriter, sync_parent};
use crate::data::{DType, Field, HostData, Level, Pointers};
use crate::error::{Error, Result};
use crate::store::arrays;
use crate::store::format::{self, FieldInfo, StoreGroup};

impl AtomicDataZarrWriter {
    /// Adds a custom field to every physical sample: `data` has `shape[0]`
    /// rows = samples (system), total atoms (atom) or total edges (edge).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `shape` does not fit `data`, `name` is not a
    /// valid field name or already taken, or the row count differs from the store's
    /// on `level`'s axis; [`Error::Zarr`] or [`Error::Io`] when writing fails.
    pub fn add_custom(&mut self, name: &str, level: Level, shape: &[usize], data: impl Into<HostData>) -> Result<()> {
        let field = Field::new(level, shape.to_vec(), data)?;
        let root = format::read_root(&self.path)?;
        format::check_field_name(name)
            .map_err(|r| Error::invalid(format!("{}: add_custom", self.path.display()), r))?;
        if root.fields.contains_key(name) || format::string_fields(&self.location(), &root)?.contains_key(name) {
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
        arrays::create_array(&self.path, &self.store, &pending_rel, field.dtype(), shape, &resolved, None)?;
        self.write_rows(&pending_rel, 0..need, field.data.as_bytes().to_vec())?;
        txn.commit().map_err(|e| Error::io(&pending, e))?;
        self.place_pending(name, FieldInfo { group: StoreGroup::Custom, level }, root)
    }

    /// Adds field `name` to every sample already in the store, with `fill`
    /// in every row: NaN for a float label that only later frames carry
    /// (`fill` is converted to `dtype`; bool is `fill != 0`). The field goes
    /// to `core/` or `custom/` by its name, like a first write's; appends
    /// must carry it from then on. Only metadata is written (the rows read
    /// as the array's fill value), so this costs the same for any store
    /// size; it commits as [`add_custom`](Self::add_custom) does.
    ///
    /// ```
    /// # fn main() -> atomzarr::Result<()> {
    /// use atomzarr::{AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, DType, Level, Reader, ReaderExt, ZarrWriteConfig};
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("s.zarr");
    /// let mut w = AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default())?;
    /// let h = AtomicData::new(vec![1], vec![[0.0; 3]])?;
    /// w.write(&[h.clone()])?;
    /// w.add_filled("energy", Level::System, DType::Float32, &[1], f64::NAN)?;
    /// w.append(&[h.with_energy(-13.6)])?;
    /// let r = AtomicDataZarrReader::open(&path)?;
    /// let e = |i| r.read(i).unwrap().data.field("energy").unwrap().data.get_f64(0).unwrap();
    /// assert!(e(0).is_nan());
    /// assert_eq!(e(1), -13.6f32 as f64);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `name` is not a valid field name or already
    /// names a field or string label; [`Error::Format`] or [`Error::Inconsistent`]
    /// when the store is damaged; [`Error::Zarr`] or [`Error::Io`] when writing fails.
    pub fn add_filled(&mut self, name: &str, level: Level, dtype: DType, trailing: &[usize], fill: f64) -> Result<()> {
        let root = format::read_root(&self.path)?;
        let ctx = || format!("{}: add_filled {name}", self.path.display());
        format::check_field_name(name).map_err(|r| Error::invalid(ctx(), r))?;
        if root.fields.contains_key(name) || format::string_fields(&self.location(), &root)?.contains_key(name) {
            return Err(Error::invalid(ctx(), "a field or string label of this name exists"));
        }
        let n = root.num_samples;
        let (atoms, edges) = (self.pointers(format::ATOMS_PTR, n)?, self.pointers(format::EDGES_PTR, n)?);
        let rows = Pointers { atoms: &atoms, edges: &edges }.total(level, n);
        let group = format::group_for_new_field(name);
        let pending_rel = format::pending_path(name);
        let pending = self.path.join(&pending_rel);
        if pending.exists() {
            std::fs::remove_dir_all(&pending).map_err(|e| Error::io(&pending, e))?;
        }
        let mut shape: Vec<u64> = vec![rows];
        shape.extend(trailing.iter().map(|&d| d as u64));
        let txn = self.store.transaction();
        let resolved = self.config.resolve(group, name);
        arrays::create_array(
            &self.path,
            &self.store,
            &pending_rel,
            dtype,
            shape,
            &resolved,
            Some(&fill_bytes(dtype, fill)),
        )?;
        txn.commit().map_err(|e| Error::io(&pending, e))?;
        self.place_pending(name, FieldInfo { group, level }, root)
    }

    /// Lists field `name` (the commit point) and moves its finished array
    /// from the pending folder into its group.
    fn place_pending(&mut self, name: &str, info: FieldInfo, mut root: format::RootAttrs) -> Result<()> {
        let pending = self.path.join(format::pending_path(name));
        let rel = format::field_path(info.group, name);
        root.fields.insert(name.to_string(), info);
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

/// One element of `dtype` holding `x`, as little-endian bytes (a fill value).
fn fill_bytes(dtype: DType, x: f64) -> Vec<u8> {
    match dtype {
        DType::Bool => vec![u8::from(x != 0.0)],
        DType::Float16 => half::f16::from_f64(x).to_le_bytes().to_vec(),
        DType::BFloat16 => half::bf16::from_f64(x).to_le_bytes().to_vec(),
        DType::Float32 => (x as f32).to_le_bytes().to_vec(),
        DType::Float64 => x.to_le_bytes().to_vec(),
        // Integers: `x` truncated toward zero and saturated, as `as` does.
        DType::Int8 => (x as i8).to_le_bytes().to_vec(),
        DType::Int16 => (x as i16).to_le_bytes().to_vec(),
        DType::Int32 => (x as i32).to_le_bytes().to_vec(),
        DType::Int64 => (x as i64).to_le_bytes().to_vec(),
        DType::UInt8 => (x as u8).to_le_bytes().to_vec(),
        DType::UInt16 => (x as u16).to_le_bytes().to_vec(),
        DType::UInt32 => (x as u32).to_le_bytes().to_vec(),
        DType::UInt64 => (x as u64).to_le_bytes().to_vec(),
    }
}
