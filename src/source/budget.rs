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
    // Water-filling: the children that need least past their floor first.
    let mut order: Vec<usize> = (0..fits.len()).collect();
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
    fn floors_over_the_budget_are_scaled() {
        assert_eq!(split_cache_budget(&[fit(1000, 300), fit(1000, 100)], 200), [150, 50]);
    }
}
