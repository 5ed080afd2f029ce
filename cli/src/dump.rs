//! `atomzarr dump`: every logical sample as the reference fixtures' JSON
//! ([`atomzarr::formats::dump`]), optionally with neighbor lists built at a
//! cutoff while reading.

use std::io::Write;

use atomzarr::{AtomicDataZarrReader, Location};

use crate::output::stdout_err;

/// `atomzarr dump`.
pub(crate) fn dump(store: &Location, cutoff: Option<f64>) -> atomzarr::Result<()> {
    let reader = AtomicDataZarrReader::open(store)?;
    let stdout = std::io::stdout();
    let mut lock = std::io::BufWriter::new(stdout.lock());
    match cutoff {
        Some(c) => {
            let ds = atomzarr::Dataset::new(reader).with_skip_validation(true).with_cutoff(c)?;
            atomzarr::formats::dump::dump_json(&ds, &mut lock)?;
        }
        None => atomzarr::formats::dump::dump_json(&reader, &mut lock)?,
    }
    lock.write_all(b"\n").map_err(stdout_err)
}
