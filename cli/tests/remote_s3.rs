//! Stores on an S3-compatible server the test starts itself: moto's
//! `moto_server` (PyPI `moto[server]`; `.ci/run` installs it in a venv and
//! sets `ATOMZARR_MOTO_SERVER`). Every fixture is published with `copy`,
//! then dumps over `s3://` exactly as its `expected.json`, through the
//! library (options) and the CLI (AWS_* environment variables); copied
//! back, it dumps so again. A missing bucket is a typed error naming it.
//!
//! Without moto_server this test fails, saying how to install it: a
//! skipped S3 test would pass CI with the S3 path untested.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use atomzarr::store::remote::{RemoteOptions, copy};
use atomzarr::{AtomicDataZarrReader, Error, ReaderOptions, RemoteErrorKind};
use common::{assets, dump_json, expected_dump, fixture_names, tmpdir};

/// A running moto_server; killed when dropped.
struct Moto {
    child: Child,
    endpoint: String,
    /// The last lines moto wrote to stderr, for a failure message.
    log: Arc<Mutex<VecDeque<String>>>,
}

impl Moto {
    /// Whether moto is still running, and what it last logged.
    fn describe(&mut self) -> String {
        let state = match self.child.try_wait() {
            Ok(None) => "running".to_string(),
            Ok(Some(status)) => format!("exited: {status}"),
            Err(e) => format!("state unknown: {e}"),
        };
        let log = self.log.lock().map(|l| l.iter().cloned().collect::<Vec<_>>().join("\n")).unwrap_or_default();
        format!("moto_server {state}; its last lines:\n{log}")
    }
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
            let root = common::repo_root();
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

/// Starts moto_server on a port it binds itself (`-p 0`), so no other
/// process can take the port between its choice and its bind, reads the
/// port back from the line werkzeug logs (` * Running on
/// http://127.0.0.1:PORT`), and returns once the server answers a real
/// HTTP request, not merely a TCP accept.
fn start_moto() -> Moto {
    let mut child = Command::new(moto_server())
        .args(["-H", "127.0.0.1", "-p", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start moto_server");
    let stderr = child.stderr.take().expect("piped stderr");
    let log = Arc::new(Mutex::new(VecDeque::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    // Reads stderr to the end (moto logs every request there, and a full
    // pipe would stall it), keeping the last lines for failure messages.
    std::thread::spawn({
        let log = log.clone();
        move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(addr) = line.split("Running on http://").nth(1)
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(addr.trim().to_string());
                }
                let mut log = log.lock().unwrap();
                if log.len() == 20 {
                    log.pop_front();
                }
                log.push_back(line);
            }
        }
    });
    let mut moto = Moto { child, endpoint: String::new(), log };
    let Ok(addr) = rx.recv_timeout(Duration::from_secs(60)) else {
        panic!("moto_server did not report its port within 60 s: {}", moto.describe())
    };
    moto.endpoint = format!("http://{addr}");
    let t0 = Instant::now();
    loop {
        match http(&addr, &format!("GET / HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")) {
            Ok(reply) if reply.starts_with("HTTP/1.") => return moto,
            Ok(reply) => panic!("moto_server on {addr} answered a non-HTTP reply {reply:?}: {}", moto.describe()),
            Err(e) if t0.elapsed() > Duration::from_secs(60) => {
                panic!("moto_server on {addr} did not answer within 60 s ({e}): {}", moto.describe())
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// One request on a fresh connection; the whole reply.
fn http(host: &str, request: &str) -> std::io::Result<String> {
    let mut s = TcpStream::connect(host)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    s.write_all(request.as_bytes())?;
    let mut reply = String::new();
    s.read_to_string(&mut reply)?;
    Ok(reply)
}

/// Creates `bucket` (moto accepts unsigned requests): one plain HTTP PUT,
/// retried a bounded number of times on a transport error.
fn create_bucket(moto: &mut Moto, bucket: &str) {
    let host = moto.endpoint.trim_start_matches("http://").to_string();
    let request = format!("PUT /{bucket} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    let mut attempt = 0;
    let reply = loop {
        match http(&host, &request) {
            Ok(reply) => break reply,
            Err(e) if attempt < 5 => {
                eprintln!("create bucket {bucket}: {e}; retrying");
                attempt += 1;
                std::thread::sleep(Duration::from_millis(200 << attempt));
            }
            Err(e) => panic!("create bucket {bucket} on {host}: {e} after {attempt} retries; {}", moto.describe()),
        }
    };
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
    let mut moto = start_moto();
    create_bucket(&mut moto, "stores");
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
    let mut moto = start_moto();
    create_bucket(&mut moto, "empty");
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
