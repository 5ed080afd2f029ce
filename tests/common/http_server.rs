//! A loopback HTTP/1.1 server with Range support, for the remote-store
//! tests and `examples/http_latency.rs`: serves a directory (GET with
//! `Range: bytes=a-b`, `a-`, `-n`; HEAD; keep-alive), adds a fixed latency
//! to every request, counts requests and the most it ever had in flight,
//! and injects faults.
//!
//! Why by hand rather than tiny_http: tiny_http 0.12's task pool can leave a
//! new connection queued behind idle keep-alive connections when several
//! arrive at once (two spawns both see one waiting thread), which stalls a
//! client that opens many connections at once until its timeout. Here every
//! connection has its own thread.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
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
    /// Bodies cut in half: the full Content-Length announced, half sent,
    /// the connection closed.
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

/// A running server; stops accepting when dropped.
pub struct HttpServer {
    pub url: String,
    pub stats: Arc<ServerStats>,
    stop: Arc<AtomicBool>,
    addr: std::net::SocketAddr,
    accept: Option<std::thread::JoinHandle<()>>,
}

impl HttpServer {
    /// Serves `root` on 127.0.0.1 (a free port), sleeping `latency` before
    /// answering each request. `_workers` is kept for callers; every
    /// connection has its own thread.
    pub fn start(root: impl Into<PathBuf>, latency: Duration, _workers: usize, fault: Fault) -> HttpServer {
        let root: Arc<PathBuf> = Arc::new(root.into());
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let addr = listener.local_addr().expect("a local address");
        let stats = Arc::new(ServerStats::default());
        if let Fault::Unavailable(n) = fault {
            stats.unavailable_left.store(n, Ordering::SeqCst);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let accept = {
            let (stats, stop) = (stats.clone(), stop.clone());
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(conn) = conn else { continue };
                    let (root, stats) = (root.clone(), stats.clone());
                    std::thread::spawn(move || connection(conn, &root, latency, fault, &stats));
                }
            })
        };
        HttpServer { url: format!("http://{addr}"), stats, stop, addr, accept: Some(accept) }
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
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(a) = self.accept.take() {
            let _ = a.join();
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
    (start < end).then_some((start, end))
}

/// Serves the requests of one connection until the client closes it.
fn connection(conn: TcpStream, root: &Path, latency: Duration, fault: Fault, stats: &ServerStats) {
    let _ = conn.set_nodelay(true);
    let Ok(write_half) = conn.try_clone() else { return };
    let mut out = std::io::BufWriter::new(write_half);
    let mut input = BufReader::new(conn);
    loop {
        let mut line = String::new();
        if input.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, target) = (parts.next().unwrap_or("").to_string(), parts.next().unwrap_or("").to_string());
        let mut range = None;
        loop {
            let mut h = String::new();
            if input.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':')
                && k.trim().eq_ignore_ascii_case("range")
            {
                range = Some(v.trim().to_string());
            }
        }
        let now = stats.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        stats.max_in_flight.fetch_max(now, Ordering::SeqCst);
        stats.requests.fetch_add(1, Ordering::SeqCst);
        if !latency.is_zero() {
            std::thread::sleep(latency);
        }
        let (status, headers, body, cut) = answer(root, &method, &target, range.as_deref(), fault, stats);
        // Out of the in-flight count before answering, so the client's next
        // request never overlaps this one's count.
        stats.in_flight.fetch_sub(1, Ordering::SeqCst);
        let mut head = format!("HTTP/1.1 {status} X\r\nContent-Length: {}\r\n", body.len());
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        let send = if method == "HEAD" {
            &body[..0]
        } else if cut {
            &body[..body.len() / 2]
        } else {
            &body[..]
        };
        if out.write_all(head.as_bytes()).and_then(|()| out.write_all(send)).and_then(|()| out.flush()).is_err() || cut
        {
            return;
        }
    }
}

/// Status, extra headers, body, and whether to cut the body and close.
fn answer(
    root: &Path,
    method: &str,
    target: &str,
    range: Option<&str>,
    fault: Fault,
    stats: &ServerStats,
) -> (u16, Vec<(&'static str, String)>, Vec<u8>, bool) {
    let empty = |code| (code, vec![], vec![], false);
    match fault {
        Fault::Forbidden => return empty(403),
        Fault::Stall(d) => std::thread::sleep(d),
        Fault::Unavailable(_) => {
            let left = &stats.unavailable_left;
            if left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok() {
                return empty(503);
            }
        }
        _ => {}
    }
    if method != "GET" && method != "HEAD" {
        return empty(405);
    }
    let rel = percent_decode(target.split('?').next().unwrap_or("").trim_start_matches('/'));
    if rel.split('/').any(|c| c == "..") {
        return empty(400);
    }
    let Ok(mut file) = std::fs::File::open(root.join(&rel)) else { return empty(404) };
    let len = match file.metadata() {
        Ok(m) if m.is_file() => m.len(),
        _ => return empty(404),
    };
    let (start, end, code) = match range {
        None => (0, len, 200),
        Some(r) => match parse_range(r, len) {
            Some((s, e)) => {
                stats.ranged.fetch_add(1, Ordering::SeqCst);
                (s, e, 206)
            }
            None => return empty(416),
        },
    };
    let mut body = vec![0u8; (end - start) as usize];
    if method == "GET" && file.seek(SeekFrom::Start(start)).and_then(|_| file.read_exact(&mut body)).is_err() {
        return empty(500);
    }
    let mut headers = vec![("Accept-Ranges", "bytes".to_string())];
    if code == 206 {
        headers.push(("Content-Range", format!("bytes {start}-{}/{len}", end - 1)));
    }
    (code, headers, body, fault == Fault::Truncate && method == "GET" && end - start > 1)
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
