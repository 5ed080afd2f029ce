//! The crate's one error type.
//!
//! Every variant that comes from a store names the store (its path), and where
//! it applies the array and the index, so a failed training step says exactly
//! which bytes were bad.

use std::path::PathBuf;

use crate::location::Location;

/// Errors returned by every fallible call in this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The store path does not exist.
    #[error("store {store}: no such path")]
    NotFound {
        /// The store: its path or URL.
        store: Location,
    },
    /// A writer operation was interrupted at a point that leaves the store
    /// unreadable; what it had written is kept, and
    /// `AtomicDataZarrWriter::open` completes or undoes the operation.
    #[error(
        "store {store}: a {operation} was interrupted; its data is kept at {kept} \
         (AtomicDataZarrWriter::open finishes the job)"
    )]
    Interrupted {
        /// The store: its path or URL.
        store: Location,
        /// What was interrupted (`defragment`, `add_custom of field x`).
        operation: String,
        /// Where its data is.
        kept: PathBuf,
    },
    /// The writer refuses to overwrite an existing path.
    #[error("store {store}: already exists (open it for append, or choose another path)")]
    AlreadyExists {
        /// The store: its path or URL.
        store: Location,
    },
    /// The path is not an atomic-structure Zarr v3 store of the expected layout.
    #[error("store {store}: not an atomzarr store: {reason}")]
    Format {
        /// The store: its path or URL.
        store: Location,
        /// What is wrong.
        reason: String,
    },
    /// Arrays of the store disagree with each other (lengths, pointers).
    #[error("store {store}, array {array}: {reason}")]
    Inconsistent {
        /// The store: its path or URL.
        store: Location,
        /// The array path inside the store (e.g. `meta/atoms_ptr`).
        array: String,
        /// What disagrees.
        reason: String,
    },
    /// A Zarr call (metadata, chunk decode, storage) failed.
    #[error("store {store}, array {array}: {source}")]
    Zarr {
        /// The store: its path or URL.
        store: Location,
        /// The array or group path inside the store.
        array: String,
        /// The underlying zarrs error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Decoding a chunk failed (corrupt bytes, wrong length).
    #[error("store {store}, array {array}, chunk {chunk}: {reason}")]
    Chunk {
        /// The store: its path or URL.
        store: Location,
        /// The array path inside the store.
        array: String,
        /// The chunk (sub-chunk for sharded arrays) index along dimension 0.
        chunk: u64,
        /// What failed.
        reason: String,
    },
    /// A logical sample index outside `-len..len`.
    #[error("{source_name}: index {index} out of range for {len} samples")]
    IndexOutOfRange {
        /// The store (or dataset) the index was meant for.
        source_name: String,
        /// The index as given.
        index: i64,
        /// The number of logical samples.
        len: usize,
    },
    /// Input data that does not fit the store or the data model.
    #[error("{context}: {reason}")]
    InvalidInput {
        /// Where (store, field or sample).
        context: String,
        /// What is wrong.
        reason: String,
    },
    /// A sample failed validation in the Dataset layer.
    #[error("{source_name}, sample {index}: invalid sample: {reason}")]
    Validation {
        /// The store or dataset.
        source_name: String,
        /// The logical index of the sample.
        index: usize,
        /// Which check failed.
        reason: String,
    },
    /// A configuration value the user chose that is out of its domain (a
    /// knob, an option, a command-line argument). Failures of data, stores
    /// and saved records have their own variants.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A record the call needs was never saved in the store (a split by
    /// that name, statistics).
    #[error("store {store}: {reason}")]
    NotSaved {
        /// The store: its path or URL.
        store: Location,
        /// What is missing, and how to save it.
        reason: String,
    },
    /// A record saved in the store no longer describes it, or the store
    /// changed while something was computed over it: compute it again.
    #[error("store {store}: out of date: {reason}")]
    Stale {
        /// The store: its path or URL.
        store: Location,
        /// What changed.
        reason: String,
    },
    /// A [`ReadPlan`](crate::ReadPlan) read by a reader that did not make
    /// it, or made before its reader's
    /// [`refresh`](crate::ReaderExt::refresh): plan the read again.
    #[error("{reader}: not this reader's plan: {reason}; plan the read again")]
    PlanMismatch {
        /// The reader asked to read the plan.
        reader: String,
        /// How the plan differs from the reader's own.
        reason: String,
    },
    /// A saved [`LoaderState`](crate::LoaderState) that does not fit the
    /// loader it is loaded into.
    #[error("loader state does not fit this loader: {what} is {saved} in the state, {here} here")]
    StateMismatch {
        /// The setting that differs.
        what: String,
        /// Its value in the state.
        saved: String,
        /// Its value in this loader.
        here: String,
    },
    /// Plain I/O (creating directories, renaming during defragment).
    #[error("{path}: {source}")]
    Io {
        /// The path that was being touched.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Background work was cancelled, or a thread doing it could not start,
    /// died or panicked.
    #[error("background work failed: {0}")]
    Background(String),
    /// A value that could not be written as, or read from, JSON (a report,
    /// a saved split, statistics or loader state).
    #[error("{what}: {source}")]
    Serialization {
        /// What was being written or read.
        what: String,
        /// The serde_json error.
        #[source]
        source: serde_json::Error,
    },
    /// An invariant of this crate's own code broke: a bug in atomzarr, never
    /// a consequence of the input. The message says which; please report it.
    #[error("internal error (a bug in atomzarr; please report it): {0}")]
    Internal(String),
    /// A field that cannot go to, or come back from, a Burn device: a value
    /// the device's dtype cannot hold, or a failed read-back.
    #[error("device, field {field}: {reason}")]
    Device {
        /// The batch field (or index tensor) concerned.
        field: String,
        /// What went wrong.
        reason: String,
    },
    /// A failure injected by the writer's `fail_after` test hook (feature
    /// `testing` only).
    #[cfg(any(test, feature = "testing"))]
    #[error("injected failure after append step {0:?}")]
    Injected(AppendStep),
    /// A chunk's stored checksum (its `crc32c` codec, or a shard index's)
    /// does not match its bytes: they changed after they were written, and
    /// nothing was decoded from them.
    #[error("store {store}, array {array}, chunk {chunk}: checksum mismatch ({reason}); the chunk is corrupt")]
    Checksum {
        /// The store: its path or URL.
        store: Location,
        /// The array path inside the store.
        array: String,
        /// The chunk (sub-chunk for sharded arrays) index along dimension 0.
        chunk: u64,
        /// Which checksum, with the stored and computed values.
        reason: String,
    },
    /// A neighbor index outside its own sample's atoms, met on a batch path
    /// (in a batch it would point into another structure). `read` and
    /// `read_many` return such samples as stored; batches refuse them.
    #[error(
        "{source_name}, sample {index} (physical {physical_index}): neighbor_list index {value} \
         outside the sample's {num_atoms} atoms [0, {num_atoms}){}",
        append_bug_hint(*.append_shift, source_name)
    )]
    NeighborIndex {
        /// The store (or dataset) the sample belongs to.
        source_name: String,
        /// The logical index of the sample in that store.
        index: usize,
        /// Its physical index in the store.
        physical_index: usize,
        /// The offending index, sample-local (as `read` returns it).
        value: i64,
        /// The sample's atom count.
        num_atoms: usize,
        /// `Some(K)` when every index of the sample lies in range once `K`
        /// is added and `K` is the store's atom offset of an earlier sample
        /// boundary: the signature of nvalchemi-toolkit's append bug, which
        /// `atomzarr repair` fixes.
        append_shift: Option<i64>,
    },
    /// An input file (any import format) that does not parse.
    #[error("{}:{line}: {field}: {reason}", file.display())]
    Parse {
        /// The input file.
        file: PathBuf,
        /// Where in it, 1-based: the line of a text file, else the record
        /// (row, entry, conformer); 0 for the file as a whole.
        line: usize,
        /// The field or key being read (`atom count`, `Lattice`, `forces`, ...).
        field: String,
        /// What is wrong.
        reason: String,
    },
    /// A request to a remote store (object storage or HTTP) failed, after
    /// the retries transient failures get.
    #[error("{url}: {kind}: {reason}")]
    Remote {
        /// The object's (or store's) URL.
        url: String,
        /// What kind of failure.
        kind: RemoteErrorKind,
        /// The server's or client's words.
        reason: String,
    },
    /// Another writer holds the store's writer lock (one writer at a time;
    /// see `atomzarr::store::lock`). Nothing was written.
    #[error("store {store}: {}", locked_reason(holder.as_ref(), *waited))]
    Locked {
        /// The store: its path or URL.
        store: Location,
        /// Who holds the lock, as the holder recorded it (`None` where it
        /// could not be read: an older writer, or one just taking it).
        holder: Option<LockHolder>,
        /// How long this writer waited for it: its lock timeout (zero: it
        /// failed at once).
        waited: std::time::Duration,
    },
    /// A write (append, repair, defragment) was asked of a store at a remote
    /// URL: remote stores are read here, and published whole with `copy`.
    #[error(
        "{url}: remote stores are read-only ({operation}); write a local store and publish it with `atomzarr copy`"
    )]
    RemoteReadOnly {
        /// The store's URL.
        url: String,
        /// What was asked.
        operation: String,
    },
}

/// What kind of failure an [`Error::Remote`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RemoteErrorKind {
    /// The bucket, container or key does not exist (404).
    NotFound,
    /// The credentials were refused or lack the permission (401, 403).
    Forbidden,
    /// The request did not complete within the timeout.
    Timeout,
    /// The response held fewer bytes than asked for.
    Truncated,
    /// The URL scheme or operation is not available (a build without the
    /// `remote` feature, a write to an HTTP server).
    Unsupported,
    /// Anything else (connection refused, a 5xx after the retries).
    Other,
}

impl std::fmt::Display for RemoteErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RemoteErrorKind::NotFound => "not found",
            RemoteErrorKind::Forbidden => "access denied",
            RemoteErrorKind::Timeout => "timed out",
            RemoteErrorKind::Truncated => "truncated response",
            RemoteErrorKind::Unsupported => "unsupported",
            RemoteErrorKind::Other => "request failed",
        })
    }
}

/// The writer holding a store's lock, as it recorded itself in the lock file.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// let h = atomzarr::LockHolder { pid: 42, host: "node7".into(), since: SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000) };
/// assert!(h.to_string().starts_with("pid 42 on host node7 since 2023-11-14T22:13:20Z ("));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockHolder {
    /// Its process id (on its host).
    pub pid: u32,
    /// The name of the machine it runs on.
    pub host: String,
    /// When it took the lock (to the second).
    pub since: std::time::SystemTime,
}

impl std::fmt::Display for LockHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ago = std::time::SystemTime::now().duration_since(self.since).map_or(0, |d| d.as_secs());
        let host = if self.host.is_empty() { "an unnamed host" } else { &self.host };
        write!(
            f,
            "pid {} on host {host} since {} ({ago} s ago)",
            self.pid,
            humantime::format_rfc3339_seconds(self.since)
        )
    }
}

fn locked_reason(holder: Option<&LockHolder>, waited: std::time::Duration) -> String {
    let who = holder.map_or("another process".to_string(), |h| h.to_string());
    let when = if waited.is_zero() {
        "one writer at a time: wait for it (`--wait SECONDS`, `ZarrWriteConfig::with_lock_timeout`) or stop it"
            .to_string()
    } else {
        format!("still held after waiting {:.1} s", waited.as_secs_f64())
    };
    format!("its writer lock is held by {who}; {when}")
}

fn append_bug_hint(shift: Option<i64>, store: &str) -> String {
    match shift {
        Some(k) => format!(
            "; this looks like nvalchemi-toolkit's append bug (indices shifted by -{k}); run `atomzarr repair {store}`"
        ),
        None => String::new(),
    }
}

/// The steps of an append, in the order they hit the disk (with feature
/// `testing`, the writer's `fail_after` hook stops after one of them with
/// `Error::Injected`). Defined here, beside the error that carries it, so
/// the error type imports nothing from the crate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendStep {
    /// New field arrays created (first write only) and listed in `fields`.
    Schema,
    /// Field rows written.
    FieldData,
    /// `samples_mask`, `atoms_mask`, `edges_mask` extended.
    Masks,
    /// `atoms_ptr`, `edges_ptr` extended.
    Pointers,
    /// `num_samples` committed.
    NumSamples,
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// [`Error::Config`] naming `name` unless `value` is at least 1: the
    /// one check of every count that must not be 0 (batch size, workers,
    /// streams, pool blocks, ...).
    ///
    /// ```
    /// let e = atomzarr::Error::check_at_least_one("batch_size", 0).unwrap_err();
    /// assert_eq!(e.to_string(), "invalid configuration: batch_size must be >= 1, got 0");
    /// assert!(atomzarr::Error::check_at_least_one("batch_size", 3).is_ok());
    /// ```
    ///
    /// # Errors
    /// [`Error::Config`] when `value` is 0.
    pub fn check_at_least_one(name: &str, value: usize) -> Result<()> {
        if value == 0 {
            return Err(Error::Config(format!("{name} must be >= 1, got 0")));
        }
        Ok(())
    }

    /// [`Error::Config`] unless `rank` is one of `world_size` ranks.
    ///
    /// # Errors
    /// [`Error::Config`] when `rank >= world_size` (so also for `world_size == 0`).
    pub(crate) fn check_rank(rank: usize, world_size: usize) -> Result<()> {
        if rank >= world_size {
            return Err(Error::Config(format!("rank {rank} out of range for world_size {world_size}")));
        }
        Ok(())
    }

    /// Whether the error is about one sample's content (an out-of-range
    /// neighbor index or a failed validation), which
    /// [`ErrorPolicy::Skip`](crate::ErrorPolicy::Skip) skips.
    ///
    /// ```
    /// let e = atomzarr::Error::Validation { source_name: "s".into(), index: 0, reason: "x".into() };
    /// assert!(e.is_sample_error());
    /// assert!(!atomzarr::Error::Config("c".into()).is_sample_error());
    /// ```
    pub fn is_sample_error(&self) -> bool {
        matches!(self, Error::NeighborIndex { .. } | Error::Validation { .. })
    }

    /// `Ok` when every index is below `len`; else
    /// [`Error::IndexOutOfRange`] naming `source` (what the indices index:
    /// a reader, a store) and the first index that is not. The one check
    /// of indices into a collection, for every layer.
    pub(crate) fn check_indices<'a>(
        source: impl FnOnce() -> String,
        indices: impl IntoIterator<Item = &'a usize>,
        len: usize,
    ) -> Result<()> {
        match indices.into_iter().find(|&&i| i >= len) {
            Some(&bad) => Err(Error::IndexOutOfRange { source_name: source(), index: bad as i64, len }),
            None => Ok(()),
        }
    }

    /// [`Error::PlanMismatch`] naming `reader`.
    pub(crate) fn plan_mismatch(reader: &str, reason: impl Into<String>) -> Error {
        Error::PlanMismatch { reader: reader.to_string(), reason: reason.into() }
    }

    /// `index` in `0..len`, counting a negative index from the end
    /// (Python's convention); else [`Error::IndexOutOfRange`] naming `source`.
    pub(crate) fn checked_index(source: impl FnOnce() -> String, index: i64, len: usize) -> Result<usize> {
        let i = if index < 0 { index + len as i64 } else { index };
        if i < 0 || i as usize >= len {
            return Err(Error::IndexOutOfRange { source_name: source(), index, len });
        }
        Ok(i as usize)
    }

    pub(crate) fn zarr(
        store: impl Into<Location>,
        array: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Zarr { store: store.into(), array: array.into(), source: Box::new(source) }
    }

    pub(crate) fn format(store: impl Into<Location>, reason: impl Into<String>) -> Self {
        Error::Format { store: store.into(), reason: reason.into() }
    }

    pub(crate) fn inconsistent(
        store: impl Into<Location>,
        array: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        Error::Inconsistent { store: store.into(), array: array.into(), reason: reason.into() }
    }

    pub(crate) fn invalid(context: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::InvalidInput { context: context.into(), reason: reason.into() }
    }

    /// A parse error of the file as a whole (no line or record).
    pub(crate) fn in_file(file: &std::path::Path, field: &str, reason: impl std::fmt::Display) -> Self {
        Error::Parse { file: file.to_path_buf(), line: 0, field: field.to_string(), reason: reason.to_string() }
    }

    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        Error::Io { path: path.to_path_buf(), source }
    }
}
