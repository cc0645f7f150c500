//! A backend that serves recorded data: an agent snapshot in a JSON file
//! (as `GET /v1/snapshot` returns it, e.g. one taken on a real node), and
//! XIDs injected through a handle. Used by tests, and to run an agent
//! without a GPU.

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use super::backend::{GpuBackend, Reading, XidSeen};
use super::wire::AgentSnapshot;

pub struct FakeBackend {
    reading: Result<Reading, String>,
    xids: mpsc::Receiver<XidSeen>,
}

/// Injects XIDs into a running fake backend.
#[derive(Clone)]
pub struct FakeXids(mpsc::Sender<XidSeen>);

impl FakeXids {
    pub fn inject(&self, gpu: &str, code: u32) {
        // The agent is gone when this fails; nothing to inject into.
        let _ = self.0.send(XidSeen { gpu: gpu.to_string(), code });
    }
}

impl FakeBackend {
    pub fn new(reading: Result<Reading, String>) -> (FakeBackend, FakeXids) {
        let (tx, rx) = mpsc::channel();
        (FakeBackend { reading, xids: rx }, FakeXids(tx))
    }

    /// Serves the GPUs of a recorded snapshot (their XID history and pods
    /// are dropped: the agent keeps its own). A snapshot taken where NVML
    /// was unavailable serves that state.
    pub fn from_snapshot(snapshot: AgentSnapshot) -> (FakeBackend, FakeXids) {
        let reading = if snapshot.nvml.available {
            Ok(Reading {
                driver_version: snapshot.driver_version,
                cuda_driver_version: snapshot.cuda_driver_version,
                gpus: snapshot
                    .gpus
                    .into_iter()
                    .map(|mut g| {
                        g.xids.clear();
                        g.pods.clear();
                        g.health = "healthy".into();
                        g
                    })
                    .collect(),
            })
        } else {
            Err(snapshot.nvml.reason.unwrap_or_else(|| "NVML unavailable".into()))
        };
        FakeBackend::new(reading)
    }

    pub fn from_file(path: &Path) -> anyhow::Result<(FakeBackend, FakeXids)> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("reading the fake backend's data {}: {e}", path.display()))?;
        let snapshot: AgentSnapshot = serde_json::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{} is not an agent snapshot: {e}", path.display()))?;
        Ok(FakeBackend::from_snapshot(snapshot))
    }
}

impl GpuBackend for FakeBackend {
    fn name(&self) -> &'static str {
        "fake"
    }

    fn read(&mut self) -> Result<Reading, String> {
        self.reading.clone()
    }

    fn wait_xids(&mut self, timeout: Duration) -> Vec<XidSeen> {
        let mut seen = Vec::new();
        match self.xids.recv_timeout(timeout) {
            Ok(x) => {
                seen.push(x);
                seen.extend(self.xids.try_iter());
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            // Nobody can inject any more: just wait like NVML would.
            Err(mpsc::RecvTimeoutError::Disconnected) => std::thread::sleep(timeout),
        }
        seen
    }
}
