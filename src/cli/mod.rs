//! The library side of the `atomzarr` command line (feature `cli`): the I/O
//! benchmark, the JSON dump and the store report. `src/main.rs` parses the
//! arguments and prints.
//!
//! | module | owns |
//! |---|---|
//! | [`bench`](mod@bench) | `atomzarr roundtrip` and `atomzarr read`: read orders, timed read paths, report rows |
//! | [`dump`] | `atomzarr dump`: every sample as JSON, in the reference toolkit's number format |
//! | [`stats`] | `atomzarr stats`: the dataset statistics as a table |
//! | [`split`](mod@split) | `atomzarr split`: a split's parts as a table or JSON |
//! | [`inspect`] | `atomzarr inspect`: sample counts and, per array, codec, chunking and bytes on disk |

pub mod bench;
pub mod dump;
pub mod inspect;
pub mod split;
pub mod stats;
