//! [`copy`]: publishing a store to object storage (or fetching one back):
//! every object copied, many at a time, the root `zarr.json` last, so a
//! reader of the destination never sees a store whose root names arrays
//! that are not there yet.

use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStore;
use object_store::path::Path as ObjPath;

use super::RemoteOptions;
use super::bytes::{connect, remote_error};
use crate::Location;
use crate::error::{Error, RemoteErrorKind, Result};
use crate::store::durable::TEMP_MARK;
use crate::store::lock::{LOCK_FILE, StoreLock};

/// What [`copy`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct CopyReport {
    /// Objects (files) copied.
    pub objects: u64,
    /// Bytes copied.
    pub bytes: u64,
}

/// One side of a copy: a client, the store's prefix in it, its URL.
struct Side {
    store: Arc<dyn ObjectStore>,
    prefix: ObjPath,
    url: String,
    listable: bool,
}

impl Side {
    fn open(location: &Location, options: &RemoteOptions) -> Result<Side> {
        match location {
            Location::Local(path) => {
                let fs = object_store::local::LocalFileSystem::new_with_prefix(path)
                    .map_err(|e| remote_error(location.to_string(), &e))?;
                Ok(Side { store: Arc::new(fs), prefix: ObjPath::default(), url: location.to_string(), listable: true })
            }
            Location::Url(url) => {
                let url = url.trim_end_matches('/').to_string();
                let (store, prefix, listable) = connect(&url, options)?;
                Ok(Side { store, prefix, url, listable })
            }
        }
    }

    fn path(&self, key: &str) -> ObjPath {
        if self.prefix.as_ref().is_empty() {
            ObjPath::from(key)
        } else {
            ObjPath::from(format!("{}/{key}", self.prefix))
        }
    }

    fn url_of(&self, key: &str) -> String {
        format!("{}/{key}", self.url.trim_end_matches('/'))
    }
}

/// Copies the store at `src` to `dst`; either may be a local path (or
/// `file://` URL) or an object-store URL (`s3://`, `gs://`, `az://`; an
/// `http(s)://` server can be neither listed nor written). `dst` must not
/// hold a store already. Returns what was copied.
///
/// ```no_run
/// # fn main() -> atomzarr::Result<()> {
/// use atomzarr::store::remote::{RemoteOptions, copy};
/// let done = copy("train.zarr", "s3://bucket/train.zarr", &RemoteOptions::default())?;
/// println!("{} objects, {} bytes", done.objects, done.bytes);
/// # Ok(()) }
/// ```
///
/// # Errors
/// [`Error::NotFound`] or [`Error::Format`] when `src` holds no store;
/// [`Error::AlreadyExists`] when `dst` does; [`Error::RemoteReadOnly`] for an
/// HTTP `dst`; [`Error::Remote`] naming the URL of a failed request;
/// [`Error::Locked`] for a locked local store; [`Error::Io`] naming a local file.
pub fn copy(src: impl Into<Location>, dst: impl Into<Location>, options: &RemoteOptions) -> Result<CopyReport> {
    let (src, dst) = (src.into(), dst.into());
    let runtime = super::bytes::io_runtime()?;
    if let Some(p) = src.local().filter(|p| !p.join("zarr.json").is_file()) {
        return Err(Error::NotFound { store: p.into() });
    }
    let from = Side::open(&src, options)?;
    if !from.listable {
        return Err(Error::Remote {
            url: from.url.clone(),
            kind: RemoteErrorKind::Unsupported,
            reason: "an HTTP server cannot be listed; copy from a local path or an object store".into(),
        });
    }
    if let Some(url) = dst.url().filter(|u| u.starts_with("http://") || u.starts_with("https://")) {
        return Err(Error::RemoteReadOnly { url: url.to_string(), operation: "copy to an HTTP server".into() });
    }
    // A local source is copied holding its writer lock shared (writers wait,
    // other copies do not), so the copy is one commit of it, never a mix of
    // two; a local destination is a new store, locked from the moment its
    // folder exists.
    let _source_lock = match src.local() {
        Some(p) => StoreLock::acquire_shared(p, options.lock_timeout())?,
        None => None,
    };
    let _destination_lock = match dst.local() {
        Some(p) => {
            if let Some(parent) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
            }
            match std::fs::create_dir(p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    return Err(Error::AlreadyExists { store: p.into() });
                }
                Err(e) => return Err(Error::io(p, e)),
            }
            Some(StoreLock::acquire(p, options.lock_timeout())?)
        }
        None => None,
    };
    let to = Side::open(&dst, options)?;
    runtime.block_on(async {
        match to.store.head(&to.path("zarr.json")).await {
            Ok(_) => return Err(Error::AlreadyExists { store: to.url.clone().into() }),
            Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(remote_error(to.url_of("zarr.json"), &e)),
        }
        let listed: Vec<object_store::ObjectMeta> = from
            .store
            .list(if from.prefix.as_ref().is_empty() { None } else { Some(&from.prefix) })
            .try_collect()
            .await
            .map_err(|e| remote_error(from.url.clone(), &e))?;
        let base = from.prefix.as_ref().to_string();
        let mut keys: Vec<String> = listed
            .iter()
            .map(|m| {
                let full = m.location.as_ref();
                if base.is_empty() { full.to_string() } else { full[base.len()..].trim_start_matches('/').to_string() }
            })
            .collect();
        if !keys.iter().any(|k| k == "zarr.json") {
            return Err(Error::format(
                std::path::Path::new(&from.url),
                "no zarr.json at the root (not a Zarr v3 group)",
            ));
        }
        // The root last (below); a source's writer lock and temporaries are
        // not store data.
        keys.retain(|k| k != "zarr.json" && k != LOCK_FILE && !k.contains(TEMP_MARK));
        let one = |key: String| {
            let (from, to) = (&from, &to);
            async move {
                let got = from.store.get(&from.path(&key)).await.map_err(|e| remote_error(from.url_of(&key), &e))?;
                let bytes = got.bytes().await.map_err(|e| remote_error(from.url_of(&key), &e))?;
                let n = bytes.len() as u64;
                to.store.put(&to.path(&key), bytes.into()).await.map_err(|e| remote_error(to.url_of(&key), &e))?;
                Ok::<u64, Error>(n)
            }
        };
        let mut report = CopyReport::default();
        let mut done = futures::stream::iter(keys.into_iter().map(one)).buffer_unordered(options.concurrency());
        while let Some(n) = done.next().await {
            report.objects += 1;
            report.bytes += n?;
        }
        // The root last: the commit point of the copy.
        report.bytes += one("zarr.json".to_string()).await?;
        report.objects += 1;
        Ok(report)
    })
}
