//! `atomzarr repair`: neighbor lists that nvalchemi-toolkit's `append`
//! stored shifted, found and rewritten ([`atomzarr::store::repair`]).

use std::path::Path;
use std::time::Duration;

use atomzarr::store::repair::RepairReport;

use crate::output::json_err;

/// `atomzarr repair`: checks (`dry_run`) or repairs the store and prints
/// the report; errors when out-of-range samples remain.
pub(crate) fn repair(store: &Path, dry_run: bool, json: bool, wait: Duration) -> atomzarr::Result<()> {
    let report = if dry_run {
        atomzarr::store::repair::check(store)?
    } else {
        atomzarr::store::repair::repair_with_lock_timeout(store, wait)?
    };
    print_repair(&report, json)
}

/// Prints a repair report; errors when out-of-range samples remain.
fn print_repair(r: &RepairReport, json: bool) -> atomzarr::Result<()> {
    if json {
        println!("{}", serde_json::to_string(r).map_err(json_err)?);
    } else {
        let verb = if r.written { "fixed" } else { "would fix" };
        println!("store {}: {} samples with edges checked", r.store, r.samples_checked);
        for run in &r.fixed {
            let (a, b) = (run.physical[0], run.physical[run.physical.len() - 1]);
            println!(
                "{verb} {} samples (physical {a}..={b}): indices shifted by -{} (toolkit append bug)",
                run.physical.len(),
                run.shift
            );
        }
        for u in &r.unfixed {
            println!(
                "not fixed: sample {} (physical {}): index {} outside [0, {}): {}",
                u.index, u.physical_index, u.value, u.num_atoms, u.reason
            );
        }
        if r.fixed.is_empty() && r.unfixed.is_empty() {
            println!("every neighbor index is in range");
        }
    }
    if r.unfixed.is_empty() {
        Ok(())
    } else {
        Err(atomzarr::Error::Inconsistent {
            store: r.store.clone(),
            array: "core/neighbor_list".into(),
            reason: format!(
                "{} samples with out-of-range neighbor indices could not be fixed (listed above)",
                r.unfixed.len()
            ),
        })
    }
}
