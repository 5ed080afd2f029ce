//! Labels only some frames have: every field and string label seen so far
//! (in the store, or in the frames imported before), and the filling of
//! what a frame lacks (docs/LABELS.md):
//!
//! - a float field: NaN in every element of the frame's rows;
//! - an integer or bool field `x`: 0 / false, and a bool system field
//!   `x_present` (`[1]`) that is false there and true where the frame has
//!   `x`. It exists once any frame lacks `x`;
//! - a string label: `""`.
//!
//! A label first met after frames were written is added to the store over
//! those frames (NaN, 0, false or `""` read back, at no write cost:
//! [`AtomicDataZarrWriter::add_filled`], [`AtomicDataZarrWriter::add_strings`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use half::{bf16, f16};

use super::Signature;
use crate::data::{AtomicData, DType, Field, HostData, Level, StringField};
use crate::error::{Error, Result};
use crate::source::Reader;
use crate::store::{AtomicDataZarrReader, AtomicDataZarrWriter};

/// The name of the presence flag of integer or bool field `name`.
pub(crate) fn presence_name(name: &str) -> String {
    format!("{name}_present")
}

/// `len` elements of `dtype` meaning "absent": NaN for floats, 0 / false
/// otherwise.
pub(crate) fn absent(dtype: DType, len: usize) -> HostData {
    match dtype {
        DType::Float16 => HostData::Float16(vec![f16::NAN; len]),
        DType::BFloat16 => HostData::BFloat16(vec![bf16::NAN; len]),
        DType::Float32 => HostData::Float32(vec![f32::NAN; len]),
        DType::Float64 => HostData::Float64(vec![f64::NAN; len]),
        other => HostData::zeros(other, len),
    }
}

fn is_float(d: DType) -> bool {
    matches!(d, DType::Float16 | DType::BFloat16 | DType::Float32 | DType::Float64)
}

fn show(s: &(Level, DType, Vec<usize>)) -> String {
    format!("{} {} {:?}", s.0, s.1, s.2)
}

/// What the import knows about labels.
pub(super) struct Labels {
    fields: Signature,
    strings: BTreeMap<String, Level>,
    /// Integer and bool fields with a presence flag.
    tracked: BTreeSet<String>,
    /// Samples in the store.
    stored: usize,
    /// [`super::Missing::Error`]: the first frame's fields and where it was.
    first: Option<(Signature, BTreeMap<String, Level>, PathBuf, usize)>,
}

/// Labels met for the first time in a batch of frames.
#[derive(Default)]
struct NewLabels {
    fields: Vec<String>,
    strings: Vec<String>,
}

/// The error of a batch's frame, naming the file and the frames before it.
struct FillErr<'a> {
    file: &'a Path,
    imported: usize,
}

impl FillErr<'_> {
    fn at(&self, line: usize, field: &str, reason: String) -> Error {
        Error::Parse {
            file: self.file.to_path_buf(),
            line,
            field: field.to_string(),
            reason: format!("{reason}. {} frames were imported before this one", self.imported),
        }
    }
}

fn signature(s: &AtomicData) -> Signature {
    s.fields.iter().map(|(k, f)| (k.clone(), (f.level, f.dtype(), f.trailing_shape().to_vec()))).collect()
}

impl Labels {
    /// The labels of the store at `path` (none for a new store).
    pub(super) fn of_store(path: &Path) -> Result<Labels> {
        let r = AtomicDataZarrReader::open(path)?;
        let fields = r.field_schema();
        let tracked = fields
            .keys()
            .filter(|k| fields.contains_key(&presence_name(k)) && !is_float(fields[*k].1))
            .cloned()
            .collect();
        Ok(Labels { strings: r.schema().strings, fields, tracked, stored: r.num_physical(), first: None })
    }

    /// [`super::Missing::Error`]: every frame must have the first frame's
    /// fields and string labels (an append to a store is checked against
    /// the store by the writer).
    pub(super) fn check_same(
        &mut self,
        samples: &[AtomicData],
        file: &Path,
        lines: &[usize],
        imported: usize,
    ) -> Result<()> {
        for (s, &line) in samples.iter().zip(lines) {
            let sig = signature(s);
            let strings: BTreeMap<String, Level> = s.strings.iter().map(|(k, f)| (k.clone(), f.level)).collect();
            let Some((want, want_strings, f0, l0)) = &self.first else {
                self.first = Some((sig, strings, file.to_path_buf(), line));
                continue;
            };
            let diff = || -> Option<(String, String)> {
                for (k, w) in want {
                    match sig.get(k) {
                        None => return Some((k.clone(), "missing in this frame, present in the first".into())),
                        Some(g) if g != w => {
                            return Some((
                                k.clone(),
                                format!("is {} here but {} in the first frame", show(g), show(w)),
                            ));
                        }
                        _ => {}
                    }
                }
                if let Some(k) = sig.keys().find(|k| !want.contains_key(*k)) {
                    return Some((k.clone(), "not in the first frame".into()));
                }
                if let Some(k) =
                    want_strings.keys().chain(strings.keys()).find(|k| want_strings.get(*k) != strings.get(*k))
                {
                    return Some((k.clone(), "string label in one of this frame and the first, not both".into()));
                }
                None
            };
            if let Some((field, why)) = diff() {
                return Err(Error::Parse {
                    file: file.to_path_buf(),
                    line,
                    field,
                    reason: format!(
                        "{why} (first frame: {}:{l0}); one store holds one schema (--missing fill stores \
                         labels that only some frames have). {imported} frames were imported before this one",
                        f0.display()
                    ),
                });
            }
        }
        Ok(())
    }

    /// [`super::Missing::Fill`]: adds to the store the labels these frames
    /// bring, then gives every frame every label.
    pub(super) fn fill(
        &mut self,
        writer: &mut AtomicDataZarrWriter,
        samples: &mut [AtomicData],
        file: &Path,
        lines: &[usize],
        imported: usize,
    ) -> Result<()> {
        let err = FillErr { file, imported };
        let known_before: BTreeSet<String> = self.fields.keys().cloned().collect();
        let new = self.learn(samples, lines, &err)?;
        let flags = self.presence_flags(samples, &known_before);
        for (name, _) in &flags {
            let flag = presence_name(name);
            if self.fields.contains_key(&flag) && !new.fields.contains(&flag) {
                let at = lines.first().copied().unwrap_or(0);
                return Err(err.at(
                    at,
                    &flag,
                    format!("the presence flag of {name} would replace a field of this name"),
                ));
            }
        }
        if self.stored > 0 {
            self.add_to_store(writer, &new, &flags)?;
        }
        for (name, _) in flags {
            self.fields.insert(presence_name(&name), (Level::System, DType::Bool, vec![]));
            self.tracked.insert(name);
        }
        for s in samples.iter_mut() {
            self.fill_frame(s);
        }
        self.stored += samples.len();
        Ok(())
    }

    /// Whether frame `s` has exactly the known fields and string labels.
    /// The usual frame does: one walk of both sorted maps checks it, without
    /// lookups.
    fn has_known_labels(&self, s: &AtomicData) -> bool {
        s.fields.len() == self.fields.len()
            && s.fields.iter().zip(&self.fields).all(|((a, f), (b, k))| {
                a == b && f.level == k.0 && f.dtype() == k.1 && f.trailing_shape() == k.2.as_slice()
            })
            && s.strings.len() == self.strings.len()
            && s.strings.iter().zip(&self.strings).all(|((a, f), (b, l))| a == b && f.level == *l)
    }

    /// Records the fields and string labels the frames bring, refusing one
    /// whose kind, level, dtype or shape differs from what is known.
    fn learn(&mut self, samples: &[AtomicData], lines: &[usize], err: &FillErr<'_>) -> Result<NewLabels> {
        let mut new = NewLabels::default();
        for (s, &line) in samples.iter().zip(lines) {
            if self.has_known_labels(s) {
                continue;
            }
            for (name, f) in &s.fields {
                let sig = (f.level, f.dtype(), f.trailing_shape().to_vec());
                if self.strings.contains_key(name) {
                    return Err(err.at(line, name, "a number here, a string label in other frames".into()));
                }
                match self.fields.get(name) {
                    Some(k) if *k != sig => {
                        return Err(err.at(
                            line,
                            name,
                            format!("is {} here but {} in earlier frames or the store", show(&sig), show(k)),
                        ));
                    }
                    Some(_) => {}
                    None => {
                        self.fields.insert(name.clone(), sig);
                        new.fields.push(name.clone());
                    }
                }
            }
            for (name, f) in &s.strings {
                if self.fields.contains_key(name) {
                    return Err(err.at(line, name, "a string here, a number in other frames".into()));
                }
                match self.strings.get(name) {
                    Some(l) if *l != f.level => {
                        return Err(err.at(
                            line,
                            name,
                            format!("a {} string label here, {l} in other frames", f.level),
                        ));
                    }
                    Some(_) => {}
                    None => {
                        self.strings.insert(name.clone(), f.level);
                        new.strings.push(name.clone());
                    }
                }
            }
        }
        Ok(new)
    }

    /// Integer and bool fields some frame lacks, which get a presence flag,
    /// each with whether the stored frames have it.
    fn presence_flags(&self, samples: &[AtomicData], known_before: &BTreeSet<String>) -> Vec<(String, bool)> {
        let mut flags: Vec<(String, bool)> = Vec::new();
        for (name, (_, dtype, _)) in &self.fields {
            if is_float(*dtype) || self.tracked.contains(name) || name.ends_with("_present") {
                continue;
            }
            let new_late = self.stored > 0 && !known_before.contains(name);
            let lacking = samples.iter().any(|s| !s.fields.contains_key(name));
            if new_late || lacking {
                // Stored frames had the field exactly when it was known before.
                flags.push((name.clone(), known_before.contains(name)));
            }
        }
        flags
    }

    /// Adds the new labels and presence flags to the store, filled over the
    /// frames it holds.
    fn add_to_store(&self, writer: &mut AtomicDataZarrWriter, new: &NewLabels, flags: &[(String, bool)]) -> Result<()> {
        for name in &new.fields {
            let (level, dtype, trailing) = self.fields[name].clone();
            writer.add_filled(name, level, dtype, &trailing, if is_float(dtype) { f64::NAN } else { 0.0 })?;
        }
        for name in &new.strings {
            writer.add_strings(name, self.strings[name])?;
        }
        for (name, stored_had_it) in flags {
            writer.add_filled(
                &presence_name(name),
                Level::System,
                DType::Bool,
                &[],
                f64::from(u8::from(*stored_had_it)),
            )?;
        }
        Ok(())
    }

    /// Gives frame `s` its presence flags and every label it lacks, filled.
    fn fill_frame(&self, s: &mut AtomicData) {
        if self.tracked.is_empty() && s.fields.len() == self.fields.len() && s.strings.len() == self.strings.len() {
            // Checked in `learn`: the same names, so nothing to fill.
            return;
        }
        let (n, e) = (s.num_atoms(), s.num_edges());
        for name in &self.tracked {
            let has = s.fields.contains_key(name);
            s.fields
                .insert(presence_name(name), Field { level: Level::System, shape: vec![1], data: vec![has].into() });
        }
        for (name, (level, dtype, trailing)) in &self.fields {
            if s.fields.contains_key(name) {
                continue;
            }
            let rows = level.pick(n, e, 1);
            let mut shape = vec![rows];
            shape.extend(trailing);
            let len = shape.iter().product();
            s.fields.insert(name.clone(), Field { level: *level, shape, data: absent(*dtype, len) });
        }
        for (name, level) in &self.strings {
            if !s.strings.contains_key(name) {
                let rows = level.pick(n, 0, 1);
                s.strings.insert(name.clone(), StringField { level: *level, values: vec![String::new(); rows] });
            }
        }
    }
}
