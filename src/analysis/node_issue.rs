//! What can be wrong with a node, as stable codes (DESIGN.md): the fleet
//! analysis and the checks it calls (time-slicing's shared memory) say
//! them; the view model words them.

/// Stable node issue codes (DESIGN.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IssueCode {
    DevicePluginNotAdvertising,
    NotReady,
    Cordoned,
    BlackHole,
    MigConfigPending,
    MigConfigFailed,
    UpgradeStuck,
    UpgradeFailed,
    XidErrors,
    /// The node's agent cannot be read (or has no NVML): its GPUs are
    /// judged from the node object alone.
    AgentUnavailable,
    /// GFD says the MIG configuration does not suit the `single` strategy
    /// (product `<gpu>-MIG-INVALID`, count 0): no GPU is usable.
    MigInvalid,
    /// A time-sliced GPU whose pods together fill its memory: nothing
    /// limits one pod's share, so the next allocation fails in whichever asks.
    SharedMemoryFull,
    /// Capacity above allocatable: the device plugin reports GPUs unhealthy.
    DevicePluginUnhealthy,
    /// Reserved by a kgpu defragmentation plan (its taint): new pods stay
    /// off it. Left behind when the kgpu that ran the plan was killed.
    DefragReserved,
    /// DRA devices tainted NoSchedule or NoExecute (KEP-5055): new claims
    /// keep off them.
    DeviceTainted,
    /// A layer of the GPU Operator's stack (driver, toolkit, device plugin,
    /// GFD, dcgm-exporter, validator) does not run here: the first one.
    GpuStack,
    /// Pods bound here wait for a ComputeDomain in which this node's IMEX
    /// daemon is not Ready (NVIDIA's DRA driver): they do not start.
    ComputeDomainNotReady,
}

impl IssueCode {
    pub fn as_str(self) -> &'static str {
        match self {
            IssueCode::DevicePluginNotAdvertising => "device-plugin-not-advertising",
            IssueCode::NotReady => "not-ready",
            IssueCode::Cordoned => "cordoned",
            IssueCode::BlackHole => "black-hole",
            IssueCode::MigConfigPending => "mig-config-pending",
            IssueCode::MigConfigFailed => "mig-config-failed",
            IssueCode::UpgradeStuck => "upgrade-stuck",
            IssueCode::UpgradeFailed => "upgrade-failed",
            IssueCode::XidErrors => "xid-errors",
            IssueCode::SharedMemoryFull => "shared-gpu-memory-full",
            IssueCode::AgentUnavailable => "agent-unavailable",
            IssueCode::MigInvalid => "mig-invalid",
            IssueCode::DefragReserved => "defrag-reserved",
            IssueCode::DevicePluginUnhealthy => "device-plugin-unhealthy",
            IssueCode::DeviceTainted => "device-tainted",
            IssueCode::GpuStack => "gpu-stack",
            IssueCode::ComputeDomainNotReady => "compute-domain-not-ready",
        }
    }

    /// Problems that lose capacity or jobs rank above administrative states.
    pub fn is_fault(self) -> bool {
        !matches!(
            self,
            IssueCode::Cordoned | IssueCode::MigConfigPending | IssueCode::AgentUnavailable | IssueCode::DefragReserved
        )
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct NodeIssue {
    pub code: IssueCode,
    pub detail: String,
}
