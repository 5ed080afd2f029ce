//! Robust z-scores of energies per atom (Iglewicz and Hoaglin's modified
//! z-score): `z = 0.6745 (x - median) / MAD`, `MAD` the median of
//! `|x - median|`; medians of an even count are the mean of the two middle
//! values (as NumPy's `median`). A group whose MAD is 0 flags nothing.

use std::collections::HashMap;

use rayon::prelude::*;

/// The factor that makes the MAD of a normal distribution its standard deviation's scale.
const MAD_SCALE: f64 = 0.6745;

fn median(v: &mut [f64]) -> f64 {
    v.sort_unstable_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

/// The members of `group` (indices into `values`) whose robust z-score
/// within the group is above `bound` in absolute value.
pub(crate) fn outliers(values: &[f64], group: &[usize], bound: f64) -> Vec<usize> {
    if group.is_empty() {
        return Vec::new();
    }
    let mut v: Vec<f64> = group.iter().map(|&i| values[i]).collect();
    let m = median(&mut v);
    let mut dev: Vec<f64> = group.iter().map(|&i| (values[i] - m).abs()).collect();
    let mad = median(&mut dev);
    if mad <= 0.0 || !mad.is_finite() {
        return Vec::new();
    }
    group.iter().copied().filter(|&i| (MAD_SCALE * (values[i] - m) / mad).abs() > bound).collect()
}

/// Groups of samples with the same composition: each group's members,
/// in order. `compositions(i)` is sample `i`'s `(Z, count)` list.
pub(crate) fn by_composition<'a>(
    members: impl Iterator<Item = usize>,
    composition: impl Fn(usize) -> &'a [(i64, u32)],
) -> Vec<Vec<usize>> {
    let mut ids: HashMap<&'a [(i64, u32)], usize> = HashMap::new();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for i in members {
        let next = groups.len();
        let g = *ids.entry(composition(i)).or_insert(next);
        if g == next {
            groups.push(Vec::new());
        }
        groups[g].push(i);
    }
    groups
}

/// Residual energies per atom after per-element reference energies:
/// `r = y - Σ_z (n_z / n) E0_z`, the E0s the least-squares fit of total
/// energies `n y` to compositions (the fit `prep::stats` makes). `None`
/// when the compositions do not determine one energy per element.
pub(crate) fn e0_residuals<'a>(
    members: &[usize],
    y: &[f64],
    composition: impl Fn(usize) -> &'a [(i64, u32)] + Sync,
) -> Option<Vec<f64>> {
    if members.is_empty() {
        return Some(vec![f64::NAN; y.len()]);
    }
    let mut zs: Vec<i64> = members.iter().flat_map(|&i| composition(i).iter().map(|c| c.0)).collect();
    zs.sort_unstable();
    zs.dedup();
    let at = |z: i64| zs.binary_search(&z).unwrap_or(0);
    let k = zs.len();
    // The normal equations A^T A and A^T E, summed in parallel over blocks
    // of samples (each sample adds its composition's outer product).
    let (ata, atb) = members
        .par_chunks(4096)
        .map(|block| {
            let (mut ata, mut atb) = (vec![0.0; k * k], vec![0.0; k]);
            let mut comp: Vec<(usize, f64)> = Vec::new();
            for &i in block {
                comp.clear();
                comp.extend(composition(i).iter().map(|&(z, c)| (at(z), f64::from(c))));
                let n: f64 = comp.iter().map(|c| c.1).sum();
                for &(a, na) in &comp {
                    atb[a] += na * y[i] * n;
                    let row = &mut ata[a * k..(a + 1) * k];
                    for &(b, nb) in &comp {
                        row[b] += na * nb;
                    }
                }
            }
            (ata, atb)
        })
        .reduce(
            || (vec![0.0; k * k], vec![0.0; k]),
            |(mut a, mut b), (x, y)| {
                a.iter_mut().zip(x).for_each(|(p, q)| *p += q);
                b.iter_mut().zip(y).for_each(|(p, q)| *p += q);
                (a, b)
            },
        );
    let ata: Vec<Vec<f64>> = ata.chunks(k.max(1)).map(<[f64]>::to_vec).collect();
    let e0 = crate::prep::stats::solve(ata, atb)?;
    let mut r = vec![f64::NAN; y.len()];
    for &i in members {
        let comp = composition(i);
        let n: f64 = comp.iter().map(|c| f64::from(c.1)).sum();
        r[i] = y[i] - comp.iter().map(|&(z, c)| f64::from(c) / n * e0[at(z)]).sum::<f64>();
    }
    Some(r)
}
