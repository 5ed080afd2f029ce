//! A loopback HTTP server with Range support, for the remote-store tests
//! and `examples/http_latency.rs`: serves a directory (GET with `Range:
//! bytes=a-b`, `a-`, `-n`; HEAD), adds a fixed latency to every request,
//! counts requests and the most it ever had in flight, and injects faults.
//!
//! Why tiny_http: a blocking server with a worker pool is all a loopback
//! test needs; each worker sleeps its latency without holding the others.
#![allow(dead_code)]

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// What the server does wrong, on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Nothing.
    None,
    /// Every request answered 403.
    Forbidden,
    /// The next `n` requests answered 503, then normal service.
    Unavailable(u64),
    /// Bodies cut in half (the full Content-Length announced, then the
    /// connection closed).
    Truncate,
    /// Every request answered after this long.
    Stall(Duration),
}

/// Counters of a running server.
#[derive(Debug, Default)]
pub struct ServerStats {
    pub requests: AtomicU64,
    pub ranged: AtomicU64,
    in_flight: AtomicU64,
    pub max_in_flight: AtomicU64,
    pub unavailable_left: AtomicU64,
}

/// A running server; stopped when dropped.
pub struct HttpServer {
    pub url: String,
    pub stats: Arc<ServerStats>,
    server: Arc<tiny_http::Server>,
    stop: Arc<AtomicBool>,
    workers: Vec<std::thread::JoinHandle<()>>,
}

impl HttpServer {
    /// Serves `root` on 127.0.0.1 (a free port) with `latency` added to
    /// every request, `workers` requests at a time.
    pub fn start(root: impl Into<PathBuf>, latency: Duration, workers: usize, fault: Fault) -> HttpServer {
        let root: PathBuf = root.into();
        let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("bind a loopback port"));
        let port = server.server_addr().to_ip().expect("an IP listener").port();
        let stats = Arc::new(ServerStats::default());
        if let Fault::Unavailable(n) = fault {
            stats.unavailable_left.store(n, Ordering::SeqCst);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let workers = (0..workers.max(1))
            .map(|_| {
                let (server, stats, stop, root) = (server.clone(), stats.clone(), stop.clone(), root.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::SeqCst) {
                        let Ok(Some(req)) = server.recv_timeout(Duration::from_millis(50)) else { continue };
                        let now = stats.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                        stats.max_in_flight.fetch_max(now, Ordering::SeqCst);
                        stats.requests.fetch_add(1, Ordering::SeqCst);
                        if !latency.is_zero() {
                            std::thread::sleep(latency);
                        }
                        // `serve` leaves the in-flight count before it answers, so a
                        // client's next request never overlaps this one's count.
                        serve(&root, req, fault, &stats);
                    }
                })
            })
            .collect();
        HttpServer { url: format!("http://127.0.0.1:{port}"), stats, server, stop, workers }
    }

    /// Requests served so far.
    pub fn requests(&self) -> u64 {
        self.stats.requests.load(Ordering::SeqCst)
    }

    /// The most requests ever in flight at once.
    pub fn max_in_flight(&self) -> u64 {
        self.stats.max_in_flight.load(Ordering::SeqCst)
    }

    /// Zeroes the counters.
    pub fn reset(&self) {
        self.stats.requests.store(0, Ordering::SeqCst);
        self.stats.ranged.store(0, Ordering::SeqCst);
        self.stats.max_in_flight.store(0, Ordering::SeqCst);
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.server.unblock();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

/// `bytes=a-b` / `a-` / `-n` as a range of an object of `len` bytes.
fn parse_range(v: &str, len: u64) -> Option<(u64, u64)> {
    let spec = v.trim().strip_prefix("bytes=")?;
    let (a, b) = spec.split_once('-')?;
    let (start, end) = match (a.trim(), b.trim()) {
        ("", n) => {
            let n: u64 = n.parse().ok()?;
            (len.saturating_sub(n), len)
        }
        (a, "") => (a.parse().ok()?, len),
        (a, b) => (a.parse().ok()?, b.parse::<u64>().ok()?.saturating_add(1).min(len)),
    };
    (start < end || (start == 0 && len == 0)).then_some((start, end))
}

fn serve(root: &std::path::Path, req: tiny_http::Request, fault: Fault, stats: &ServerStats) {
    use tiny_http::{Header, Response, StatusCode};
    let done = || {
        stats.in_flight.fetch_sub(1, Ordering::SeqCst);
    };
    let status = |req: tiny_http::Request, code: u16| {
        done();
        let _ = req.respond(Response::empty(StatusCode(code)));
    };
    match fault {
        Fault::Forbidden => return status(req, 403),
        Fault::Stall(d) => std::thread::sleep(d),
        Fault::Unavailable(_) => {
            let left = &stats.unavailable_left;
            if left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok() {
                return status(req, 503);
            }
        }
        _ => {}
    }
    let rel = req.url().split('?').next().unwrap_or("").trim_start_matches('/').to_string();
    let rel = percent_decode(&rel);
    if rel.split('/').any(|c| c == "..") {
        return status(req, 400);
    }
    let path = root.join(&rel);
    let Ok(mut file) = std::fs::File::open(&path) else { return status(req, 404) };
    let Ok(meta) = file.metadata() else { return status(req, 404) };
    if !meta.is_file() {
        return status(req, 404);
    }
    let len = meta.len();
    let range = req.headers().iter().find(|h| h.field.equiv("Range")).map(|h| h.value.as_str().to_string());
    let (start, end, code) = match range {
        None => (0, len, 200),
        Some(r) => match parse_range(&r, len) {
            Some((s, e)) => {
                stats.ranged.fetch_add(1, Ordering::SeqCst);
                (s, e, 206)
            }
            None => return status(req, 416),
        },
    };
    let mut body = vec![0u8; (end - start) as usize];
    if file.seek(SeekFrom::Start(start)).and_then(|_| file.read_exact(&mut body)).is_err() {
        return status(req, 500);
    }
    if fault == Fault::Truncate && req.method() != &tiny_http::Method::Head && body.len() > 1 {
        // Announce the whole body, send half, close.
        let head = format!(
            "HTTP/1.1 {code} X\r\nContent-Length: {}\r\nContent-Range: bytes {start}-{}/{len}\r\nConnection: close\r\n\r\n",
            body.len(),
            end.saturating_sub(1)
        );
        done();
        let mut w = req.into_writer();
        let _ = w.write_all(head.as_bytes());
        let _ = w.write_all(&body[..body.len() / 2]);
        let _ = w.flush();
        return;
    }
    // Never chunked: object stores (and object_store's client) expect a
    // Content-Length on every body.
    let mut resp = Response::from_data(body).with_status_code(StatusCode(code)).with_chunked_threshold(usize::MAX);
    if code == 206 {
        let v = format!("bytes {start}-{}/{len}", end.saturating_sub(1));
        resp.add_header(Header::from_bytes("Content-Range", v).expect("an ASCII header"));
    }
    resp.add_header(Header::from_bytes("Accept-Ranges", "bytes").expect("an ASCII header"));
    done();
    let _ = req.respond(resp);
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && let Some(v) = s.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
