//! Import: files of the formats MLIP data ships in ([`crate::formats`]:
//! extended XYZ plain or compressed, ASE's SQLite and LMDB databases,
//! SPICE and ANI-1x HDF5, rMD17 and sGDML npz, the MPtrj JSON) into a
//! store, streamed in batches, with neighbor lists built on the way when a
//! cutoff is given ([`crate::data::neighbors`]).
//!
//! A new store is created; an existing one is appended to. Frames may
//! differ in their labels (stress on some frames only, magnetic moments on
//! the magnetic ones, a string key here and there): with
//! [`Missing::Fill`] (the default) every label any frame has is stored for
//! all of them, and a frame without it reads as NaN (floats), as 0 / false
//! with `<name>_present` false (integers and bools), or as `""` (strings);
//! see `docs/LABELS.md`. [`Missing::Error`] refuses a frame whose fields
//! differ from the first frame's (or the store's) instead.
//!
//! Values arrive in eV, Å, eV/Å and eV/Å³ (each format converts); the root
//! attributes record that (`units`) and, per imported file, its format,
//! its own units and the factors applied (`imports`).
//!
//! Memory: parsing runs one batch ahead of writing (three batches at most:
//! one parsing, one queued, one writing), plus what a format needs to find
//! its next batch (stated in each format's docs).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::json;

use crate::data::AtomicData;
use crate::data::neighbors::add_neighbors;
use crate::error::{Error, Result};
use crate::formats::{FileInfo, Frame, FrameOptions, open_frames};
use crate::progress::Progress;
use crate::store::format;
use crate::store::{AtomicDataZarrWriter, ZarrWriteConfig};

mod fill;

use fill::Labels;

/// What the import does with labels only some frames have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Missing {
    /// Store every label any frame has, for all frames; absent values read
    /// as NaN (floats), 0 / false plus `<name>_present` = false (integers,
    /// bools) or `""` (strings).
    #[default]
    Fill,
    /// Every frame must carry the same fields as the first (and as the
    /// store, when appending); a frame that differs stops the import.
    Error,
}

/// Options of [`import_files`].
///
/// ```
/// # fn main() -> atomzarr::Result<()> {
/// use atomzarr::formats::import::{ImportOptions, Missing};
/// let o = ImportOptions::default().with_cutoff(5.0)?.with_batch_frames(2048).with_missing(Missing::Error);
/// assert_eq!((o.cutoff(), o.batch_frames(), o.missing()), (Some(5.0), 2048, Missing::Error));
/// assert!(ImportOptions::default().with_cutoff(-1.0).is_err());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ImportOptions {
    cutoff: Option<f64>,
    batch_frames: usize,
    progress: bool,
    write_config: ZarrWriteConfig,
    missing: Missing,
    frames: FrameOptions,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            cutoff: None,
            batch_frames: 8192,
            progress: false,
            write_config: ZarrWriteConfig::default(),
            missing: Missing::Fill,
            frames: FrameOptions::default(),
        }
    }
}

impl ImportOptions {
    /// Builds `neighbor_list` and `shifts` for this cutoff (Å) and stores
    /// them. Default: none (stored as the files give them: none).
    ///
    /// # Errors
    /// [`Error::Config`] for a cutoff that is not a positive finite number
    /// (the check of [`Dataset::with_cutoff`](crate::Dataset::with_cutoff)).
    pub fn with_cutoff(mut self, cutoff: f64) -> Result<Self> {
        crate::data::neighbors::check_cutoff(cutoff)?;
        self.cutoff = Some(cutoff);
        Ok(self)
    }
    /// The cutoff.
    pub fn cutoff(&self) -> Option<f64> {
        self.cutoff
    }
    /// Frames per batch: parsed together, written in one append (memory
    /// holds about three batches). Default 8192.
    pub fn with_batch_frames(mut self, n: usize) -> Self {
        self.batch_frames = n.max(1);
        self
    }
    /// Frames per batch.
    pub fn batch_frames(&self) -> usize {
        self.batch_frames
    }
    /// Shows a progress bar over the input bytes.
    pub fn with_progress(mut self, yes: bool) -> Self {
        self.progress = yes;
        self
    }
    /// Whether progress is shown.
    pub fn progress(&self) -> bool {
        self.progress
    }
    /// Chunking and codecs of a new store. Default: the library's.
    pub fn with_write_config(mut self, config: ZarrWriteConfig) -> Self {
        self.write_config = config;
        self
    }
    /// The write configuration.
    pub fn write_config(&self) -> &ZarrWriteConfig {
        &self.write_config
    }
    /// Labels only some frames have: filled (default) or an error.
    pub fn with_missing(mut self, missing: Missing) -> Self {
        self.missing = missing;
        self
    }
    /// The missing-label policy.
    pub fn missing(&self) -> Missing {
        self.missing
    }
    /// How input files are read: format, units, HDF5 keys.
    pub fn with_frame_options(mut self, frames: FrameOptions) -> Self {
        self.frames = frames;
        self
    }
    /// How input files are read.
    pub fn frame_options(&self) -> &FrameOptions {
        &self.frames
    }
}

/// One imported file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ImportedFile {
    /// The file.
    pub file: PathBuf,
    /// Its format.
    pub format: String,
    /// Its layout within the format.
    pub layout: String,
    /// Its units (the format's own, or `--units`).
    pub units: crate::formats::units::Units,
    /// Frames read from it.
    pub frames: usize,
}

/// What an import did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ImportReport {
    /// The store.
    pub store: PathBuf,
    /// Whether the store existed (frames appended).
    pub appended: bool,
    /// Frames written.
    pub frames: usize,
    /// Atoms written.
    pub atoms: u64,
    /// Edges written (0 without a cutoff).
    pub edges: u64,
    /// The files, in order.
    pub files: Vec<ImportedFile>,
}

/// Imports `inputs` (each in the format its bytes show, or the one the
/// options name) into `store` (created, or appended to).
///
/// ```
/// # fn main() -> atomzarr::Result<()> {
/// use atomzarr::{AtomicDataZarrReader, Reader, ReaderExt};
/// use atomzarr::formats::import::{ImportOptions, import_files};
/// let dir = tempfile::tempdir().unwrap();
/// let xyz = dir.path().join("h.extxyz");
/// // Only the second frame has a stress and a config type.
/// std::fs::write(&xyz, "2\nenergy=-1.1\nH 0 0 0\nH 0 0 0.74\n\
///     1\nenergy=-0.5 stress=\"1 0 0 0 1 0 0 0 1\" config_type=atom\nH 0 0 0\n").unwrap();
/// let store = dir.path().join("h.zarr");
/// let report = import_files(&[&xyz], &store, &ImportOptions::default().with_cutoff(1.0)?)?;
/// assert_eq!((report.frames, report.edges), (2, 2));
/// let r = AtomicDataZarrReader::open(&store)?;
/// let first = r.read(0)?.data;
/// assert!(first.field("stress").unwrap().data.get_f64(0).unwrap().is_nan());
/// assert_eq!((first.string("config_type"), r.read(1)?.data.string("config_type")), (Some(""), Some("atom")));
/// # Ok(()) }
/// ```
///
/// # Errors
/// [`Error::Io`] naming an input that cannot be read; [`Error::InvalidInput`]
/// for an unknown format or frames that do not fit the store's fields;
/// [`Error::Parse`] naming the file and line of a bad frame (or, with
/// [`Missing::Error`], of labels other frames lack); the writer's errors
/// ([`Error::Locked`], ...) of [`AtomicDataZarrWriter::open`] and `create`.
pub fn import_files<P: AsRef<Path> + Sync>(
    inputs: &[P],
    store: impl AsRef<Path>,
    options: &ImportOptions,
) -> Result<ImportReport> {
    let store = store.as_ref();
    let mut total_bytes = 0u64;
    for p in inputs {
        let p = p.as_ref();
        total_bytes += std::fs::metadata(p).map_err(|e| Error::io(p, e))?.len();
    }
    let (mut writer, appended) = open_or_create(store, options.write_config())?;
    let bar = Progress::new(options.progress(), total_bytes, "import");
    let mut report = ImportReport { store: store.into(), appended, frames: 0, atoms: 0, edges: 0, files: Vec::new() };
    let result = import_into(inputs, &mut writer, options, &bar, &mut report);
    bar.finish_and_clear();
    if let Err(e) = result {
        // A store this call created and wrote nothing to is removed again,
        // so that a corrected rerun does not meet an empty store.
        if !appended
            && report.frames == 0
            && let Err(rm) = writer.remove_store()
        {
            log::warn!("{}: could not remove the empty store: {rm}", store.display());
        }
        return Err(e);
    }
    if report.frames == 0 {
        log::warn!("{}: no frames in the input", store.display());
    }
    record_provenance(store, &report)?;
    Ok(report)
}

/// A writer of `store`: the existing store opened for appending (true), or a
/// new one. Another import may create the store between the look and the
/// create (then this one appends), or remove the empty store it made when
/// it failed (then this one creates): a few looks settle it.
fn open_or_create(store: &Path, config: &ZarrWriteConfig) -> Result<(AtomicDataZarrWriter, bool)> {
    let mut last = None;
    for _ in 0..4 {
        let attempt = if store.exists() {
            AtomicDataZarrWriter::open(store, config.clone()).map(|w| (w, true))
        } else {
            AtomicDataZarrWriter::create(store, config.clone()).map(|w| (w, false))
        };
        match attempt {
            Err(e @ (Error::AlreadyExists { .. } | Error::NotFound { .. })) => last = Some(e),
            other => return other,
        }
    }
    Err(last.unwrap_or_else(|| Error::NotFound { store: store.into() }))
}

/// Records the store's units and, per file, where its frames came from.
fn record_provenance(store: &Path, report: &ImportReport) -> Result<()> {
    if report.files.is_empty() || report.frames == 0 {
        return Ok(());
    }
    let mut root = format::read_root(store)?;
    root.extra.insert("units".into(), json!({"energy": "eV", "length": "Å", "forces": "eV/Å", "stress": "eV/Å^3"}));
    let mut imports = root.extra.get("imports").and_then(|v| v.as_array().cloned()).unwrap_or_default();
    for f in &report.files {
        imports.push(json!({
            "file": f.file.display().to_string(),
            "format": f.format,
            "layout": f.layout,
            "source_units": f.units.describe(),
            "factors": f.units.factors(),
            "frames": f.frames,
        }));
    }
    root.extra.insert("imports".into(), imports.into());
    format::write_root(store, &root)
}

/// One parsed batch, handed from the parsing thread to the writing one.
struct Batch {
    file: PathBuf,
    /// Index of the file in the report (`None`: the file's first batch
    /// carries its info).
    info: Option<FileInfo>,
    lines: Vec<usize>,
    samples: Vec<AtomicData>,
    bytes: u64,
}

/// Parses (and builds edges for) every batch of every input, in order.
fn produce<P: AsRef<Path>>(
    inputs: &[P],
    options: &ImportOptions,
    send: &std::sync::mpsc::SyncSender<Result<Batch>>,
) -> Result<()> {
    for p in inputs {
        let file = p.as_ref().to_path_buf();
        let size = std::fs::metadata(&file).map_err(|e| Error::io(&file, e))?.len();
        let (mut reader, info) = open_frames(&file, options.frame_options())?;
        let mut info = Some(info);
        let mut shown = 0u64;
        loop {
            let frames = reader.next_batch(options.batch_frames())?;
            let (done, total) = reader.progress();
            // Progress in file bytes, whatever the format counts in.
            let now = if total == 0 { size } else { (size as f64 * (done as f64 / total as f64)) as u64 };
            let Some(frames) = frames else {
                let end = Batch {
                    file: file.clone(),
                    info: info.take(),
                    lines: vec![],
                    samples: vec![],
                    bytes: size.saturating_sub(shown),
                };
                if send.send(Ok(end)).is_err() {
                    return Ok(());
                }
                break;
            };
            let lines: Vec<usize> = frames.iter().map(|f| f.line).collect();
            let mut samples: Vec<AtomicData> = frames.into_iter().map(|f: Frame| f.data).collect();
            if let Some(cutoff) = options.cutoff() {
                samples = add_neighbors(samples, cutoff).map_err(|e| Error::Parse {
                    file: file.clone(),
                    line: lines.first().copied().unwrap_or(0),
                    field: "neighbor list".into(),
                    reason: e.to_string(),
                })?;
            }
            let bytes = now.saturating_sub(shown);
            shown = shown.max(now);
            let batch = Batch { file: file.clone(), info: info.take(), lines, samples, bytes };
            if send.send(Ok(batch)).is_err() {
                // The writer stopped (with its own error): nothing to do.
                return Ok(());
            }
        }
    }
    Ok(())
}

/// Parsing runs one batch ahead of writing, on its own thread, so the
/// writer's syncs overlap the next batch's parse; the bounded channel keeps
/// memory at three batches at most (one parsing, one queued, one writing).
fn import_into<P: AsRef<Path> + Sync>(
    inputs: &[P],
    writer: &mut AtomicDataZarrWriter,
    options: &ImportOptions,
    bar: &Progress,
    report: &mut ImportReport,
) -> Result<()> {
    let (send, recv) = std::sync::mpsc::sync_channel::<Result<Batch>>(1);
    std::thread::scope(|scope| {
        scope.spawn(move || {
            if let Err(e) = produce(inputs, options, &send) {
                // A closed channel means the writer already failed.
                let _ = send.send(Err(e));
            }
        });
        let result = consume(&recv, writer, options.missing(), bar, report);
        // Unblock the parser if the writer stopped early.
        drop(recv);
        result
    })
}

fn consume(
    recv: &std::sync::mpsc::Receiver<Result<Batch>>,
    writer: &mut AtomicDataZarrWriter,
    missing: Missing,
    bar: &Progress,
    report: &mut ImportReport,
) -> Result<()> {
    let appended = report.appended;
    let mut labels = Labels::of_store(writer.path())?;
    for batch in recv.iter() {
        let Batch { file, info, lines, mut samples, bytes } = batch?;
        if let Some(info) = info {
            report.files.push(ImportedFile {
                file: file.clone(),
                format: info.format.name().to_string(),
                layout: info.layout.clone(),
                units: info.units,
                frames: 0,
            });
        }
        if samples.is_empty() {
            bar.inc(bytes);
            continue;
        }
        match missing {
            Missing::Error => labels.check_same(&samples, &file, &lines, report.frames)?,
            Missing::Fill => labels.fill(writer, &mut samples, &file, &lines, report.frames)?,
        }
        let (lo, hi) = (lines.first().copied().unwrap_or(0), lines.last().copied().unwrap_or(0));
        writer.append(&samples).map_err(|e| match e {
            Error::InvalidInput { context, reason } => Error::InvalidInput {
                context: format!("{context} (frames of {}, records {lo}..={hi})", file.display()),
                reason: if report.frames == 0 && appended {
                    format!("{reason}; the file's fields do not match the existing store's")
                } else {
                    reason
                },
            },
            other => other,
        })?;
        report.frames += samples.len();
        if let Some(f) = report.files.last_mut() {
            f.frames += samples.len();
        }
        for s in &samples {
            report.atoms += s.num_atoms() as u64;
            report.edges += s.num_edges() as u64;
        }
        bar.inc(bytes);
    }
    Ok(())
}

/// The schema of a set of fields: level, dtype and trailing shape by name.
pub(crate) type Signature = BTreeMap<String, (crate::data::Level, crate::data::DType, Vec<usize>)>;
