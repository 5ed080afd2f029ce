//! Opening and creating the zarrs arrays of a store: the codec chain a
//! [`ResolvedArrayConfig`] asks for (and the configuration an existing
//! array's metadata implies), dtypes and chunk shapes.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use zarrs::array::codec::{BloscCodec, Crc32cCodec, GzipCodec, ZstdCodec};
use zarrs::array::{Array, ArrayBuilder, ArrayMetadata};
use zarrs::storage::ReadableStorageTraits;

use crate::data::DType;
use crate::error::{Error, Result};
use crate::location::Location;
use crate::store::config::{Codec, ResolvedArrayConfig, Shuffle, ZarrArrayConfig};
use crate::store::durable::Store;

/// Whether codec metadata `c` is the Zarr v3 `crc32c` codec (checksum last,
/// the only form it has; `numcodecs.crc32c` with a `location` is not it).
pub(crate) fn is_crc32c(c: &Value) -> bool {
    c == "crc32c"
        || (c.get("name").and_then(|n| n.as_str()) == Some("crc32c")
            && c.get("configuration").is_none_or(|conf| conf.as_object().is_some_and(|m| m.is_empty())))
}

/// Opens a filesystem store handle.
pub fn open_store(path: &Path) -> Result<Arc<Store>> {
    Store::new(path).map(Arc::new).map_err(|e| Error::zarr(path, "/", e))
}

/// Opens an array of the store (with zarrs' zstd and blosc decoders
/// bounded unless the user opted out, see [`crate::store::set_bounded_codecs`]).
pub fn open_array<T: ?Sized + ReadableStorageTraits + 'static>(
    store_path: &Location,
    store: &Arc<T>,
    rel: &str,
) -> Result<Array<T>> {
    crate::store::limits::install_bounded_codecs();
    // Through the store, not the filesystem: a writer's transaction may hold
    // the array's metadata staged, not yet on disk.
    let key = zarrs::storage::StoreKey::new(format!("{rel}/zarr.json")).map_err(|e| Error::zarr(store_path, rel, e))?;
    if store.size_key(&key).map_err(|e| Error::zarr(store_path, rel, e))?.is_none() {
        return Err(Error::format(store_path, format!("missing array {rel}")));
    }
    let array = Array::open(store.clone(), &format!("/{rel}")).map_err(|e| Error::zarr(store_path, rel, e))?;
    codecs_as_objects(store_path, store, rel, array)
}

/// `array` with every top-level codec that has no configuration (`crc32c`)
/// given an empty one.
///
/// Why: zarrs reads `{"name": "crc32c"}` as a name-only codec, and when this
/// array's metadata is stored again (an append resizing it) writes it back as
/// the bare string `"crc32c"`, Zarr 3.1 shorthand that zarr-python 3.1 (the
/// reference toolkit's Zarr) refuses: "Expected dict, got <class 'str'>". An
/// empty configuration makes zarrs write the object form again. (Codecs
/// nested in `sharding_indexed` are kept as written.)
fn codecs_as_objects<T: ?Sized + ReadableStorageTraits + 'static>(
    store_path: &Location,
    store: &Arc<T>,
    rel: &str,
    array: Array<T>,
) -> Result<Array<T>> {
    use zarrs::metadata::Configuration;
    use zarrs::metadata::v3::MetadataV3;
    let ArrayMetadata::V3(meta) = array.metadata() else { return Ok(array) };
    if meta.codecs.iter().all(|c| c.configuration().is_some()) {
        return Ok(array);
    }
    let mut meta = meta.clone();
    for c in &mut meta.codecs {
        if c.configuration().is_none() {
            *c = MetadataV3::new_with_configuration(c.name(), Configuration::default())
                .with_must_understand(c.must_understand());
        }
    }
    Array::new_with_metadata(store.clone(), &format!("/{rel}"), ArrayMetadata::V3(meta))
        .map_err(|e| Error::zarr(store_path, rel, e))
}

/// The dtype of an opened array.
pub fn array_dtype<T: ?Sized>(store_path: &Location, rel: &str, array: &Array<T>) -> Result<DType> {
    let name = match array.metadata() {
        ArrayMetadata::V3(m) => m.data_type.name().to_string(),
        ArrayMetadata::V2(_) => return Err(Error::format(store_path, format!("{rel} is a Zarr v2 array"))),
    };
    DType::from_name(&name).ok_or_else(|| Error::inconsistent(store_path, rel, format!("unsupported data type {name}")))
}

/// Builds (and stores the metadata of) a new array at `rel`. Every row not
/// written reads as `fill` (one element's little-endian bytes; `None`: zero).
/// A field that only later frames carry is created with a fill over the
/// rows already in the store (NaN for floats), without writing them.
pub fn create_array(
    store_path: &Path,
    store: &Arc<Store>,
    rel: &str,
    dtype: DType,
    shape: Vec<u64>,
    config: &ResolvedArrayConfig,
    fill: Option<&[u8]>,
) -> Result<Array<Store>> {
    config.validate(rel)?;
    let row_elems: u64 = shape.iter().skip(1).product();
    let row_bytes = (row_elems as usize).max(1) * dtype.size();
    let chunk = config.chunk_rows(row_bytes);
    let outer = config.shard_size.unwrap_or(chunk);
    let mut chunk_shape = vec![outer];
    chunk_shape.extend(shape.iter().skip(1).map(|&d| d.max(1)));
    // A byte-vector fill value must go in as `FillValue` bytes: zarrs reads a
    // plain `Vec<u8>` as JSON array metadata, which no scalar dtype accepts.
    let fill = zarrs::array::FillValue::new(fill.map_or_else(|| vec![0u8; dtype.size()], <[u8]>::to_vec));
    let mut builder = ArrayBuilder::new(shape.clone(), chunk_shape.clone(), dtype.name(), fill);
    let mut b2b: Vec<Arc<dyn zarrs::array::BytesToBytesCodecTraits>> = match config.codec {
        Codec::None => vec![],
        Codec::Zstd { level } => vec![Arc::new(ZstdCodec::new(level, false))],
        Codec::Gzip { level } => {
            vec![Arc::new(GzipCodec::new(level).map_err(|e| Error::Config(format!("{rel}: {e}")))?)]
        }
        Codec::BloscLz4 { clevel, shuffle } | Codec::BloscZstd { clevel, shuffle } => {
            use zarrs::array::codec::{BloscCompressionLevel, BloscCompressor, BloscShuffleMode};
            let cname = if matches!(config.codec, Codec::BloscLz4 { .. }) {
                BloscCompressor::LZ4
            } else {
                BloscCompressor::Zstd
            };
            let mode = match shuffle {
                Shuffle::NoShuffle => BloscShuffleMode::NoShuffle,
                Shuffle::Shuffle => BloscShuffleMode::Shuffle,
                Shuffle::BitShuffle => BloscShuffleMode::BitShuffle,
            };
            let clevel = BloscCompressionLevel::try_from(clevel)
                .map_err(|_| Error::Config(format!("{rel}: blosc clevel {clevel}")))?;
            vec![Arc::new(
                BloscCodec::new(cname, clevel, None, mode, Some(dtype.size()))
                    .map_err(|e| Error::Config(format!("{rel}: {e}")))?,
            )]
        }
    };
    if config.checksum {
        // Last in the chain, so the checksum covers the encoded bytes and is
        // checked before any decompressor sees them. With sharding this is
        // the inner chain: one checksum per inner chunk, and a read of one
        // inner chunk still reads only its bytes.
        b2b.push(Arc::new(Crc32cCodec::new()));
    }
    builder.bytes_to_bytes_codecs(b2b);
    if config.shard_size.is_some() {
        let mut inner = vec![chunk];
        inner.extend(chunk_shape.iter().skip(1));
        builder.subchunk_shape(inner);
    }
    let array = builder.build(store.clone(), &format!("/{rel}")).map_err(|e| Error::zarr(store_path, rel, e))?;
    array.store_metadata().map_err(|e| Error::zarr(store_path, rel, e))?;
    Ok(array)
}

/// Builds (and stores the metadata of) a new 1-d string array at `rel`
/// (Zarr v3 `string`, `vlen-utf8`, then the configured compressor and
/// checksum; fill value `""`), `rows` long. Unsharded: a string row is a
/// label of a few bytes, so one chunk holds `chunk_size` rows (default
/// 65,536).
pub fn create_string_array(
    store_path: &Path,
    store: &Arc<Store>,
    rel: &str,
    rows: u64,
    config: &ResolvedArrayConfig,
) -> Result<Array<Store>> {
    config.validate(rel)?;
    let chunk = config.chunk_size.unwrap_or(1 << 16).max(1);
    let mut builder = ArrayBuilder::new(vec![rows], vec![chunk], zarrs::array::data_type::string(), "");
    let mut b2b: Vec<Arc<dyn zarrs::array::BytesToBytesCodecTraits>> = match config.codec {
        Codec::None => vec![],
        Codec::Gzip { level } => {
            vec![Arc::new(GzipCodec::new(level).map_err(|e| Error::Config(format!("{rel}: {e}")))?)]
        }
        // Blosc's shuffle is for fixed-size elements: strings take zstd.
        Codec::Zstd { level } => vec![Arc::new(ZstdCodec::new(level, false))],
        Codec::BloscLz4 { clevel, .. } | Codec::BloscZstd { clevel, .. } => {
            vec![Arc::new(ZstdCodec::new(i32::from(clevel), false))]
        }
    };
    if config.checksum {
        b2b.push(Arc::new(Crc32cCodec::new()));
    }
    builder.bytes_to_bytes_codecs(b2b);
    let array = builder.build(store.clone(), &format!("/{rel}")).map_err(|e| Error::zarr(store_path, rel, e))?;
    array.store_metadata().map_err(|e| Error::zarr(store_path, rel, e))?;
    Ok(array)
}

/// What an existing array's metadata says about its configuration: codec,
/// chunk and shard rows, and whether its (inner) chunks end in a `crc32c`
/// checksum. Used by `inspect` and to keep settings on defragment.
pub fn infer_config<T: ?Sized>(array: &Array<T>) -> ZarrArrayConfig {
    let meta = serde_json::to_value(array.metadata()).unwrap_or(Value::Null);
    let outer = meta.pointer("/chunk_grid/configuration/chunk_shape/0").and_then(Value::as_u64);
    let mut codecs = meta.get("codecs").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut cfg = ZarrArrayConfig { chunk_size: outer, ..Default::default() };
    if let Some(shard) = codecs.iter().find(|c| c["name"] == "sharding_indexed").cloned() {
        cfg.shard_size = outer;
        cfg.chunk_size = shard.pointer("/configuration/chunk_shape/0").and_then(Value::as_u64);
        codecs = shard.pointer("/configuration/codecs").and_then(Value::as_array).cloned().unwrap_or_default();
    }
    cfg.codec = Some(Codec::None);
    // Only a checksum last in the chain is one `create_array` would write.
    // (A codec without configuration may be the bare string `"crc32c"`.)
    cfg.checksum = Some(codecs.last().is_some_and(|c| c == "crc32c" || c["name"] == "crc32c"));
    for c in &codecs {
        let conf = &c["configuration"];
        let codec = match c["name"].as_str() {
            Some("zstd") => Codec::Zstd { level: conf["level"].as_i64().unwrap_or(0) as i32 },
            Some("gzip") => Codec::Gzip { level: conf["level"].as_u64().unwrap_or(5) as u32 },
            Some("blosc") => {
                let clevel = conf["clevel"].as_u64().unwrap_or(5) as u8;
                let shuffle = match conf["shuffle"].as_str() {
                    Some("noshuffle") => Shuffle::NoShuffle,
                    Some("bitshuffle") => Shuffle::BitShuffle,
                    _ => Shuffle::Shuffle,
                };
                if conf["cname"] == "zstd" {
                    Codec::BloscZstd { clevel, shuffle }
                } else {
                    Codec::BloscLz4 { clevel, shuffle }
                }
            }
            _ => continue,
        };
        cfg.codec = Some(codec);
    }
    cfg
}
