//! Python exceptions for atomzarr's errors: one base class, and its own class
//! for what a script handles apart (a locked store, a corrupt chunk, a
//! missing store, an invalid sample). An index out of range is Python's
//! `IndexError`, so that `reader[i]` behaves as a sequence.

use atomzarr::{Error, RemoteErrorKind};
use pyo3::exceptions::{PyException, PyIndexError};
use pyo3::prelude::*;

pyo3::create_exception!(atomzarr, AtomzarrError, PyException, "An error from atomzarr (the Rust error's message).");
pyo3::create_exception!(atomzarr, StoreLockedError, AtomzarrError, "Another writer holds the store's lock.");
pyo3::create_exception!(atomzarr, ChecksumError, AtomzarrError, "A chunk failed its checksum: the store is corrupt.");
pyo3::create_exception!(atomzarr, StoreNotFoundError, AtomzarrError, "No store at the path or URL.");
pyo3::create_exception!(atomzarr, ValidationError, AtomzarrError, "A sample failed validation.");

/// The Python exception for `e`, carrying its message.
pub fn to_py(e: Error) -> PyErr {
    let msg = e.to_string();
    match e {
        Error::Locked { .. } => StoreLockedError::new_err(msg),
        Error::Checksum { .. } => ChecksumError::new_err(msg),
        Error::NotFound { .. } | Error::Remote { kind: RemoteErrorKind::NotFound, .. } => {
            StoreNotFoundError::new_err(msg)
        }
        Error::Validation { .. } => ValidationError::new_err(msg),
        Error::IndexOutOfRange { .. } => PyIndexError::new_err(msg),
        _ => AtomzarrError::new_err(msg),
    }
}

/// Registers the exception classes on the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("AtomzarrError", py.get_type::<AtomzarrError>())?;
    m.add("StoreLockedError", py.get_type::<StoreLockedError>())?;
    m.add("ChecksumError", py.get_type::<ChecksumError>())?;
    m.add("StoreNotFoundError", py.get_type::<StoreNotFoundError>())?;
    m.add("ValidationError", py.get_type::<ValidationError>())?;
    Ok(())
}
