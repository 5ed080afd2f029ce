//! `atomzarr split`: a [`Split`] as a table of its parts (share of the
//! samples and atoms, with the spread expected from assigning groups at
//! random) or as JSON.

use comfy_table::Table;
use serde_json::{Map, Value, json};

use crate::prep::split::Split;

/// The parts as a table, with the rule above it.
///
/// ```
/// # fn main() -> atomzarr::Result<()> {
/// use atomzarr::InMemoryReader;
/// use atomzarr::prep::split::{Split, SplitRule};
/// let data = InMemoryReader::from_samples(&atomzarr::data::synth::generate(40, 2, 4, 0)?, "toy")?;
/// let split = Split::compute(&data, &SplitRule::parse("train=0.75,val=0.25")?)?;
/// let text = atomzarr::cli::split::render(&"toy".into(), &split);
/// assert!(text.contains("train") && text.contains("val"));
/// # Ok(()) }
/// ```
pub fn render(store: &crate::Location, split: &Split) -> String {
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

/// `{"splits": {part: [logical indices...]}, "rule": ..., "parts": [...]}`.
pub fn to_json(split: &Split) -> Value {
    let splits: Map<String, Value> = split.parts().map(|(name, idx)| (name.to_string(), json!(idx))).collect();
    json!({"splits": splits, "rule": split.rule(), "parts": split.summary()})
}
