//! Reproducible train / validation / test splits: [`SplitRule`] (group by a
//! label, a seed, the parts' fractions) and [`Split`], the rule applied to
//! a reader's samples.
//!
//! Each **group** of samples goes whole to one part, chosen by the split
//! hash of `(seed, group key)` ([`crate::data::hash`], where the algorithm
//! is written out with a Python version). So:
//!
//! - no group is in two parts (grouping by `mp_id`, a SMILES or a
//!   trajectory id keeps near-duplicates out of the validation set);
//! - the same rule gives the same split on every machine and version (the
//!   hash is recorded as [`SPLIT_HASH`]);
//! - the hash does not depend on how many samples there are: appending
//!   never moves a sample that was already assigned, and new groups are
//!   assigned the same way.
//!
//! **Group keys.** With [`SplitRule::with_by`]`(Some(label))`, a sample's key
//! is the value of a system-level string label (`config_type`, `mp_id`,
//! `smiles`) or of a system-level integer field, one value per sample,
//! printed in decimal (`frame_id = 7` is the key `"7"`). A sample whose
//! label is absent (`""` for a string, `<name>_present` false for an
//! integer, see docs/LABELS.md) is a group of its own, keyed as below.
//! Without `by`, each sample is its own group, keyed by its **physical
//! index** in decimal: its row in the store, which appends and deletes
//! never change. `defragment` renumbers the rows of a store that had
//! deletions; a split keyed by physical index saved before that is refused
//! afterwards ([`Split::from_store`]); group by an id label to keep a split
//! across defragments.
//!
//! **Tolerance.** Groups are assigned independently, so the number of
//! groups in a part of fraction `p` is binomial: its share of the `G`
//! groups is `p ± sqrt(p (1 - p) / G)` (one standard deviation), and its
//! share of the samples `p ± sqrt(p (1 - p) Σ n_g²) / N` for groups of
//! `n_g` samples (atoms likewise). [`PartSummary`] reports the achieved
//! shares in samples and in atoms with these standard deviations.
//!
//! ```
//! # fn main() -> atomzarr::Result<()> {
//! use atomzarr::{AtomicData, InMemoryReader};
//! use atomzarr::prep::split::{Split, SplitRule};
//! let samples: Vec<AtomicData> = (0..100)
//!     .map(|i| AtomicData::new(vec![1], vec![[0.0; 3]]).unwrap().with_string("mol", format!("m{}", i / 4)))
//!     .collect();
//! let data = InMemoryReader::from_samples(&samples, "toy")?;
//! let rule = SplitRule::parse("train=0.8,val=0.2")?.with_by(Some("mol".into())).with_seed(1);
//! let split = Split::compute(&data, &rule)?;
//! let (train, val) = (split.indices("train")?, split.indices("val")?);
//! assert_eq!(train.len() + val.len(), 100);
//! // Molecules stay whole: the 4 samples of a molecule share a part.
//! assert!(val.iter().all(|i| val.contains(&(i / 4 * 4))));
//! # Ok(()) }
//! ```

use std::collections::HashMap;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::data::hash::{SPLIT_HASH, split_unit};
use crate::data::{CollatedBatch, HostData, Level};
use crate::error::{Error, Result};
use crate::source::{Reader, ReaderExt};

/// How samples are split: the label they are grouped by, the seed and the
/// parts with their fractions (in order: the order is part of the rule).
///
/// ```
/// use atomzarr::prep::split::SplitRule;
/// let r = SplitRule::parse("train=0.8,val=0.1,test=0.1").unwrap().with_seed(7);
/// assert_eq!(r.parts()[1], ("val".to_string(), 0.1));
/// assert_eq!(r.part_of_key("mp-149"), r.part_of_key("mp-149"));
/// assert!(SplitRule::parse("train=0.8,val=0.1").is_err()); // fractions must sum to 1
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SplitRule {
    by: Option<String>,
    seed: u64,
    parts: Vec<(String, f64)>,
    hash: String,
}

/// How far the fractions may sum from 1 (they are written by hand).
const SUM_TOLERANCE: f64 = 1e-6;

impl SplitRule {
    /// A rule with these parts, seed 0, each sample its own group. The
    /// fractions must be finite, non-negative and sum to 1 (within 1e-6);
    /// part names must be distinct, non-empty, of letters, digits, `_` and `-`.
    ///
    /// # Errors
    /// [`Error::Config`] when there is no part, a part name is invalid or
    /// repeated, or the fractions are not finite, non-negative and summing to 1.
    pub fn new(parts: Vec<(String, f64)>) -> Result<SplitRule> {
        let bad = |why: String| Err(Error::Config(format!("split fractions: {why}")));
        if parts.is_empty() {
            return bad("no parts".into());
        }
        for (k, (name, f)) in parts.iter().enumerate() {
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
                return bad(format!("part name {name:?} is not letters, digits, _ and -"));
            }
            if parts[..k].iter().any(|(n, _)| n == name) {
                return bad(format!("part {name} given twice"));
            }
            if !f.is_finite() || *f < 0.0 {
                return bad(format!("part {name}: fraction {f} is not a number >= 0"));
            }
        }
        let sum: f64 = parts.iter().map(|(_, f)| f).sum();
        if (sum - 1.0).abs() > SUM_TOLERANCE {
            return bad(format!("they sum to {sum}, not 1"));
        }
        Ok(SplitRule { by: None, seed: 0, parts, hash: SPLIT_HASH.to_string() })
    }

    /// A rule from `name=fraction,...` (`train=0.8,val=0.1,test=0.1`).
    ///
    /// # Errors
    /// [`Error::Config`] when an item is not `name=fraction` or a fraction is not
    /// a number; otherwise as [`SplitRule::new`].
    pub fn parse(fractions: &str) -> Result<SplitRule> {
        let parts = fractions
            .split(',')
            .map(|item| {
                let (name, f) = item.split_once('=').ok_or_else(|| {
                    Error::Config(format!("split fractions: {item:?} is not name=fraction (e.g. train=0.8)"))
                })?;
                let f: f64 = f
                    .trim()
                    .parse()
                    .map_err(|_| Error::Config(format!("split fractions: {f:?} (part {name}) is not a number")))?;
                Ok((name.trim().to_string(), f))
            })
            .collect::<Result<Vec<_>>>()?;
        SplitRule::new(parts)
    }

    /// Groups samples by this label (`None`: each sample its own group).
    pub fn with_by(mut self, by: Option<String>) -> Self {
        self.by = by;
        self
    }

    /// The label samples are grouped by.
    pub fn by(&self) -> Option<&str> {
        self.by.as_deref()
    }

    /// The seed of the hash (default 0).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The parts and their fractions, in order.
    pub fn parts(&self) -> &[(String, f64)] {
        &self.parts
    }

    /// The hash the rule assigns with ([`SPLIT_HASH`]).
    pub fn hash(&self) -> &str {
        &self.hash
    }

    /// Checks a rule read back from elsewhere (a store's attributes): its
    /// hash must be one this version computes, its fractions valid.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the hash is not [`SPLIT_HASH`]; [`Error::Config`] when the parts fail
    /// [`SplitRule::new`]'s checks.
    pub fn checked(self) -> Result<SplitRule> {
        if self.hash != SPLIT_HASH {
            return Err(Error::invalid(
                "split rule",
                format!("split hash {:?} is not one this atomzarr computes ({SPLIT_HASH})", self.hash),
            ));
        }
        Ok(SplitRule { by: self.by, seed: self.seed, ..SplitRule::new(self.parts)? })
    }

    /// The part (its position in [`SplitRule::parts`]) of the group `key`.
    pub fn part_of_key(&self, key: &str) -> usize {
        let u = split_unit(self.seed, key);
        let mut c = 0.0;
        for (k, (_, f)) in self.parts.iter().enumerate() {
            c += f;
            if u < c {
                return k;
            }
        }
        self.parts.len() - 1
    }
}

/// One part of a [`Split`]: what it holds and how close it came to its
/// fraction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartSummary {
    /// The part's name.
    pub name: String,
    /// The fraction asked for.
    pub fraction: f64,
    /// Groups assigned to it.
    pub groups: u64,
    /// Samples in it.
    pub samples: u64,
    /// Atoms in it.
    pub atoms: u64,
    /// Its share of the samples.
    pub sample_fraction: f64,
    /// Its share of the atoms.
    pub atom_fraction: f64,
    /// One standard deviation of `sample_fraction` around `fraction` when
    /// groups are assigned at random: `sqrt(p (1 - p) Σ n_g²) / N`.
    pub sample_sigma: f64,
    /// The same for `atom_fraction`, over the groups' atom counts.
    pub atom_sigma: f64,
}

/// A rule applied to a reader: the logical indices of each part.
#[derive(Debug, Clone, PartialEq)]
pub struct Split {
    rule: SplitRule,
    indices: Vec<Vec<usize>>,
    summary: Vec<PartSummary>,
    ungrouped: u64,
}

/// Samples read per work item while keys are collected.
const CHUNK: usize = 4096;

/// Where a sample's group key comes from.
enum KeySource {
    /// The physical index.
    Physical,
    /// A system string label.
    String(String),
    /// A system integer field, with its `_present` flag if there is one.
    Int(String, Option<String>),
}

fn key_source<R: Reader + ?Sized>(reader: &R, by: Option<&str>) -> Result<KeySource> {
    let Some(by) = by else { return Ok(KeySource::Physical) };
    let crate::source::Schema { fields, strings } = reader.schema();
    let level = match (strings.get(by), fields.get(by)) {
        (Some(l), _) => *l,
        (None, Some(l)) => *l,
        (None, None) => {
            return Err(Error::invalid(
                reader.name(),
                format!(
                    "no label {by} to split by (string labels {:?}, fields {:?})",
                    strings.keys().collect::<Vec<_>>(),
                    fields.keys().collect::<Vec<_>>()
                ),
            ));
        }
    };
    if level != Level::System {
        return Err(Error::invalid(
            reader.name(),
            format!("{by} is a {level} label; a split groups samples by a system label (one value per sample)"),
        ));
    }
    if strings.contains_key(by) {
        return Ok(KeySource::String(by.to_string()));
    }
    let present = format!("{by}_present");
    let flag = (fields.get(&present) == Some(&Level::System)).then_some(present);
    Ok(KeySource::Int(by.to_string(), flag))
}

/// The keys (`None`: absent) and atom counts of the samples of `batch`.
fn batch_keys(src: &KeySource, batch: &CollatedBatch, source: &str) -> Result<Vec<Option<String>>> {
    let n = batch.num_graphs();
    match src {
        KeySource::Physical => Ok(vec![None; n]),
        KeySource::String(name) => {
            let f =
                batch.strings.get(name).filter(|f| f.values.len() == n).ok_or_else(|| {
                    Error::invalid(source, format!("string label {name} is not one value per sample"))
                })?;
            Ok(f.values.iter().map(|v| (!v.is_empty()).then(|| v.clone())).collect())
        }
        KeySource::Int(name, flag) => {
            let f = batch.fields.get(name).ok_or_else(|| Error::invalid(source, format!("no field {name}")))?;
            if f.data.get_i64(0).is_none() && n > 0 || f.data.len() != n {
                return Err(Error::invalid(
                    source,
                    format!(
                        "{name} is a {} field of {} values per sample; a split groups by a string label or an \
                         integer field with one value per sample",
                        f.data.dtype(),
                        f.data.len().checked_div(n).unwrap_or(0)
                    ),
                ));
            }
            let flags = flag.as_ref().and_then(|p| batch.fields.get(p)).map(|p| &p.data);
            (0..n)
                .map(|k| {
                    if let Some(HostData::Bool(p)) = flags
                        && !p.get(k).copied().unwrap_or(true)
                    {
                        return Ok(None);
                    }
                    f.data.get_i64(k).map(|v| Some(v.to_string())).ok_or_else(|| {
                        Error::invalid(source, format!("{name}: value {k} of the batch is not an int64"))
                    })
                })
                .collect()
        }
    }
}

/// Per-group sizes, for the tolerance.
#[derive(Default, Clone, Copy)]
struct GroupSize {
    part: usize,
    samples: u64,
    atoms: u64,
}

impl Split {
    /// Applies `rule` to every logical sample of `reader` (one streamed
    /// pass over the samples; without `by` only the atom counts are read).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the rule's `by` label is missing or not system
    /// level, or a field that is not one integer per sample;
    /// [`Error::InvalidInput`] when its values cannot be read as keys; the
    /// reader's errors (as [`ReaderExt::load_collated`]).
    pub fn compute<R: Reader + ?Sized>(reader: &R, rule: &SplitRule) -> Result<Split> {
        let src = key_source(reader, rule.by())?;
        let len = reader.len();
        let n_parts = rule.parts().len();
        let mut indices: Vec<Vec<usize>> = vec![Vec::new(); n_parts];
        let mut groups: HashMap<String, GroupSize> = HashMap::new();
        // Samples that are their own group: (part, atoms) each.
        let mut singles: Vec<GroupSize> = Vec::new();
        let chunks: Vec<usize> = (0..len).step_by(CHUNK).collect();
        // A few chunks at a time in parallel: bounded memory for the keys.
        for wave in chunks.chunks(rayon::current_num_threads().max(1) * 2) {
            let read: Vec<(Vec<Option<String>>, Vec<u64>)> = wave
                .par_iter()
                .map(|&start| -> Result<_> {
                    let idx: Vec<usize> = (start..(start + CHUNK).min(len)).collect();
                    if let KeySource::Physical = src {
                        let atoms =
                            idx.iter().map(|&i| reader.sample_sizes(i).map(|m| m.0 as u64)).collect::<Result<_>>()?;
                        return Ok((vec![None; idx.len()], atoms));
                    }
                    let mut out = Vec::new();
                    reader.load_collated(std::slice::from_ref(&idx), &mut out)?;
                    let b = out.first().ok_or_else(|| Error::InvalidInput {
                        context: reader.name().to_string(),
                        reason: "load_collated returned no batch".into(),
                    })?;
                    let atoms = b.atoms_ptr.windows(2).map(|w| (w[1] - w[0]) as u64).collect();
                    Ok((batch_keys(&src, b, reader.name())?, atoms))
                })
                .collect::<Result<_>>()?;
            for (&start, (keys, atoms)) in wave.iter().zip(read) {
                for (k, (key, atoms)) in keys.into_iter().zip(atoms).enumerate() {
                    let i = start + k;
                    let (part, size) = match key {
                        Some(key) => {
                            let g = groups.entry(key).or_insert_with_key(|key| GroupSize {
                                part: rule.part_of_key(key),
                                ..Default::default()
                            });
                            g.samples += 1;
                            g.atoms += atoms;
                            (g.part, None)
                        }
                        None => {
                            let part = rule.part_of_key(&reader.sample_metadata(i).physical_index.to_string());
                            (part, Some(GroupSize { part, samples: 1, atoms }))
                        }
                    };
                    indices[part].push(i);
                    singles.extend(size);
                }
            }
        }
        let ungrouped = if rule.by().is_some() { singles.len() as u64 } else { 0 };
        let summary = summarise(rule, groups.values().chain(&singles));
        Ok(Split { rule: rule.clone(), indices, summary, ungrouped })
    }

    /// The rule.
    pub fn rule(&self) -> &SplitRule {
        &self.rule
    }

    /// The logical indices of `part`, ascending.
    ///
    /// # Errors
    /// [`Error::Config`] when the rule has no part `part`.
    pub fn indices(&self, part: &str) -> Result<&[usize]> {
        let k = self.rule.parts().iter().position(|(n, _)| n == part).ok_or_else(|| {
            Error::Config(format!(
                "no part {part} in this split (parts: {})",
                self.rule.parts().iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", ")
            ))
        })?;
        Ok(&self.indices[k])
    }

    /// Every part's name and logical indices, in the rule's order.
    pub fn parts(&self) -> impl Iterator<Item = (&str, &[usize])> {
        self.rule.parts().iter().zip(&self.indices).map(|((n, _), i)| (n.as_str(), i.as_slice()))
    }

    /// What each part holds, in the rule's order.
    pub fn summary(&self) -> &[PartSummary] {
        &self.summary
    }

    /// Samples grouped by `by` whose label was absent (each its own group).
    pub fn ungrouped(&self) -> u64 {
        self.ungrouped
    }

    /// `{"splits": {part: [logical indices...]}, "rule": ..., "parts": [...]}`:
    /// what `atomzarr split --json` prints and the Python package returns.
    ///
    /// ```
    /// # fn main() -> atomzarr::Result<()> {
    /// use atomzarr::InMemoryReader;
    /// use atomzarr::prep::split::{Split, SplitRule};
    /// let data = InMemoryReader::from_samples(&atomzarr::data::synth::generate(40, 2, 4, 0)?, "toy")?;
    /// let split = Split::compute(&data, &SplitRule::parse("train=0.75,val=0.25")?)?;
    /// let json = split.to_json();
    /// assert_eq!(json["splits"]["train"].as_array().unwrap().len() + json["splits"]["val"].as_array().unwrap().len(), 40);
    /// # Ok(()) }
    /// ```
    pub fn to_json(&self) -> serde_json::Value {
        let splits: serde_json::Map<String, serde_json::Value> =
            self.parts().map(|(name, idx)| (name.to_string(), serde_json::json!(idx))).collect();
        serde_json::json!({"splits": splits, "rule": self.rule(), "parts": self.summary()})
    }
}

fn summarise<'a>(rule: &SplitRule, groups: impl Iterator<Item = &'a GroupSize>) -> Vec<PartSummary> {
    let n = rule.parts().len();
    let (mut g, mut s, mut a) = (vec![0u64; n], vec![0u64; n], vec![0u64; n]);
    let (mut s2, mut a2) = (0f64, 0f64);
    for x in groups {
        g[x.part] += 1;
        s[x.part] += x.samples;
        a[x.part] += x.atoms;
        s2 += (x.samples as f64).powi(2);
        a2 += (x.atoms as f64).powi(2);
    }
    let (ts, ta) = (s.iter().sum::<u64>() as f64, a.iter().sum::<u64>() as f64);
    let share = |x: u64, t: f64| if t > 0.0 { x as f64 / t } else { 0.0 };
    rule.parts()
        .iter()
        .enumerate()
        .map(|(k, (name, p))| PartSummary {
            name: name.clone(),
            fraction: *p,
            groups: g[k],
            samples: s[k],
            atoms: a[k],
            sample_fraction: share(s[k], ts),
            atom_fraction: share(a[k], ta),
            sample_sigma: if ts > 0.0 { (p * (1.0 - p) * s2).sqrt() / ts } else { 0.0 },
            atom_sigma: if ta > 0.0 { (p * (1.0 - p) * a2).sqrt() / ta } else { 0.0 },
        })
        .collect()
}
