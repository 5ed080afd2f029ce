//! `atomzarr split`: a [`Split`] as a table of its parts (share of the
//! samples and atoms, with the spread expected from assigning groups at
//! random) or as JSON ([`Split::to_json`]).

use comfy_table::Table;

use atomzarr::prep::split::{Split, SplitRule};
use atomzarr::{AtomicDataZarrReader, AtomicDataZarrWriter, Location, ZarrWriteConfig};

/// `atomzarr split`: computes the split, saves its rule under `save`, and
/// prints it.
pub(crate) fn split(
    store: &Location,
    by: Option<String>,
    fractions: &str,
    seed: u64,
    save: Option<&str>,
    json: bool,
) -> atomzarr::Result<()> {
    let reader = AtomicDataZarrReader::open(store)?;
    let rule = SplitRule::parse(fractions)?.with_by(by).with_seed(seed);
    let split = Split::compute(&reader, &rule)?;
    if let Some(name) = save {
        AtomicDataZarrWriter::open(store, ZarrWriteConfig::default())?.save_split(name, &split, &reader)?;
    }
    if json {
        println!("{}", split.to_json());
    } else {
        println!("{}", render(store, &split));
        if let Some(name) = save {
            println!("saved as {name} in {store} (root attribute atomzarr.splits.{name})");
        }
    }
    Ok(())
}

/// The parts as a table, with the rule above it.
fn render(store: &Location, split: &Split) -> String {
    let rule = split.rule();
    let total: u64 = split.summary().iter().map(|p| p.samples).sum();
    let mut out = format!(
        "store {}: {total} samples, {} (seed {}, hash {})\n",
        store,
        match rule.by() {
            Some(by) => format!("grouped by {by}"),
            None => "each sample its own group (keyed by physical index)".to_string(),
        },
        rule.seed(),
        rule.hash()
    );
    if split.ungrouped() > 0 {
        out += &format!(
            "{} samples without a value of {} are groups of their own\n",
            split.ungrouped(),
            rule.by().unwrap_or("the label")
        );
    }
    let mut t = Table::new();
    t.set_header(["part", "fraction", "groups", "samples", "share (±3σ)", "atoms", "share (±3σ)"]);
    for p in split.summary() {
        t.add_row([
            p.name.clone(),
            format!("{:.4}", p.fraction),
            p.groups.to_string(),
            p.samples.to_string(),
            format!("{:.4} (±{:.4})", p.sample_fraction, 3.0 * p.sample_sigma),
            p.atoms.to_string(),
            format!("{:.4} (±{:.4})", p.atom_fraction, 3.0 * p.atom_sigma),
        ]);
    }
    out += &t.to_string();
    out
}
