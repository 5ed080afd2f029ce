//! [`RemoteBytes`]: a store at a URL, read through an `object_store`
//! client on the process's I/O runtime (the reader is synchronous).
//!
//! One runtime and one client per store URL and options serve every
//! reader of the process: building a client loads the TLS root store (tens
//! of milliseconds), and a client's pooled connections live on the runtime
//! that opened them, so both outlive any one reader.

use std::ops::Range;
use std::sync::Arc;
use std::sync::mpsc::Sender;

use futures::StreamExt;
use object_store::path::Path as ObjPath;
use object_store::{GetOptions, GetRange, ObjectStore};

use super::RemoteOptions;
use super::disk_cache::DiskCache;
use crate::error::{Error, RemoteErrorKind, Result};
use crate::store::bytes::{ByteSource, Bytes, Fetched, IoCounters, IoStats, RangeRequest};

/// What the runtime's tasks share: the client, where the store is, counters.
#[derive(Debug)]
pub(super) struct Client {
    pub(super) store: Arc<dyn ObjectStore>,
    pub(super) prefix: ObjPath,
    /// The store's URL, without a trailing `/`.
    pub(super) url: String,
    counters: IoCounters,
}

impl Client {
    pub(super) fn path(&self, key: &str) -> ObjPath {
        let key = key.trim_matches('/');
        if self.prefix.as_ref().is_empty() {
            ObjPath::from(key)
        } else {
            ObjPath::from(format!("{}/{key}", self.prefix))
        }
    }

    pub(super) fn url_of(&self, key: &str) -> String {
        if key.is_empty() { self.url.clone() } else { format!("{}/{}", self.url, key.trim_matches('/')) }
    }

    /// A typed error naming the object's URL.
    pub(super) fn error(&self, key: &str, e: &object_store::Error) -> Error {
        remote_error(self.url_of(key), e)
    }

    /// Bytes `range` of `key` (`None`: the whole object); `Ok(None)`: no such object.
    async fn get(&self, key: &str, range: Option<Range<u64>>) -> Result<Option<Bytes>> {
        let path = self.path(key);
        let got = match &range {
            Some(r) => self.store.get_range(&path, r.clone()).await,
            None => match self.store.get(&path).await {
                Ok(g) => g.bytes().await,
                Err(e) => Err(e),
            },
        };
        let bytes = match got {
            Ok(b) => b,
            Err(e) => return self.missing_or(key, e),
        };
        self.counters.count(bytes.len() as u64);
        if let Some(r) = range
            && bytes.len() as u64 != r.end - r.start
        {
            return Err(Error::Remote {
                url: self.url_of(key),
                kind: RemoteErrorKind::Truncated,
                reason: format!("{} bytes received for bytes {}..{}", bytes.len(), r.start, r.end),
            });
        }
        Ok(Some(bytes))
    }

    /// The last `n` bytes of `key` and its length (one request).
    async fn suffix(&self, key: &str, n: u64) -> Result<Option<(Bytes, u64)>> {
        let opts = GetOptions { range: Some(GetRange::Suffix(n)), ..Default::default() };
        let got = match self.store.get_opts(&self.path(key), opts).await {
            Ok(g) => g,
            Err(e) => return self.missing_or(key, e),
        };
        let size = got.meta.size;
        let want = n.min(size);
        let bytes = got.bytes().await.map_err(|e| self.error(key, &e))?;
        self.counters.count(bytes.len() as u64);
        if bytes.len() as u64 != want {
            return Err(Error::Remote {
                url: self.url_of(key),
                kind: RemoteErrorKind::Truncated,
                reason: format!("{} bytes received for the last {want} of {size}", bytes.len()),
            });
        }
        Ok(Some((bytes, size)))
    }

    /// `Ok(None)` for a missing key, the typed error otherwise (a missing
    /// bucket is an error, not a missing key).
    fn missing_or<T>(&self, key: &str, e: object_store::Error) -> Result<Option<T>> {
        self.counters.count(0);
        match self.error(key, &e) {
            Error::Remote { kind: RemoteErrorKind::NotFound, reason, .. } if !reason.contains("NoSuchBucket") => {
                Ok(None)
            }
            e => Err(e),
        }
    }
}

/// The text of an error and its sources.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// An `object_store` error as [`Error::Remote`] naming `url`.
///
/// Stores that map HTTP statuses to `object_store`'s own variants are
/// classified by the variant. Otherwise only the status the text reports
/// (`status code: 503 ...`) and words outside URLs count: the text quotes
/// the request's URL, whose port or key may well contain `403` or
/// `timeout`.
pub(super) fn remote_error(url: String, e: &object_store::Error) -> Error {
    let reason = chain(e);
    // object_store's retry errors quote their `retry_timeout` setting:
    // not a sign of a timeout.
    let low = reason.to_ascii_lowercase().replace("retry_timeout", "");
    let status: Option<u16> = low.split("status code: ").nth(1).and_then(|s| s.get(..3)?.parse().ok());
    let words: String = low.split_whitespace().filter(|w| !w.contains("://")).collect::<Vec<_>>().join(" ");
    let said = |keys: &[&str]| keys.iter().any(|k| words.contains(k));
    let kind = match e {
        object_store::Error::NotFound { .. } => RemoteErrorKind::NotFound,
        object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. } => {
            RemoteErrorKind::Forbidden
        }
        object_store::Error::NotSupported { .. } | object_store::Error::NotImplemented => RemoteErrorKind::Unsupported,
        _ if said(&["timed out", "timeout"]) => RemoteErrorKind::Timeout,
        _ if matches!(status, Some(401 | 403)) || said(&["forbidden", "accessdenied"]) => RemoteErrorKind::Forbidden,
        _ if status == Some(404) || said(&["nosuchbucket"]) => RemoteErrorKind::NotFound,
        _ if said(&["incomplete", "end of file", "unexpected eof", "error decoding response body"]) => {
            RemoteErrorKind::Truncated
        }
        _ => RemoteErrorKind::Other,
    };
    Error::Remote { url, kind, reason }
}

/// A store at a URL (`s3://`, `gs://`, `az://`, `http(s)://`): a
/// [`ByteSource`] over `object_store`, with a runtime for its requests.
///
/// ```no_run
/// # fn main() -> atomzarr::Result<()> {
/// use atomzarr::store::bytes::ByteSource;
/// use atomzarr::store::remote::{RemoteOptions, RemoteBytes};
/// let src = RemoteBytes::open("https://example.org/data/train.zarr", &RemoteOptions::default())?;
/// let root = src.get("zarr.json")?;
/// # Ok(()) }
/// ```
pub struct RemoteBytes {
    client: Arc<Client>,
    runtime: &'static tokio::runtime::Runtime,
    concurrency: usize,
    merge_gap: Option<u64>,
    /// Plain HTTP servers cannot list.
    listable: bool,
    disk: Option<DiskCache>,
    /// Prefetched metadata documents by key (`None`: not there).
    meta: std::sync::Mutex<std::collections::HashMap<String, Option<Bytes>>>,
}

impl std::fmt::Debug for RemoteBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteBytes").field("url", &self.client.url).field("concurrency", &self.concurrency).finish()
    }
}

/// The `object_store` client for `url` and the store's prefix in it.
pub(super) fn connect(url: &str, o: &RemoteOptions) -> Result<(Arc<dyn ObjectStore>, ObjPath, bool)> {
    use object_store::{BackoffConfig, ClientOptions, RetryConfig};
    let bad = |reason: String| Error::Remote { url: url.to_string(), kind: RemoteErrorKind::Unsupported, reason };
    let parsed = url::Url::parse(url).map_err(|e| bad(format!("not a URL: {e}")))?;
    let retry = RetryConfig {
        backoff: BackoffConfig {
            init_backoff: std::time::Duration::from_millis(100),
            max_backoff: std::time::Duration::from_secs(5),
            base: 2.0,
        },
        max_retries: o.retries(),
        retry_timeout: o.timeout().saturating_mul(o.retries() as u32 + 1),
    };
    // Every request of a read window may be in flight at once: keep that
    // many connections alive between windows.
    let mut client = ClientOptions::new()
        .with_timeout(o.timeout())
        .with_connect_timeout(o.timeout())
        .with_pool_max_idle_per_host(o.concurrency().max(8));
    if let Some(allow) = o.allow_http() {
        client = client.with_allow_http(allow);
    }
    let path_of = |p: &str| ObjPath::from_url_path(p).map_err(|e| bad(format!("path: {e}")));
    let err = |e: object_store::Error| remote_error(url.to_string(), &e);
    let (store, prefix, listable): (Arc<dyn ObjectStore>, ObjPath, bool) = match parsed.scheme() {
        "s3" | "s3a" => {
            use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
            // `with_client_options` replaces the client options `from_env`
            // read, so AWS_ALLOW_HTTP is carried over by hand.
            let client = merge_allow_http(client, std::env::var("AWS_ALLOW_HTTP").ok(), o);
            let mut b = AmazonS3Builder::from_env().with_client_options(client).with_url(url).with_retry(retry);
            for (k, v) in [
                (AmazonS3ConfigKey::Endpoint, o.endpoint()),
                (AmazonS3ConfigKey::Region, o.region()),
                (AmazonS3ConfigKey::AccessKeyId, o.access_key_id()),
                (AmazonS3ConfigKey::SecretAccessKey, o.secret_access_key()),
                (AmazonS3ConfigKey::Token, o.session_token()),
            ] {
                if let Some(v) = v {
                    b = b.with_config(k, v);
                }
            }
            for (k, v) in o.config() {
                let key: AmazonS3ConfigKey = k.parse().map_err(|e| bad(format!("{e}")))?;
                b = b.with_config(key, v);
            }
            (Arc::new(b.build().map_err(err)?), path_of(parsed.path())?, true)
        }
        "gs" => {
            use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
            let mut b =
                GoogleCloudStorageBuilder::from_env().with_url(url).with_retry(retry).with_client_options(client);
            for (k, v) in o.config() {
                let key: GoogleConfigKey = k.parse().map_err(|e| bad(format!("{e}")))?;
                b = b.with_config(key, v);
            }
            (Arc::new(b.build().map_err(err)?), path_of(parsed.path())?, true)
        }
        "az" | "azure" | "abfs" | "abfss" | "adl" => {
            use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
            let mut b = MicrosoftAzureBuilder::from_env().with_url(url).with_retry(retry).with_client_options(client);
            for (k, v) in o.config() {
                let key: AzureConfigKey = k.parse().map_err(|e| bad(format!("{e}")))?;
                b = b.with_config(key, v);
            }
            (Arc::new(b.build().map_err(err)?), path_of(parsed.path())?, true)
        }
        "http" | "https" => {
            use object_store::http::HttpBuilder;
            // The HTTP store's base URL is the store itself: keys are paths below it.
            let base = url.trim_end_matches('/');
            let b =
                HttpBuilder::new().with_url(base).with_retry(retry).with_client_options(client.with_allow_http(true));
            (Arc::new(b.build().map_err(err)?), ObjPath::default(), false)
        }
        other => return Err(bad(format!("unsupported scheme {other}:// (s3, gs, az, http, https, file)"))),
    };
    Ok((store, prefix, listable))
}

/// The process's I/O runtime (two worker threads: they only wait on sockets).
pub(super) fn io_runtime() -> Result<&'static tokio::runtime::Runtime> {
    static RUNTIME: std::sync::OnceLock<std::result::Result<tokio::runtime::Runtime, String>> =
        std::sync::OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("atomzarr-io")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| Error::Background(format!("cannot start the I/O runtime: {e}")))
}

/// [`connect`], reusing the client an earlier call built for the same URL
/// and options.
fn connect_shared(url: &str, o: &RemoteOptions) -> Result<(Arc<dyn ObjectStore>, ObjPath, bool)> {
    type Clients = std::collections::HashMap<String, (Arc<dyn ObjectStore>, ObjPath, bool)>;
    static CLIENTS: std::sync::OnceLock<std::sync::Mutex<Clients>> = std::sync::OnceLock::new();
    let clients = CLIENTS.get_or_init(Default::default);
    let key = format!("{url}\n{o:?}");
    if let Some(found) = clients.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&key) {
        return Ok(found.clone());
    }
    let made = connect(url, o)?;
    clients.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(key, made.clone());
    Ok(made)
}

/// `client` with `allow_http` as the options, else the environment, say.
fn merge_allow_http(
    client: object_store::ClientOptions,
    env: Option<String>,
    o: &RemoteOptions,
) -> object_store::ClientOptions {
    match (o.allow_http(), env) {
        (Some(a), _) => client.with_allow_http(a),
        (None, Some(v)) => client.with_allow_http(v.eq_ignore_ascii_case("true") || v == "1"),
        (None, None) => client,
    }
}

impl RemoteBytes {
    /// Connects to the store at `url` (no request is made yet).
    ///
    /// # Errors
    /// [`Error::Remote`] naming `url` when it is not a supported URL, an
    /// option key is unknown or the client cannot be built; [`Error::Io`]
    /// naming the disk cache folder when it cannot be made or read;
    /// [`Error::Background`] when the I/O runtime cannot start.
    pub fn open(url: &str, options: &RemoteOptions) -> Result<Self> {
        let url = url.trim_end_matches('/').to_string();
        let (store, prefix, listable) = connect_shared(&url, options)?;
        let runtime = io_runtime()?;
        let disk = match options.disk_cache() {
            Some((dir, max)) => Some(DiskCache::open(dir, max)?),
            None => None,
        };
        Ok(RemoteBytes {
            client: Arc::new(Client { store, prefix, url, counters: IoCounters::default() }),
            runtime,
            concurrency: options.concurrency(),
            merge_gap: options.merge_gap(),
            listable,
            disk,
            meta: Default::default(),
        })
    }

    fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.runtime.block_on(f)
    }

    /// A prefetched document: `Some(Some(bytes))`, `Some(None)` (absent), or
    /// `None` (not prefetched).
    fn prefetched(&self, key: &str) -> Option<Option<Bytes>> {
        self.meta.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(key).cloned()
    }
}

impl ByteSource for RemoteBytes {
    fn location(&self) -> &str {
        &self.client.url
    }

    fn is_remote(&self) -> bool {
        true
    }

    fn get(&self, key: &str) -> Result<Option<Bytes>> {
        if let Some(kept) = self.prefetched(key) {
            return Ok(kept);
        }
        self.block_on(self.client.get(key, None))
    }

    fn get_range(&self, key: &str, range: Range<u64>) -> Result<Option<Bytes>> {
        if range.is_empty() {
            return Ok(self.size(key)?.map(|_| Bytes::new()));
        }
        self.block_on(self.client.get(key, Some(range)))
    }

    fn get_suffix(&self, key: &str, n: u64) -> Result<Option<(Bytes, u64)>> {
        let c = &self.client;
        self.block_on(c.suffix(key, n))
    }

    fn get_suffixes(&self, requests: &[(String, u64)]) -> Vec<Result<Option<(Bytes, u64)>>> {
        let c = &self.client;
        self.block_on(async {
            type Answer = (usize, Result<Option<(Bytes, u64)>>);
            let mut answers: Vec<Answer> = futures::stream::iter(requests.iter().enumerate())
                .map(|(i, (k, n))| async move { (i, c.suffix(k, *n).await) })
                .buffer_unordered(self.concurrency)
                .collect()
                .await;
            answers.sort_by_key(|(i, _)| *i);
            answers.into_iter().map(|(_, r)| r).collect()
        })
    }

    fn size(&self, key: &str) -> Result<Option<u64>> {
        if let Some(kept) = self.prefetched(key) {
            return Ok(kept.map(|b| b.len() as u64));
        }
        let c = &self.client;
        self.block_on(async {
            match c.store.head(&c.path(key)).await {
                Ok(meta) => {
                    c.counters.count(0);
                    Ok(Some(meta.size))
                }
                Err(e) => c.missing_or(key, e),
            }
        })
    }

    fn list_sizes(&self, prefix: &str) -> Result<Option<Vec<(String, u64)>>> {
        if !self.listable {
            return Ok(None);
        }
        let c = &self.client;
        let base = c.path("");
        self.block_on(async {
            let dir = c.path(prefix);
            let mut stream = c.store.list(Some(&dir));
            let mut out = Vec::new();
            c.counters.count(0);
            while let Some(meta) = stream.next().await {
                let meta = meta.map_err(|e| c.error(prefix, &e))?;
                let full = meta.location.as_ref();
                let rel = if base.as_ref().is_empty() {
                    full
                } else {
                    full.strip_prefix(base.as_ref()).map(|r| r.trim_start_matches('/')).unwrap_or(full)
                };
                out.push((rel.to_string(), meta.size));
            }
            Ok(Some(out))
        })
    }

    fn stats(&self) -> IoStats {
        self.client.counters.get()
    }

    fn concurrency(&self) -> usize {
        self.concurrency
    }

    fn merge_gap(&self) -> Option<u64> {
        self.merge_gap
    }

    /// Runs the requests on the runtime, `concurrency` at a time, and
    /// returns at once: answers arrive on `done` as they complete.
    fn fetch_many(&self, requests: Vec<RangeRequest>, done: Sender<Fetched>) {
        let client = self.client.clone();
        let concurrency = self.concurrency;
        self.runtime.spawn(async move {
            let client = &client;
            let mut answers = futures::stream::iter(requests.into_iter().enumerate())
                .map(|(i, r)| async move { (i, client.get(&r.key, r.range).await) })
                .buffer_unordered(concurrency);
            while let Some(answer) = answers.next().await {
                if done.send(answer).is_err() {
                    // The reader stopped listening (an error elsewhere).
                    return;
                }
            }
        });
    }

    fn prefetch(&self, keys: &[String]) {
        let c = &self.client;
        let wanted: Vec<&String> = keys.iter().filter(|k| self.prefetched(k).is_none()).collect();
        let got: Vec<(String, Result<Option<Bytes>>)> = self.block_on(
            futures::stream::iter(wanted)
                .map(|k| async move { (k.clone(), c.get(k, None).await) })
                .buffer_unordered(self.concurrency)
                .collect(),
        );
        let mut meta = self.meta.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for (k, r) in got {
            // Errors are not kept: the read that needs the document meets them.
            if let Ok(b) = r {
                meta.insert(k, b);
            }
        }
    }

    fn forget(&self) {
        self.meta.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
    }

    fn cached(&self, key: &str, range: Option<&Range<u64>>) -> Option<Bytes> {
        self.disk.as_ref()?.get(key, range)
    }

    fn keep(&self, key: &str, range: Option<&Range<u64>>, bytes: &Bytes) {
        if let Some(d) = &self.disk {
            d.put(key, range, bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generic(text: &str) -> object_store::Error {
        object_store::Error::Generic { store: "HTTP", source: text.to_string().into() }
    }

    #[test]
    fn a_status_or_keyword_inside_a_url_does_not_classify_an_error() {
        // Ports 40319 and 54041 hold "403" and "404"; the key holds "timeout".
        let text = "Error performing GET http://127.0.0.1:40319/timeout/x.zarr/zarr.json in 1ms, after 1 \
                    retries, max_retries: 1, retry_timeout: 60s - Server returned non-2xx status code: 503 \
                    Service Unavailable: ";
        let kind = |e: Error| match e {
            Error::Remote { kind, .. } => kind,
            other => panic!("{other}"),
        };
        assert_eq!(kind(remote_error("u".into(), &generic(text))), RemoteErrorKind::Other);
        let e = generic(&text.replace("503 Service Unavailable", "403 Forbidden").replace("40319", "54041"));
        assert_eq!(kind(remote_error("u".into(), &e)), RemoteErrorKind::Forbidden);
        let e = generic(&text.replace("503 Service Unavailable", "404 Not Found"));
        assert_eq!(kind(remote_error("u".into(), &e)), RemoteErrorKind::NotFound);
        let e = generic("error sending request for url (http://127.0.0.1:1/x): operation timed out");
        assert_eq!(kind(remote_error("u".into(), &e)), RemoteErrorKind::Timeout);
    }
}
