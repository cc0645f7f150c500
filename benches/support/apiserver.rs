//! What a tool costs the cluster: the API server's CPU time (from /proc)
//! and the requests it has answered (its own `apiserver_request_total`),
//! and a stand-in dcgm-exporter that counts the reads reaching it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// `apiserver_request_total` by series (verb, resource, code, …): each
/// request the server has finished (a watch counts when it ends).
pub fn requests_by_series(metrics: &str) -> std::collections::BTreeMap<String, f64> {
    metrics
        .lines()
        .filter_map(|l| l.strip_prefix("apiserver_request_total"))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            Some((series.to_string(), value.parse::<f64>().ok()?))
        })
        .collect()
}

/// One reading of the API server: CPU seconds and requests answered.
#[derive(Clone)]
pub struct Reading {
    pub cpu: f64,
    pub requests: std::collections::BTreeMap<String, f64>,
    pub at: std::time::Instant,
}

impl Reading {
    fn total(&self) -> f64 {
        self.requests.values().sum()
    }
}

pub struct Meter {
    pub pid: u32,
    pub client: kube::Client,
}

impl Meter {
    pub async fn read(&self) -> Reading {
        let req = http::Request::get("/metrics").body(Vec::new()).unwrap();
        let text = self.client.request_text(req).await.unwrap_or_default();
        Reading {
            cpu: super::terminal::cpu_seconds(self.pid),
            requests: requests_by_series(&text),
            at: std::time::Instant::now(),
        }
    }
}

/// CPU share of one core and requests per second between two readings; the
/// second reading's own scrape of /metrics is not counted.
pub fn rates(before: &Reading, after: &Reading) -> (f64, f64) {
    let secs = (after.at - before.at).as_secs_f64().max(1e-9);
    ((after.cpu - before.cpu) / secs, (after.total() - before.total() - 1.0).max(0.0) / secs)
}

/// The series that grew most between two readings, with their counts: what
/// a tool asked the server for.
pub fn busiest(before: &Reading, after: &Reading, n: usize) -> Vec<(String, f64)> {
    let mut grown: Vec<(String, f64)> = after
        .requests
        .iter()
        .map(|(k, v)| (k.clone(), v - before.requests.get(k).copied().unwrap_or(0.0)))
        .filter(|(_, d)| *d > 0.0)
        .collect();
    grown.sort_by(|a, b| b.1.total_cmp(&a.1));
    grown.truncate(n);
    grown
}

/// A dcgm-exporter at `ip` answering every read with `text`; returns its
/// port and the count of reads it has answered. (The API server refuses to
/// proxy to loopback, so `ip` is this machine's network address.)
pub fn fake_exporter(ip: &str, port: u16, text: String) -> (u16, Arc<AtomicU64>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind((ip, port))
        .or_else(|_| std::net::TcpListener::bind((ip, 0)))
        .expect("a port for the stand-in exporter");
    let port = listener.local_addr().unwrap().port();
    let served = Arc::new(AtomicU64::new(0));
    let count = served.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                text.len()
            );
            let _ = s.write_all(head.as_bytes()).and_then(|_| s.write_all(text.as_bytes()));
            count.fetch_add(1, Ordering::Relaxed);
        }
    });
    (port, served)
}

/// This machine's address on its network (not loopback), found by the route
/// a UDP socket would take; nothing is sent.
pub fn network_address() -> Option<String> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("192.0.2.1:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then(|| ip.to_string())
}
