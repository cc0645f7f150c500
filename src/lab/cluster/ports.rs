//! Loopback ports for a lab's components.
//!
//! A port from `bind(127.0.0.1:0)` lies in the kernel's ephemeral range, so
//! between our probe and the component's own bind the kernel may hand it to
//! someone else: another `bind(0)`, or the local end of an outgoing
//! connection (kube-apiserver's own connections to etcd took one in CI). Ports
//! below the ephemeral range are only ever taken by an explicit bind, so we
//! probe those, each once per process.

use std::net::TcpListener;
use std::ops::Range;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::lab::LabError;

/// Where ports are probed when the ephemeral range leaves no room below it.
const FALLBACK: Range<u32> = 20_000..32_000;
/// The lowest port we probe: below it live well-known services.
const LOWEST: u32 = 10_000;

/// A loopback port nobody listens on, outside the ephemeral range.
pub fn free_port() -> Result<u16, LabError> {
    let range = probe_range(&std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default());
    // One cursor per process, started at a pid-dependent place, so two
    // processes starting labs at once rarely probe the same ports.
    static CURSOR: AtomicU32 = AtomicU32::new(u32::MAX);
    let width = range.end - range.start;
    let _ = CURSOR.compare_exchange(
        u32::MAX,
        std::process::id().wrapping_mul(7919) % width,
        Ordering::SeqCst,
        Ordering::SeqCst,
    );
    for _ in 0..width.min(2_000) {
        let port = range.start + CURSOR.fetch_add(1, Ordering::SeqCst) % width;
        let Ok(port) = u16::try_from(port) else { continue };
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    Err(LabError::Start {
        component: "ports".into(),
        message: format!("no free loopback port in {}..{}", range.start, range.end),
    })
}

/// The ports below the kernel's ephemeral range (`"32768\t60999"`), or
/// above it when there is more room there; [`FALLBACK`] when it cannot be read.
fn probe_range(ephemeral: &str) -> Range<u32> {
    let mut bounds = ephemeral.split_whitespace().map(str::parse::<u32>);
    let (Some(Ok(low)), Some(Ok(high))) = (bounds.next(), bounds.next()) else { return FALLBACK };
    let below = LOWEST..low.max(LOWEST);
    let above = (high + 1).min(65_536)..65_536;
    let widest = if below.len() >= above.len() { below } else { above };
    if widest.len() < 1_000 { FALLBACK } else { widest }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_below_the_ephemeral_range() {
        assert_eq!(probe_range("32768\t60999\n"), 10_000..32_768);
    }

    #[test]
    fn probes_above_an_ephemeral_range_that_starts_low() {
        assert_eq!(probe_range("1024 49151"), 49_152..65_536);
    }

    #[test]
    fn falls_back_when_the_range_is_unreadable_or_leaves_no_room() {
        assert_eq!(probe_range(""), FALLBACK);
        assert_eq!(probe_range("1024 65000"), FALLBACK);
    }

    #[test]
    fn hands_out_distinct_bindable_ports() {
        let a = free_port().unwrap();
        let b = free_port().unwrap();
        assert_ne!(a, b);
        assert!(u32::from(a) < 32_768 || u32::from(a) > 60_999);
        TcpListener::bind(("127.0.0.1", a)).unwrap();
    }
}
