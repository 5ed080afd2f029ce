//! Opening and creating the zarrs arrays of a store: dtypes, chunk shapes,
//! and the codec chain a [`ResolvedArrayConfig`] asks for (described by
//! [`crate::store::codec`]).

use std::path::Path;
use std::sync::Arc;

use zarrs::array::{Array, ArrayBuilder, ArrayMetadata};
use zarrs::storage::ReadableStorageTraits;

use crate::data::DType;
use crate::error::{Error, Result};
use crate::location::Location;
use crate::store::codec::{ChainSpec, steps_for};
use crate::store::config::{Codec, ResolvedArrayConfig, ZarrArrayConfig};
use crate::store::durable::Store;

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
    let b2b = steps_for(config.codec, config.checksum)
        .iter()
        .map(|s| s.to_zarrs(rel, dtype.size()))
        .collect::<Result<Vec<_>>>()?;
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
    // Blosc's shuffle is for fixed-size elements: strings take zstd.
    let codec = match config.codec {
        Codec::BloscLz4 { clevel, .. } | Codec::BloscZstd { clevel, .. } => Codec::Zstd { level: i32::from(clevel) },
        other => other,
    };
    let b2b = steps_for(codec, config.checksum).iter().map(|s| s.to_zarrs(rel, 1)).collect::<Result<Vec<_>>>()?;
    builder.bytes_to_bytes_codecs(b2b);
    let array = builder.build(store.clone(), &format!("/{rel}")).map_err(|e| Error::zarr(store_path, rel, e))?;
    array.store_metadata().map_err(|e| Error::zarr(store_path, rel, e))?;
    Ok(array)
}

/// What an existing array's metadata says about its configuration: codec,
/// chunk and shard rows, and whether its (inner) chunks end in a `crc32c`
/// checksum. Used by `inspect` and to keep settings on defragment.
pub fn infer_config<T: ?Sized>(array: &Array<T>) -> ZarrArrayConfig {
    ChainSpec::of(array).config()
}
