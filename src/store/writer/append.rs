//! `write` and `append`: every sample checked against the store's schema,
//! then field rows, masks and pointers staged in one transaction, committed
//! by the root `num_samples`.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;

use rayon::prelude::*;

use super::{AtomicDataZarrWriter, Schema, for_each_io};
use crate::data::NEIGHBOR_LIST;
use crate::data::{AtomicData, DType, Field, HostData, Level};
use crate::error::{AppendStep, Error, Result};
use crate::store::arrays;
use crate::store::format::{self, FieldInfo, RootAttrs};

/// Field `k` (in name order) of a sample whose fields are `cols`, which
/// must be field `name`.
fn nth_field<'s>(cols: &[&'s Field], k: usize, name: &str, path: &Path) -> Result<&'s Field> {
    cols.get(k).copied().ok_or_else(|| Error::invalid(path.display().to_string(), format!("field {name} is missing")))
}

impl AtomicDataZarrWriter {
    /// First write into an empty store (same as `append`, but refuses a store
    /// that already holds samples, so a second `write` cannot silently append).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the store already holds samples; otherwise
    /// as [`append`](Self::append).
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
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the sample when one lacks or adds a field,
    /// differs in level, dtype or shape, or fails [`AtomicData::validate`];
    /// [`Error::Format`] or [`Error::Inconsistent`] when the store is damaged;
    /// [`Error::Zarr`] or [`Error::Io`] when writing fails (nothing is committed).
    pub fn append(&mut self, samples: &[AtomicData]) -> Result<()> {
        self.append_checked(samples, true)
    }

    /// `append`; `validate_values` false skips the value checks of
    /// [`AtomicData::validate`] (neighbor indices in range, finite positions)
    /// but keeps every structural one. Defragment copies samples that are
    /// already in a store and must keep them exactly as they read (reference
    /// stores hold appended neighbor lists whose sample-local indices are
    /// negative, see cli/tests/store_fixtures.rs).
    pub(super) fn append_checked(&mut self, samples: &[AtomicData], validate_values: bool) -> Result<()> {
        if samples.is_empty() {
            return Ok(());
        }
        // The tails it wrote are kept only if it committed; otherwise the
        // store may hold older ones (see `tail`).
        let done = self.append_transaction(samples, validate_values);
        if done.is_ok() {
            self.tails.commit();
        } else {
            self.tails.clear();
        }
        done
    }

    fn append_transaction(&mut self, samples: &[AtomicData], validate_values: bool) -> Result<()> {
        let root = format::read_root(&self.path)?;
        let n = root.num_samples;
        let existing = self.store_schema(&root)?;
        let schema = self.check_samples(samples, &existing, n == 0 && existing.is_empty(), validate_values)?;
        let labels = self.check_strings(&root, samples, n == 0 && existing.is_empty())?;
        let (v0, e0) =
            (self.last_pointer(format::ATOMS_PTR, n)? as u64, self.last_pointer(format::EDGES_PTR, n)? as u64);
        let ext = Extent::new(n as u64, v0, e0, samples);

        // Everything below up to the commit is staged in one transaction:
        // nothing on disk changes until every array's new files are written,
        // and then all of them are synced together and renamed into place.
        let txn = self.store.transaction();
        let mut attrs = root.clone();
        // Schema: a first write creates its arrays (listed at the commit).
        if existing.is_empty() {
            self.create_schema(&schema, &labels, &mut attrs)?;
        }
        self.checkpoint(AppendStep::Schema)?;

        self.write_fields(samples, &schema, &ext)?;
        self.write_strings(samples, &labels, ext.n0, ext.v0)?;
        self.checkpoint(AppendStep::FieldData)?;

        // Masks (independent arrays: in parallel, as the fields).
        let masks = [
            (format::SAMPLES_MASK, ext.n0..ext.n1),
            (format::ATOMS_MASK, ext.v0..ext.v1),
            (format::EDGES_MASK, ext.e0..ext.e1),
        ];
        for_each_io(&masks, |(rel, range)| {
            self.write_rows_with(rel, range.clone(), vec![1u8; (range.end - range.start) as usize], true)
        })?;
        self.checkpoint(AppendStep::Masks)?;

        // Pointers (in parallel, as above).
        let ptrs = [(format::ATOMS_PTR, &ext.new_atoms), (format::EDGES_PTR, &ext.new_edges)];
        for_each_io(&ptrs, |(rel, vals)| {
            self.write_rows_with(rel, ext.n0 + 1..ext.n1 + 1, bytemuck::cast_slice(vals.as_slice()).to_vec(), true)
        })?;
        self.checkpoint(AppendStep::Pointers)?;

        // Make the staged files durable and visible, then commit: readers
        // see the new samples only once `num_samples` says so.
        attrs.num_samples = ext.n1 as usize;
        let root = format::root_bytes(&self.path, &attrs)?;
        txn.commit_then_replace(&self.path.join("zarr.json"), &root).map_err(|e| Error::io(&self.path, e))?;
        self.checkpoint(AppendStep::NumSamples)?;
        Ok(())
    }

    /// A first write's arrays: one per field and string label, entered in
    /// the root attributes `attrs`.
    fn create_schema(
        &self,
        schema: &BTreeMap<String, Schema>,
        labels: &BTreeMap<String, Level>,
        attrs: &mut RootAttrs,
    ) -> Result<()> {
        let entries: Vec<(&String, &Schema)> = schema.iter().collect();
        for_each_io(&entries, |&(name, sc)| -> Result<()> {
            let rel = format::field_path(sc.group, name);
            let mut shape = vec![0u64];
            shape.extend(&sc.trailing);
            arrays::create_array(
                &self.path,
                &self.store,
                &rel,
                sc.dtype,
                shape,
                &self.config.resolve(sc.group, name),
                None,
            )?;
            Ok(())
        })?;
        for (name, sc) in schema {
            attrs.fields.insert(name.clone(), FieldInfo { group: sc.group, level: sc.level });
        }
        self.create_strings(labels)?;
        format::set_string_fields(attrs, labels);
        Ok(())
    }

    /// The samples' field rows, concatenated per field and written after
    /// the store's (neighbor lists shifted to store-global atom indices).
    ///
    /// Fields are independent arrays (separate files), so they are
    /// concatenated and written in parallel: each write ends in an fsync of
    /// its own, and overlapping those latencies (and the single-threaded
    /// concatenation) is most of the write time.
    fn write_fields(&self, samples: &[AtomicData], schema: &BTreeMap<String, Schema>, ext: &Extent) -> Result<()> {
        let bar = self.bar(schema.len() as u64, "append");
        let fields: Vec<(usize, &String, &Schema)> = schema.iter().enumerate().map(|(k, (n, sc))| (k, n, sc)).collect();
        // Each sample's fields in name order, once: `values().nth(k)` per
        // field would walk the map again for every field.
        let cols: Vec<Vec<&Field>> = samples.iter().map(|s| s.fields.values().collect()).collect();
        for_each_io(&fields, |&(k, name, sc)| -> Result<()> {
            let rel = format::field_path(sc.group, name);
            // check_samples made every sample's field names equal the schema's
            // and both maps iterate in name order, so a sample's k-th field is
            // `name`: positional access skips a string-compared map lookup per
            // sample and field (a tenth of a write's CPU in profiles).
            let field = |i: usize| nth_field(&cols[i], k, name, &self.path);
            // Concatenate straight into the byte buffer zarrs takes (no
            // intermediate typed buffer and copy).
            let mut total = 0;
            for i in 0..samples.len() {
                total += field(i)?.data.len();
            }
            let mut bytes = Vec::with_capacity(total * sc.dtype.size());
            for i in 0..samples.len() {
                let f = field(i)?;
                if name == NEIGHBOR_LIST {
                    // Sample-local to store-global, in the copy.
                    let base = if i == 0 { ext.v0 as i64 } else { ext.new_atoms[i - 1] };
                    let mut shifted = HostData::with_capacity(f.data.dtype(), f.data.len());
                    shifted.extend_rebased(f.data.as_bytes(), base)?;
                    bytes.extend_from_slice(shifted.as_bytes());
                } else {
                    bytes.extend_from_slice(f.data.as_bytes());
                }
            }
            self.write_rows_with(&rel, ext.rows(sc.level), bytes, true)?;
            bar.inc(1);
            Ok(())
        })?;
        bar.finish_and_clear();
        Ok(())
    }

    /// Checks samples against each other and the store; returns the schema.
    fn check_samples(
        &self,
        samples: &[AtomicData],
        existing: &BTreeMap<String, Schema>,
        first_write: bool,
        validate_values: bool,
    ) -> Result<BTreeMap<String, Schema>> {
        let schema = if first_write { schema_of(&samples[0]) } else { existing.clone() };
        if schema.is_empty() {
            return Err(Error::invalid(self.sample_ctx(0), "sample has no fields"));
        }
        if first_write {
            for name in schema.keys() {
                format::check_field_name(name).map_err(|r| Error::invalid(self.sample_ctx(0), r))?;
            }
        }
        // Samples are checked in parallel (validation is a large serial share
        // of a write otherwise); `find_first` keeps the error of the lowest
        // failing index, as a sequential loop would report it.
        let check = |i: usize, s: &AtomicData| {
            self.check_sample(s, &schema, validate_values).map_err(|r| Error::invalid(self.sample_ctx(i), r))
        };
        if let Some(Err(e)) = samples.par_iter().enumerate().map(|(i, s)| check(i, s)).find_first(Result::is_err) {
            return Err(e);
        }
        Ok(schema)
    }

    /// The context of sample `i`'s errors.
    fn sample_ctx(&self, i: usize) -> String {
        format!("{}: append sample {i}", self.path.display())
    }

    /// Checks one sample against the schema; returns why it does not fit.
    fn check_sample(
        &self,
        s: &AtomicData,
        schema: &BTreeMap<String, Schema>,
        validate_values: bool,
    ) -> std::result::Result<(), String> {
        // Equal key sequences (the usual case) need no map lookups; the
        // lookups below only name the offending field.
        let same_keys = s.fields.len() == schema.len() && s.fields.keys().zip(schema.keys()).all(|(a, b)| a == b);
        if !same_keys {
            if let Some(extra) = s.fields.keys().find(|k| !schema.contains_key(*k)) {
                return Err(format!("field {extra} is not in the store"));
            }
            if let Some(missing) = schema.keys().find(|k| !s.fields.contains_key(*k)) {
                return Err(format!("field {missing} is missing"));
            }
        }
        // Same key sets, both sorted: the zip pairs each field with its schema.
        for ((name, f), sc) in s.fields.iter().zip(schema.values()) {
            check_field(name, f, sc)?;
        }
        if validate_values {
            s.validate()?;
        } else {
            // Row counts must still agree per axis, or the pointers would lie.
            let (v, e) = (s.num_atoms(), s.num_edges());
            for (name, f) in &s.fields {
                let want = f.level.pick(v, e, 1);
                if f.rows() != want {
                    return Err(format!("{name}: {} rows, expected {want} ({} level)", f.rows(), f.level));
                }
            }
        }
        Ok(())
    }
}

/// The schema a first write takes from its first sample.
fn schema_of(first: &AtomicData) -> BTreeMap<String, Schema> {
    first
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
}

/// Checks field `name` of a sample against its schema `sc`.
fn check_field(name: &str, f: &Field, sc: &Schema) -> std::result::Result<(), String> {
    let trailing: Vec<u64> = f.trailing_shape().iter().map(|&d| d as u64).collect();
    if f.level != sc.level || f.dtype() != sc.dtype || trailing != sc.trailing {
        return Err(format!(
            "field {name} is {} {} {:?}, the store has {} {} {:?}",
            f.level,
            f.dtype(),
            trailing,
            sc.level,
            sc.dtype,
            sc.trailing
        ));
    }
    if f.data.len() != f.shape.iter().product::<usize>() {
        return Err(format!("field {name}: shape {:?} vs {} elements", f.shape, f.data.len()));
    }
    // Stored neighbor lists are offset by the atom count; refuse a dtype
    // that cannot take the offset now, before the first write creates a
    // schema that could never be appended to.
    if name == NEIGHBOR_LIST && !matches!(f.dtype(), DType::Int32 | DType::Int64 | DType::UInt32 | DType::UInt64) {
        return Err(format!("neighbor_list: dtype {} is not an index type (int32/int64/uint32/uint64)", f.dtype()));
    }
    Ok(())
}

/// Where an append's rows go: the store's sample, atom and edge counts
/// before (`*0`) and after (`*1`) it, and the new samples' pointers.
struct Extent {
    n0: u64,
    v0: u64,
    e0: u64,
    n1: u64,
    v1: u64,
    e1: u64,
    /// Atom pointer after each new sample.
    new_atoms: Vec<i64>,
    /// Edge pointer after each new sample.
    new_edges: Vec<i64>,
}

impl Extent {
    fn new(n0: u64, v0: u64, e0: u64, samples: &[AtomicData]) -> Extent {
        let mut new_atoms = Vec::with_capacity(samples.len());
        let mut new_edges = Vec::with_capacity(samples.len());
        let (mut v, mut e) = (v0 as i64, e0 as i64);
        for s in samples {
            v += s.num_atoms() as i64;
            e += s.num_edges() as i64;
            new_atoms.push(v);
            new_edges.push(e);
        }
        let (v1, e1, n1) = (v as u64, e as u64, n0 + samples.len() as u64);
        Extent { n0, v0, e0, n1, v1, e1, new_atoms, new_edges }
    }

    /// The new rows of an array at `level`.
    fn rows(&self, level: Level) -> Range<u64> {
        match level {
            Level::Atom => self.v0..self.v1,
            Level::Edge => self.e0..self.e1,
            Level::System => self.n0..self.n1,
        }
    }
}
