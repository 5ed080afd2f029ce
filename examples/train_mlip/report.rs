//! What the example prints: the training set, the model, each epoch, and
//! the final line the tests and CI read.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::cli::Args;
use crate::model::{Forces, Scatter};
use crate::step::{Metrics, Trainer};
use crate::training::{BoxError, EpochReport, TrainingSet};

/// The split, the E0s and the training statistics.
pub fn training_set(set: &TrainingSet, args: &Args) {
    let prep = args.prep();
    println!(
        "split by {}{}{}",
        prep.by.as_deref().unwrap_or("index (the last --val-fraction)"),
        match &set.e0s {
            Some(e) => format!(
                "; E0s fitted on the training part, subtracted from every energy: {}",
                e.e0s().iter().map(|(z, e)| format!("Z={z} {e:.4} eV")).collect::<Vec<_>>().join(", ")
            ),
            None => "; raw energies (no E0s)".to_string(),
        },
        if args.rotate { "; random rotation of every training structure" } else { "" }
    );
    let stats = &set.stats;
    println!(
        "{} train / {} validation structures; mean energy {:.4} eV/atom (spread {:.4}), RMS force {:.4} eV/Å, {:.1} neighbors/atom",
        set.train_indices.len(),
        set.val_indices.len(),
        stats.energy_per_atom,
        stats.energy_scale,
        stats.force_scale,
        stats.avg_neighbors
    );
}

/// The order the training loader reads, as its state records it.
pub fn order(state: &atomzarr::LoaderState, args: &Args) {
    let how = match state.pool_blocks() {
        Some(k) => format!("the block pool, {k} blocks resident (the store decodes to more than the reader's cache)"),
        None if args.shuffle == crate::cli::ShuffleArg::Full => "a full permutation of the training part".into(),
        None => "a full permutation (the store fits the reader's cache)".into(),
    };
    println!("train order: {how}");
}

/// The model and the loader settings.
pub fn model(trainer: &Trainer, backend: &str, scatter: Scatter, args: &Args, gpu: bool) {
    use burn::module::Module;
    println!(
        "model: {}, {} parameters, backend {backend}, scatter {scatter:?}; batch {} prefetch {}{}",
        match trainer.model.forces() {
            Forces::Conservative => "conservative (forces = -dE/dx, written out)",
            Forces::Direct => "message passing + direct force head",
        },
        trainer.model.num_params(),
        args.batch_size(),
        args.prefetch_factor,
        if gpu { ", pinned uploads on the loader's upload stream" } else { "" }
    );
}

/// The epochs of the example's own loop, and their totals.
pub struct Run {
    epochs: usize,
    wait: Duration,
    total: Duration,
    samples: usize,
    last: Option<Metrics>,
    /// `--metrics`: one JSON line per epoch.
    metrics: Option<std::fs::File>,
}

impl Run {
    /// A run of `epochs` epochs, writing each epoch's numbers to `metrics`
    /// (created anew) if given.
    pub fn new(epochs: usize, metrics: Option<&Path>) -> Result<Run, BoxError> {
        let metrics = metrics
            .map(|p| std::fs::File::create(p).map_err(|e| format!("--metrics {}: {e}", p.display())))
            .transpose()?;
        Ok(Run { epochs, wait: Duration::ZERO, total: Duration::ZERO, samples: 0, last: None, metrics })
    }

    /// Prints epoch `epoch` (from 0); the first epoch's data wait is left
    /// out of the totals (it includes the first reads), unless it is the only one.
    pub fn epoch(&mut self, epoch: usize, r: &EpochReport, m: Metrics, lr: f64) -> Result<(), BoxError> {
        if epoch > 0 || self.epochs == 1 {
            self.wait += r.wait;
            self.total += r.total;
            self.samples += r.samples;
        }
        println!(
            "epoch {:>2}/{}: train loss {:.4} | val energy MAE {:.4} eV (baseline {:.4}) force MAE {:.4} eV/Å (baseline {:.4}) | {:.0} samples/s, data wait {:.2}% | lr {:.1e}",
            epoch + 1,
            self.epochs,
            r.loss,
            m.energy_mae(),
            m.baseline_energy_mae(),
            m.force_mae(),
            m.baseline_force_mae(),
            r.samples_per_s(),
            100.0 * r.wait_fraction(),
            lr
        );
        if let Some(f) = &mut self.metrics {
            use std::io::Write;
            let line = serde_json::json!({
                "epoch": epoch + 1,
                "train_loss": r.loss,
                "val_energy_mae": m.energy_mae(),
                "val_force_mae": m.force_mae(),
                "baseline_energy_mae": m.baseline_energy_mae(),
                "baseline_force_mae": m.baseline_force_mae(),
                "samples_per_s": r.samples_per_s(),
                "rss_bytes": crate::memory::resident_bytes(),
            });
            // serde_json writes NaN and Inf as null: the reader fails on them.
            writeln!(f, "{line}")?;
        }
        self.last = Some(m);
        Ok(())
    }

    /// Prints where the model went and the final line.
    pub fn finish(self, saved: &Path, e0: bool, rotate: bool, forces: Forces, start: Instant) -> Result<(), BoxError> {
        let m = self.last.ok_or("no epochs run")?;
        println!(
            "saved {} (+ .json config); energy MAE {:.1}% and force MAE {:.1}% of the baseline's; total {:.1}s",
            saved.display(),
            100.0 * m.energy_mae() / m.baseline_energy_mae(),
            100.0 * m.force_mae() / m.baseline_force_mae(),
            start.elapsed().as_secs_f64()
        );
        println!(
            "final: e0={e0} rotate={rotate} val_energy_mae={:.5} val_force_mae={:.5} baseline_energy_mae={:.5} baseline_force_mae={:.5} data_wait={:.2}% samples_per_s={:.1} forces={forces}",
            m.energy_mae(),
            m.force_mae(),
            m.baseline_energy_mae(),
            m.baseline_force_mae(),
            100.0 * self.wait.as_secs_f64() / self.total.as_secs_f64().max(1e-9),
            self.samples as f64 / self.total.as_secs_f64().max(1e-9)
        );
        Ok(())
    }
}
