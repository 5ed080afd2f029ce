//! [`Location`]: where a store lives, a local path or a URL, told apart once
//! where a location enters the crate (a function argument, a CLI argument),
//! so that no code below asks a `Path` whether it is really a URL.

use std::fmt;
use std::path::{Path, PathBuf};

/// Where a store lives.
///
/// Every entry point that names a store (`AtomicDataZarrReader::open`,
/// `AtomicDataZarrWriter::create` and `open`, `copy`, the CLI) takes
/// `impl Into<Location>`: a `&str`, `String`, `&Path` or `PathBuf` is parsed
/// once, here. A `scheme://` string is a URL; `file://` URLs are local
/// paths (percent escapes decoded); anything else is a path.
///
/// ```
/// use atomzarr::Location;
/// use std::path::Path;
/// assert_eq!(Location::from("data/x.zarr"), Location::Local("data/x.zarr".into()));
/// assert_eq!(Location::from("file:///tmp/x%20y.zarr"), Location::Local("/tmp/x y.zarr".into()));
/// assert_eq!(Location::from("s3://bucket/x.zarr"), Location::Url("s3://bucket/x.zarr".into()));
/// assert_eq!(Location::from(Path::new("odd:name")).local(), Some(Path::new("odd:name")));
/// assert!(Location::from("https://host/x.zarr").is_remote());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Location {
    /// A path on this machine (also what a `file://` URL names).
    Local(PathBuf),
    /// A remote URL: `s3://`, `gs://`, `az://`, `http(s)://` (feature
    /// `remote`), or another scheme, refused where it is used.
    Url(String),
}

impl Location {
    /// Parses a path or URL (see the type's docs).
    pub fn parse(location: &str) -> Location {
        if !is_url(location) {
            return Location::Local(PathBuf::from(location));
        }
        match location.strip_prefix("file://") {
            // `file:///abs/path` (empty host) or `file://localhost/abs/path`.
            Some(rest) => {
                Location::Local(PathBuf::from(percent_decode(rest.strip_prefix("localhost").unwrap_or(rest))))
            }
            None => Location::Url(location.to_string()),
        }
    }

    /// The local path, `None` for a remote URL.
    pub fn local(&self) -> Option<&Path> {
        match self {
            Location::Local(p) => Some(p),
            Location::Url(_) => None,
        }
    }

    /// The URL, `None` for a local path.
    pub fn url(&self) -> Option<&str> {
        match self {
            Location::Local(_) => None,
            Location::Url(u) => Some(u),
        }
    }

    /// Whether this is a remote URL.
    pub fn is_remote(&self) -> bool {
        matches!(self, Location::Url(_))
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Local(p) => write!(f, "{}", p.display()),
            Location::Url(u) => f.write_str(u),
        }
    }
}

/// A location serializes as the text it displays: the path or the URL.
impl serde::Serialize for Location {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl std::str::FromStr for Location {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> std::result::Result<Location, Self::Err> {
        Ok(Location::parse(s))
    }
}

impl From<&str> for Location {
    fn from(s: &str) -> Location {
        Location::parse(s)
    }
}

impl From<String> for Location {
    fn from(s: String) -> Location {
        Location::parse(&s)
    }
}

impl From<&String> for Location {
    fn from(s: &String) -> Location {
        Location::parse(s)
    }
}

impl From<&Path> for Location {
    /// A path that spells a URL (`s3://b/x`, as a shell argument may arrive)
    /// is that URL; a path that is not UTF-8 is a path.
    fn from(p: &Path) -> Location {
        match p.to_str() {
            Some(s) => Location::parse(s),
            None => Location::Local(p.to_path_buf()),
        }
    }
}

impl From<PathBuf> for Location {
    fn from(p: PathBuf) -> Location {
        Location::from(p.as_path())
    }
}

impl From<&PathBuf> for Location {
    fn from(p: &PathBuf) -> Location {
        Location::from(p.as_path())
    }
}

impl From<&Location> for Location {
    fn from(l: &Location) -> Location {
        l.clone()
    }
}

/// Whether `location` is a URL (`scheme://...`) rather than a path.
fn is_url(location: &str) -> bool {
    location.split_once("://").is_some_and(|(scheme, _)| {
        !scheme.is_empty() && scheme.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    })
}

/// `%XX` escapes of a URL path decoded (invalid escapes kept as written).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%'
            && let (Some(h), Some(l)) = (b.get(i + 1).copied().and_then(hex), b.get(i + 2).copied().and_then(hex))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_paths_and_file_urls_are_told_apart() {
        assert!(is_url("s3://b/k") && is_url("https://h/x") && is_url("file:///x"));
        assert!(!is_url("/abs/path") && !is_url("rel/path") && !is_url("odd:name") && !is_url("://x"));
        assert_eq!(Location::parse("file://localhost/a/b"), Location::Local("/a/b".into()));
        assert_eq!(Location::parse("file:///a/%zz"), Location::Local("/a/%zz".into()));
        assert_eq!(Location::parse("gs://b/p").url(), Some("gs://b/p"));
        assert_eq!(Location::parse("gs://b/p").to_string(), "gs://b/p");
        assert_eq!(percent_decode("a%2"), "a%2");
    }
}
