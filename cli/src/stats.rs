//! `atomzarr stats`: [`DatasetStats`] as
//! text (the JSON form is its serde serialisation).

use comfy_table::Table;

use atomzarr::prep::stats::{DatasetStats, MinMeanMax, StatsOptions, dataset_stats, subset_stats};
use atomzarr::{AtomicDataZarrReader, AtomicDataZarrWriter, Location, ZarrWriteConfig};

use crate::output::{json_err, show_progress};

/// `atomzarr stats`: the statistics of the store, or of one part of a saved
/// split; `save` keeps them in the store's root attributes.
pub(crate) fn stats(store: &Location, split: Option<&str>, part: &str, save: bool, json: bool) -> atomzarr::Result<()> {
    let reader = AtomicDataZarrReader::open(store)?;
    let options = StatsOptions::default().with_progress(show_progress(json));
    let s = match split {
        Some(name) => {
            let sp = atomzarr::prep::split::Split::from_store(&reader, name)?;
            subset_stats(&reader, sp.indices(part)?, &options)?
        }
        None => dataset_stats(&reader, &options)?,
    };
    if save {
        let scope = split.map(|n| (n, part));
        AtomicDataZarrWriter::open(store, ZarrWriteConfig::default())?.save_stats(&s, scope, &reader)?;
    }
    if json {
        println!("{}", serde_json::to_string(&s).map_err(json_err)?);
    } else {
        if let Some(name) = split {
            println!("split {name}, part {part}");
        }
        println!("{}", render(store, &s));
        if save {
            println!("saved in {store} (root attribute atomzarr.stats)");
        }
    }
    Ok(())
}

fn mmm(m: Option<MinMeanMax>) -> String {
    m.map_or("-".into(), |m| format!("{} / {:.2} / {}", m.min, m.mean, m.max))
}

fn opt(x: Option<f64>, digits: usize) -> String {
    x.map_or("-".into(), |x| format!("{x:.digits$}"))
}

/// The report as lines and a per-element table.
fn render(store: &Location, s: &DatasetStats) -> String {
    let mut out = format!("store {store}\n");
    out += &format!(
        "samples: {}   atoms: {}   edges: {}\n",
        s.num_samples,
        s.num_atoms,
        s.num_edges.map_or("-".into(), |e| e.to_string())
    );
    out += &format!("atoms per sample (min / mean / max): {}\n", mmm(s.atoms_per_sample));
    out += &format!("edges per sample (min / mean / max): {}\n", mmm(s.edges_per_sample));
    out += &format!("average number of neighbors: {}\n", opt(s.avg_num_neighbors, 4));
    out += &format!(
        "energy per atom (eV): {}\n",
        s.energy_per_atom.map_or("-".into(), |m| format!("mean {:.6}, std {:.6}", m.mean, m.std))
    );
    out += &format!(
        "energy per atom after E0s (eV): {}\n",
        s.residual_energy_per_atom.map_or("-".into(), |m| format!("mean {:.6}, std {:.6}", m.mean, m.std))
    );
    out += &format!("force RMS (eV/Å): {}\n", opt(s.force_rms, 6));
    if let Some(note) = &s.e0_note {
        out += &format!("E0s: none ({note})\n");
    }
    let mut t = Table::new();
    t.set_header(["Z", "element", "atoms", "E0 (eV)"]);
    for e in &s.elements {
        t.add_row([e.z.to_string(), e.symbol.to_string(), e.count.to_string(), opt(e.e0, 6)]);
    }
    out += &t.to_string();
    out
}
