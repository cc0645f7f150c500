//! Giving memory back to the system once a large transient is over.
//!
//! Loading a fleet decodes every object once (at 100,000 pods, 400 MB of JSON
//! page by page). What the decoding frees stays in the allocator's per-thread
//! heaps, and a thread gives its free pages back only as it allocates again
//! or ends: at 100,000 pods an idle cockpit held 161 MiB until the blocking
//! pool's idle threads ended 10 s later, then 116 MiB; with this, 104 MiB
//! from the first view on. The binary says how a thread hands its free pages
//! back ([`set_release`], its allocator's call); when the first list is in,
//! the cockpit asks every runtime thread to do it once
//! ([`release_everywhere`]), each as it next goes idle ([`on_idle`], tokio's
//! park hook).

use std::cell::Cell;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

static RELEASE: OnceLock<fn()> = OnceLock::new();

/// How many times threads were asked to give their free pages back.
static ASKED: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// How many of those asks this thread has answered.
    static ANSWERED: Cell<u64> = const { Cell::new(0) };
}

/// The allocator's way for the calling thread to give back the pages it
/// holds free. Set once, by the binary; without it the asks do nothing.
pub fn set_release(release: fn()) {
    let _ = RELEASE.set(release);
}

/// Asks every thread to give its free pages back when it next goes idle,
/// this one now.
pub fn release_everywhere() {
    ASKED.fetch_add(1, Ordering::Relaxed);
    on_idle();
}

/// A thread going idle: gives its free pages back if asked since it last did.
/// Cheap otherwise (tokio's workers call it whenever they park).
pub fn on_idle() {
    let asked = ASKED.load(Ordering::Relaxed);
    if ANSWERED.get() == asked {
        return;
    }
    ANSWERED.set(asked);
    if let Some(release) = RELEASE.get() {
        let started = std::time::Instant::now();
        release();
        tracing::debug!("free pages given back in {:.1} ms", started.elapsed().as_secs_f64() * 1e3);
    }
}

/// The cockpit's runtime: two workers that answer the asks as they park.
pub fn cockpit_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).on_thread_park(on_idle).enable_all().build()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    static RELEASED: AtomicUsize = AtomicUsize::new(0);

    fn count() {
        RELEASED.fetch_add(1, Ordering::Relaxed);
    }

    #[test]
    fn each_thread_answers_each_ask_once() {
        set_release(count);
        let released = || RELEASED.load(Ordering::Relaxed);
        let before = released();
        release_everywhere();
        assert_eq!(released(), before + 1, "the asking thread gives back at once");
        on_idle();
        assert_eq!(released(), before + 1, "and not again until asked again");
        std::thread::spawn(|| {
            on_idle();
            on_idle();
        })
        .join()
        .unwrap_or_default();
        assert_eq!(released(), before + 2, "another thread answers once as it goes idle");
        release_everywhere();
        assert_eq!(released(), before + 3);
    }
}
