//! What a store may claim: the size checks the reader makes before it
//! allocates anything a store's metadata asks for.
//!
//! A store's metadata is a claim: `num_samples`, the pointers, shapes and
//! chunk shapes are numbers anyone can write, and believed blindly they make
//! the reader allocate exabytes (an abort), overflow its size arithmetic or
//! loop for ages. So, before reading:
//!
//! - all size arithmetic is checked (an overflow is an error, not a wrap);
//! - an inner chunk decodes to at most [`MAX_CHUNK_BYTES`], and a shard index
//!   is at most that large too;
//! - the row counts a store claims (samples, atoms, edges: what
//!   `num_samples` and the pointer values set) must be backed by chunk files
//!   of at least one array on that axis: a chunk file of `L` bytes decodes to
//!   at most `L` bytes uncompressed, or `L` x [`MAX_EXPANSION`] compressed,
//!   and never to more than its chunk shape; up to [`UNBACKED_ROWS`] rows
//!   may be claimed without files (fill values);
//! - a field's bytes (rows x row width) must be backed by its own files,
//!   except [`FILL_ROW_BYTES`] per row of fill values (an all-zero field is
//!   never written by zarr-python, whatever its size: the toolkit's stores
//!   hold `velocities` that way).
//!
//! zarrs' own `zstd` and `blosc` decoders size their output from the frame
//! header, which a damaged chunk can set to anything; [`install_bounded_codecs`]
//! replaces them (zarrs' runtime codec registry) with ones that never produce
//! more than the chunk's decoded size.

use std::borrow::Cow;
use std::num::NonZeroU64;
use std::sync::Arc;

use zarrs::array::{
    Array, ArrayBytesRaw, BytesRepresentation, BytesToBytesCodecTraits, CodecError, CodecMetadataOptions, CodecOptions,
    CodecTraits, RecommendedConcurrency,
};
use zarrs::plugin::{ExtensionName, ZarrVersion};

use crate::data::DType;
use crate::error::{Error, Result};
use crate::location::Location;
use crate::store::codec::ChainSpec;

/// Largest decoded inner chunk (and shard index) the reader accepts: 256 MiB.
/// zarr-python's default chunks stay under 64 MiB; the reference layout's
/// inner chunks are ~120 KB.
pub const MAX_CHUNK_BYTES: u64 = 256 << 20;

/// The most bytes one stored byte may decode to in a compressed chain: a
/// zstd RLE block holds 128 KiB in 4 bytes (gzip and blosc-lz4 reach less).
pub const MAX_EXPANSION: u64 = 32768;

/// Rows an axis may claim without any chunk file behind them.
pub const UNBACKED_ROWS: u64 = 1 << 20;

/// Bytes per row a field may hold in fill values (absent chunks) beyond what
/// its files back: 8 KiB, e.g. a `[N, 1024]` float64 field of zeros.
pub const FILL_ROW_BYTES: u64 = 8 << 10;

/// The checked sizes of one array, along dimension 0 (the reader's axis).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Geometry {
    /// Elements per row (product of the trailing dimensions).
    pub row_elems: usize,
    /// Bytes per row.
    pub row_bytes: usize,
    /// Rows per inner chunk (the decode granularity).
    pub chunk_rows: u64,
    /// Rows per stored chunk file (the shard, when sharded).
    pub file_rows: u64,
    /// Whether the chain compresses (some codec other than bytes, crc32c,
    /// transpose and sharding).
    pub compressed: bool,
}

fn bad(store: &Location, rel: &str, reason: impl Into<String>) -> Error {
    Error::inconsistent(store, rel, reason)
}

/// Checks the shape, chunk grid and codecs (`chain`, parsed from its
/// metadata) of an opened array: every size
/// the reader derives from them fits its integer type, an inner chunk
/// decodes to at most [`MAX_CHUNK_BYTES`], and a shard index is no larger.
pub(crate) fn geometry<T: ?Sized>(
    store: &Location,
    rel: &str,
    array: &Array<T>,
    dtype: DType,
    chain: &ChainSpec,
) -> Result<Geometry> {
    use zarrs::array::ArrayShardedExt;
    let shape = array.shape();
    if shape.is_empty() {
        return Err(bad(store, rel, "a 0-dimensional array (expected rows along dimension 0)"));
    }
    if !chain.regular {
        return Err(bad(store, rel, "the chunk grid is not regular"));
    }
    let overflow = |what: &str| bad(store, rel, format!("{what} overflows: shape {shape:?}"));
    let row_elems = shape[1..]
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .and_then(|e| usize::try_from(e).ok())
        .ok_or_else(|| overflow("the row size"))?;
    let row_bytes = row_elems.checked_mul(dtype.size()).ok_or_else(|| overflow("the row size in bytes"))?;
    let outer = array
        .chunk_shape(&vec![0; array.dimensionality()])
        .map_err(|e| bad(store, rel, format!("chunk shape: {e}")))?;
    let inner = array.effective_subchunk_shape().unwrap_or_else(|| outer.clone());
    if inner.len() != shape.len() || outer.len() != shape.len() {
        return Err(bad(store, rel, format!("chunk shape {outer:?} / {inner:?} for an array of shape {shape:?}")));
    }
    let elems = |s: &[NonZeroU64]| s.iter().try_fold(1u64, |acc, d| acc.checked_mul(d.get()));
    let chunk_bytes = elems(&inner).and_then(|e| e.checked_mul(dtype.size() as u64));
    match chunk_bytes {
        Some(b) if b <= MAX_CHUNK_BYTES => {}
        _ => {
            return Err(bad(
                store,
                rel,
                format!("an inner chunk of shape {inner:?} {dtype} exceeds the {MAX_CHUNK_BYTES}-byte limit"),
            ));
        }
    }
    // The reader decodes an inner chunk into chunk_rows whole rows of the
    // array (its trailing dimensions, which the chunk's may not match).
    if inner[0].get().checked_mul(row_bytes as u64).is_none_or(|b| b > MAX_CHUNK_BYTES) {
        return Err(bad(
            store,
            rel,
            format!("{} rows of {row_bytes} bytes per inner chunk exceed the {MAX_CHUNK_BYTES}-byte limit", inner[0]),
        ));
    }
    if outer != inner {
        // Sharded: 16 index bytes per inner chunk (zarrs sizes the index so).
        let per_shard =
            outer.iter().zip(&inner).try_fold(1u64, |acc, (o, i)| acc.checked_mul(o.get().div_ceil(i.get())));
        if per_shard.and_then(|k| k.checked_mul(16)).is_none_or(|b| b > MAX_CHUNK_BYTES) {
            return Err(bad(
                store,
                rel,
                format!(
                    "a shard of shape {outer:?} in inner chunks of {inner:?} needs an index over the {MAX_CHUNK_BYTES}-byte limit"
                ),
            ));
        }
    }
    Ok(Geometry {
        row_elems,
        row_bytes,
        chunk_rows: inner[0].get(),
        file_rows: outer[0].get(),
        compressed: chain.compresses(),
    })
}

/// How many bytes the chunk files of array `rel` can decode to, at most,
/// counting until the third argument is reached: the reader's byte source
/// answers it (a directory listing, an object listing, or the sizes of the
/// chunk objects the grid names). See [`backed_by`].
pub(crate) type Backing<'a> = &'a dyn Fn(&str, &Geometry, u64) -> Result<u64>;

/// Bytes chunk files of the given sizes can decode to, at most (see the
/// module docs), counting until `enough` is reached.
pub(crate) fn backed_by(sizes: impl IntoIterator<Item = u64>, g: &Geometry, enough: u64) -> u64 {
    let ratio = if g.compressed { MAX_EXPANSION } else { 1 };
    let per_file = g.file_rows.saturating_mul(g.row_bytes.max(1) as u64);
    let mut total = 0u64;
    for len in sizes {
        total = total.saturating_add(len.saturating_mul(ratio).min(per_file));
        if total >= enough {
            break;
        }
    }
    total
}

/// Checks that `rows` rows of one axis are backed by some array's chunk
/// files: `arrays` are the axis's arrays (path, geometry), `what` names the
/// claim for the error (which names `claimed_by`).
pub(crate) fn check_rows(
    store: &Location,
    claimed_by: &str,
    what: &str,
    rows: u64,
    arrays: &[(&str, Geometry)],
    backed: Backing<'_>,
) -> Result<()> {
    if rows <= UNBACKED_ROWS {
        return Ok(());
    }
    let need = rows - UNBACKED_ROWS;
    let mut best = 0u64;
    for (rel, g) in arrays {
        if g.row_bytes == 0 {
            continue;
        }
        let row_bytes = g.row_bytes as u64;
        let held = backed(rel, g, need.saturating_mul(row_bytes))? / row_bytes;
        if held >= need {
            return Ok(());
        }
        best = best.max(held);
    }
    Err(bad(
        store,
        claimed_by,
        format!(
            "{what} claims {rows} rows, but the chunk files of its arrays hold at most {} \
             (atomzarr's store size limits)",
            best.saturating_add(UNBACKED_ROWS)
        ),
    ))
}

/// Checks that array `rel`'s `rows` rows are backed by its files, beyond
/// [`FILL_ROW_BYTES`] of fill values per row.
pub(crate) fn check_field_bytes(
    store: &Location,
    rel: &str,
    rows: u64,
    g: &Geometry,
    backed: Backing<'_>,
) -> Result<()> {
    let claimed = rows
        .checked_mul(g.row_bytes as u64)
        .ok_or_else(|| bad(store, rel, format!("{rows} rows of {} bytes overflow", g.row_bytes)))?;
    let fill = rows.saturating_mul(FILL_ROW_BYTES);
    if claimed <= fill {
        return Ok(());
    }
    let held = backed(rel, g, claimed - fill)?;
    if held.saturating_add(fill) >= claimed {
        return Ok(());
    }
    Err(bad(
        store,
        rel,
        format!(
            "{rows} rows of {} bytes claim {claimed} bytes, but its chunk files hold at most {held} \
             (and fill values at most {FILL_ROW_BYTES} per row; atomzarr's store size limits)",
            g.row_bytes
        ),
    ))
}

// ------------------------------------------------------------ bounded codecs

/// Which check a [`Bounded`] codec makes before decoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Zstd,
    Blosc,
}

/// A zarrs bytes-to-bytes codec whose decoder never allocates more than the
/// decoded representation allows (zarrs' zstd and blosc decoders allocate
/// what the frame header says). Everything else is the wrapped codec's.
#[derive(Debug)]
struct Bounded {
    inner: Arc<dyn BytesToBytesCodecTraits>,
    kind: Kind,
}

impl Bounded {
    /// The most bytes a decode may produce.
    fn cap(decoded: &BytesRepresentation) -> u64 {
        match decoded {
            BytesRepresentation::FixedSize(n) | BytesRepresentation::BoundedSize(n) => *n,
            // Only after another unbounded codec (nested compressors): the
            // chunk limit is still a bound on anything the reader accepts.
            BytesRepresentation::UnboundedSize => MAX_CHUNK_BYTES * 2,
        }
    }
}

impl ExtensionName for Bounded {
    fn name(&self, version: ZarrVersion) -> Option<Cow<'static, str>> {
        self.inner.name(version)
    }
}

impl CodecTraits for Bounded {
    fn as_any(&self) -> &dyn std::any::Any {
        self.inner.as_any()
    }

    fn configuration(
        &self,
        version: ZarrVersion,
        options: &CodecMetadataOptions,
    ) -> Option<zarrs::metadata::Configuration> {
        self.inner.configuration(version, options)
    }

    fn partial_decoder_capability(&self) -> zarrs::array::codec::api::PartialDecoderCapability {
        self.inner.partial_decoder_capability()
    }

    fn partial_encoder_capability(&self) -> zarrs::array::codec::api::PartialEncoderCapability {
        self.inner.partial_encoder_capability()
    }
}

impl BytesToBytesCodecTraits for Bounded {
    fn into_dyn(self: Arc<Self>) -> Arc<dyn BytesToBytesCodecTraits> {
        self
    }

    fn recommended_concurrency(&self, decoded: &BytesRepresentation) -> Result<RecommendedConcurrency, CodecError> {
        self.inner.recommended_concurrency(decoded)
    }

    fn encoded_representation(&self, decoded: &BytesRepresentation) -> BytesRepresentation {
        self.inner.encoded_representation(decoded)
    }

    fn encode<'a>(&self, decoded: ArrayBytesRaw<'a>, options: &CodecOptions) -> Result<ArrayBytesRaw<'a>, CodecError> {
        self.inner.encode(decoded, options)
    }

    fn decode<'a>(
        &self,
        encoded: ArrayBytesRaw<'a>,
        decoded: &BytesRepresentation,
        options: &CodecOptions,
    ) -> Result<ArrayBytesRaw<'a>, CodecError> {
        let cap = Self::cap(decoded);
        match self.kind {
            Kind::Zstd => {
                // Into a buffer of the chunk's size: zstd fails with
                // "destination buffer is too small" rather than grow it.
                let cap = usize::try_from(cap)
                    .map_err(|_| CodecError::Other(format!("zstd: output bound {cap} too large")))?;
                let out = crate::store::chunk_bytes::zstd_decode(&encoded, cap)
                    .map_err(|e| CodecError::Other(format!("zstd: {e} (at most {cap} bytes expected)")))?;
                Ok(Cow::Owned(out))
            }
            Kind::Blosc => {
                // Blosc 1 header: bytes 4..8 are the decoded size (u32 LE),
                // which zarrs allocates before looking further.
                let claimed = encoded.get(4..8).and_then(|b| b.try_into().ok()).map(u32::from_le_bytes);
                match claimed {
                    Some(n) if u64::from(n) <= cap => self.inner.decode(encoded, decoded, options),
                    Some(n) => {
                        Err(CodecError::Other(format!("blosc: header claims {n} bytes, at most {cap} expected")))
                    }
                    None => {
                        Err(CodecError::Other(format!("blosc: {} bytes is shorter than its header", encoded.len())))
                    }
                }
            }
        }
    }
}

/// The registry handles of the bounded decoders while they are installed.
static INSTALLED: std::sync::Mutex<Option<Vec<zarrs::array::codec::api::CodecRuntimeRegistryHandleV3>>> =
    std::sync::Mutex::new(None);

/// Set by `set_bounded_codecs(false)`: opening a store no longer installs them.
static OPTED_OUT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Registers bounded `zstd` and `blosc` decoders with zarrs' runtime codec
/// registry, unless [`set_bounded_codecs`]`(false)` was called. Runtime
/// plugins take precedence over zarrs' built-in ones, so this affects every
/// zarrs array the process opens afterwards, atomzarr's or not. Encoding,
/// metadata and the decoded bytes are zarrs' own; only a frame that claims
/// more than its chunk's decoded size is refused instead of allocated.
///
/// zarrs builds each array's codec chain from the registry and offers no
/// public way to hand one array its own chain, so the bounds cannot be
/// attached per array.
pub(crate) fn install_bounded_codecs() {
    if OPTED_OUT.load(std::sync::atomic::Ordering::Acquire) {
        return;
    }
    let mut installed = INSTALLED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if installed.is_none() {
        *installed = Some(register_bounded());
    }
}

/// Whether opening a store installs atomzarr's bounded `zstd` and `blosc`
/// decoders in zarrs' process-wide codec registry (the default: `true`).
///
/// A damaged or hostile chunk can claim any decoded size in its frame
/// header, and zarrs' own decoders allocate what it claims; the bounded
/// ones refuse anything larger than the chunk. They are installed when the
/// first store is opened and then serve every zarrs array of the process.
/// `set_bounded_codecs(false)` removes them and keeps later opens from
/// installing them again (zarrs' own decoders serve everything);
/// `set_bounded_codecs(true)` installs them now.
///
/// ```
/// atomzarr::store::set_bounded_codecs(false); // zarrs' own decoders for the whole process
/// atomzarr::store::set_bounded_codecs(true);
/// ```
pub fn set_bounded_codecs(enabled: bool) {
    use zarrs::array::codec::api::unregister_codec_v3;
    OPTED_OUT.store(!enabled, std::sync::atomic::Ordering::Release);
    let mut installed = INSTALLED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    match (enabled, installed.take()) {
        (true, None) => *installed = Some(register_bounded()),
        (true, Some(handles)) => *installed = Some(handles),
        (false, Some(handles)) => handles.iter().for_each(|h| {
            unregister_codec_v3(h);
        }),
        (false, None) => {}
    }
}

fn register_bounded() -> Vec<zarrs::array::codec::api::CodecRuntimeRegistryHandleV3> {
    use zarrs::array::Codec;
    use zarrs::array::CodecTraitsV3;
    use zarrs::array::codec::api::{CodecRuntimePluginV3, register_codec_v3};
    use zarrs::array::codec::{BloscCodec, ZstdCodec};
    [("zstd", Kind::Zstd), ("blosc", Kind::Blosc)]
        .into_iter()
        .map(|(name, kind)| {
            register_codec_v3(CodecRuntimePluginV3::new(
                move |n: &str| n == name,
                move |metadata| {
                    let codec = match kind {
                        Kind::Zstd => <ZstdCodec as CodecTraitsV3>::create(metadata)?,
                        Kind::Blosc => <BloscCodec as CodecTraitsV3>::create(metadata)?,
                    };
                    match codec {
                        Codec::BytesToBytes(inner) => Ok(Codec::BytesToBytes(Arc::new(Bounded { inner, kind }))),
                        other => Ok(other),
                    }
                },
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_fit_the_reference_stores() {
        const { assert!(MAX_CHUNK_BYTES >= 12 * 500_000) }; // a reference shard's positions, whole
        assert_eq!(MAX_EXPANSION, 128 * 1024 / 4); // zstd's RLE block: 128 KiB from 4 bytes
        assert_eq!(UNBACKED_ROWS, 1 << 20);
    }
}
