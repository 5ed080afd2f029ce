//! A training set out of a store: reproducible splits, dataset statistics,
//! both saved in the store, and the batch transforms that use them.
//!
//! | module | owns |
//! |---|---|
//! | [`filter`] | the samples to delete: force, energy outliers, duplicates, absent labels, in one streaming pass |
//! | [`split`] | reproducible grouped splits: [`split::SplitRule`] (group by a label, seed, fractions) and [`split::Split`] |
//! | [`stats`] | dataset statistics (counts, elements, E0s, energy per atom, force RMS, neighbors), streamed and parallel |
//! | [`saved`] | splits and statistics saved in the store's root attributes: [`saved::SavedStats`], `Split::from_store`, staleness |
//! | `save` | saving them: `AtomicDataZarrWriter::save_split`, `save_stats` |
//! | [`transforms`] | transforms of collated batches: E0 subtraction, scale and shift, random rotation, sample weights |

pub mod filter;
mod save;
pub mod saved;
pub mod split;
pub mod stats;
pub mod transforms;
