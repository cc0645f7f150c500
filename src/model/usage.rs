//! GPU utilization as the node agents or dcgm-exporter report it, and the
//! bounded history kgpu keeps of it: what an idle holder is judged on.
//!
//! A reading says, per device (a whole GPU or one MIG instance), who holds
//! it, how busy it is and how much memory is used. The model folds each
//! node's readings into a [`NodeUsageHistory`]: the last readings within a
//! window, and since when each device has been idle under its holder.

use std::collections::VecDeque;

use super::Timestamp;
use super::pod::PodKey;
use super::sym::Sym;

/// Under this, a device is idle: dcgm-exporter's engine-active ratio and
/// NVML's utilization both read 0–2% on a GPU that only holds memory.
pub const IDLE_BELOW_PCT: f32 = 5.0;
/// The window kept per device for the mean.
pub const WINDOW_SECONDS: i64 = 600;
/// At most this many readings per device, however often they come.
pub const WINDOW_SAMPLES: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum UsageSource {
    Agent,
    DcgmExporter,
}

impl UsageSource {
    pub fn as_str(self) -> &'static str {
        match self {
            UsageSource::Agent => "agent",
            UsageSource::DcgmExporter => "dcgm-exporter",
        }
    }
}

/// A MIG GPU instance: its profile and its id on the GPU (`GPU_I_ID`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MigSlice {
    pub profile: Sym,
    pub id: u32,
}

/// One device in one reading.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceReading {
    /// The physical GPU's UUID.
    pub gpu: Sym,
    pub index: u32,
    /// Set when the reading is of one MIG instance of the GPU.
    pub slice: Option<MigSlice>,
    /// The pods the device is assigned to, sorted (more than one when shared
    /// by time-slicing or MPS; none when free or not attributed).
    pub holders: Box<[PodKey]>,
    /// Percent of time busy (NVML utilization, or dcgm's engine-active ratio × 100).
    pub busy_pct: Option<f32>,
    pub memory_used_mib: Option<u64>,
    /// Since when the reporter itself has seen the device idle, when it
    /// keeps that (the agent does; dcgm-exporter does not).
    pub idle_since: Option<Timestamp>,
}

impl DeviceReading {
    pub fn same_device(&self, other: &DeviceReading) -> bool {
        self.gpu == other.gpu && self.slice.as_ref().map(|s| s.id) == other.slice.as_ref().map(|s| s.id)
    }
}

/// What one reporter said about one node's devices at one time.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeUsage {
    pub node: Sym,
    pub source: UsageSource,
    pub at: Timestamp,
    pub devices: Box<[DeviceReading]>,
    /// Why the reporter could not be read this time (then `devices` is
    /// empty and the history is kept as it was).
    pub problem: Option<Box<str>>,
}

/// One past reading of one device, compact: a window of them per device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    pub at: Timestamp,
    busy_permille: u16,
    memory_mib: u32,
}

const UNKNOWN_BUSY: u16 = u16::MAX;
const UNKNOWN_MEMORY: u32 = u32::MAX;

impl Sample {
    fn of(r: &DeviceReading, at: Timestamp) -> Sample {
        Sample {
            at,
            busy_permille: r
                .busy_pct
                .filter(|b| b.is_finite())
                .map_or(UNKNOWN_BUSY, |b| (b.clamp(0.0, 100.0) * 10.0).round() as u16),
            memory_mib: r.memory_used_mib.map_or(UNKNOWN_MEMORY, |m| m.min(u64::from(UNKNOWN_MEMORY - 1)) as u32),
        }
    }

    pub fn busy_pct(&self) -> Option<f32> {
        (self.busy_permille != UNKNOWN_BUSY).then(|| f32::from(self.busy_permille) / 10.0)
    }

    pub fn memory_mib(&self) -> Option<u64> {
        (self.memory_mib != UNKNOWN_MEMORY).then_some(u64::from(self.memory_mib))
    }
}

/// One device under one set of holders, as kgpu has seen it.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceHistory {
    /// The latest reading.
    pub reading: DeviceReading,
    /// When kgpu first saw the device under these holders.
    pub first_seen: Timestamp,
    /// Start of the current idle run; `None` while busy or not known.
    pub idle_since: Option<Timestamp>,
    /// The idle run began before anyone watched: it is at least this long.
    pub idle_at_least: bool,
    samples: VecDeque<Sample>,
}

impl DeviceHistory {
    fn start(reading: DeviceReading, at: Timestamp) -> DeviceHistory {
        let mut h = DeviceHistory {
            reading: reading.clone(),
            first_seen: at,
            idle_since: None,
            idle_at_least: false,
            samples: VecDeque::new(),
        };
        h.record(reading, at);
        h
    }

    /// The next reading of the same device: the same holders continue the
    /// history, other holders start a new one.
    fn next(&self, reading: DeviceReading, at: Timestamp) -> DeviceHistory {
        if self.reading.holders != reading.holders {
            return DeviceHistory::start(reading, at);
        }
        let mut h = self.clone();
        h.record(reading, at);
        h
    }

    fn record(&mut self, reading: DeviceReading, at: Timestamp) {
        match reading.busy_pct.filter(|b| b.is_finite()) {
            Some(busy) if busy < IDLE_BELOW_PCT => {
                let seen = self.idle_since.unwrap_or(at);
                // The reporter's own memory reaches further back than ours.
                match reading.idle_since.filter(|&s| s < seen && s <= at) {
                    Some(reported) => {
                        self.idle_since = Some(reported);
                        self.idle_at_least = false;
                    }
                    None => {
                        if self.idle_since.is_none() {
                            // Never seen busy: the run began before kgpu looked.
                            self.idle_at_least = !self.samples.iter().any(|s| s.busy_pct().is_some());
                        }
                        self.idle_since = Some(seen);
                    }
                }
            }
            Some(_) => {
                self.idle_since = None;
                self.idle_at_least = false;
            }
            // Not known this time: the run neither ends nor begins.
            None => {}
        }
        let sample = Sample::of(&reading, at);
        // A poll that brings the same moment again replaces it.
        if self.samples.back().is_some_and(|s| s.at >= at) {
            self.samples.pop_back();
        }
        self.samples.push_back(sample);
        while self.samples.len() > WINDOW_SAMPLES || self.samples.front().is_some_and(|s| s.at < at - WINDOW_SECONDS) {
            self.samples.pop_front();
        }
        self.reading = reading;
    }

    pub fn samples(&self) -> impl Iterator<Item = &Sample> {
        self.samples.iter()
    }

    /// Mean busy percent over the readings in the window that said.
    pub fn mean_busy_pct(&self) -> Option<f32> {
        self.mean_busy_pct_since(0)
    }

    /// [`DeviceHistory::mean_busy_pct`] over the readings from `since` on
    /// (a holder's start: a GPU held through a DRA claim keeps one history
    /// across holders, as the kubelet names none of them).
    pub fn mean_busy_pct_since(&self, since: Timestamp) -> Option<f32> {
        let known: Vec<f32> = self.samples.iter().filter(|s| s.at >= since).filter_map(Sample::busy_pct).collect();
        (!known.is_empty()).then(|| known.iter().sum::<f32>() / known.len() as f32)
    }

    /// Seconds the window spans (from its first reading to its last).
    pub fn window_seconds(&self) -> i64 {
        match (self.samples.front(), self.samples.back()) {
            (Some(a), Some(b)) => b.at - a.at,
            _ => 0,
        }
    }

    /// Idle for how long, as of the last reading (never counted on past it:
    /// a reporter gone quiet says nothing about the time since).
    pub fn idle_seconds(&self) -> Option<i64> {
        let last = self.samples.back()?.at;
        self.idle_since.map(|s| (last - s).max(0))
    }

    pub fn last_reading_at(&self) -> Option<Timestamp> {
        self.samples.back().map(|s| s.at)
    }
}

/// One reporter's view of one node, folded over its readings.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeUsageHistory {
    pub node: Sym,
    pub source: UsageSource,
    pub at: Timestamp,
    pub devices: Box<[DeviceHistory]>,
    /// The last reading failed: why. The devices are as last read.
    pub problem: Option<Box<str>>,
}

impl NodeUsageHistory {
    /// The new reading folded into what was known: devices no longer
    /// reported are dropped, so memory follows the devices that exist.
    pub fn fold(old: Option<&NodeUsageHistory>, new: NodeUsage) -> NodeUsageHistory {
        if let Some(problem) = new.problem {
            // A failed read says nothing of the devices: keep what was known.
            return match old {
                Some(o) => NodeUsageHistory { problem: Some(problem), ..o.clone() },
                None => NodeUsageHistory {
                    node: new.node,
                    source: new.source,
                    at: new.at,
                    devices: Box::new([]),
                    problem: Some(problem),
                },
            };
        }
        let at = new.at;
        let devices = new
            .devices
            .into_vec()
            .into_iter()
            .map(|reading| {
                let before = old.and_then(|o| o.devices.iter().find(|d| d.reading.same_device(&reading)));
                match before {
                    Some(h) => h.next(reading, at),
                    None => DeviceHistory::start(reading, at),
                }
            })
            .collect();
        NodeUsageHistory { node: new.node, source: new.source, at, devices, problem: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(holder: Option<&str>, busy: Option<f32>) -> DeviceReading {
        DeviceReading {
            gpu: Sym::new("GPU-1"),
            index: 0,
            slice: None,
            holders: holder.map(|h| PodKey::new("team-a", h)).into_iter().collect(),
            busy_pct: busy,
            memory_used_mib: Some(40_000),
            idle_since: None,
        }
    }

    fn fold(old: Option<&NodeUsageHistory>, at: Timestamp, r: DeviceReading) -> NodeUsageHistory {
        NodeUsageHistory::fold(
            old,
            NodeUsage {
                problem: None,
                node: Sym::new("n"),
                source: UsageSource::DcgmExporter,
                at,
                devices: Box::new([r]),
            },
        )
    }

    #[test]
    fn idle_runs_from_the_first_idle_reading_and_ends_with_a_busy_one() {
        let h = fold(None, 100, reading(Some("p"), Some(80.0)));
        let h = fold(Some(&h), 110, reading(Some("p"), Some(1.0)));
        let h = fold(Some(&h), 120, reading(Some("p"), None));
        let h = fold(Some(&h), 400, reading(Some("p"), Some(0.0)));
        let d = &h.devices[0];
        assert_eq!(d.idle_since, Some(110));
        assert_eq!(d.idle_seconds(), Some(290));
        assert!(!d.idle_at_least, "seen going idle: the start is known");
        assert_eq!(d.mean_busy_pct(), Some(27.0), "the unknown reading is left out of the mean");
        let h = fold(Some(&h), 410, reading(Some("p"), Some(60.0)));
        assert_eq!(h.devices[0].idle_seconds(), None);
    }

    #[test]
    fn idle_since_first_sight_is_a_lower_bound_unless_the_reporter_knows_better() {
        let h = fold(None, 100, reading(Some("p"), Some(0.0)));
        let h = fold(Some(&h), 160, reading(Some("p"), Some(0.0)));
        assert_eq!((h.devices[0].idle_seconds(), h.devices[0].idle_at_least), (Some(60), true));
        let told = DeviceReading { idle_since: Some(-3500), ..reading(Some("p"), Some(0.0)) };
        let h = fold(Some(&h), 170, told);
        assert_eq!((h.devices[0].idle_seconds(), h.devices[0].idle_at_least), (Some(3670), false));
        // A reporter's time in the future is not believed.
        let h = fold(None, 100, DeviceReading { idle_since: Some(900), ..reading(Some("p"), Some(0.0)) });
        assert_eq!(h.devices[0].idle_since, Some(100));
    }

    #[test]
    fn a_new_holder_starts_a_new_history_and_a_gone_device_is_dropped() {
        let h = fold(None, 100, reading(Some("p"), Some(0.0)));
        let h = fold(Some(&h), 700, reading(Some("q"), Some(0.0)));
        assert_eq!((h.devices[0].first_seen, h.devices[0].idle_seconds()), (700, Some(0)));
        let other = DeviceReading { gpu: Sym::new("GPU-2"), ..reading(Some("q"), Some(0.0)) };
        let h = fold(Some(&h), 710, other);
        assert_eq!(h.devices.len(), 1);
        assert_eq!(h.devices[0].reading.gpu.as_str(), "GPU-2");
    }

    #[test]
    fn a_mean_since_a_holders_start_leaves_the_readings_before_it_out() {
        // No holder named (a GPU held through a DRA claim): one history.
        let mut h = fold(None, 0, reading(None, Some(0.0)));
        h = fold(Some(&h), 60, reading(None, Some(0.0)));
        h = fold(Some(&h), 120, reading(None, Some(90.0)));
        h = fold(Some(&h), 180, reading(None, Some(80.0)));
        let d = &h.devices[0];
        assert_eq!(d.mean_busy_pct(), Some(42.5));
        assert_eq!(d.mean_busy_pct_since(120), Some(85.0));
        assert_eq!(d.mean_busy_pct_since(500), None);
    }

    #[test]
    fn the_window_is_bounded_in_time_and_in_count() {
        let mut h = fold(None, 0, reading(Some("p"), Some(50.0)));
        for t in 1..10_000 {
            h = fold(Some(&h), t, reading(Some("p"), Some(50.0)));
        }
        let d = &h.devices[0];
        assert_eq!(d.samples().count(), WINDOW_SAMPLES);
        let mut h = fold(None, 0, reading(Some("p"), Some(50.0)));
        for t in 1..100 {
            h = fold(Some(&h), t * 60, reading(Some("p"), Some(50.0)));
        }
        assert!(h.devices[0].window_seconds() <= WINDOW_SECONDS);
        // The same moment twice is one reading.
        let again = fold(Some(&h), 99 * 60, reading(Some("p"), Some(50.0)));
        assert_eq!(again.devices[0].samples().count(), h.devices[0].samples().count());
    }

    #[test]
    fn absurd_values_are_clamped_or_unknown() {
        for (busy, want) in [(Some(f32::NAN), None), (Some(250.0), Some(100.0)), (Some(-3.0), Some(0.0))] {
            let h = fold(None, 0, reading(Some("p"), busy));
            assert_eq!(h.devices[0].samples().next().and_then(Sample::busy_pct), want, "{busy:?}");
        }
        let huge = DeviceReading { memory_used_mib: Some(u64::MAX), ..reading(None, None) };
        let h = fold(None, 0, huge);
        assert!(h.devices[0].samples().next().and_then(Sample::memory_mib).is_some());
    }
}
