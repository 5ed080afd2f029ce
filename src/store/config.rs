//! Write configuration: codec, chunk and shard per group and per field.
//!
//! Layering (first set value wins): `field_overrides[name]`, then the group
//! default (`meta`, `core` or `custom`), then the library default
//! ([`ZarrArrayConfig::library_default`]). Every attribute is layered on its
//! own, so an override can change only the chunk size and keep the codec.
//!
//! ```
//! use atomzarr::{Codec, ZarrArrayConfig, ZarrWriteConfig};
//! let config = ZarrWriteConfig::default()
//!     .with_core(ZarrArrayConfig::default().with_codec(Codec::Zstd { level: 3 }).with_chunk_size(10_000).with_shard_size(500_000))
//!     .with_override("neighbor_list", ZarrArrayConfig::default().with_chunk_size(20_000));
//! config.validate().unwrap();
//! let json = serde_json::to_string(&config).unwrap();
//! assert_eq!(serde_json::from_str::<ZarrWriteConfig>(&json).unwrap(), config);
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::store::format::{self, StoreGroup};

/// Byte-shuffle mode of the blosc codecs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Shuffle {
    /// No shuffle.
    NoShuffle,
    /// Byte shuffle (the usual choice for floats).
    #[default]
    Shuffle,
    /// Bit shuffle.
    BitShuffle,
}

/// Compression codec applied after the `bytes` (little-endian) codec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "kebab-case")]
pub enum Codec {
    /// No compression.
    None,
    /// zstd at `level` (-7..=22; 0 means zstd's default, 3).
    Zstd {
        /// Compression level.
        level: i32,
    },
    /// blosc with the lz4 compressor.
    BloscLz4 {
        /// Compression level 0..=9.
        clevel: u8,
        /// Shuffle mode.
        shuffle: Shuffle,
    },
    /// blosc with the zstd compressor.
    BloscZstd {
        /// Compression level 0..=9.
        clevel: u8,
        /// Shuffle mode.
        shuffle: Shuffle,
    },
    /// gzip at `level` (0..=9).
    Gzip {
        /// Compression level.
        level: u32,
    },
}

impl Codec {
    /// The codec names [`Codec::from_name`] takes, as the reference
    /// toolkit's `nvalchemi-io-test --codec` spells them (`lz4` is blosc
    /// with lz4).
    pub const NAMES: [&'static str; 5] = ["zstd", "lz4", "blosc-zstd", "gzip", "none"];

    /// The codec named `name` (one of [`Codec::NAMES`]) at `level`; the blosc
    /// codecs byte-shuffle. Ignores `level` for `none`.
    ///
    /// # Errors
    /// [`Error::Config`] for another name or a level out of the codec's range.
    ///
    /// ```
    /// use atomzarr::{Codec, Shuffle};
    /// assert_eq!(Codec::from_name("zstd", 3)?, Codec::Zstd { level: 3 });
    /// assert_eq!(Codec::from_name("lz4", 5)?, Codec::BloscLz4 { clevel: 5, shuffle: Shuffle::Shuffle });
    /// assert!(Codec::from_name("lz4", 12).is_err());
    /// # Ok::<(), atomzarr::Error>(())
    /// ```
    pub fn from_name(name: &str, level: i32) -> Result<Codec> {
        let small = |what: &str| {
            u8::try_from(level)
                .ok()
                .filter(|l| *l <= 9)
                .ok_or_else(|| Error::Config(format!("{what} level {level} outside 0..=9")))
        };
        let codec = match name {
            "none" => Codec::None,
            "zstd" => Codec::Zstd { level },
            "lz4" => Codec::BloscLz4 { clevel: small("blosc")?, shuffle: Shuffle::Shuffle },
            "blosc-zstd" => Codec::BloscZstd { clevel: small("blosc")?, shuffle: Shuffle::Shuffle },
            "gzip" => Codec::Gzip { level: u32::from(small("gzip")?) },
            other => {
                return Err(Error::Config(format!("unknown codec {other:?} (one of {})", Codec::NAMES.join(", "))));
            }
        };
        codec.validate()?;
        Ok(codec)
    }

    /// Checks the level ranges.
    ///
    /// # Errors
    /// [`Error::Config`] when a zstd level is outside -7..=22, or a blosc or
    /// gzip level outside 0..=9.
    pub fn validate(&self) -> Result<()> {
        match *self {
            Codec::Zstd { level } if !(-7..=22).contains(&level) => {
                Err(Error::Config(format!("zstd level {level} outside -7..=22")))
            }
            Codec::BloscLz4 { clevel, .. } | Codec::BloscZstd { clevel, .. } if clevel > 9 => {
                Err(Error::Config(format!("blosc clevel {clevel} outside 0..=9")))
            }
            Codec::Gzip { level } if level > 9 => Err(Error::Config(format!("gzip level {level} outside 0..=9"))),
            _ => Ok(()),
        }
    }
}

impl std::fmt::Display for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Codec::None => write!(f, "none"),
            Codec::Zstd { level } => write!(f, "zstd({level})"),
            Codec::BloscLz4 { clevel, .. } => write!(f, "blosc-lz4({clevel})"),
            Codec::BloscZstd { clevel, .. } => write!(f, "blosc-zstd({clevel})"),
            Codec::Gzip { level } => write!(f, "gzip({level})"),
        }
    }
}

/// Per-array settings; `None` means "inherit from the next layer".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct ZarrArrayConfig {
    /// Compression codec.
    pub(crate) codec: Option<Codec>,
    /// Rows per (inner) chunk along dimension 0, on the array's own axis.
    pub(crate) chunk_size: Option<u64>,
    /// Rows per shard; a multiple of `chunk_size`. Unset: no sharding.
    pub(crate) shard_size: Option<u64>,
    /// Store chunks that hold only the fill value (Zarr skips them by default).
    pub(crate) write_empty_chunks: Option<bool>,
    /// End every chunk's codec chain (the inner chain of a sharded array)
    /// with a `crc32c` checksum, so a reader detects corrupted bytes instead
    /// of decoding them into wrong values. Unset: on.
    pub(crate) checksum: Option<bool>,
}

impl ZarrArrayConfig {
    /// What an unset attribute resolves to: zstd level 0 (Zarr's default),
    /// chunks of about 1 MiB decoded, no sharding, empty chunks skipped,
    /// a crc32c checksum per chunk.
    pub fn library_default() -> ResolvedArrayConfig {
        ResolvedArrayConfig {
            codec: Codec::Zstd { level: 0 },
            chunk_size: None,
            shard_size: None,
            write_empty_chunks: false,
            checksum: true,
        }
    }

    /// Sets the codec.
    pub fn with_codec(mut self, codec: Codec) -> Self {
        self.codec = Some(codec);
        self
    }

    /// Sets the chunk size (rows).
    pub fn with_chunk_size(mut self, rows: u64) -> Self {
        self.chunk_size = Some(rows);
        self
    }

    /// Sets the shard size (rows), enabling `sharding_indexed`.
    pub fn with_shard_size(mut self, rows: u64) -> Self {
        self.shard_size = Some(rows);
        self
    }

    /// Sets write_empty_chunks: when false (the default, as the toolkit
    /// writes), a chunk (or a shard's inner chunk) holding only the fill
    /// value is not stored at all, and reads as the fill value; when true,
    /// every chunk is stored. It applies to each write through the writer
    /// whose configuration has it (append, delete, add_custom, defragment).
    pub fn with_write_empty_chunks(mut self, yes: bool) -> Self {
        self.write_empty_chunks = Some(yes);
        self
    }

    /// Turns the per-chunk `crc32c` checksum on or off (on by default).
    ///
    /// Why crc32c rather than zstd's own `checksum: true`: it covers every
    /// codec (uncompressed, blosc and gzip chunks too), it is checked on the
    /// encoded bytes before any decompressor sees them, it is hardware
    /// accelerated, and zarr-python 3 (the reference toolkit's Zarr library)
    /// reads and verifies it. Turn it off only to write stores byte-identical
    /// to the reference toolkit's.
    ///
    /// ```
    /// use atomzarr::{ZarrArrayConfig, ZarrWriteConfig, store::format::StoreGroup};
    /// let config = ZarrWriteConfig::default()
    ///     .with_core(ZarrArrayConfig::default().with_checksum(false))
    ///     .with_override("energy", ZarrArrayConfig::default().with_checksum(true));
    /// assert!(!config.resolve(StoreGroup::Core, "positions").checksum);
    /// assert!(config.resolve(StoreGroup::Core, "energy").checksum);
    /// assert!(config.resolve(StoreGroup::Meta, "atoms_ptr").checksum); // library default
    /// ```
    pub fn with_checksum(mut self, yes: bool) -> Self {
        self.checksum = Some(yes);
        self
    }

    /// The codec, if set at this layer.
    pub fn codec(&self) -> Option<Codec> {
        self.codec
    }

    /// The chunk size (rows), if set at this layer.
    pub fn chunk_size(&self) -> Option<u64> {
        self.chunk_size
    }

    /// The shard size (rows), if set at this layer.
    pub fn shard_size(&self) -> Option<u64> {
        self.shard_size
    }

    /// Whether all-fill chunks are stored, if set at this layer.
    pub fn write_empty_chunks(&self) -> Option<bool> {
        self.write_empty_chunks
    }

    /// Whether chunks end with a `crc32c` checksum, if set at this layer.
    pub fn checksum(&self) -> Option<bool> {
        self.checksum
    }

    fn or(self, lower: ZarrArrayConfig) -> ZarrArrayConfig {
        ZarrArrayConfig {
            codec: self.codec.or(lower.codec),
            chunk_size: self.chunk_size.or(lower.chunk_size),
            shard_size: self.shard_size.or(lower.shard_size),
            write_empty_chunks: self.write_empty_chunks.or(lower.write_empty_chunks),
            checksum: self.checksum.or(lower.checksum),
        }
    }
}

/// A fully resolved array configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResolvedArrayConfig {
    /// Compression codec.
    pub codec: Codec,
    /// Rows per chunk; `None` picks about 1 MiB of decoded data per chunk.
    pub chunk_size: Option<u64>,
    /// Rows per shard, if sharded.
    pub shard_size: Option<u64>,
    /// Store all-fill-value chunks.
    pub write_empty_chunks: bool,
    /// End each chunk's codec chain with a `crc32c` checksum.
    pub checksum: bool,
}

impl ResolvedArrayConfig {
    /// The chunk row count for an array whose rows are `row_bytes` bytes.
    pub fn chunk_rows(&self, row_bytes: usize) -> u64 {
        const TARGET: usize = 1 << 20;
        self.chunk_size.unwrap_or_else(|| (TARGET / row_bytes.max(1)).max(1) as u64)
    }

    /// Checks chunk and shard sizes and the codec.
    ///
    /// # Errors
    /// [`Error::Config`] naming `what` when the codec level is out of range,
    /// `chunk_size` is 0, or `shard_size` is set without `chunk_size` or is not a
    /// positive multiple of it.
    pub fn validate(&self, what: &str) -> Result<()> {
        self.codec.validate()?;
        if self.chunk_size == Some(0) {
            return Err(Error::Config(format!("{what}: chunk_size must be positive")));
        }
        if let Some(shard) = self.shard_size {
            let chunk = self
                .chunk_size
                .ok_or_else(|| Error::Config(format!("{what}: shard_size {shard} needs an explicit chunk_size")))?;
            if shard == 0 || shard % chunk != 0 {
                return Err(Error::Config(format!(
                    "{what}: shard_size {shard} is not a positive multiple of chunk_size {chunk}"
                )));
            }
        }
        Ok(())
    }
}

/// Layered write configuration of a store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct ZarrWriteConfig {
    /// Defaults for `meta/` arrays (pointers, masks).
    pub(crate) meta: ZarrArrayConfig,
    /// Defaults for `core/` arrays.
    pub(crate) core: ZarrArrayConfig,
    /// Defaults for `custom/` arrays.
    pub(crate) custom: ZarrArrayConfig,
    /// Per-field-name overrides (apply in whichever group the field lives).
    pub(crate) field_overrides: BTreeMap<String, ZarrArrayConfig>,
    /// How long opening or creating a writer waits for another writer's lock
    /// (see [`crate::store::lock`]). How this process behaves, not how the
    /// store is laid out: never serialized.
    #[serde(skip)]
    pub(crate) lock_timeout: Duration,
}

impl ZarrWriteConfig {
    /// Sets the `meta` default.
    pub fn with_meta(mut self, c: ZarrArrayConfig) -> Self {
        self.meta = c;
        self
    }

    /// Sets the `core` default.
    pub fn with_core(mut self, c: ZarrArrayConfig) -> Self {
        self.core = c;
        self
    }

    /// Sets the `custom` default.
    pub fn with_custom(mut self, c: ZarrArrayConfig) -> Self {
        self.custom = c;
        self
    }

    /// Adds an override for one field name.
    pub fn with_override(mut self, field: impl Into<String>, c: ZarrArrayConfig) -> Self {
        self.field_overrides.insert(field.into(), c);
        self
    }

    /// Lets a writer wait up to `timeout` for the store's writer lock when
    /// another writer holds it, instead of failing at once with
    /// [`Error::Locked`] (the default: zero). Applies to
    /// [`AtomicDataZarrWriter::create`](crate::AtomicDataZarrWriter::create),
    /// [`open`](crate::AtomicDataZarrWriter::open) and imports.
    ///
    /// ```
    /// use std::time::Duration;
    /// let c = atomzarr::ZarrWriteConfig::default().with_lock_timeout(Duration::from_secs(60));
    /// assert_eq!(c.lock_timeout(), Duration::from_secs(60));
    /// ```
    pub fn with_lock_timeout(mut self, timeout: Duration) -> Self {
        self.lock_timeout = timeout;
        self
    }

    /// How long a writer waits for the lock.
    pub fn lock_timeout(&self) -> Duration {
        self.lock_timeout
    }

    /// The `meta` group default.
    pub fn meta(&self) -> &ZarrArrayConfig {
        &self.meta
    }

    /// The `core` group default.
    pub fn core(&self) -> &ZarrArrayConfig {
        &self.core
    }

    /// The `custom` group default.
    pub fn custom(&self) -> &ZarrArrayConfig {
        &self.custom
    }

    /// The per-field overrides.
    pub fn field_overrides(&self) -> &BTreeMap<String, ZarrArrayConfig> {
        &self.field_overrides
    }

    /// The settings of array `name` in `group`.
    pub fn resolve(&self, group: StoreGroup, name: &str) -> ResolvedArrayConfig {
        let group_default = match group {
            StoreGroup::Meta => self.meta,
            StoreGroup::Core => self.core,
            StoreGroup::Custom => self.custom,
        };
        let layered = self.field_overrides.get(name).copied().unwrap_or_default().or(group_default);
        let lib = ZarrArrayConfig::library_default();
        ResolvedArrayConfig {
            codec: layered.codec.unwrap_or(lib.codec),
            chunk_size: layered.chunk_size.or(lib.chunk_size),
            shard_size: layered.shard_size.or(lib.shard_size),
            write_empty_chunks: layered.write_empty_chunks.unwrap_or(lib.write_empty_chunks),
            checksum: layered.checksum.unwrap_or(lib.checksum),
        }
    }

    /// Validates every layer as it would resolve (shard a multiple of chunk,
    /// codec levels in range); each field override in its field's group.
    ///
    /// # Errors
    /// [`Error::Config`] naming the layer (or `field_overrides[name]`) that
    /// [`ResolvedArrayConfig::validate`] refuses.
    pub fn validate(&self) -> Result<()> {
        for (g, what) in [(StoreGroup::Meta, "meta"), (StoreGroup::Core, "core"), (StoreGroup::Custom, "custom")] {
            self.resolve(g, "").validate(what)?;
        }
        // An override is checked in the group its field lives in (a meta
        // array, a core field, else a custom field), not in all three: an
        // override that only sets shard_size is valid for a core field when
        // core sets chunk_size, whatever meta and custom say. A name used
        // elsewhere (add_custom with a core name) is still checked when its
        // array is created.
        for name in self.field_overrides.keys() {
            let group = if format::META_ARRAYS.iter().any(|(rel, _)| format::meta_name(rel) == name) {
                StoreGroup::Meta
            } else {
                format::group_for_new_field(name)
            };
            self.resolve(group, name).validate(&format!("field_overrides[{name}]"))?;
        }
        Ok(())
    }
}
