//! What every command shares to print: standard output that tolerates a
//! closed pipe, and the errors of a report that could not be printed.

use std::io::Write;

/// A report that could not be written as JSON.
pub(crate) fn json_err(e: serde_json::Error) -> atomzarr::Error {
    atomzarr::Error::Serialization { what: "the JSON report".into(), source: e }
}

/// A failed write to standard output.
pub(crate) fn stdout_err(e: std::io::Error) -> atomzarr::Error {
    atomzarr::Error::Io { path: "<stdout>".into(), source: e }
}

/// Writes `text` to standard output. A closed pipe (`| head`) is the
/// reader's choice, not an error.
pub(crate) fn write_stdout(text: &str) -> atomzarr::Result<()> {
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(stdout_err(e)),
        _ => Ok(()),
    }
}

/// Progress bars are shown unless the output is JSON going to a pipe with
/// standard error not a terminal either.
pub(crate) fn show_progress(json: bool) -> bool {
    !json || std::io::IsTerminal::is_terminal(&std::io::stderr())
}
