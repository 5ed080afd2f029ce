//! The fields of a mixture whose children differ (a [`MultiReader`] with
//! `output_strict` off): their union, the values a child's samples read
//! for the fields it lacks, and the `<name>_present` flags that say which
//! graphs hold each label (docs/LABELS.md, "Labels a mixture's children
//! lack").
//!
//! [`MultiReader`]: crate::MultiReader

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::data::{AtomicData, CollatedBatch, CollatedField, DType, HostData, Level, NEIGHBOR_LIST, StringField};
use crate::data::{absent, neighbors::SHIFTS};
use crate::error::{Error, Result};
use crate::source::multi_options::{DATASET_INDEX, LOSS_WEIGHT};
use crate::source::{Reader, ReaderExt, Schema};

/// What a presence flag's name ends with: `energy_present` says which
/// graphs hold `energy`.
pub const PRESENT_SUFFIX: &str = "_present";

/// The fields a structure is made of: every child of a mixture has them.
const REQUIRED: [&str; 2] = ["atomic_numbers", "positions"];

/// Geometry a child may lack, read as zeros (`pbc` false): no periodic
/// image, which is what a molecule is to a neighbor list.
const NON_PERIODIC: [&str; 3] = ["cell", "pbc", SHIFTS];

/// Fields the mixture adds itself: never a label, never flagged.
const ADDED: [&str; 2] = [DATASET_INDEX, LOSS_WEIGHT];

/// A field's level, element type and row shape.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Spec {
    level: Level,
    dtype: DType,
    trailing: Vec<usize>,
}

/// The union of a mixture's fields, when its children's differ.
#[derive(Debug)]
pub(crate) struct FieldUnion {
    /// Every field of any child, flags included.
    specs: BTreeMap<String, Spec>,
    /// Per child, the fields it has.
    has: Vec<BTreeSet<String>>,
    /// The labels a sample may lack, each flagged by `<name>_present`.
    flagged: Vec<String>,
    /// Every string label of any child.
    strings: BTreeMap<String, Level>,
}

/// `name` of child `d`, for errors.
fn child(children: &[Arc<dyn Reader>], d: usize) -> String {
    format!("MultiReader: dataset {d} ({})", children[d].name())
}

impl FieldUnion {
    /// The union of the non-empty children's fields; `None` when they all
    /// have the same fields and string labels (nothing to fill). Reads the
    /// first sample of each non-empty child, for the element types and
    /// row shapes.
    ///
    /// # Errors
    /// Naming the child: a field with another level, element type or row
    /// shape than another child's; a child without a field of
    /// [`REQUIRED`]; a child with edge fields but no neighbor list.
    pub(crate) fn of(children: &[Arc<dyn Reader>]) -> Result<Option<FieldUnion>> {
        let schemas: Vec<Option<Schema>> = children.iter().map(|c| (!c.is_empty()).then(|| c.schema())).collect();
        let mut present = schemas.iter().flatten();
        let Some(first) = present.next() else { return Ok(None) };
        if present.all(|s| s == first) {
            return Ok(None);
        }
        let mut specs: BTreeMap<String, (usize, Spec)> = BTreeMap::new();
        let mut strings: BTreeMap<String, (usize, Level)> = BTreeMap::new();
        let mut has = vec![BTreeSet::new(); children.len()];
        for (d, schema) in schemas.iter().enumerate() {
            let Some(schema) = schema else { continue };
            for name in REQUIRED {
                if !schema.fields.contains_key(name) {
                    return Err(Error::invalid(
                        child(children, d),
                        format!("has no {name} field: every child needs one"),
                    ));
                }
            }
            let has_edges = schema.fields.values().any(|l| *l == Level::Edge);
            if has_edges && !schema.fields.contains_key(NEIGHBOR_LIST) {
                return Err(Error::invalid(child(children, d), format!("has edge fields but no {NEIGHBOR_LIST}")));
            }
            let sample = children[d].read(0)?.data;
            for (name, level) in &schema.fields {
                let f = sample.field(name).ok_or_else(|| {
                    Error::invalid(child(children, d), format!("its schema lists {name}, its first sample lacks it"))
                })?;
                let spec = Spec { level: *level, dtype: f.dtype(), trailing: f.trailing_shape().to_vec() };
                match specs.get(name) {
                    Some((r, want)) if *want != spec => {
                        return Err(Error::invalid(
                            child(children, d),
                            format!(
                                "field {name} is {:?} {} {:?} here and {:?} {} {:?} in dataset {r} ({})",
                                spec.level,
                                spec.dtype,
                                spec.trailing,
                                want.level,
                                want.dtype,
                                want.trailing,
                                children[*r].name()
                            ),
                        ));
                    }
                    Some(_) => {}
                    None => {
                        specs.insert(name.clone(), (d, spec));
                    }
                }
                has[d].insert(name.clone());
            }
            for (name, level) in &schema.strings {
                match strings.get(name) {
                    Some((r, l)) if l != level => {
                        return Err(Error::invalid(
                            child(children, d),
                            format!("string label {name} is {level:?} here, {l:?} in dataset {r}"),
                        ));
                    }
                    Some(_) => {}
                    None => {
                        strings.insert(name.clone(), (d, *level));
                    }
                }
            }
        }
        let mut specs: BTreeMap<String, Spec> = specs.into_iter().map(|(n, (_, s))| (n, s)).collect();
        let flagged = flagged_labels(&specs, &has, &schemas);
        for name in &flagged {
            let spec = Spec { level: Level::System, dtype: DType::Bool, trailing: vec![] };
            specs.insert(format!("{name}{PRESENT_SUFFIX}"), spec);
        }
        let strings = strings.into_iter().map(|(n, (_, l))| (n, l)).collect();
        Ok(Some(FieldUnion { specs, has, flagged, strings }))
    }

    /// The mixture's fields: every child's, and a flag per label a sample
    /// may lack.
    pub(crate) fn schema(&self) -> Schema {
        Schema::new(self.specs.iter().map(|(n, s)| (n.clone(), s.level)).collect()).with_strings(self.strings.clone())
    }

    /// Child `d`'s batch with every field of the union: those it lacks as
    /// absent values (zeros for [`NON_PERIODIC`] geometry), each flagged
    /// label's `<name>_present` computed (false where the child lacks the
    /// label, where its stored flag says absent, or where a float row of
    /// the graph holds a NaN), and the label's rows in a graph without it
    /// set to absent values.
    ///
    /// # Errors
    /// When a field's buffer is shorter than the batch's pointers say.
    pub(crate) fn fill_batch(&self, d: usize, batch: &mut CollatedBatch) -> Result<()> {
        let has = &self.has[d];
        let graphs = batch.num_graphs();
        for (name, spec) in &self.specs {
            if has.contains(name) || self.is_flag(name) {
                continue;
            }
            let rows = match spec.level {
                Level::Atom => batch.num_atoms(),
                Level::Edge => batch.num_edges(),
                Level::System => graphs,
            };
            let len = rows * spec.trailing.iter().product::<usize>();
            let data = if NON_PERIODIC.contains(&name.as_str()) || ADDED.contains(&name.as_str()) {
                HostData::zeros(spec.dtype, len)
            } else {
                absent::values(spec.dtype, len)
            };
            batch
                .fields
                .insert(name.clone(), CollatedField { level: spec.level, trailing_shape: spec.trailing.clone(), data });
        }
        for name in &self.flagged {
            let flag = format!("{name}{PRESENT_SUFFIX}");
            let flags = self.flags(d, batch, name, &flag)?;
            let data = HostData::Bool(flags);
            batch.fields.insert(flag, CollatedField { level: Level::System, trailing_shape: vec![], data });
        }
        for (name, level) in &self.strings {
            if !batch.strings.contains_key(name) {
                let rows = if *level == Level::Atom { batch.num_atoms() } else { graphs };
                batch.strings.insert(name.clone(), StringField { level: *level, values: vec![String::new(); rows] });
            }
        }
        Ok(())
    }

    /// Child `d`'s sample with every field of the union, as
    /// [`fill_batch`](Self::fill_batch) makes them.
    pub(crate) fn fill_sample(&self, d: usize, sample: AtomicData) -> Result<AtomicData> {
        let mut batch = CollatedBatch::from_samples(&[0], std::slice::from_ref(&sample))?;
        self.fill_batch(d, &mut batch)?;
        batch.sample(0)
    }

    /// Whether `name` is the flag of a flagged label.
    fn is_flag(&self, name: &str) -> bool {
        name.strip_suffix(PRESENT_SUFFIX).is_some_and(|base| self.flagged.iter().any(|f| f == base))
    }

    /// Label `name`'s presence in each graph of child `d`'s `batch`; a
    /// graph without it gets absent values in its rows.
    fn flags(&self, d: usize, batch: &mut CollatedBatch, name: &str, flag: &str) -> Result<Vec<bool>> {
        let graphs = batch.num_graphs();
        if !self.has[d].contains(name) {
            return Ok(vec![false; graphs]);
        }
        let stored = match batch.fields.get(flag) {
            Some(CollatedField { data: HostData::Bool(v), .. }) if self.has[d].contains(flag) => Some(v.clone()),
            _ => None,
        };
        let short = || Error::invalid(format!("batch field {name}"), "shorter than the batch's pointers say");
        let mut out = Vec::with_capacity(graphs);
        let mut ranges = Vec::with_capacity(graphs);
        let f = batch.fields.get(name).ok_or_else(short)?;
        let row_len = f.trailing_shape.iter().product::<usize>();
        for g in 0..graphs {
            let rows = batch.graph_rows(f.level, g).ok_or_else(short)?;
            let elems = rows.start * row_len..rows.end * row_len;
            if elems.end > f.data.len() {
                return Err(short());
            }
            let here = stored.as_ref().is_none_or(|s| s.get(g).copied().unwrap_or(false))
                && !absent::any_nan(&f.data, elems.clone());
            out.push(here);
            ranges.push(elems);
        }
        if let Some(f) = batch.fields.get_mut(name) {
            for (here, elems) in out.iter().zip(ranges) {
                if !here {
                    absent::set(&mut f.data, elems);
                }
            }
        }
        Ok(out)
    }
}

/// The labels a sample of the mixture may lack: fields some non-empty
/// child lacks or stores a `<name>_present` flag for, leaving out the
/// structure ([`REQUIRED`], [`NON_PERIODIC`], the neighbor list), the
/// mixture's own fields and the flags themselves.
fn flagged_labels(specs: &BTreeMap<String, Spec>, has: &[BTreeSet<String>], schemas: &[Option<Schema>]) -> Vec<String> {
    let structure =
        |n: &str| REQUIRED.contains(&n) || NON_PERIODIC.contains(&n) || n == NEIGHBOR_LIST || ADDED.contains(&n);
    let is_flag = |n: &str| n.strip_suffix(PRESENT_SUFFIX).is_some_and(|b| specs.contains_key(b));
    specs
        .keys()
        .filter(|n| !structure(n) && !is_flag(n))
        .filter(|n| {
            let flag = format!("{n}{PRESENT_SUFFIX}");
            has.iter().zip(schemas).any(|(h, s)| s.is_some() && (!h.contains(*n) || h.contains(&flag)))
        })
        .cloned()
        .collect()
}
