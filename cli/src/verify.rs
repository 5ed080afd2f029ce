//! `atomzarr verify`: every fault of a store ([`atomzarr::store::verify`]).

use atomzarr::Location;
use atomzarr::store::verify::{VerifyOptions, verify as check};

use crate::output::{json_err, show_progress, write_stdout};

/// `atomzarr verify`: lists every fault; an error (exit status 1) if any.
pub(crate) fn verify(store: &Location, json: bool) -> atomzarr::Result<()> {
    let r = check(store, &VerifyOptions::default().with_progress(show_progress(json)))?;
    if json {
        println!("{}", serde_json::to_string(&r).map_err(json_err)?);
    } else {
        let mut text: String = r.faults.iter().map(|f| format!("{f}\n")).collect();
        text += &format!(
            "store {}: {} samples, {} arrays, {} chunks ({:.1} MB decoded) checked: {} faults\n",
            r.store,
            r.num_samples,
            r.arrays,
            r.chunks,
            r.decoded_bytes as f64 / 1e6,
            r.faults.len()
        );
        write_stdout(&text)?;
    }
    if r.is_clean() {
        Ok(())
    } else {
        Err(atomzarr::Error::InvalidInput {
            context: format!("store {}", r.store),
            reason: format!("{} faults found (listed above)", r.faults.len()),
        })
    }
}
