//! Splits and statistics saved in a store: the root attributes under the
//! key `atomzarr`, which the toolkit and zarr-python keep and ignore.
//!
//! ```text
//! zarr.json  "attributes": {
//!   "num_samples": ..., "fields": {...},
//!   "atomzarr": {
//!     "splits": {"main": {"rule": {"by": "mp_id", "seed": 0, "parts": [["train", 0.8], ...],
//!                                  "hash": "fnv1a64-splitmix64/1"},
//!                         "saved_at": {"num_samples": 1000, "num_physical": 1000, "layout_generation": 0},
//!                         "parts": [{"name": "train", "samples": 801, "atoms": ..., ...}, ...]}},
//!     "stats": {"split": {"name": "main", "part": "train", "rule": {...}} | null,
//!               "saved_at": {...}, "stats": {... DatasetStats ...}},
//!     "layout_generation": 1        (present once a defragment renumbered samples)
//!   }}
//! ```
//!
//! A split is saved as its rule ([`SplitRule`]): [`Split::from_store`]
//! applies it to the store as it is now, so samples appended since are in
//! it too, and no sample moves. The counts at save time are a record.
//! Statistics are saved with where the store was ([`StoreMark`]: logical
//! and physical sample counts, layout generation); [`SavedStats::staleness`]
//! says whether samples were appended, deleted or renumbered since, or the
//! split they were computed on changed.
//!
//! Saving goes through the writer ([`AtomicDataZarrWriter::save_split`](crate::AtomicDataZarrWriter::save_split),
//! [`AtomicDataZarrWriter::save_stats`](crate::AtomicDataZarrWriter::save_stats)): the root `zarr.json` is replaced
//! atomically and durably, as every commit of the writer is.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::error::{Error, Result};
use crate::prep::split::{PartSummary, Split, SplitRule};
use crate::prep::stats::DatasetStats;
use crate::source::Reader;
use crate::store::AtomicDataZarrReader;
use crate::store::format::{self, RootAttrs};

/// The root attribute atomzarr keeps its own records under.
pub use crate::store::format::ATTR;

/// Where a store was: enough to tell whether samples were appended,
/// deleted or renumbered since.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreMark {
    /// Logical (active) samples.
    pub num_samples: usize,
    /// Physical samples (rows; deleted ones included).
    pub num_physical: usize,
    /// How many times a defragment renumbered the rows (dropped deleted
    /// samples): physical indices of one generation mean nothing in another.
    pub layout_generation: u64,
}

impl StoreMark {
    /// The reader's store as it is now (its root attributes read anew).
    ///
    /// # Errors
    /// The errors of reading the root attributes (as
    /// [`read_root_from`](crate::store::format::read_root_from)).
    pub fn of(reader: &AtomicDataZarrReader) -> Result<StoreMark> {
        let root = root_of(reader)?;
        Ok(StoreMark {
            num_samples: reader.len(),
            num_physical: reader.num_physical(),
            layout_generation: format::layout_generation(&root.extra),
        })
    }

    /// What changed from `self` to `now`, in words; `None` when nothing did.
    pub fn changes(&self, now: &StoreMark) -> Option<String> {
        let mut why = Vec::new();
        if now.layout_generation != self.layout_generation || now.num_physical < self.num_physical {
            why.push("a defragment renumbered the samples".to_string());
        } else {
            let appended = now.num_physical - self.num_physical;
            if appended > 0 {
                why.push(format!("{appended} samples appended"));
            }
            let deleted = (self.num_samples + appended).saturating_sub(now.num_samples);
            if deleted > 0 {
                why.push(format!("{deleted} samples deleted"));
            }
        }
        (!why.is_empty()).then(|| why.join(", "))
    }
}

/// A split as the store keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedSplit {
    /// The rule (what [`Split::from_store`] applies).
    pub rule: SplitRule,
    /// The store when the split was saved.
    pub saved_at: StoreMark,
    /// The parts when it was saved.
    pub parts: Vec<PartSummary>,
}

/// The split statistics were computed on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatsScope {
    /// The saved split's name.
    pub name: String,
    /// Its part (`train`).
    pub part: String,
    /// Its rule when the statistics were computed.
    pub rule: SplitRule,
}

/// Statistics as the store keeps them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedStats {
    /// The statistics.
    pub stats: DatasetStats,
    /// The split part they were computed on (`None`: every sample).
    pub split: Option<StatsScope>,
    /// The store when they were computed.
    pub saved_at: StoreMark,
}

fn root_of(reader: &AtomicDataZarrReader) -> Result<RootAttrs> {
    format::read_root_from(&*reader.byte_source(), reader.location())
}

/// The `atomzarr` object of the root attributes, made one if absent.
pub(crate) fn ours_mut<'a>(
    store: &std::path::Path,
    extra: &'a mut Map<String, Value>,
) -> Result<&'a mut Map<String, Value>> {
    extra
        .entry(ATTR)
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or_else(|| Error::format(store, format!("root attribute {ATTR} is not an object")))
}

fn decode<T: for<'de> Deserialize<'de>>(reader: &AtomicDataZarrReader, what: &str, v: &Value) -> Result<T> {
    serde_json::from_value(v.clone())
        .map_err(|e| Error::format(reader.location(), format!("root attribute {ATTR}.{what} cannot be read ({e})")))
}

/// Every split saved in the reader's store, by name.
///
/// # Errors
/// [`Error::Format`] when the saved splits are not an object or a record
/// cannot be read; the errors of reading the root attributes.
pub fn saved_splits(reader: &AtomicDataZarrReader) -> Result<BTreeMap<String, SavedSplit>> {
    let root = root_of(reader)?;
    let Some(splits) = root.extra.get(ATTR).and_then(|a| a.get("splits")) else { return Ok(BTreeMap::new()) };
    let map = splits
        .as_object()
        .ok_or_else(|| Error::format(reader.location(), format!("{ATTR}.splits is not an object")))?;
    map.iter().map(|(k, v)| Ok((k.clone(), decode(reader, &format!("splits.{k}"), v)?))).collect()
}

/// The split saved as `name`, its rule checked.
fn saved_split(reader: &AtomicDataZarrReader, name: &str) -> Result<SavedSplit> {
    let mut all = saved_splits(reader)?;
    let names: Vec<String> = all.keys().cloned().collect();
    let mut s = all.remove(name).ok_or_else(|| Error::NotSaved {
        store: reader.location().clone(),
        reason: format!(
            "no split saved as {name} (saved: {}); save one with `atomzarr split {} ... --save {name}`",
            if names.is_empty() { "none".to_string() } else { names.join(", ") },
            reader.name()
        ),
    })?;
    s.rule = s.rule.checked()?;
    Ok(s)
}

impl Split {
    /// The split saved in the reader's store as `name`
    /// (`atomzarr split ... --save NAME`), applied to the store as it is
    /// now: samples appended since are assigned by the same rule, and no
    /// sample moves. A split that keys samples by physical index (saved
    /// without `by`) is refused once a defragment has renumbered them.
    ///
    /// ```
    /// # fn main() -> atomzarr::Result<()> {
    /// use atomzarr::{AtomicDataZarrReader, AtomicDataZarrWriter, DataLoader, Dataset, ZarrWriteConfig};
    /// use atomzarr::sampler::ListSampler;
    /// use atomzarr::prep::split::{Split, SplitRule};
    /// use burn::tensor::Device;
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("s.zarr");
    /// let mut w = AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default())?;
    /// w.write(&atomzarr::data::synth::generate(50, 2, 5, 0)?)?;
    /// let reader = AtomicDataZarrReader::open(&path)?;
    /// let split = Split::compute(&reader, &SplitRule::parse("train=0.9,val=0.1")?.with_seed(3))?;
    /// w.save_split("main", &split, &reader)?;
    ///
    /// let train = Split::from_store(&reader, "main")?.indices("train")?.to_vec();
    /// assert_eq!(train, split.indices("train")?);
    /// let loader = DataLoader::builder(Dataset::new(reader))
    ///     .with_sampler(ListSampler::new(train)).with_batch_size(8).with_shuffle(true)
    ///     .build(&Device::flex())?;
    /// # let _ = loader;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NotSaved`] when no split is saved as `name`;
    /// [`Error::InvalidInput`] when its rule is not one this version
    /// computes; [`Error::Stale`] when it keys samples by physical index and
    /// a defragment renumbered them since; [`Error::Format`] for an unreadable
    /// record; the errors of [`Split::compute`].
    pub fn from_store(reader: &AtomicDataZarrReader, name: &str) -> Result<Split> {
        let saved = saved_split(reader, name)?;
        if saved.rule.by().is_none() {
            let now = StoreMark::of(reader)?;
            if now.layout_generation != saved.saved_at.layout_generation
                || now.num_physical < saved.saved_at.num_physical
            {
                return Err(Error::Stale {
                    store: reader.location().clone(),
                    reason: format!(
                        "split {name} keys samples by physical index, and a defragment renumbered them since it \
                         was saved; save it again (or split by an id label, which defragment keeps)"
                    ),
                });
            }
        }
        Split::compute(reader, &saved.rule)
    }
}

impl SavedStats {
    /// The statistics saved in the reader's store (`atomzarr stats --save`),
    /// `None` if there are none. Check [`SavedStats::staleness`] before use.
    ///
    /// # Errors
    /// [`Error::Format`] when the saved record cannot be read; the errors of
    /// reading the root attributes.
    pub fn from_store(reader: &AtomicDataZarrReader) -> Result<Option<SavedStats>> {
        let root = root_of(reader)?;
        match root.extra.get(ATTR).and_then(|a| a.get("stats")) {
            None => Ok(None),
            Some(v) => decode(reader, "stats", v).map(Some),
        }
    }

    /// Why these statistics no longer describe the reader's store (samples
    /// appended, deleted or renumbered since, or the split they were
    /// computed on saved again with another rule); `None` when they do.
    ///
    /// ```
    /// # fn main() -> atomzarr::Result<()> {
    /// use atomzarr::{AtomicDataZarrReader, AtomicDataZarrWriter, ReaderExt, ZarrWriteConfig};
    /// use atomzarr::prep::stats::{StatsOptions, dataset_stats};
    /// use atomzarr::prep::saved::SavedStats;
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("s.zarr");
    /// let mut w = AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default())?;
    /// w.write(&atomzarr::data::synth::generate(20, 2, 5, 0)?)?;
    /// let reader = AtomicDataZarrReader::open(&path)?;
    /// w.save_stats(&dataset_stats(&reader, &StatsOptions::default())?, None, &reader)?;
    /// let saved = SavedStats::from_store(&reader)?.unwrap();
    /// assert_eq!(saved.staleness(&reader)?, None);
    /// w.append(&atomzarr::data::synth::generate(3, 2, 5, 1)?)?;
    /// reader.refresh()?;
    /// assert_eq!(saved.staleness(&reader)?.as_deref(), Some("3 samples appended"));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`saved_splits`].
    pub fn staleness(&self, reader: &AtomicDataZarrReader) -> Result<Option<String>> {
        let mut why: Vec<String> = self.saved_at.changes(&StoreMark::of(reader)?).into_iter().collect();
        if let Some(scope) = &self.split {
            match saved_splits(reader)?.get(&scope.name) {
                Some(s) if s.rule == scope.rule => {}
                Some(_) => why.push(format!("split {} was saved again with another rule", scope.name)),
                None => why.push(format!("split {} is no longer saved", scope.name)),
            }
        }
        Ok((!why.is_empty()).then(|| why.join("; ")))
    }
}

/// Checks that the store at the writer's path is still where `mark` saw it
/// (what was computed is about the store as it is).
pub(crate) fn check_unchanged(store: &std::path::Path, root: &RootAttrs, mark: &StoreMark) -> Result<()> {
    if root.num_samples != mark.num_physical || format::layout_generation(&root.extra) != mark.layout_generation {
        return Err(Error::Stale {
            store: store.into(),
            reason: format!(
                "it changed while this was computed ({} samples then, {} now); compute it again",
                mark.num_physical, root.num_samples
            ),
        });
    }
    Ok(())
}

/// `value` as a JSON value for the root attributes.
pub(crate) fn to_value<T: Serialize>(store: &std::path::Path, value: &T) -> Result<Value> {
    serde_json::to_value(value).map_err(|e| Error::format(store, format!("cannot record {ATTR} attributes ({e})")))
}
