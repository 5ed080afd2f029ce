//! `atomzarr import` and `atomzarr export`: files of other formats into a
//! store ([`atomzarr::formats::import`]), and a store back out as extended XYZ.

use std::path::Path;

use atomzarr::formats::import::{ImportOptions, Missing};
use atomzarr::{AtomicDataZarrReader, Location, ZarrWriteConfig};

use crate::args::{ImportArgs, MissingArg};
use crate::output::{json_err, show_progress};

/// `atomzarr import`: files of any supported format into a store.
pub(crate) fn import(a: ImportArgs) -> atomzarr::Result<()> {
    let ImportArgs { mut paths, format, units, energy_key, forces_key, missing, cutoff, batch_frames, json, wait } = a;
    use atomzarr::formats::input::Format;
    let store = paths.pop().ok_or_else(|| atomzarr::Error::Config("import needs a store path".into()))?;
    let format = match format {
        Some(f) => Some(
            Format::parse(&f)
                .ok_or_else(|| atomzarr::Error::Config(format!("--format {f}: one of {}", Format::names())))?,
        ),
        None => None,
    };
    let units = match units {
        Some(u) => Some(u.parse().map_err(|e| atomzarr::Error::Config(format!("--units: {e}")))?),
        None => None,
    };
    let show = show_progress(json);
    let source = atomzarr::formats::FrameOptions::default()
        .with_format(format)
        .with_units(units)
        .with_energy_key(energy_key)
        .with_forces_key(forces_key);
    let mut options = ImportOptions::default()
        .with_batch_frames(batch_frames)
        .with_missing(match missing {
            MissingArg::Fill => Missing::Fill,
            MissingArg::Error => Missing::Error,
        })
        .with_frame_options(source)
        .with_progress(show)
        .with_write_config(ZarrWriteConfig::default().with_lock_timeout(wait.wait));
    if let Some(c) = cutoff {
        options = options.with_cutoff(c)?;
    }
    let t = std::time::Instant::now();
    let r = atomzarr::formats::import::import_files(&paths, &store, &options)?;
    let secs = t.elapsed().as_secs_f64();
    if json {
        let mut v = serde_json::to_value(&r).map_err(json_err)?;
        v["seconds"] = secs.into();
        println!("{v}");
    } else {
        for f in &r.files {
            println!("{}: {} {} ({}), {} frames", f.file.display(), f.format, f.layout, f.units, f.frames);
        }
        println!(
            "{} {}: {} frames, {} atoms, {} edges from {} files in {secs:.2} s ({:.0} frames/s)",
            if r.appended { "appended to" } else { "created" },
            r.store.display(),
            r.frames,
            r.atoms,
            r.edges,
            paths.len(),
            r.frames as f64 / secs.max(1e-9)
        );
    }
    Ok(())
}

/// `atomzarr export`: a store's samples as extended XYZ.
pub(crate) fn export(store: &Location, out: &Path) -> atomzarr::Result<()> {
    let reader = AtomicDataZarrReader::open(store)?;
    let n = atomzarr::formats::export::export_extxyz(&reader, out)?;
    println!("wrote {n} frames to {}", out.display());
    Ok(())
}
