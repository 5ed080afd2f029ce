//! [`ChainSpec`]: an array's codec chain as a typed description, parsed once
//! from its `zarr.json`, and the one place that reads codec metadata.
//!
//! Every part of the store that depends on how chunks are encoded asks it:
//! creation (the chain a [`Codec`] setting writes, [`steps_for`] and
//! [`Step::to_zarrs`]), `inspect` and defragment (the setting an existing
//! chain implies, [`ChainSpec::config`]), the size limits (whether a chain
//! compresses), the reader's direct decode and the writer's tail encode (the
//! chains they can decode or encode by hand, [`ChainSpec::by_hand`],
//! [`ChainSpec::row_shards`]). Adding a codec is one variant here.

use std::sync::Arc;

use serde_json::Value;
use zarrs::array::codec::{BloscCodec, Crc32cCodec, GzipCodec, ZstdCodec};
use zarrs::array::{Array, BytesToBytesCodecTraits};

use crate::error::{Error, Result};
use crate::store::config::{Codec, Shuffle, ZarrArrayConfig};

/// One codec of a chain.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Step {
    /// `bytes`: `Some(true)` little endian, `Some(false)` big, `None` not
    /// stated (single-byte types).
    Bytes(Option<bool>),
    /// `zstd` at `level`, with zstd's own frame checksum or not.
    Zstd {
        /// The level as stated (0: zstd's default).
        level: i32,
        /// zstd's frame checksum.
        checksum: bool,
    },
    /// `gzip` at `level`.
    Gzip(u32),
    /// `blosc`.
    Blosc {
        /// `zstd` or another compressor (`lz4` and the rest).
        zstd: bool,
        /// Compression level.
        clevel: u8,
        /// Shuffle mode.
        shuffle: Shuffle,
    },
    /// `crc32c` (Zarr v3's, no configuration).
    Crc32c,
    /// `transpose`.
    Transpose,
    /// `sharding_indexed`.
    Sharding(Box<Sharding>),
    /// Any other codec, by name (`numcodecs.crc32c` with a location among them).
    Other(String),
}

/// A `sharding_indexed` codec's configuration.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sharding {
    /// The inner chunk shape (`None` when not a list of integers).
    pub chunk_shape: Option<Vec<u64>>,
    /// The inner chain.
    pub codecs: Vec<Step>,
    /// The inner chain's metadata as stored (for zarrs' own decode).
    pub codecs_json: Vec<Value>,
    /// The index's chain.
    pub index_codecs: Vec<Step>,
    /// Index at the end of the shard (`Some(false)`: at the start; `None`:
    /// a location this crate does not know).
    pub index_at_end: Option<bool>,
}

/// An array's chunk grid and codec chain, as its metadata states them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ChainSpec {
    /// The grid is `regular`.
    pub regular: bool,
    /// The regular grid's chunk shape (`None` when absent or malformed).
    pub chunk_shape: Option<Vec<u64>>,
    /// The top-level codecs.
    pub codecs: Vec<Step>,
}

/// Rows-only sharding with an index this crate reads itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RowShards {
    /// Rows per inner chunk.
    pub inner_rows: u64,
    /// Inner chunks per shard.
    pub inner_per_shard: u64,
    /// The index is at the end of the shard file (else at its start).
    pub index_at_end: bool,
    /// The index ends in a crc32c checksum.
    pub index_crc32c: bool,
}

/// An inner chain of `bytes` (little endian) [+ `zstd`] [+ `crc32c`]: what
/// this crate writes by default, decoded and appended to by hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ByHand {
    /// The zstd step: its level and whether it has zstd's frame checksum.
    pub zstd: Option<(i32, bool)>,
    /// The chain ends in crc32c.
    pub crc32c: bool,
}

fn name_of(c: &Value) -> Option<&str> {
    // A codec without configuration may be the bare string of its name.
    c.as_str().or_else(|| c.get("name").and_then(Value::as_str))
}

fn dims(v: Option<&Value>) -> Option<Vec<u64>> {
    v?.as_array()?.iter().map(Value::as_u64).collect()
}

impl Step {
    fn parse(c: &Value) -> Step {
        let conf = c.get("configuration");
        let get = |key: &str| conf.and_then(|k| k.get(key));
        let Some(name) = name_of(c) else { return Step::Other(String::new()) };
        match name {
            "bytes" => Step::Bytes(get("endian").and_then(Value::as_str).map(|e| e == "little")),
            "zstd" => Step::Zstd {
                level: get("level").and_then(Value::as_i64).and_then(|l| i32::try_from(l).ok()).unwrap_or(0),
                checksum: get("checksum").and_then(Value::as_bool).unwrap_or(false),
            },
            "gzip" => Step::Gzip(get("level").and_then(Value::as_u64).and_then(|l| u32::try_from(l).ok()).unwrap_or(5)),
            "blosc" => Step::Blosc {
                zstd: get("cname").and_then(Value::as_str) == Some("zstd"),
                clevel: get("clevel").and_then(Value::as_u64).and_then(|l| u8::try_from(l).ok()).unwrap_or(5),
                shuffle: match get("shuffle").and_then(Value::as_str) {
                    Some("noshuffle") => Shuffle::NoShuffle,
                    Some("bitshuffle") => Shuffle::BitShuffle,
                    _ => Shuffle::Shuffle,
                },
            },
            // Zarr v3's crc32c has no configuration; `numcodecs.crc32c` with
            // a `location` is another codec.
            "crc32c" if conf.is_none_or(|k| k.as_object().is_some_and(|m| m.is_empty())) => Step::Crc32c,
            "transpose" => Step::Transpose,
            "sharding_indexed" => {
                let list = |key: &str| get(key).and_then(Value::as_array).cloned().unwrap_or_default();
                let codecs_json = list("codecs");
                Step::Sharding(Box::new(Sharding {
                    chunk_shape: dims(get("chunk_shape")),
                    codecs: codecs_json.iter().map(Step::parse).collect(),
                    codecs_json,
                    index_codecs: list("index_codecs").iter().map(Step::parse).collect(),
                    index_at_end: match get("index_location").and_then(Value::as_str) {
                        None | Some("end") => Some(true),
                        Some("start") => Some(false),
                        Some(_) => None,
                    },
                }))
            }
            other => Step::Other(other.to_string()),
        }
    }

    /// Whether this step may compress (some codec other than bytes,
    /// crc32c, transpose and sharding; a shard's chains are looked into).
    fn compresses(&self) -> bool {
        match self {
            Step::Bytes(_) | Step::Crc32c | Step::Transpose => false,
            Step::Sharding(s) => s.codecs.iter().chain(&s.index_codecs).any(Step::compresses),
            _ => true,
        }
    }

    /// `bytes` in little endian for elements of `size` bytes (an unstated
    /// endianness is fine for single bytes only).
    fn is_little(&self, size: usize) -> bool {
        matches!(self, Step::Bytes(Some(true))) || (matches!(self, Step::Bytes(None)) && size == 1)
    }

    /// The zarrs codec of a bytes-to-bytes step, for elements of
    /// `type_size` bytes (blosc's shuffle needs it).
    ///
    /// # Errors
    /// [`Error::Config`] naming `rel` for a level out of its codec's range,
    /// or a step that is not bytes-to-bytes.
    pub(crate) fn to_zarrs(&self, rel: &str, type_size: usize) -> Result<Arc<dyn BytesToBytesCodecTraits>> {
        use zarrs::array::codec::{BloscCompressionLevel, BloscCompressor, BloscShuffleMode};
        let config = |e: &dyn std::fmt::Display| Error::Config(format!("{rel}: {e}"));
        Ok(match self {
            Step::Zstd { level, checksum } => Arc::new(ZstdCodec::new(*level, *checksum)),
            Step::Gzip(level) => Arc::new(GzipCodec::new(*level).map_err(|e| config(&e))?),
            Step::Blosc { zstd, clevel, shuffle } => {
                let cname = if *zstd { BloscCompressor::Zstd } else { BloscCompressor::LZ4 };
                let mode = match shuffle {
                    Shuffle::NoShuffle => BloscShuffleMode::NoShuffle,
                    Shuffle::Shuffle => BloscShuffleMode::Shuffle,
                    Shuffle::BitShuffle => BloscShuffleMode::BitShuffle,
                };
                let clevel =
                    BloscCompressionLevel::try_from(*clevel).map_err(|_| config(&format!("blosc clevel {clevel}")))?;
                Arc::new(BloscCodec::new(cname, clevel, None, mode, Some(type_size)).map_err(|e| config(&e))?)
            }
            Step::Crc32c => Arc::new(Crc32cCodec::new()),
            other => return Err(config(&format!("{other:?} is not a bytes-to-bytes codec"))),
        })
    }
}

/// The bytes-to-bytes steps a [`Codec`] setting writes, then a `crc32c`
/// last when `checksum` (so the checksum covers the encoded bytes and is
/// checked before any decompressor sees them; with sharding this is the
/// inner chain: one checksum per inner chunk).
pub(crate) fn steps_for(codec: Codec, checksum: bool) -> Vec<Step> {
    let mut steps = match codec {
        Codec::None => vec![],
        Codec::Zstd { level } => vec![Step::Zstd { level, checksum: false }],
        Codec::Gzip { level } => vec![Step::Gzip(level)],
        Codec::BloscLz4 { clevel, shuffle } => vec![Step::Blosc { zstd: false, clevel, shuffle }],
        Codec::BloscZstd { clevel, shuffle } => vec![Step::Blosc { zstd: true, clevel, shuffle }],
    };
    if checksum {
        steps.push(Step::Crc32c);
    }
    steps
}

impl ChainSpec {
    /// The chain of `array`, from its metadata.
    pub(crate) fn of<T: ?Sized>(array: &Array<T>) -> ChainSpec {
        ChainSpec::parse(&serde_json::to_value(array.metadata()).unwrap_or(Value::Null))
    }

    /// The chain in array metadata `meta` (a `zarr.json` document).
    pub(crate) fn parse(meta: &Value) -> ChainSpec {
        ChainSpec {
            regular: meta.pointer("/chunk_grid/name").and_then(Value::as_str) == Some("regular"),
            chunk_shape: dims(meta.pointer("/chunk_grid/configuration/chunk_shape")),
            codecs: meta
                .get("codecs")
                .and_then(Value::as_array)
                .map_or_else(Vec::new, |cs| cs.iter().map(Step::parse).collect()),
        }
    }

    /// The sharding codec, when it is the whole top-level chain.
    pub(crate) fn sharding(&self) -> Option<&Sharding> {
        match self.codecs.as_slice() {
            [Step::Sharding(s)] => Some(s),
            _ => None,
        }
    }

    /// The chain each (inner) chunk is encoded with.
    pub(crate) fn inner(&self) -> &[Step] {
        self.sharding().map_or(&self.codecs, |s| &s.codecs)
    }

    /// Whether any codec of the chain (a shard's included) may compress.
    pub(crate) fn compresses(&self) -> bool {
        self.codecs.iter().any(Step::compresses)
    }

    /// The configuration the chain implies: compressor, chunk and shard
    /// rows, and whether (inner) chunks end in a checksum.
    pub(crate) fn config(&self) -> ZarrArrayConfig {
        let outer = self.chunk_shape.as_ref().and_then(|s| s.first().copied());
        let mut cfg = ZarrArrayConfig { chunk_size: outer, ..Default::default() };
        if let Some(s) = self.sharding() {
            cfg.shard_size = outer;
            cfg.chunk_size = s.chunk_shape.as_ref().and_then(|c| c.first().copied());
        }
        let inner = self.inner();
        cfg.checksum = Some(matches!(inner.last(), Some(Step::Crc32c)));
        cfg.codec = Some(
            inner
                .iter()
                .rev()
                .find_map(|s| match *s {
                    Step::Zstd { level, .. } => Some(Codec::Zstd { level }),
                    Step::Gzip(level) => Some(Codec::Gzip { level }),
                    Step::Blosc { zstd: true, clevel, shuffle } => Some(Codec::BloscZstd { clevel, shuffle }),
                    Step::Blosc { zstd: false, clevel, shuffle } => Some(Codec::BloscLz4 { clevel, shuffle }),
                    _ => None,
                })
                .unwrap_or(Codec::None),
        );
        cfg
    }

    /// The inner chain as `bytes` (little endian, for elements of
    /// `elem_size` bytes) [+ `zstd`] [+ `crc32c`], if it is one. Always
    /// `None` on a big-endian host.
    pub(crate) fn by_hand(&self, elem_size: usize) -> Option<ByHand> {
        if !cfg!(target_endian = "little") {
            return None;
        }
        let zstd = |s: &Step| match *s {
            Step::Zstd { level, checksum } => Some((level, checksum)),
            _ => None,
        };
        match self.inner() {
            [b] if b.is_little(elem_size) => Some(ByHand { zstd: None, crc32c: false }),
            [b, Step::Crc32c] if b.is_little(elem_size) => Some(ByHand { zstd: None, crc32c: true }),
            [b, z] if b.is_little(elem_size) => Some(ByHand { zstd: Some(zstd(z)?), crc32c: false }),
            [b, z, Step::Crc32c] if b.is_little(elem_size) => Some(ByHand { zstd: Some(zstd(z)?), crc32c: true }),
            _ => None,
        }
    }

    /// The sharding, when it splits rows only (dimension 0, a whole number
    /// of inner chunks per shard) and its index is `bytes` (little endian)
    /// [+ `crc32c`] at a known end: the shards this crate reads and extends
    /// itself.
    pub(crate) fn row_shards(&self) -> Option<RowShards> {
        let s = self.sharding()?;
        let (outer, inner) = (self.chunk_shape.as_ref()?, s.chunk_shape.as_ref()?);
        if outer.len() != inner.len() || outer.get(1..) != inner.get(1..) {
            return None;
        }
        let (&o, &i) = (outer.first()?, inner.first()?);
        if i == 0 || o % i != 0 {
            return None;
        }
        let index_crc32c = match s.index_codecs.as_slice() {
            [b] if b.is_little(8) => false,
            [b, Step::Crc32c] if b.is_little(8) => true,
            _ => return None,
        };
        Some(RowShards { inner_rows: i, inner_per_shard: o / i, index_at_end: s.index_at_end?, index_crc32c })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The reference toolkit's sharded layout (zarr-python 3.1's metadata).
    fn toolkit_sharded() -> Value {
        json!({
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [256, 3]}},
            "codecs": [{"name": "sharding_indexed", "configuration": {
                "chunk_shape": [64, 3],
                "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                           {"name": "zstd", "configuration": {"level": 3, "checksum": false}}],
                "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
                "index_location": "end"}}]
        })
    }

    #[test]
    fn one_parse_answers_every_question() {
        let c = ChainSpec::parse(&toolkit_sharded());
        assert!(c.regular && c.compresses());
        let cfg = c.config();
        assert_eq!((cfg.chunk_size, cfg.shard_size, cfg.checksum), (Some(64), Some(256), Some(false)));
        assert_eq!(cfg.codec, Some(Codec::Zstd { level: 3 }));
        assert_eq!(c.by_hand(4), Some(ByHand { zstd: Some((3, false)), crc32c: false }));
        let shards = RowShards { inner_rows: 64, inner_per_shard: 4, index_at_end: true, index_crc32c: true };
        assert_eq!(c.row_shards(), Some(shards));
    }

    #[test]
    fn bare_names_big_endian_and_unknown_codecs() {
        let plain = ChainSpec::parse(&json!({
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [10]}},
            "codecs": [{"name": "bytes"}, "crc32c"]}));
        assert!(!plain.compresses());
        assert_eq!(plain.by_hand(1), Some(ByHand { zstd: None, crc32c: true }));
        assert_eq!(plain.by_hand(8), None, "an unstated endianness is only fine for single bytes");
        assert_eq!(plain.config().codec, Some(Codec::None));
        let big = ChainSpec::parse(&json!({"codecs": [{"name": "bytes", "configuration": {"endian": "big"}}]}));
        assert_eq!(big.by_hand(4), None);
        let located = ChainSpec::parse(&json!({"codecs": [
            {"name": "bytes", "configuration": {"endian": "little"}},
            {"name": "crc32c", "configuration": {"location": "end"}}]}));
        assert_eq!(located.by_hand(4), None, "numcodecs' crc32c is not Zarr v3's");
        assert!(located.compresses(), "an unknown codec may compress");
    }

    #[test]
    fn written_steps_read_back_as_the_setting() {
        for codec in [
            Codec::None,
            Codec::Zstd { level: 5 },
            Codec::Gzip { level: 4 },
            Codec::BloscLz4 { clevel: 3, shuffle: Shuffle::BitShuffle },
            Codec::BloscZstd { clevel: 7, shuffle: Shuffle::NoShuffle },
        ] {
            let mut codecs = vec![Step::Bytes(Some(true))];
            codecs.extend(steps_for(codec, true));
            let c = ChainSpec { regular: true, chunk_shape: Some(vec![8]), codecs };
            assert_eq!((c.config().codec, c.config().checksum), (Some(codec), Some(true)), "{codec:?}");
        }
    }
}
