//! Stores on an S3-compatible server the test starts itself: moto's
//! `moto_server` (PyPI `moto[server]`; `.ci/run` installs it in a venv and
//! sets `ATOMZARR_MOTO_SERVER`). Every fixture is published with `copy`,
//! then dumps over `s3://` exactly as its `expected.json`, through the
//! library (options) and the CLI (AWS_* environment variables); copied
//! back, it dumps so again. A missing bucket is a typed error naming it.
//!
//! Without moto_server this test fails, saying how to install it: a
//! skipped S3 test would pass CI with the S3 path untested.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use atomzarr::store::remote::{RemoteOptions, copy};
use atomzarr::{AtomicDataZarrReader, Error, ReaderOptions, RemoteErrorKind};
use common::{assets, dump_json, expected_dump, fixture_names, tmpdir};

/// A running moto_server; killed when dropped.
struct Moto {
    child: Child,
    endpoint: String,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The moto_server to run: `ATOMZARR_MOTO_SERVER`, else one on `PATH`, else
/// the one `.ci/run` installs in `.ci/venv`, else one this test installs
/// once in `target/moto-venv` (python3 with pip and network access), so
/// that the README's `cargo test --release` needs no set-up step of its own.
fn moto_server() -> String {
    static FOUND: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    FOUND
        .get_or_init(|| {
            if let Ok(p) = std::env::var("ATOMZARR_MOTO_SERVER") {
                return p;
            }
            let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
            let on_path = std::env::var_os("PATH")
                .and_then(|paths| std::env::split_paths(&paths).map(|d| d.join("moto_server")).find(|p| p.is_file()));
            let ci = root.join(".ci/venv/bin/moto_server");
            let own = root.join("target/moto-venv/bin/moto_server");
            if let Some(p) = on_path.or_else(|| Some(ci).filter(|p| p.is_file())) {
                return p.display().to_string();
            }
            if !own.is_file() {
                eprintln!("remote_s3: installing moto[server] into target/moto-venv (once)");
                let venv = root.join("target/moto-venv");
                let ok = Command::new("python3").arg("-m").arg("venv").arg(&venv).status().is_ok_and(|s| s.success())
                    && Command::new(venv.join("bin/pip"))
                        .args(["install", "--quiet", "moto[server]"])
                        .status()
                        .is_ok_and(|s| s.success());
                assert!(
                    ok && own.is_file(),
                    "moto_server not found and could not be installed: install it \
                     (python3 -m venv .ci/venv && .ci/venv/bin/pip install 'moto[server]') \
                     or point ATOMZARR_MOTO_SERVER at one"
                );
            }
            own.display().to_string()
        })
        .clone()
}

fn start_moto() -> Moto {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = Command::new(moto_server())
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start moto_server");
    let moto = Moto { child, endpoint: format!("http://127.0.0.1:{port}") };
    let t0 = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(t0.elapsed() < Duration::from_secs(30), "moto_server did not listen on {port} within 30 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    moto
}

/// Creates `bucket` (moto accepts unsigned requests): one plain HTTP PUT.
fn create_bucket(endpoint: &str, bucket: &str) {
    let host = endpoint.trim_start_matches("http://");
    let mut s = TcpStream::connect(host).unwrap();
    write!(s, "PUT /{bucket} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "create bucket {bucket}: {reply}");
}

fn options(endpoint: &str) -> RemoteOptions {
    RemoteOptions::default()
        .with_endpoint(endpoint)
        .with_region("us-east-1")
        .with_credentials("testing", "testing")
        .with_allow_http(true)
        .with_retries(1)
}

#[test]
fn fixtures_published_to_s3_dump_as_expected() {
    let moto = start_moto();
    create_bucket(&moto.endpoint, "stores");
    let opts = options(&moto.endpoint);
    let back = tmpdir();
    for name in fixture_names() {
        let local = assets().join(format!("{name}.zarr"));
        let url = format!("s3://stores/published/{name}.zarr");
        let report = copy(local.to_str().unwrap(), &url, &opts).unwrap();
        assert_eq!(report.objects as usize, common::snapshot(&local).len(), "{name}: every file copied");
        let r = AtomicDataZarrReader::open_remote(&url, ReaderOptions::default(), opts.clone()).unwrap();
        assert_eq!(
            dump_json(&r).trim(),
            expected_dump(&name).trim(),
            "{name}: dump over s3:// differs from expected.json"
        );
        // And back again.
        let again = back.path().join(format!("{name}.zarr"));
        copy(&url, again.to_str().unwrap(), &opts).unwrap();
        let r = AtomicDataZarrReader::open(&again).unwrap();
        assert_eq!(dump_json(&r).trim(), expected_dump(&name).trim(), "{name}: copied back from s3://");
        // A second copy onto the same URL is refused (no overwrite).
        let e = copy(local.to_str().unwrap(), &url, &opts).unwrap_err();
        assert!(matches!(e, Error::AlreadyExists { .. }), "{e}");
    }
    // The CLI, configured by the AWS_* environment variables alone.
    let name = &fixture_names()[0];
    let out = Command::new(env!("CARGO_BIN_EXE_atomzarr"))
        .args(["dump", &format!("s3://stores/published/{name}.zarr")])
        .env("AWS_ENDPOINT_URL", &moto.endpoint)
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ALLOW_HTTP", "true")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8(out.stdout).unwrap().trim(), expected_dump(name).trim());
}

#[test]
fn a_missing_bucket_or_store_is_a_typed_error_naming_it() {
    let moto = start_moto();
    create_bucket(&moto.endpoint, "empty");
    let opts = options(&moto.endpoint).with_retries(0);
    for url in ["s3://no-such-bucket/x.zarr", "s3://empty/x.zarr"] {
        let e = AtomicDataZarrReader::open_remote(url, ReaderOptions::default(), opts.clone()).unwrap_err();
        match &e {
            Error::Remote { kind: RemoteErrorKind::NotFound, url: u, .. } => {
                assert!(u.starts_with(url), "{u} names {url}")
            }
            other => panic!("{url}: expected a not-found error, got {other}"),
        }
    }
}
