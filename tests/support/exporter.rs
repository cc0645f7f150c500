//! A dcgm-exporter stand-in for live tests and benchmarks: answers every
//! request with the same text (verbatim exporter output) and counts them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Serves `text` at `ip`, on `port` if free (else any): returns the port
/// and how many reads it has answered. The API server refuses to proxy to
/// loopback, so tests that go through its pod proxy pass
/// [`network_address`].
pub fn serve(ip: &str, port: u16, text: String) -> (u16, Arc<AtomicU64>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind((ip, port))
        .or_else(|_| std::net::TcpListener::bind((ip, 0)))
        .expect("a port for the stand-in exporter");
    let port = listener.local_addr().expect("a bound address").port();
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
