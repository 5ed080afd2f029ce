//! Import: extended-XYZ files ([`crate::source::extxyz`]) into a store,
//! streamed in batches (bounded memory), with neighbor lists built on the
//! way when a cutoff is given ([`crate::data::neighbors`]).
//!
//! A new store is created; an existing one is appended to when its schema
//! (field names, levels, dtypes, trailing shapes) matches the frames', and
//! refused otherwise before anything is written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::data::neighbors::add_neighbors;
use crate::data::{AtomicData, DType, Level};
use crate::error::{Error, Result};
use crate::progress::Progress;
use crate::source::extxyz::{ExtxyzReader, Frame};
use crate::store::{AtomicDataZarrWriter, ZarrWriteConfig};

/// Options of [`import_extxyz`].
///
/// ```
/// let o = atomzarr::store::import::ImportOptions::default().with_cutoff(Some(5.0)).with_batch_frames(2048);
/// assert_eq!((o.cutoff(), o.batch_frames()), (Some(5.0), 2048));
/// ```
#[derive(Debug, Clone)]
pub struct ImportOptions {
    cutoff: Option<f64>,
    batch_frames: usize,
    progress: bool,
    write_config: ZarrWriteConfig,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions { cutoff: None, batch_frames: 8192, progress: false, write_config: ZarrWriteConfig::default() }
    }
}

impl ImportOptions {
    /// Builds `neighbor_list` and `shifts` for this cutoff (Å). Default: none.
    pub fn with_cutoff(mut self, cutoff: Option<f64>) -> Self {
        self.cutoff = cutoff;
        self
    }
    /// The cutoff.
    pub fn cutoff(&self) -> Option<f64> {
        self.cutoff
    }
    /// Frames per batch: parsed together, written in one append (memory
    /// holds about one batch). Default 8192.
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
}

type Signature = BTreeMap<String, (Level, DType, Vec<usize>)>;

fn signature(s: &AtomicData) -> Signature {
    s.fields.iter().map(|(k, f)| (k.clone(), (f.level, f.dtype(), f.trailing_shape().to_vec()))).collect()
}

/// The first difference between a frame's fields and the import's.
fn schema_diff(want: &Signature, got: &Signature) -> Option<(String, String)> {
    let show = |s: &(Level, DType, Vec<usize>)| format!("{} {} {:?}", s.0, s.1, s.2);
    for (k, w) in want {
        match got.get(k) {
            None => return Some((k.clone(), "missing in this frame, present in the first".into())),
            Some(g) if g != w => {
                return Some((k.clone(), format!("is {} here but {} in the first frame", show(g), show(w))));
            }
            _ => {}
        }
    }
    got.keys().find(|k| !want.contains_key(*k)).map(|k| (k.clone(), "not in the first frame".into()))
}

/// Imports extended-XYZ files into `store` (created, or appended to).
///
/// ```
/// # fn main() -> atomzarr::Result<()> {
/// use atomzarr::{AtomicDataZarrReader, Reader};
/// use atomzarr::store::import::{ImportOptions, import_extxyz};
/// let dir = tempfile::tempdir().unwrap();
/// let xyz = dir.path().join("h2.extxyz");
/// std::fs::write(&xyz, "2\nenergy=-1.1\nH 0 0 0\nH 0 0 0.74\n").unwrap();
/// let store = dir.path().join("h2.zarr");
/// let report = import_extxyz(&[&xyz], &store, &ImportOptions::default().with_cutoff(Some(1.0)))?;
/// assert_eq!((report.frames, report.edges), (1, 2));
/// assert_eq!(AtomicDataZarrReader::open(&store)?.len(), 1);
/// # Ok(()) }
/// ```
pub fn import_extxyz<P: AsRef<Path> + Sync>(
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
    let mut report = ImportReport { store: store.to_path_buf(), appended, frames: 0, atoms: 0, edges: 0 };
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
    Err(last.unwrap_or_else(|| Error::NotFound { store: store.to_path_buf() }))
}

/// One parsed batch, handed from the parsing thread to the writing one.
struct Batch {
    file: PathBuf,
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
        let mut reader = ExtxyzReader::open(&file)?;
        let mut seen = 0u64;
        while let Some(frames) = reader.next_batch(options.batch_frames())? {
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
            let now = reader.bytes_read();
            let batch = Batch { file: file.clone(), lines, samples, bytes: now - seen };
            seen = now;
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
        let result = consume(&recv, writer, bar, report);
        // Unblock the parser if the writer stopped early.
        drop(recv);
        result
    })
}

fn consume(
    recv: &std::sync::mpsc::Receiver<Result<Batch>>,
    writer: &mut AtomicDataZarrWriter,
    bar: &Progress,
    report: &mut ImportReport,
) -> Result<()> {
    let appended = report.appended;
    let mut first: Option<(Signature, PathBuf, usize)> = None;
    for batch in recv.iter() {
        let Batch { file, lines, samples, bytes } = batch?;
        for (s, &line) in samples.iter().zip(&lines) {
            let sig = signature(s);
            match &first {
                None => first = Some((sig, file.clone(), line)),
                Some((want, f0, l0)) => {
                    if let Some((field, why)) = schema_diff(want, &sig) {
                        return Err(Error::Parse {
                            file: file.clone(),
                            line,
                            field,
                            reason: format!(
                                "{why} (first frame: {}:{l0}); one store holds one schema. \
                                 {} frames were imported before this one",
                                f0.display(),
                                report.frames
                            ),
                        });
                    }
                }
            }
        }
        let (lo, hi) = (lines.first().copied().unwrap_or(0), lines.last().copied().unwrap_or(0));
        writer.append(&samples).map_err(|e| match e {
            Error::InvalidInput { context, reason } => Error::InvalidInput {
                context: format!("{context} (frames of {}, lines {lo}..={hi})", file.display()),
                reason: if report.frames == 0 && appended {
                    format!("{reason}; the file's fields do not match the existing store's")
                } else {
                    reason
                },
            },
            other => other,
        })?;
        report.frames += samples.len();
        for s in &samples {
            report.atoms += s.num_atoms() as u64;
            report.edges += s.num_edges() as u64;
        }
        bar.inc(bytes);
    }
    Ok(())
}
