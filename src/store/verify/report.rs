//! What [`verify`](super::verify) finds: one [`Fault`] per problem, each
//! naming where it lies (store, array, chunk, sample), and the report of a
//! whole check.

use serde::Serialize;

use crate::error::Error;
use crate::location::Location;

/// One problem of a store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fault {
    /// The store.
    pub store: Location,
    /// The array inside the store (`core/positions`), when the fault lies in one.
    pub array: Option<String>,
    /// The chunk (inner chunk of a sharded array) along dimension 0, when one.
    pub chunk: Option<u64>,
    /// The physical sample, when one.
    pub sample: Option<usize>,
    /// What is wrong.
    pub reason: String,
}

impl Fault {
    /// A fault of array `array` of `store`.
    pub(crate) fn array(store: &Location, array: &str, reason: impl Into<String>) -> Fault {
        Fault { store: store.clone(), array: Some(array.to_string()), chunk: None, sample: None, reason: reason.into() }
    }

    /// The same fault, in chunk `chunk`.
    pub(crate) fn in_chunk(mut self, chunk: u64) -> Fault {
        self.chunk = Some(chunk);
        self
    }

    /// The same fault, of physical sample `sample`.
    pub(crate) fn of_sample(mut self, sample: usize) -> Fault {
        self.sample = Some(sample);
        self
    }

    /// The fault an error of the store's reader stands for: its array and
    /// chunk where the error names them, its reason without them.
    pub(crate) fn from_error(store: &Location, e: &Error) -> Fault {
        let mut f = Fault { store: store.clone(), array: None, chunk: None, sample: None, reason: e.to_string() };
        match e {
            Error::Inconsistent { array, reason, .. } => (f.array, f.reason) = (Some(array.clone()), reason.clone()),
            Error::Chunk { array, chunk, reason, .. } => {
                (f.array, f.chunk, f.reason) = (Some(array.clone()), Some(*chunk), reason.clone());
            }
            Error::Checksum { array, chunk, reason, .. } => {
                (f.array, f.chunk) = (Some(array.clone()), Some(*chunk));
                f.reason = format!("checksum mismatch ({reason})");
            }
            Error::Zarr { array, source, .. } => (f.array, f.reason) = (Some(array.clone()), source.to_string()),
            Error::Format { reason, .. } => f.reason = format!("not an atomzarr store: {reason}"),
            _ => {}
        }
        f
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(out, "store {}", self.store)?;
        if let Some(a) = &self.array {
            write!(out, ", array {a}")?;
        }
        if let Some(c) = self.chunk {
            write!(out, ", chunk {c}")?;
        }
        if let Some(s) = self.sample {
            write!(out, ", sample {s}")?;
        }
        write!(out, ": {}", self.reason)
    }
}

/// What [`verify`](super::verify) found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// The store.
    pub store: Location,
    /// Physical samples (`num_samples`); 0 when the store did not open.
    pub num_samples: usize,
    /// Arrays whose chunks were read.
    pub arrays: usize,
    /// Chunks read and checked.
    pub chunks: u64,
    /// Bytes those chunks decoded to.
    pub decoded_bytes: u64,
    /// Every fault found, by array, chunk and sample.
    pub faults: Vec<Fault>,
}

impl VerifyReport {
    /// Whether no fault was found.
    pub fn is_clean(&self) -> bool {
        self.faults.is_empty()
    }
}
