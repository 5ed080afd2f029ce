//! A store read over loopback HTTP with latency added to every request,
//! against the same read from disk: the latency figure of docs/REMOTE.md.
//!
//! ```text
//! cargo run --release --example http_latency -- STORE [--latency-ms 5] [--workers 128]
//!     [--read-mode raw|batch|single] [--read-order shuffle|sequential] [--epochs 1]
//!     [--concurrency 64] [--merge-gap BYTES | --no-merge] [--cache-bytes N]
//! cargo run --release --example http_latency -- STORE --latency-ms 5 --serve-only SECONDS
//! ```
//!
//! `--serve-only` just serves the store's folder (printing the store's URL)
//! for that long, for `atomzarr read URL ...` by hand.
//!
//! Serves the store's parent folder with the test suite's HTTP server
//! (`tests/common/http_server.rs`: Range requests, a sleep of the latency
//! per request, many requests at once), times one read of every sample
//! locally and over HTTP, and prints both rows (JSON), the throughput ratio
//! (remote / local) and the requests per epoch.

#[path = "../tests/common/http_server.rs"]
mod http_server;

use std::path::PathBuf;
use std::time::Duration;

use atomzarr::bench::{ReadOptions, ReadOrder, ReadPath, read_bench};
use atomzarr::store::remote::RemoteOptions;

fn main() -> atomzarr::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut store: Option<PathBuf> = None;
    let (mut latency_ms, mut workers) = (5u64, 128usize);
    let mut opts = ReadOptions { paths: vec![ReadPath::Raw], order: ReadOrder::Shuffle, ..ReadOptions::default() };
    let mut remote = RemoteOptions::default();
    let mut serve_only: Option<u64> = None;
    let bad = |what: &str| atomzarr::Error::Config(format!("http_latency: bad or missing value for {what}"));
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| bad(name));
        match a.as_str() {
            "--latency-ms" => latency_ms = value(&a)?.parse().map_err(|_| bad(&a))?,
            "--workers" => workers = value(&a)?.parse().map_err(|_| bad(&a))?,
            "--epochs" => opts.epochs = value(&a)?.parse().map_err(|_| bad(&a))?,
            "--cache-bytes" => opts.cache_bytes = value(&a)?.parse().map_err(|_| bad(&a))?,
            "--concurrency" => remote = remote.with_concurrency(value(&a)?.parse().map_err(|_| bad(&a))?),
            "--merge-gap" => remote = remote.with_merge_gap(Some(value(&a)?.parse().map_err(|_| bad(&a))?)),
            "--no-merge" => remote = remote.with_merge_gap(None),
            "--serve-only" => serve_only = Some(value(&a)?.parse().map_err(|_| bad(&a))?),
            "--read-mode" => {
                opts.paths = vec![match value(&a)?.as_str() {
                    "raw" => ReadPath::Raw,
                    "batch" => ReadPath::Batch,
                    "single" => ReadPath::Single,
                    _ => return Err(bad(&a)),
                }]
            }
            "--read-order" => {
                opts.order = match value(&a)?.as_str() {
                    "shuffle" => ReadOrder::Shuffle,
                    "sequential" => ReadOrder::Sequential,
                    _ => return Err(bad(&a)),
                }
            }
            _ if store.is_none() && !a.starts_with("--") => store = Some(PathBuf::from(a)),
            _ => return Err(bad(&a)),
        }
    }
    let store = store.ok_or_else(|| bad("STORE"))?;
    let (Some(parent), Some(name)) = (store.parent(), store.file_name()) else { return Err(bad("STORE")) };
    opts.remote = remote;

    let root = if parent.as_os_str().is_empty() { std::path::Path::new(".") } else { parent };
    if let Some(secs) = serve_only {
        let server =
            http_server::HttpServer::start(root, Duration::from_millis(latency_ms), workers, http_server::Fault::None);
        println!("{}/{}", server.url, name.to_string_lossy());
        std::thread::sleep(Duration::from_secs(secs));
        return Ok(());
    }
    let local = read_bench(&store, &opts)?;
    let server =
        http_server::HttpServer::start(root, Duration::from_millis(latency_ms), workers, http_server::Fault::None);
    let url = format!("{}/{}", server.url, name.to_string_lossy());
    let over_http = read_bench(url.as_str(), &opts)?;
    for r in local.iter().chain(&over_http) {
        println!(
            "{}",
            serde_json::to_string(r)
                .map_err(|e| atomzarr::Error::Serialization { what: "the JSON report".into(), source: e })?
        );
    }
    for (l, h) in local.iter().zip(&over_http) {
        println!(
            "epoch {}: local {:.0} samples/s, HTTP +{latency_ms} ms {:.0} samples/s: ratio {:.2}; \
             {} requests over HTTP ({} bytes), server saw at most {} in flight",
            h.epoch,
            l.read_samples_per_s,
            h.read_samples_per_s,
            h.read_samples_per_s / l.read_samples_per_s,
            h.requests,
            h.fetched_bytes,
            server.max_in_flight()
        );
    }
    Ok(())
}
