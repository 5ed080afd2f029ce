//! The on-disk cache of encoded chunks fetched from a remote store: one
//! file per (object, byte range), at most a byte budget of them, the least
//! recently used removed first. The reader checks the chunks' checksums
//! (crc32c codec) after reading them from here as after a fetch.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::store::bytes::Bytes;

/// Files by name, least recently used first, and their total size.
#[derive(Debug)]
struct Held {
    files: lru::LruCache<String, u64>,
    total: u64,
}

/// A bounded folder of fetched byte ranges.
#[derive(Debug)]
pub(super) struct DiskCache {
    dir: PathBuf,
    max_bytes: u64,
    held: Mutex<Held>,
}

/// The file name of `range` of `key`: the key with `/` and `%` escaped,
/// then the range (reversible, so two entries never share a file).
fn name(key: &str, range: Option<&Range<u64>>) -> String {
    let key = key.replace('%', "%25").replace('/', "%2F");
    match range {
        Some(r) => format!("{key}@{}-{}", r.start, r.end),
        None => format!("{key}@all"),
    }
}

impl DiskCache {
    /// The cache in `dir` (created if missing), taking over the files a
    /// previous run left there, oldest first.
    pub(super) fn open(dir: &Path, max_bytes: u64) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let mut found = Vec::new();
        for e in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?.flatten() {
            let Ok(m) = e.metadata() else { continue };
            let n = e.file_name().to_string_lossy().into_owned();
            if m.is_file() && n.contains('@') && !n.ends_with(".tmp") {
                found.push((m.modified().ok(), n, m.len()));
            }
        }
        found.sort();
        let mut held = Held { files: lru::LruCache::unbounded(), total: 0 };
        for (_, n, len) in found {
            held.total += len;
            held.files.put(n, len);
        }
        let cache = DiskCache { dir: dir.to_path_buf(), max_bytes, held: Mutex::new(held) };
        cache.evict(&mut cache.lock());
        Ok(cache)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn evict(&self, held: &mut Held) {
        while held.total > self.max_bytes {
            let Some((n, len)) = held.files.pop_lru() else { break };
            held.total -= len;
            // Already gone is as good as removed.
            let _ = std::fs::remove_file(self.dir.join(n));
        }
    }

    /// The cached bytes, if held (and still on disk).
    pub(super) fn get(&self, key: &str, range: Option<&Range<u64>>) -> Option<Bytes> {
        let n = name(key, range);
        let len = *self.lock().files.get(&n)?;
        match std::fs::read(self.dir.join(&n)) {
            Ok(b) if b.len() as u64 == len => Some(Bytes::from(b)),
            _ => {
                // Removed or damaged behind our back: forget it, fetch again.
                let mut held = self.lock();
                if let Some(len) = held.files.pop(&n) {
                    held.total -= len;
                }
                None
            }
        }
    }

    /// Keeps `bytes` (written to a temporary file, then renamed, so a
    /// reader never sees half a file). A failure to write only loses the
    /// entry: the cache is an optimisation.
    pub(super) fn put(&self, key: &str, range: Option<&Range<u64>>, bytes: &Bytes) {
        let len = bytes.len() as u64;
        if len > self.max_bytes {
            return;
        }
        let n = name(key, range);
        if self.lock().files.contains(&n) {
            return;
        }
        let tmp = self.dir.join(format!("{n}.{}.tmp", std::process::id()));
        if let Err(e) = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, self.dir.join(&n))) {
            log::warn!("disk cache {}: cannot keep {n}: {e}", self.dir.display());
            let _ = std::fs::remove_file(&tmp);
            return;
        }
        let mut held = self.lock();
        if held.files.put(n, len).is_none() {
            held.total += len;
        }
        self.evict(&mut held);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_least_recently_used_first() {
        let dir = tempfile::tempdir().unwrap();
        let c = DiskCache::open(dir.path(), 10).unwrap();
        c.put("a/c/0", Some(&(0..4)), &Bytes::from_static(b"aaaa"));
        c.put("a/c/0", Some(&(4..8)), &Bytes::from_static(b"bbbb"));
        assert_eq!(c.get("a/c/0", Some(&(0..4))).unwrap(), Bytes::from_static(b"aaaa"));
        c.put("b", None, &Bytes::from_static(b"cccc")); // 12 > 10: the least recent (4..8) goes
        assert!(c.get("a/c/0", Some(&(4..8))).is_none());
        assert!(c.get("a/c/0", Some(&(0..4))).is_some() && c.get("b", None).is_some());
        drop(c);
        let again = DiskCache::open(dir.path(), 10).unwrap();
        assert_eq!(again.get("b", None).unwrap(), Bytes::from_static(b"cccc"), "kept across runs");
        assert_ne!(name("a/b", None), name("a%2Fb", None));
    }
}
