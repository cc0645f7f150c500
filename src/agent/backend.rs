//! Where the agent's GPU facts come from: NVML on a GPU node, or a fake
//! that serves recorded data (tests, demos, a laptop). The backend is
//! blocking (NVML calls block) and runs on the agent's own thread.

use std::time::Duration;

use super::wire::GpuReport;

/// One reading of every GPU. XID history, health and pods are added by
/// the collector, which sees readings, events and the kubelet together.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reading {
    pub driver_version: Option<String>,
    pub cuda_driver_version: Option<String>,
    pub gpus: Vec<GpuReport>,
}

/// An XID as NVML reports it: the GPU's UUID and the code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XidSeen {
    pub gpu: String,
    pub code: u32,
}

pub trait GpuBackend: Send {
    /// `nvml`, `fake`.
    fn name(&self) -> &'static str;

    /// Reads every GPU. `Err` says why there is nothing to read (no driver,
    /// no GPU, no permission): a state the agent reports, not a crash.
    fn read(&mut self) -> Result<Reading, String>;

    /// Waits up to `timeout` for XIDs (returns early when one arrives).
    fn wait_xids(&mut self, timeout: Duration) -> Vec<XidSeen>;
}
