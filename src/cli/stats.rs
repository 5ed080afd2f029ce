//! `atomzarr stats`: [`crate::prep::stats::DatasetStats`] as
//! text (the JSON form is its serde serialisation).

use comfy_table::Table;

use crate::prep::stats::{DatasetStats, MinMeanMax};

fn mmm(m: Option<MinMeanMax>) -> String {
    m.map_or("-".into(), |m| format!("{} / {:.2} / {}", m.min, m.mean, m.max))
}

fn opt(x: Option<f64>, digits: usize) -> String {
    x.map_or("-".into(), |x| format!("{x:.digits$}"))
}

/// The report as lines and a per-element table.
///
/// ```
/// use atomzarr::prep::stats::DatasetStats;
/// let s = DatasetStats { num_samples: 0, num_atoms: 0, num_edges: None, atoms_per_sample: None,
///     edges_per_sample: None, elements: vec![], e0_note: None, energy_per_atom: None,
///     residual_energy_per_atom: None, force_rms: None, avg_num_neighbors: None };
/// assert!(atomzarr::cli::stats::render(&"s.zarr".into(), &s).contains("samples: 0"));
/// ```
pub fn render(store: &crate::Location, s: &DatasetStats) -> String {
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
