//! `atomzarr delete`, `filter` and `defragment`: the samples of a store
//! removed ([`atomzarr::prep::filter`] selects them,
//! [`AtomicDataZarrWriter::delete_logical`] deletes them in one call,
//! [`AtomicDataZarrWriter::defragment`] rewrites the store without them).

use std::path::Path;
use std::time::Duration;

use atomzarr::prep::filter::{FilterOptions, FilterReport, select};
use atomzarr::{AtomicDataZarrReader, AtomicDataZarrWriter, Error, Reader, ZarrWriteConfig};

use crate::args::{DeleteArgs, FilterArgs};
use crate::output::{json_err, show_progress};

fn writer(store: &Path, wait: Duration) -> atomzarr::Result<AtomicDataZarrWriter> {
    AtomicDataZarrWriter::open(store, ZarrWriteConfig::default().with_lock_timeout(wait))
}

/// Logical indices, one per line (blank lines and `#` comments skipped).
fn read_indices(file: &Path) -> atomzarr::Result<Vec<usize>> {
    let text = std::fs::read_to_string(file).map_err(|e| Error::Io { path: file.into(), source: e })?;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let t = line.split('#').next().unwrap_or("").trim();
        if t.is_empty() {
            continue;
        }
        out.push(t.parse().map_err(|_| Error::InvalidInput {
            context: format!("{}:{}", file.display(), n + 1),
            reason: format!("{t:?} is not a sample index"),
        })?);
    }
    Ok(out)
}

/// `A..B` (half-open) or `A..=B`.
pub(crate) fn parse_range(s: &str) -> Result<std::ops::Range<usize>, String> {
    let bad = || format!("{s:?} is not a range A..B or A..=B");
    let (a, b, inclusive) = match s.split_once("..=") {
        Some((a, b)) => (a, b, true),
        None => s.split_once("..").map(|(a, b)| (a, b, false)).ok_or_else(bad)?,
    };
    let a: usize = a.trim().parse().map_err(|_| bad())?;
    let b: usize = b.trim().parse().map_err(|_| bad())?;
    Ok(a..if inclusive { b + 1 } else { b })
}

/// `atomzarr delete`: the samples of a file or a range, in one delete.
pub(crate) fn delete(a: &DeleteArgs) -> atomzarr::Result<()> {
    let mut idx = match (&a.indices, &a.range) {
        (Some(file), _) => read_indices(file)?,
        (None, Some(r)) => r.clone().collect(),
        (None, None) => vec![],
    };
    idx.sort_unstable();
    idx.dedup();
    if a.dry_run {
        let len = AtomicDataZarrReader::open(&a.store)?.len();
        let out = idx.iter().filter(|&&i| i >= len).count();
        if out > 0 {
            return Err(Error::IndexOutOfRange {
                source_name: a.store.display().to_string(),
                index: idx[idx.len() - 1] as i64,
                len,
            });
        }
        println!("would delete {} of {len} samples of {}", idx.len(), a.store.display());
        return Ok(());
    }
    let physical = writer(&a.store, a.wait.wait)?.delete_logical(&idx)?;
    println!("deleted {} samples of {} (defragment to reclaim their space)", physical.len(), a.store.display());
    Ok(())
}

/// `atomzarr filter`: selects, writes the indices, deletes with `--apply`.
pub(crate) fn filter(a: &FilterArgs) -> atomzarr::Result<()> {
    let mut o = FilterOptions::default().with_progress(show_progress(a.json));
    if let Some(f) = a.max_force {
        o = o.with_max_force(f);
    }
    if let Some(z) = a.energy_z {
        o = o.with_energy_z(z, a.energy_basis.into());
    }
    if a.duplicates {
        o = o.with_duplicates(a.tolerance);
    }
    for l in &a.missing {
        o = o.with_missing(l);
    }
    let reader = AtomicDataZarrReader::open(&a.store)?;
    let report = select(&reader, &o)?;
    let out = a.out.clone().unwrap_or_else(|| a.store.with_extension("filter.txt"));
    let text: String = report.selected.iter().map(|i| format!("{i}\n")).collect();
    std::fs::write(&out, text).map_err(|e| Error::Io { path: out.clone(), source: e })?;
    if a.apply {
        let mut w = writer(&a.store, a.wait.wait)?;
        // The selection is of the commit the scan read: refuse a store
        // changed since.
        let now = AtomicDataZarrReader::open(&a.store)?.len();
        if now != report.num_samples {
            return Err(Error::Stale {
                store: a.store.clone().into(),
                reason: format!(
                    "the store changed during the scan ({} samples, now {now}); run filter again",
                    report.num_samples
                ),
            });
        }
        w.delete_logical(&report.selected)?;
    }
    print_report(&report, a, &out)
}

fn print_report(r: &FilterReport, a: &FilterArgs, out: &Path) -> atomzarr::Result<()> {
    if a.json {
        println!("{}", serde_json::to_string(r).map_err(json_err)?);
        return Ok(());
    }
    println!("{}: {} samples scanned", a.store.display(), r.num_samples);
    let line = |what: &str, n: usize| println!("  {what:<28} {n}");
    if a.max_force.is_some() {
        line("force above bound", r.force.len());
    }
    if a.energy_z.is_some() {
        line("energy per atom outlier", r.energy.len());
    }
    if a.duplicates {
        line("duplicate structure", r.duplicate.len());
    }
    for (label, v) in &r.missing {
        line(&format!("missing {label}"), v.len());
    }
    let verb = if a.apply { "deleted" } else { "would delete (--apply to delete)" };
    println!("{verb}: {} samples; indices in {}", r.selected.len(), out.display());
    Ok(())
}

/// `atomzarr defragment`: the store rewritten without its deleted samples.
pub(crate) fn defragment(store: &Path, wait: Duration) -> atomzarr::Result<()> {
    let mut w = writer(store, wait)?.with_progress(show_progress(false));
    let before = AtomicDataZarrReader::open(store)?.num_physical();
    w.defragment(None)?;
    let after = AtomicDataZarrReader::open(store)?.num_physical();
    println!("{}: {after} samples kept, {} deleted samples dropped", store.display(), before - after);
    Ok(())
}
