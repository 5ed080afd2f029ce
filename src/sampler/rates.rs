//! A mixture's per-dataset rates: weights checked and normalised, tempered
//! by a temperature, and turned into exact integer counts.

use crate::error::{Error, Result};

/// Checks per-child weights and normalises them to sum 1, tempered by
/// `temperature` when given: each rate raised to `1 / T` and normalised
/// again, so that with the default weights (the lengths `D_i`) the rates are
/// `(D_i / D)^(1/T)`, normalised: `T = 1` proportional to size, `T -> inf`
/// uniform over the datasets with a positive weight (fairchem's
/// temperature sampling). `None` weights mean proportional to child length.
pub(super) fn normalise_weights(
    weights: Option<&[f64]>,
    lengths: &[usize],
    temperature: Option<f64>,
    what: &str,
) -> Result<Vec<f64>> {
    let w: Vec<f64> = match weights {
        Some(w) => w.to_vec(),
        None => lengths.iter().map(|&l| l as f64).collect(),
    };
    if w.len() != lengths.len() {
        return Err(Error::Config(format!("{what}: {} values for {} datasets", w.len(), lengths.len())));
    }
    if let Some(bad) = w.iter().find(|x| !x.is_finite() || **x < 0.0) {
        return Err(Error::Config(format!("{what}: {bad} is not a finite non-negative number")));
    }
    let sum: f64 = w.iter().sum();
    if sum <= 0.0 {
        return Err(Error::Config(format!("{what}: at least one must be positive (datasets may all be empty)")));
    }
    if let Some(d) = (0..w.len()).find(|&d| w[d] > 0.0 && lengths[d] == 0) {
        return Err(Error::Config(format!("{what}: dataset {d} has a positive rate but no samples")));
    }
    let rates: Vec<f64> = w.into_iter().map(|x| x / sum).collect();
    match temperature {
        None => Ok(rates),
        Some(t) if t > 0.0 => {
            // Rates in (0, 1] raised to 1/T stay in (0, 1]: no overflow.
            let tempered: Vec<f64> = rates.iter().map(|&r| if r > 0.0 { r.powf(1.0 / t) } else { 0.0 }).collect();
            let sum: f64 = tempered.iter().sum();
            Ok(tempered.into_iter().map(|x| x / sum).collect())
        }
        Some(t) => Err(Error::Config(format!("{what}: temperature {t} is not positive"))),
    }
}

/// A mixture's per-dataset rates, summing to 1: `weights` (default: the
/// `lengths`) normalised, tempered by `temperature` when given (see
/// [`MultiDatasetSampler::builder`](super::MultiDatasetSampler::builder)'s
/// `with_temperature`). The counts of an epoch are these rates times its
/// samples, by largest remainder.
///
/// ```
/// use atomzarr::sampler::mixture_rates;
/// let r = mixture_rates(None, &[9_000, 1_000], Some(2.0)).unwrap();
/// assert!((r[0] - 0.75).abs() < 1e-12 && (r[1] - 0.25).abs() < 1e-12);
/// ```
///
/// # Errors
/// [`Error::Config`] for weights that do not match the datasets (count,
/// sign, all zero, a positive rate on an empty dataset) or a temperature
/// that is not positive.
pub fn mixture_rates(weights: Option<&[f64]>, lengths: &[usize], temperature: Option<f64>) -> Result<Vec<f64>> {
    normalise_weights(weights, lengths, temperature, "weights")
}

/// Integer counts summing to `total`, proportional to `weights` (largest
/// remainder; ties go to the lower dataset index).
pub(super) fn counts_from_weights(weights: &[f64], total: usize) -> Vec<usize> {
    let raw: Vec<f64> = weights.iter().map(|w| w * total as f64).collect();
    let mut counts: Vec<usize> = raw.iter().map(|r| r.floor() as usize).collect();
    let assigned: usize = counts.iter().sum();
    // Only datasets with a positive rate may take a remainder slot.
    let mut order: Vec<usize> = (0..weights.len()).filter(|&d| weights[d] > 0.0).collect();
    order.sort_by(|&a, &b| (raw[b] - raw[b].floor()).total_cmp(&(raw[a] - raw[a].floor())).then(a.cmp(&b)));
    for &d in order.iter().take(total.saturating_sub(assigned)) {
        counts[d] += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temperature_one_is_proportional_and_a_large_one_uniform() {
        let lengths = [1_000_000, 10_000, 100];
        let p = normalise_weights(None, &lengths, Some(1.0), "t").unwrap();
        let q = normalise_weights(None, &lengths, None, "t").unwrap();
        assert!(p.iter().zip(&q).all(|(a, b)| (a - b).abs() < 1e-12));
        let u = normalise_weights(None, &lengths, Some(f64::INFINITY), "t").unwrap();
        assert!(u.iter().all(|&x| (x - 1.0 / 3.0).abs() < 1e-12), "{u:?}");
        // A zero weight stays zero at any temperature.
        let z = normalise_weights(Some(&[0.0, 1.0, 3.0]), &lengths, Some(2.0), "t").unwrap();
        assert_eq!(z[0], 0.0);
        for bad in [0.0, -1.0, f64::NAN] {
            assert!(normalise_weights(None, &lengths, Some(bad), "t").is_err(), "{bad}");
        }
    }

    #[test]
    fn largest_remainder_sums_and_is_proportional() {
        assert_eq!(counts_from_weights(&[0.5, 0.5], 5), vec![3, 2]);
        assert_eq!(counts_from_weights(&[0.1, 0.2, 0.7], 10), vec![1, 2, 7]);
        let w = normalise_weights(None, &[3, 7, 0], None, "w").unwrap();
        assert_eq!(counts_from_weights(&w, 10), vec![3, 7, 0]);
        // A zero rate never gets a remainder slot.
        assert_eq!(counts_from_weights(&[0.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0], 5), vec![0, 2, 2, 1]);
    }
}
