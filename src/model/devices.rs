//! What a node's agent (or the simulator) reports about its physical GPUs:
//! facts the API server does not have.

use super::Timestamp;
use super::sym::Sym;
use super::versions::{CudaVersion, DriverVersion};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MigMode {
    Disabled,
    Enabled,
}

/// A GPU instance: a MIG profile at a placement (memory-slice start and size).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigInstance {
    pub profile: Sym,
    pub start: u8,
    pub size: u8,
    pub uuid: Option<Sym>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GpuHealth {
    Healthy,
    Unhealthy(Box<str>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XidEvent {
    pub code: u32,
    pub at: Timestamp,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Gpu {
    pub index: u32,
    pub uuid: Sym,
    pub product: Sym,
    pub memory_mib: u64,
    pub mig_mode: MigMode,
    /// A mode change waiting for a GPU reset.
    pub mig_pending: Option<MigMode>,
    pub instances: Box<[MigInstance]>,
    pub health: GpuHealth,
    /// Recent XIDs, newest last, bounded by the reporter.
    pub xids: Box<[XidEvent]>,
    pub utilization: Option<u8>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum AgentStatus {
    Reporting,
    /// The agent could not be reached or has no NVML; the reason says which.
    Unavailable(Box<str>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct NodeDevices {
    pub node: Sym,
    pub status: AgentStatus,
    pub driver: Option<DriverVersion>,
    pub cuda_driver: Option<CudaVersion>,
    pub gpus: Box<[Gpu]>,
    pub observed: Timestamp,
}
