//! [`RemoteOptions`]: how a remote store is reached (endpoint, region,
//! credentials) and read (requests in flight, range merging, retries,
//! timeout, disk cache).

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Requests kept in flight by default: object stores answer each request
/// after tens of milliseconds whatever its size, and serve many at once;
/// 64 hides a 5-20 ms latency behind the decode of a read window.
pub const DEFAULT_CONCURRENCY: usize = 64;

/// Default largest gap bridged between two wanted byte ranges of one object:
/// 1 MiB, `object_store`'s own coalescing default (a request costs about as
/// much as transferring a megabyte from a nearby object store).
pub const DEFAULT_MERGE_GAP: u64 = 1 << 20;

/// Options of a remote store. Anything not set here comes from the
/// environment: for `s3://`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
/// `AWS_SESSION_TOKEN`, `AWS_REGION`, `AWS_ENDPOINT_URL` (or
/// `AWS_ENDPOINT`) and `AWS_ALLOW_HTTP`; for `gs://`, `GOOGLE_*`; for
/// `az://`, `AZURE_*` (as `object_store`'s builders read them).
///
/// ```
/// use atomzarr::store::remote::RemoteOptions;
/// let o = RemoteOptions::default().with_concurrency(16).with_merge_gap(None).with_endpoint("http://127.0.0.1:9000");
/// assert_eq!((o.concurrency(), o.merge_gap()), (16, None));
/// assert_eq!(o.endpoint(), Some("http://127.0.0.1:9000"));
/// assert!(o.disk_cache().is_none());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteOptions {
    concurrency: usize,
    merge_gap: Option<u64>,
    retries: usize,
    timeout: Duration,
    endpoint: Option<String>,
    region: Option<String>,
    access_key_id: Option<String>,
    secret_access_key: Option<String>,
    session_token: Option<String>,
    allow_http: Option<bool>,
    config: Vec<(String, String)>,
    disk_cache: Option<(PathBuf, u64)>,
    lock_timeout: Duration,
}

impl Default for RemoteOptions {
    fn default() -> Self {
        RemoteOptions {
            concurrency: DEFAULT_CONCURRENCY,
            merge_gap: Some(DEFAULT_MERGE_GAP),
            retries: 3,
            timeout: Duration::from_secs(30),
            endpoint: None,
            region: None,
            access_key_id: None,
            secret_access_key: None,
            session_token: None,
            allow_http: None,
            config: Vec::new(),
            disk_cache: None,
            lock_timeout: Duration::ZERO,
        }
    }
}

impl RemoteOptions {
    /// Requests kept in flight while a read window is fetched (at least 1).
    pub fn with_concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }
    /// Requests kept in flight.
    pub fn concurrency(&self) -> usize {
        self.concurrency
    }
    /// Largest gap in bytes between two wanted inner chunks of one shard
    /// that one request bridges (`Some(0)`: merge only touching ranges;
    /// `None`: one request per inner chunk).
    pub fn with_merge_gap(mut self, bytes: Option<u64>) -> Self {
        self.merge_gap = bytes;
        self
    }
    /// Largest gap bridged; `None`: no merging.
    pub fn merge_gap(&self) -> Option<u64> {
        self.merge_gap
    }
    /// Retries of a transient failure (5xx, connection reset, timeout),
    /// with exponential backoff (100 ms doubling, at most 5 s).
    pub fn with_retries(mut self, n: usize) -> Self {
        self.retries = n;
        self
    }
    /// Retries of a transient failure.
    pub fn retries(&self) -> usize {
        self.retries
    }
    /// Time one request may take.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
    /// Time one request may take.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }
    /// The S3 endpoint (an S3-compatible service); else `AWS_ENDPOINT_URL`.
    pub fn with_endpoint(mut self, url: impl Into<String>) -> Self {
        self.endpoint = Some(url.into());
        self
    }
    /// The S3 endpoint set here.
    pub fn endpoint(&self) -> Option<&str> {
        self.endpoint.as_deref()
    }
    /// The S3 region; else `AWS_REGION`.
    pub fn with_region(mut self, region: impl Into<String>) -> Self {
        self.region = Some(region.into());
        self
    }
    /// The S3 region set here.
    pub fn region(&self) -> Option<&str> {
        self.region.as_deref()
    }
    /// S3 credentials; else `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY`.
    pub fn with_credentials(mut self, access_key_id: impl Into<String>, secret_access_key: impl Into<String>) -> Self {
        self.access_key_id = Some(access_key_id.into());
        self.secret_access_key = Some(secret_access_key.into());
        self
    }
    /// The S3 access key id set here.
    pub fn access_key_id(&self) -> Option<&str> {
        self.access_key_id.as_deref()
    }
    /// An S3 session token; else `AWS_SESSION_TOKEN`.
    pub fn with_session_token(mut self, token: impl Into<String>) -> Self {
        self.session_token = Some(token.into());
        self
    }
    /// Whether an S3 session token is set here.
    pub fn has_session_token(&self) -> bool {
        self.session_token.is_some()
    }
    /// Whether plain `http://` endpoints are allowed for object stores;
    /// else `AWS_ALLOW_HTTP` (`http(s)://` stores themselves always are).
    pub fn with_allow_http(mut self, allow: bool) -> Self {
        self.allow_http = Some(allow);
        self
    }
    /// Whether plain HTTP is allowed, if set here.
    pub fn allow_http(&self) -> Option<bool> {
        self.allow_http
    }
    /// Any other `object_store` configuration key of the URL's service
    /// (`aws_virtual_hosted_style_request`, `google_service_account`, ...).
    pub fn with_config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.config.push((key.into(), value.into()));
        self
    }
    /// The extra configuration keys set here.
    pub fn config(&self) -> &[(String, String)] {
        &self.config
    }
    /// Keeps the encoded chunks fetched in `dir`, at most `max_bytes` of
    /// them (the oldest removed first), so a later epoch or run reads them
    /// from disk; off by default.
    pub fn with_disk_cache(mut self, dir: impl AsRef<Path>, max_bytes: u64) -> Self {
        self.disk_cache = Some((dir.as_ref().to_path_buf(), max_bytes));
        self
    }
    /// The disk cache's folder and byte bound, if on.
    pub fn disk_cache(&self) -> Option<(&Path, u64)> {
        self.disk_cache.as_ref().map(|(p, b)| (p.as_path(), *b))
    }
    /// How long [`copy`](crate::store::remote::copy) waits for the writer
    /// lock of a local source or destination store held by another writer
    /// (see [`crate::store::lock`]); default zero: fail at once.
    pub fn with_lock_timeout(mut self, timeout: Duration) -> Self {
        self.lock_timeout = timeout;
        self
    }
    /// How long a copy waits for a writer lock.
    pub fn lock_timeout(&self) -> Duration {
        self.lock_timeout
    }
    // Read only by the client, which needs feature `remote`.
    #[cfg_attr(not(feature = "remote"), allow(dead_code))]
    pub(crate) fn secret_access_key(&self) -> Option<&str> {
        self.secret_access_key.as_deref()
    }
    #[cfg_attr(not(feature = "remote"), allow(dead_code))]
    pub(crate) fn session_token(&self) -> Option<&str> {
        self.session_token.as_deref()
    }
}
