//! String labels in the writer: checked per sample against the store's,
//! their rows written inside the append transaction, and labels added over
//! the samples already stored (`add_strings`).

use std::collections::BTreeMap;

use super::{AtomicDataZarrWriter, arr_err};
use crate::data::{AtomicData, Level};
use crate::error::{Error, Result};
use crate::store::arrays;
use crate::store::format::{self, RootAttrs, StoreGroup};

impl AtomicDataZarrWriter {
    /// The string labels of an append: the store's, or on a first write the
    /// first sample's. Every sample must carry exactly these, at their level.
    pub(super) fn check_strings(
        &self,
        root: &RootAttrs,
        samples: &[AtomicData],
        first_write: bool,
    ) -> Result<BTreeMap<String, Level>> {
        let labels: BTreeMap<String, Level> = if first_write {
            let first = samples.first().map(|s| &s.strings);
            first.into_iter().flatten().map(|(k, f)| (k.clone(), f.level)).collect()
        } else {
            format::string_fields(&self.location(), root)?
        };
        let ctx = |i: usize| format!("{}: append sample {i}", self.path.display());
        if first_write {
            for (name, level) in &labels {
                format::check_field_name(name).map_err(|r| Error::invalid(ctx(0), r))?;
                if *level == Level::Edge {
                    return Err(Error::invalid(ctx(0), format!("string label {name}: edge level is not supported")));
                }
            }
        }
        for (i, s) in samples.iter().enumerate() {
            let same = s.strings.len() == labels.len()
                && s.strings.iter().zip(&labels).all(|((a, f), (b, l))| a == b && f.level == *l);
            if !same {
                let why = match (
                    s.strings.keys().find(|k| !labels.contains_key(*k)),
                    labels.keys().find(|k| !s.strings.contains_key(*k)),
                ) {
                    (Some(extra), _) => format!("string label {extra} is not in the store"),
                    (None, Some(missing)) => format!("string label {missing} is missing"),
                    (None, None) => "a string label's level differs from the store's".to_string(),
                };
                return Err(Error::invalid(ctx(i), why));
            }
            // Counts per level (and no name shared with a field) are what
            // `validate` checks; the append may skip value checks, not these.
            for (name, f) in &s.strings {
                let want = f.level.pick(s.num_atoms(), 0, 1);
                if f.values.len() != want || s.fields.contains_key(name) {
                    return Err(Error::invalid(
                        ctx(i),
                        format!(
                            "string label {name}: {} values for {want} rows, or a field of the same name",
                            f.values.len()
                        ),
                    ));
                }
            }
        }
        Ok(labels)
    }

    /// Creates the (empty) arrays of a first write's string labels, inside
    /// the caller's transaction.
    pub(super) fn create_strings(&self, labels: &BTreeMap<String, Level>) -> Result<()> {
        for name in labels.keys() {
            self.create_string_array(name, 0)?;
        }
        Ok(())
    }

    fn create_string_array(&self, name: &str, rows: u64) -> Result<()> {
        let rel = format::string_path(name);
        // An unlisted array here is what an interrupted write left (never
        // read: only listed labels are); its chunks must not shadow new rows.
        let dir = self.path.join(&rel);
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        }
        let group = self.path.join(format::STRINGS_GROUP).join("zarr.json");
        if !group.exists() {
            format::write_group(&self.path, format::STRINGS_GROUP)?;
        }
        arrays::create_string_array(
            &self.path,
            &self.store,
            &rel,
            rows,
            &self.config.resolve(StoreGroup::Custom, name),
        )?;
        Ok(())
    }

    /// Writes the string rows of `samples` after `n` samples and `v0` atoms.
    pub(super) fn write_strings(
        &self,
        samples: &[AtomicData],
        labels: &BTreeMap<String, Level>,
        n: u64,
        v0: u64,
    ) -> Result<()> {
        for (name, level) in labels {
            let rel = format::string_path(name);
            let mut values: Vec<&str> = Vec::new();
            for s in samples {
                if let Some(f) = s.strings.get(name) {
                    values.extend(f.values.iter().map(String::as_str));
                }
            }
            let start = if *level == Level::Atom { v0 } else { n };
            let end = start + values.len() as u64;
            let mut a = self.open_array(&rel)?;
            if a.shape().first() != Some(&end) {
                a.set_shape(vec![end]).map_err(|e| Error::zarr(&self.path, &rel, e))?;
                a.store_metadata().map_err(|e| Error::zarr(&self.path, &rel, e))?;
            }
            if !values.is_empty() {
                a.store_array_subset(&[start..end], values).map_err(arr_err(&self.path, &rel))?;
            }
        }
        Ok(())
    }

    /// Adds string label `name` at `level` to every sample already in the
    /// store, as the empty string (a label's "absent"); appends must carry
    /// it from then on. Only metadata is written (the rows read as the
    /// array's fill value), and listing the label in the root attributes
    /// is the commit point: an interrupted call leaves an unlisted array
    /// that nothing reads and the next call replaces.
    ///
    /// ```
    /// # fn main() -> atomzarr::Result<()> {
    /// use atomzarr::{AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, Level, Reader, ReaderExt, ZarrWriteConfig};
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("s.zarr");
    /// let mut w = AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default())?;
    /// let h = AtomicData::new(vec![1], vec![[0.0; 3]])?;
    /// w.write(&[h.clone()])?;
    /// w.add_strings("config_type", Level::System)?;
    /// w.append(&[h.with_string("config_type", "atom")])?;
    /// let r = AtomicDataZarrReader::open(&path)?;
    /// assert_eq!(r.read(0)?.data.string("config_type"), Some(""));
    /// assert_eq!(r.read(1)?.data.string("config_type"), Some("atom"));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `name` is not a valid name or already taken,
    /// or `level` is edge; [`Error::Zarr`] or [`Error::Io`] when writing fails.
    pub fn add_strings(&mut self, name: &str, level: Level) -> Result<()> {
        let ctx = || format!("{}: add_strings {name}", self.path.display());
        format::check_field_name(name).map_err(|r| Error::invalid(ctx(), r))?;
        if level == Level::Edge {
            return Err(Error::invalid(ctx(), "string labels are atom or system level"));
        }
        let mut root = format::read_root(&self.path)?;
        let mut labels = format::string_fields(&self.location(), &root)?;
        if labels.contains_key(name) || root.fields.contains_key(name) {
            return Err(Error::invalid(ctx(), "a field or string label of this name exists"));
        }
        let n = root.num_samples;
        let rows = match level {
            Level::Atom => self.pointers(format::ATOMS_PTR, n)?[n] as u64,
            _ => n as u64,
        };
        let txn = self.store.transaction();
        self.create_string_array(name, rows)?;
        txn.commit().map_err(|e| Error::io(&self.path, e))?;
        labels.insert(name.to_string(), level);
        format::set_string_fields(&mut root, &labels);
        format::write_root(&self.path, &root)
    }
}
