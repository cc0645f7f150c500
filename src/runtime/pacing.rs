//! When the cockpit analyses the next snapshot.
//!
//! A full analysis of a large fleet costs tens of milliseconds (100 ms at
//! 100,000 pods), and a busy cluster changes many times a second, so
//! analysing every snapshot as it comes would keep a core busy, and the
//! clock's tick alone would re-analyse an idle fleet every second. The
//! cockpit instead waits, after each analysis, in proportion to what it
//! cost: twice its time before analysing changed data (at most a third of a
//! core, however fast the cluster changes; a small fleet's few milliseconds
//! are not noticed), and four hundred times it, between 1 and 60 s, before
//! analysing again for the clock alone (ages on screen move on; an idle big
//! fleet costs under half a percent of a core). A change in the data is
//! shown within three analyses' time.

use std::time::{Duration, Instant};

/// After an analysis of changed data: wait this many times its cost.
const DATA_SPACING: u32 = 2;
/// After an analysis, before one for the clock alone: this many times its cost…
const CLOCK_SPACING: u32 = 400;
/// …but at least this often…
const CLOCK_FIRST: Duration = Duration::from_secs(1);
/// …and at most this rarely.
const CLOCK_LONGEST: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, Debug)]
pub struct Pacing {
    /// What the last analysis cost.
    cost: Duration,
    /// When it finished.
    finished: Instant,
    /// The content generation it analysed (`Snapshot::content_generation`).
    content: u64,
}

impl Pacing {
    pub fn new(now: Instant, content: u64) -> Pacing {
        Pacing { cost: Duration::ZERO, finished: now, content }
    }

    /// An analysis of `content` ran from `started` to `finished`.
    pub fn analysed(&mut self, started: Instant, finished: Instant, content: u64) {
        self.cost = finished.saturating_duration_since(started);
        self.finished = finished;
        self.content = content;
    }

    /// The content the last analysis saw.
    pub fn content(&self) -> u64 {
        self.content
    }

    /// The earliest time to analyse a snapshot of `content`.
    pub fn ready_at(&self, content: u64) -> Instant {
        let wait = if content != self.content {
            self.cost * DATA_SPACING
        } else {
            (self.cost * CLOCK_SPACING).clamp(CLOCK_FIRST, CLOCK_LONGEST)
        };
        self.finished + wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn after(p: &Pacing, content: u64) -> Duration {
        p.ready_at(content) - p.finished
    }

    #[test]
    fn changed_data_waits_twice_the_last_analysis() {
        let t0 = Instant::now();
        let mut p = Pacing::new(t0, 1);
        p.analysed(t0, t0 + Duration::from_millis(100), 1);
        assert_eq!(after(&p, 2), Duration::from_millis(200));
        // A small fleet: not noticeably later.
        p.analysed(t0, t0 + Duration::from_millis(2), 2);
        assert_eq!(after(&p, 3), Duration::from_millis(4));
    }

    #[test]
    fn the_clock_alone_waits_longer_on_a_costly_fleet_within_bounds() {
        let t0 = Instant::now();
        let mut p = Pacing::new(t0, 5);
        p.analysed(t0, t0 + Duration::from_millis(2), 5);
        assert_eq!(after(&p, 5), CLOCK_FIRST);
        p.analysed(t0, t0 + Duration::from_millis(100), 5);
        assert_eq!(after(&p, 5), Duration::from_secs(40));
        p.analysed(t0, t0 + Duration::from_secs(1), 5);
        assert_eq!(after(&p, 5), CLOCK_LONGEST);
    }

    #[test]
    fn the_share_of_a_core_stays_bounded() {
        // Analyses back to back under constant change: cost ÷ (cost + wait).
        let cost = Duration::from_millis(80);
        let t0 = Instant::now();
        let mut p = Pacing::new(t0, 0);
        p.analysed(t0, t0 + cost, 0);
        let busy = cost.as_secs_f64() / (cost + after(&p, 1)).as_secs_f64();
        assert!((busy - 1.0 / 3.0).abs() < 1e-9, "{busy}");
        // Idle: one analysis per clock period.
        let idle = cost.as_secs_f64() / (cost + after(&p, 0)).as_secs_f64();
        assert!(idle < 0.005, "{idle}");
    }
}
