//! One decoded-chunk budget shared by a [`MultiReader`](crate::MultiReader)'s
//! children: how it is split.
//!
//! A mixture of stores reads each child through its own chunk cache; were
//! each cache sized on its own, a mixture of five stores would hold five
//! budgets per rank. The mixture's budget is split by what each child
//! needs:
//!
//! 1. every child first gets room for its resident arrays (the small
//!    per-system ones a shuffled read keeps decoded, see
//!    [`CacheFit::resident_bytes`]), or the budget in proportion to those
//!    when they alone do not fit;
//! 2. what is left goes to the children in equal parts, water-filled: a
//!    child takes no more than it needs to fit whole (its decoded size), and
//!    what it leaves goes to the others in equal parts again.
//!
//! So children that fit in an equal part of the budget are cached whole (a
//! shuffled mixture reads them in a full permutation), and the larger ones
//! share the rest equally, each sizing its block pool from its share.

use super::CacheFit;

/// Each child's share of `budget` bytes, for children whose stores are
/// `fits` (only `decoded_bytes` and `resident_bytes` are read). The shares
/// sum to at most `budget`.
///
/// ```
/// use atomzarr::source::{CacheFit, split_cache_budget};
/// let mib = 1u64 << 20;
/// let fit = |decoded: u64, resident: u64| CacheFit { decoded_bytes: decoded * mib, resident_bytes: resident * mib, cache_bytes: 0 };
/// // A small child is cached whole; the two large ones share the rest.
/// let shares = split_cache_budget(&[fit(100, 10), fit(3000, 300), fit(5000, 100)], 1280 * mib);
/// assert_eq!(shares, [100 * mib, 690 * mib, 490 * mib]);
/// // Everything fits: each child its decoded size.
/// assert_eq!(split_cache_budget(&[fit(100, 10), fit(200, 20)], 1280 * mib), [100 * mib, 200 * mib]);
/// ```
pub fn split_cache_budget(fits: &[CacheFit], budget: u64) -> Vec<u64> {
    split_with_whole(fits, budget, &[])
}

/// Each child's share of `budget` bytes when child `d` is drawn
/// `passes[d]` times over in an epoch (a mixture's count of it over its
/// length): as [`split_cache_budget`], except that a child drawn more
/// than once whose decoded size fits may be cached whole before the others
/// share the rest, the children that save most per byte first
/// (`passes - 1`).
///
/// A child cached whole decodes its store once per epoch; a child read
/// through a block pool decodes about each chunk once per pass, `passes`
/// times its store. Of the two splits, [`split_cache_budget`]'s and the
/// one that caches such children whole, the one whose epoch decodes fewer
/// bytes by that count is returned, so an epoch never decodes more than
/// under [`split_cache_budget`].
///
/// ```
/// use atomzarr::source::{CacheFit, split_cache_budget, split_cache_budget_by_passes};
/// let mib = 1u64 << 20;
/// let fit = |decoded: u64, resident: u64| CacheFit { decoded_bytes: decoded * mib, resident_bytes: resident * mib, cache_bytes: 0 };
/// // A small store drawn 4 times over beside two large ones drawn once:
/// let fits = [fit(5000, 700), fit(2000, 70), fit(469, 7)];
/// let equal = split_cache_budget(&fits, 1280 * mib);
/// assert!(equal[2] < 469 * mib, "equal parts leave it short of whole");
/// let by_passes = split_cache_budget_by_passes(&fits, 1280 * mib, &[0.4, 0.8, 4.0]);
/// assert_eq!(by_passes[2], 469 * mib, "cached whole: decoded once, not 4 times");
/// assert!(by_passes.iter().sum::<u64>() <= 1280 * mib);
/// ```
pub fn split_cache_budget_by_passes(fits: &[CacheFit], budget: u64, passes: &[f64]) -> Vec<u64> {
    let equal = split_cache_budget(fits, budget);
    if passes.len() != fits.len() {
        return equal;
    }
    // Children drawn more than once, those saving most per byte first.
    let mut repeated: Vec<usize> = (0..fits.len()).filter(|&d| passes[d] > 1.0).collect();
    repeated.sort_by(|&a, &b| passes[b].total_cmp(&passes[a]).then(fits[a].decoded_bytes.cmp(&fits[b].decoded_bytes)));
    let whole = split_with_whole(fits, budget, &repeated);
    if epoch_decoded_bytes(fits, &whole, passes) < epoch_decoded_bytes(fits, &equal, passes) { whole } else { equal }
}

/// Bytes an epoch decodes, by the count of [`split_cache_budget_by_passes`]:
/// a child cached whole its store once, another its store once per pass.
fn epoch_decoded_bytes(fits: &[CacheFit], shares: &[u64], passes: &[f64]) -> f64 {
    fits.iter()
        .zip(shares)
        .zip(passes)
        .map(|((f, &s), &p)| {
            let d = f.decoded_bytes as f64;
            if s >= f.decoded_bytes { d } else { d * p }
        })
        .sum()
}

/// Floors first; then `whole`'s children, in that order, their whole
/// decoded size while it fits what is left; then the rest water-filled.
fn split_with_whole(fits: &[CacheFit], budget: u64, whole: &[usize]) -> Vec<u64> {
    let need: Vec<u64> = fits.iter().map(|f| f.decoded_bytes).collect();
    let floor: Vec<u64> = fits.iter().map(|f| f.resident_bytes.min(f.decoded_bytes)).collect();
    let floor_sum: u64 = floor.iter().sum();
    if floor_sum >= budget {
        // u128: `budget * floor` cannot overflow.
        return floor
            .iter()
            .map(|&f| (u128::from(budget) * u128::from(f) / u128::from(floor_sum.max(1))) as u64)
            .collect();
    }
    let mut share = floor;
    let mut left = budget - floor_sum;
    let mut done = vec![false; fits.len()];
    for &d in whole {
        let give = need[d] - share[d];
        if give <= left {
            share[d] += give;
            left -= give;
            done[d] = true;
        }
    }
    // Water-filling: the children that need least past their floor first.
    let mut order: Vec<usize> = (0..fits.len()).filter(|&d| !done[d]).collect();
    order.sort_by_key(|&d| need[d] - share[d]);
    for (k, &d) in order.iter().enumerate() {
        let equal = left / (order.len() - k) as u64;
        let give = equal.min(need[d] - share[d]);
        share[d] += give;
        left -= give;
    }
    share
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fit(decoded: u64, resident: u64) -> CacheFit {
        CacheFit { decoded_bytes: decoded, resident_bytes: resident, cache_bytes: 0 }
    }

    #[test]
    fn shares_never_pass_the_budget_and_cover_the_floors_first() {
        for budget in [0u64, 1, 100, 1000, 5000, 1 << 40] {
            for fits in [
                vec![fit(100, 10), fit(3000, 300), fit(5000, 100)],
                vec![fit(0, 0), fit(10, 10)],
                vec![fit(4000, 900), fit(4000, 900)],
                vec![fit(7, 3)],
            ] {
                let s = split_cache_budget(&fits, budget);
                assert!(s.iter().sum::<u64>() <= budget, "{fits:?} {budget}");
                // Nobody gets more than it needs to fit whole.
                assert!(s.iter().zip(&fits).all(|(s, f)| *s <= f.decoded_bytes));
                let floors: u64 = fits.iter().map(|f| f.resident_bytes).sum();
                if floors <= budget {
                    assert!(s.iter().zip(&fits).all(|(s, f)| *s >= f.resident_bytes));
                    // The budget is used up unless every child fits whole.
                    let need: u64 = fits.iter().map(|f| f.decoded_bytes).sum();
                    assert_eq!(s.iter().sum::<u64>(), budget.min(need));
                }
            }
        }
    }

    #[test]
    fn caching_by_passes_never_decodes_more_than_equal_parts() {
        // A small grid of mixtures: the split by passes is never worse by
        // the decode count, and strictly better where a repeated child
        // fits whole only by taking from the others.
        let sizes = [0u64, 50, 200, 469, 900, 2000, 5000];
        let passes = [0.1, 0.5, 1.0, 1.5, 4.0, 20.0];
        let mut better = 0;
        for &a in &sizes {
            for &b in &sizes {
                for &c in &sizes {
                    let fits = [fit(a, a / 10), fit(b, b / 30), fit(c, c / 60)];
                    for &pa in &passes {
                        for &pc in &passes {
                            let p = [pa, 1.0, pc];
                            let by = split_cache_budget_by_passes(&fits, 1280, &p);
                            let eq = split_cache_budget(&fits, 1280);
                            assert!(by.iter().sum::<u64>() <= 1280);
                            if fits.iter().map(|f| f.resident_bytes).sum::<u64>() <= 1280 {
                                assert!(by.iter().zip(&fits).all(|(s, f)| *s >= f.resident_bytes), "floors first");
                            }
                            let (x, y) = (epoch_decoded_bytes(&fits, &by, &p), epoch_decoded_bytes(&fits, &eq, &p));
                            assert!(x <= y, "{fits:?} {p:?}: {x} > {y}");
                            better += usize::from(x < y);
                        }
                    }
                }
            }
        }
        assert!(better > 0);
        // The three-store mixture of the docs: the small store whole.
        let fits = [fit(5000, 700), fit(2000, 70), fit(469, 7)];
        let by = split_cache_budget_by_passes(&fits, 1280, &[0.28, 0.8, 4.0]);
        assert_eq!(by[2], 469);
    }

    #[test]
    fn floors_over_the_budget_are_scaled() {
        assert_eq!(split_cache_budget(&[fit(1000, 300), fit(1000, 100)], 200), [150, 50]);
    }
}
