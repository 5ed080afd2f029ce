//! Stores read over HTTP from a loopback server this test starts
//! (`common::http_server`, Range support, added latency, injected faults):
//! every fixture dumps exactly as its `expected.json`; many requests are in
//! flight at once under the concurrency knob; merging cuts the requests to
//! what the shard layout predicts; errors are typed and name the URL.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::path::Path;
use std::time::Duration;

use atomzarr::store::remote::RemoteOptions;
use atomzarr::{
    AtomicDataZarrReader, AtomicDataZarrWriter, Codec, Error, ReaderOptions, RemoteErrorKind, ZarrArrayConfig,
    ZarrWriteConfig,
};
use common::http_server::{Fault, HttpServer};
use common::{assets, cli, dump_json, expected_dump, fixture_names, read_all, tmpdir};

#[test]
fn every_fixture_dumps_over_http_as_expected() {
    let server = HttpServer::start(assets(), Duration::ZERO, 8, Fault::None);
    for name in fixture_names() {
        let url = format!("{}/{name}.zarr", server.url);
        let r = AtomicDataZarrReader::open(&url).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(r.is_remote());
        assert_eq!(
            dump_json(&r).trim(),
            expected_dump(&name).trim(),
            "{name}: dump over HTTP differs from expected.json"
        );
        assert!(r.io_stats().requests > 0 && r.io_stats().bytes > 0, "{name}: requests are counted");
    }
    // The CLI's read-side commands take URLs too.
    let name = &fixture_names()[0];
    let url = format!("{}/{name}.zarr", server.url);
    let (ok, stdout, stderr) = cli(&["dump", &url]);
    assert!(ok, "dump {url}: {stderr}");
    assert_eq!(stdout.trim(), expected_dump(name).trim());
    let (ok, stdout, stderr) = cli(&["inspect", &url]);
    assert!(ok, "inspect {url}: {stderr}");
    assert!(stdout.contains("core/positions"), "inspect lists the arrays: {stdout}");
}

#[test]
fn file_urls_read_as_paths() {
    for name in fixture_names() {
        let path = assets().join(format!("{name}.zarr"));
        let url = format!("file://{}", path.display());
        let r = AtomicDataZarrReader::open(&url).unwrap();
        assert!(!r.is_remote());
        assert_eq!(dump_json(&r).trim(), expected_dump(&name).trim(), "{name} via {url}");
    }
}

/// A store of many small inner chunks (8 per shard), so one read needs
/// many requests.
fn chunky_store(dir: &Path, n: usize) -> std::path::PathBuf {
    let path = dir.join("chunky.zarr");
    let samples = atomzarr::data::synth::generate(n, 4, 12, 7).unwrap();
    let cfg = ZarrArrayConfig::default().with_codec(Codec::Zstd { level: 1 }).with_chunk_size(64).with_shard_size(512);
    let mut w = AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default().with_core(cfg)).unwrap();
    w.write(&samples).unwrap();
    path
}

/// Inner chunks and shard files of the store's field arrays, from their
/// zarr.json (shape and sharding chunk shapes) and the files on disk.
fn layout(store: &Path) -> (u64, u64) {
    let root = common::json(&store.join("zarr.json"));
    let (mut chunks, mut shards) = (0, 0);
    for (group, names) in root["attributes"]["fields"].as_object().unwrap() {
        for name in names.as_object().unwrap().keys() {
            let meta = common::zarr_json(store, &format!("{group}/{name}"));
            let rows = meta["shape"][0].as_u64().unwrap();
            let inner = meta["codecs"][0]["configuration"]["chunk_shape"][0].as_u64().unwrap();
            chunks += rows.div_ceil(inner);
            let dir = store.join(group).join(name);
            shards += walk_files(&dir).into_iter().filter(|p| !p.ends_with("zarr.json")).count() as u64;
        }
    }
    (chunks, shards)
}

fn walk_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.path().is_dir() {
            out.extend(walk_files(&e.path()));
        } else {
            out.push(e.path());
        }
    }
    out
}

fn open_remote(url: &str, remote: RemoteOptions) -> AtomicDataZarrReader {
    AtomicDataZarrReader::open_remote(url, ReaderOptions::default(), remote).unwrap()
}

#[test]
fn requests_are_in_flight_together_under_the_concurrency_knob() {
    let dir = tmpdir();
    let store = chunky_store(dir.path(), 600);
    let want = read_all(&AtomicDataZarrReader::open(&store).unwrap());
    let server = HttpServer::start(dir.path(), Duration::from_millis(20), 64, Fault::None);
    let url = format!("{}/chunky.zarr", server.url);
    for (concurrency, lo, hi) in [(16u64, 8u64, 16u64), (1, 1, 1)] {
        let r = open_remote(&url, RemoteOptions::default().with_concurrency(concurrency as usize).with_merge_gap(None));
        server.reset();
        let got = read_all(&r);
        assert_eq!(got, want, "concurrency {concurrency}: the data");
        let seen = server.max_in_flight();
        assert!(
            (lo..=hi).contains(&seen),
            "concurrency {concurrency}: {seen} requests were in flight at most, expected {lo}..={hi}"
        );
    }
}

#[test]
fn merging_cuts_requests_to_one_per_shard() {
    let dir = tmpdir();
    let store = chunky_store(dir.path(), 600);
    let (chunks, shards) = layout(&store);
    assert!(chunks > 2 * shards, "the store has several inner chunks per shard ({chunks} in {shards})");
    let server = HttpServer::start(dir.path(), Duration::ZERO, 16, Fault::None);
    let url = format!("{}/chunky.zarr", server.url);
    let mut counts = Vec::new();
    for gap in [None, Some(0), Some(1 << 20)] {
        let r = open_remote(&url, RemoteOptions::default().with_merge_gap(gap));
        let before = r.io_stats().requests;
        let served = server.requests();
        read_all(&r);
        let made = r.io_stats().requests - before;
        assert_eq!(server.requests() - served, made, "gap {gap:?}: the counter matches the server's");
        counts.push(made);
    }
    // Each shard's index once, then one request per inner chunk, or, merged,
    // one per shard (a whole-store read wants every chunk: no gaps).
    assert_eq!(counts[0], shards + chunks, "no merging");
    assert_eq!(counts[1], shards + shards, "touching ranges merged");
    assert_eq!(counts[2], shards + shards, "1 MiB gap");
}

#[test]
fn the_disk_cache_saves_the_second_read_its_chunk_requests() {
    let dir = tmpdir();
    let store = chunky_store(dir.path(), 300);
    let (_, shards) = layout(&store);
    let cache = tmpdir();
    let server = HttpServer::start(dir.path(), Duration::ZERO, 16, Fault::None);
    let url = format!("{}/chunky.zarr", server.url);
    let opts = RemoteOptions::default().with_merge_gap(None).with_disk_cache(cache.path(), 64 << 20);
    let first = open_remote(&url, opts.clone());
    let want = read_all(&first);
    let second = open_remote(&url, opts);
    let before = second.io_stats().requests;
    assert_eq!(read_all(&second), want);
    assert_eq!(second.io_stats().requests - before, shards, "only the shard indexes are fetched again");
    // A bound smaller than one chunk keeps nothing.
    let tiny = tmpdir();
    let r = open_remote(&url, RemoteOptions::default().with_disk_cache(tiny.path(), 1));
    read_all(&r);
    assert_eq!(std::fs::read_dir(tiny.path()).unwrap().count(), 0);
}

fn open_err(url: &str, remote: RemoteOptions) -> Error {
    AtomicDataZarrReader::open_remote(url, ReaderOptions::default(), remote).expect_err("the open should fail")
}

fn kind_of(e: &Error) -> (RemoteErrorKind, String) {
    match e {
        Error::Remote { kind, url, .. } => (*kind, url.clone()),
        other => panic!("expected a remote error, got {other:?}"),
    }
}

#[test]
fn errors_are_typed_and_name_the_url() {
    let name = &fixture_names()[0];
    let quick = RemoteOptions::default().with_retries(0).with_timeout(Duration::from_millis(300));

    let ok = HttpServer::start(assets(), Duration::ZERO, 4, Fault::None);
    let missing = format!("{}/no-such.zarr", ok.url);
    let (kind, url) = kind_of(&open_err(&missing, quick.clone()));
    assert_eq!(kind, RemoteErrorKind::NotFound);
    assert!(url.starts_with(&missing), "{url}");

    let denied = HttpServer::start(assets(), Duration::ZERO, 4, Fault::Forbidden);
    let (kind, url) = kind_of(&open_err(&format!("{}/{name}.zarr", denied.url), quick.clone()));
    assert_eq!(kind, RemoteErrorKind::Forbidden, "{url}");

    let stalled = HttpServer::start(assets(), Duration::ZERO, 4, Fault::Stall(Duration::from_secs(2)));
    let (kind, url) = kind_of(&open_err(&format!("{}/{name}.zarr", stalled.url), quick.clone()));
    assert_eq!(kind, RemoteErrorKind::Timeout, "{url}");
    assert!(url.contains(name.as_str()));

    let cut = truncating_server();
    let (kind, url) = kind_of(&open_err(&format!("{cut}/{name}.zarr"), quick.clone()));
    assert_eq!(kind, RemoteErrorKind::Truncated, "{url}");
}

/// A server that announces 100 bytes, sends 10 and closes the connection
/// (tiny_http keeps connections open, so this one is a bare socket).
fn truncating_server() -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf);
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"zarr_for");
            let _ = conn.shutdown(std::net::Shutdown::Both);
        }
    });
    url
}

#[test]
fn transient_failures_are_retried() {
    let name = &fixture_names()[0];
    let flaky = HttpServer::start(assets(), Duration::ZERO, 4, Fault::Unavailable(2));
    let url = format!("{}/{name}.zarr", flaky.url);
    let r = open_remote(&url, RemoteOptions::default().with_retries(3));
    assert_eq!(dump_json(&r).trim(), expected_dump(name).trim());
    let down = HttpServer::start(assets(), Duration::ZERO, 4, Fault::Unavailable(u64::MAX));
    let url = format!("{}/{name}.zarr", down.url);
    let (kind, _) = kind_of(&open_err(&url, RemoteOptions::default().with_retries(1)));
    assert_eq!(kind, RemoteErrorKind::Other, "503 after the retries fails");
}

#[test]
fn cli_copy_makes_a_store_that_dumps_the_same() {
    let dir = tmpdir();
    let name = &fixture_names()[0];
    let src = assets().join(format!("{name}.zarr"));
    let dst = dir.path().join("copied.zarr");
    let (ok, stdout, stderr) = cli(&["copy", src.to_str().unwrap(), &format!("file://{}", dst.display())]);
    assert!(ok, "copy: {stderr}");
    assert!(stdout.contains("objects"), "{stdout}");
    let r = AtomicDataZarrReader::open(&dst).unwrap();
    assert_eq!(dump_json(&r).trim(), expected_dump(name).trim());
    let (ok, _, stderr) = cli(&["copy", src.to_str().unwrap(), dst.to_str().unwrap()]);
    assert!(!ok && stderr.contains("already exists"), "a second copy is refused: {stderr}");
    let (ok, _, stderr) = cli(&["copy", src.to_str().unwrap(), "http://127.0.0.1:1/x.zarr"]);
    assert!(!ok && stderr.contains("read-only"), "HTTP is no destination: {stderr}");
}

#[test]
fn writers_refuse_remote_urls() {
    for url in ["s3://bucket/x.zarr", "http://127.0.0.1:1/x.zarr"] {
        let e = AtomicDataZarrWriter::create(url, ZarrWriteConfig::default()).err().expect("create refused");
        assert!(matches!(&e, Error::RemoteReadOnly { url: u, .. } if u == url), "{e}");
        let e = AtomicDataZarrWriter::open(url, ZarrWriteConfig::default()).err().expect("open refused");
        assert!(matches!(e, Error::RemoteReadOnly { .. }), "{e}");
    }
    assert!(!Path::new("s3:").exists() && !Path::new("http:").exists(), "no local folder made of a URL");
}
