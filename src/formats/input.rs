//! Input files: which format a file holds (its magic bytes, then its
//! extension; [`Format`]) and reading text formats through gzip, xz or
//! bzip2 ([`open_text`]), counting the bytes taken from the file so that
//! progress is a fraction of its size.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};

/// The formats `atomzarr import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// Extended XYZ (ASE's dialect), plain or gzip / xz / bzip2 compressed.
    Extxyz,
    /// ASE's SQLite database (`ase.db`, `.db`).
    AseDb,
    /// fairchem's ASE LMDB (`.aselmdb`): one LMDB file, `zlib(orjson(row))` per id.
    AseLmdb,
    /// HDF5 in the SPICE (a group per molecule) or ANI-1x (a group per formula) layout.
    Hdf5,
    /// numpy `.npz` with the rMD17 or the sGDML key set.
    Npz,
    /// The MPtrj JSON (`{mp_id: {frame_id: {structure, ...}}}`), streamed.
    Mptrj,
}

impl Format {
    /// Every format, in the order `--format` lists them.
    pub const ALL: [Format; 6] =
        [Format::Extxyz, Format::AseDb, Format::AseLmdb, Format::Hdf5, Format::Npz, Format::Mptrj];

    /// The name `--format` takes.
    pub fn name(self) -> &'static str {
        match self {
            Format::Extxyz => "extxyz",
            Format::AseDb => "asedb",
            Format::AseLmdb => "aselmdb",
            Format::Hdf5 => "hdf5",
            Format::Npz => "npz",
            Format::Mptrj => "mptrj",
        }
    }

    /// Parses a `--format` name.
    ///
    /// ```
    /// use atomzarr::formats::input::Format;
    /// assert_eq!(Format::parse("aselmdb"), Some(Format::AseLmdb));
    /// assert_eq!(Format::parse("xyz"), Some(Format::Extxyz));
    /// assert_eq!(Format::parse("csv"), None);
    /// ```
    pub fn parse(name: &str) -> Option<Format> {
        match name.to_ascii_lowercase().as_str() {
            "extxyz" | "xyz" => Some(Format::Extxyz),
            "asedb" | "db" | "sqlite" => Some(Format::AseDb),
            "aselmdb" | "lmdb" => Some(Format::AseLmdb),
            "hdf5" | "h5" => Some(Format::Hdf5),
            "npz" => Some(Format::Npz),
            "mptrj" | "json" => Some(Format::Mptrj),
            _ => None,
        }
    }

    /// `extxyz, asedb, ...`, for messages.
    pub fn names() -> String {
        Format::ALL.iter().map(|f| f.name()).collect::<Vec<_>>().join(", ")
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How a text file is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Plain text.
    None,
    /// gzip (`.gz`).
    Gzip,
    /// xz (`.xz`).
    Xz,
    /// bzip2 (`.bz2`).
    Bzip2,
}

fn compression_of(head: &[u8]) -> Compression {
    if head.starts_with(&[0x1f, 0x8b]) {
        Compression::Gzip
    } else if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
        Compression::Xz
    } else if head.starts_with(b"BZh") {
        Compression::Bzip2
    } else {
        Compression::None
    }
}

/// The first `n` bytes of a file (fewer if it is shorter).
fn head(path: &Path, n: usize) -> Result<Vec<u8>> {
    let mut f = File::open(path).map_err(|e| Error::io(path, e))?;
    let mut buf = vec![0u8; n];
    let mut got = 0;
    while got < n {
        match f.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io(path, e)),
        }
    }
    buf.truncate(got);
    Ok(buf)
}

/// The format of `path`, from its first bytes (containers have magic
/// numbers; a compressed file is looked into), then from its extension.
///
/// # Errors
/// [`Error::InvalidInput`] naming `path` and listing `--format`'s choices
/// when the format cannot be told; [`Error::Io`] naming `path` when it
/// cannot be read (or decompressed).
///
/// ```
/// use atomzarr::formats::input::{Format, detect};
/// let dir = tempfile::tempdir().unwrap();
/// let xyz = dir.path().join("a.data");
/// std::fs::write(&xyz, "1\n\nH 0 0 0\n").unwrap();
/// assert_eq!(detect(&xyz).unwrap(), Format::Extxyz);
/// let bin = dir.path().join("b.bin");
/// std::fs::write(&bin, [0u8, 1, 2, 3]).unwrap();
/// assert!(detect(&bin).unwrap_err().to_string().contains("cannot tell the format"));
/// ```
pub fn detect(path: &Path) -> Result<Format> {
    let bytes = head(path, 64)?;
    if bytes.starts_with(b"\x89HDF\r\n\x1a\n") {
        return Ok(Format::Hdf5);
    }
    if bytes.starts_with(b"SQLite format 3\0") {
        return Ok(Format::AseDb);
    }
    if bytes.starts_with(b"PK\x03\x04") {
        return Ok(Format::Npz);
    }
    // LMDB: the meta page's magic 0xBEEFC0DE after the 16-byte page header.
    if bytes.get(16..20) == Some(&[0xde, 0xc0, 0xef, 0xbe]) {
        return Ok(Format::AseLmdb);
    }
    let name = path.file_name().map(|n| n.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
    let text = match compression_of(&bytes) {
        Compression::None => bytes,
        _ => {
            let mut r = open_text(path)?.0;
            let mut buf = Vec::with_capacity(64);
            (&mut r).take(64).read_to_end(&mut buf).map_err(|e| Error::io(path, e))?;
            buf
        }
    };
    let first = text.iter().copied().find(|b| !b.is_ascii_whitespace());
    match first {
        Some(b'{') => return Ok(Format::Mptrj),
        Some(b'0'..=b'9') => {
            // An atom count alone on the first non-blank line.
            let s = String::from_utf8_lossy(&text);
            if let Some(line) = s.lines().find(|l| !l.trim().is_empty())
                && line.trim().parse::<usize>().is_ok()
            {
                return Ok(Format::Extxyz);
            }
        }
        _ => {}
    }
    let stem = ["gz", "xz", "bz2"].iter().fold(name.as_str(), |n, ext| n.strip_suffix(&format!(".{ext}")).unwrap_or(n));
    let by_ext = match stem.rsplit('.').next().unwrap_or("") {
        "xyz" | "extxyz" => Some(Format::Extxyz),
        "aselmdb" | "lmdb" => Some(Format::AseLmdb),
        "h5" | "hdf5" => Some(Format::Hdf5),
        "npz" => Some(Format::Npz),
        "json" => Some(Format::Mptrj),
        _ => None,
    };
    by_ext.ok_or_else(|| {
        Error::invalid(
            path.display().to_string(),
            format!("cannot tell the format of {}; use --format with one of {}", path.display(), Format::names()),
        )
    })
}

/// A reader that counts the bytes taken from the file below it.
struct Counting<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// A text input, decompressed as it is read.
pub type TextInput = Box<dyn BufRead + Send>;

/// Opens a text file (plain, gzip, xz (feature `xz`) or bzip2, told by its
/// magic bytes);
/// the counter holds the file bytes read so far (compressed bytes for a
/// compressed file), for progress against the file size.
///
/// # Errors
/// [`Error::Io`] naming `path` when it cannot be opened or read;
/// [`Error::InvalidInput`] for xz input in a build without the `xz` feature.
pub fn open_text(path: &Path) -> Result<(TextInput, Arc<AtomicU64>)> {
    let kind = compression_of(&head(path, 6)?);
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let count = Arc::new(AtomicU64::new(0));
    let raw = BufReader::with_capacity(1 << 20, Counting { inner: file, count: count.clone() });
    let input: TextInput = match kind {
        Compression::None => Box::new(raw),
        // Multi-member: `cat a.gz b.gz` and pigz output are one stream.
        Compression::Gzip => Box::new(BufReader::with_capacity(1 << 20, flate2::bufread::MultiGzDecoder::new(raw))),
        #[cfg(feature = "xz")]
        Compression::Xz => {
            Box::new(BufReader::with_capacity(1 << 20, liblzma::bufread::XzDecoder::new_multi_decoder(raw)))
        }
        #[cfg(not(feature = "xz"))]
        Compression::Xz => {
            return Err(Error::invalid(
                path.display().to_string(),
                "xz-compressed input needs atomzarr built with the `xz` feature",
            ));
        }
        Compression::Bzip2 => Box::new(BufReader::with_capacity(1 << 20, bzip2::bufread::MultiBzDecoder::new(raw))),
    };
    Ok((input, count))
}
