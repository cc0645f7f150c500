//! What `kgpu agent` serves: its JSON snapshot (`GET /v1/snapshot`) and
//! the events of its stream (`GET /v1/events`). This is a contract between
//! agents and cockpits of different versions: fields are only added, and
//! `version` changes if one ever has to change meaning.

use serde::{Deserialize, Serialize};

pub const VERSION: u32 = 1;

/// The token that opens one node's agent: HMAC-SHA256 of
/// `kgpu-agent/v1:<node>` under the cluster's agent key (the Secret), in
/// lower-case hex. The cockpit sends each agent its own node's token and an
/// agent accepts only its own, so a token seen on the way to one node (the
/// pod proxy's last hop is plain HTTP) opens no other. By hand:
/// `printf 'kgpu-agent/v1:%s' NODE | openssl dgst -sha256 -hmac "$KEY" -hex`.
pub fn node_token(key: &str, node: &str) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key.as_bytes());
    let tag = ring::hmac::sign(&key, format!("kgpu-agent/v1:{node}").as_bytes());
    tag.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentSnapshot {
    pub version: u32,
    /// The Kubernetes node the agent runs on.
    pub node: String,
    /// When this reading was taken (seconds since the epoch).
    pub collected_at: i64,
    /// `nvml`, or `fake` (tests and demos).
    pub backend: String,
    /// Whether NVML answered, and if not, why (no driver, no GPU, no permission).
    pub nvml: Availability,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_version: Option<String>,
    /// The newest CUDA the driver supports, `12.4`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_driver_version: Option<String>,
    #[serde(default)]
    pub gpus: Vec<GpuReport>,
    /// The kubelet pod-resources API: which pod holds which device.
    pub pod_resources: Availability,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Availability {
    pub available: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Availability {
    pub fn yes() -> Availability {
        Availability { available: true, reason: None }
    }

    pub fn no(reason: impl Into<String>) -> Availability {
        Availability { available: false, reason: Some(reason.into()) }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuReport {
    pub index: u32,
    pub uuid: String,
    /// `NVIDIA H100 80GB HBM3`, as NVML names it.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_bus_id: Option<String>,
    #[serde(default)]
    pub memory_total_mib: u64,
    #[serde(default)]
    pub memory_used_mib: u64,
    /// Percent; absent where NVML does not say (a MIG-enabled GPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilization_pct: Option<u32>,
    /// Since when (seconds since the epoch) the agent has seen the GPU
    /// under 5% utilization without a break; absent while busy or unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_since: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_c: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_w: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecc: Option<Ecc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retired_pages: Option<RetiredPages>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remapped_rows: Option<RemappedRows>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig: Option<Mig>,
    /// Active NVLinks (by link number); empty where there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nvlinks_active: Vec<u32>,
    /// Recent XIDs, oldest first, bounded by the agent.
    #[serde(default)]
    pub xids: Vec<XidReport>,
    /// `healthy`, or why not (a critical XID, pending retired pages, a failed row remap).
    #[serde(default = "healthy")]
    pub health: String,
    /// The pods the kubelet assigned this GPU (or its MIG devices) to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pods: Vec<PodRef>,
}

fn healthy() -> String {
    "healthy".into()
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ecc {
    pub enabled: bool,
    pub pending_enabled: bool,
    pub corrected_volatile: u64,
    pub uncorrected_volatile: u64,
    pub corrected_aggregate: u64,
    pub uncorrected_aggregate: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetiredPages {
    pub single_bit: u64,
    pub double_bit: u64,
    pub pending: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RemappedRows {
    pub correctable: u64,
    pub uncorrectable: u64,
    pub pending: bool,
    pub failure: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Mig {
    pub enabled: bool,
    /// The mode after the next GPU reset, when it differs.
    pub pending_enabled: bool,
    #[serde(default)]
    pub instances: Vec<MigInstanceReport>,
}

/// A GPU instance and where it sits: memory slices `start..start+size`
/// (8 per GPU), as `nvidia-smi mig -lgi` prints `Start:Size`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MigInstanceReport {
    /// `3g.40gb`
    pub profile: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_instance_id: Option<u32>,
    /// Absent where the driver would not say (then the cockpit draws the
    /// slice without a position).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
    /// The MIG device's UUID (`MIG-…`), what the device plugin hands out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    #[serde(default)]
    pub memory_mib: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    pub start: u32,
    pub size: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct XidReport {
    pub code: u32,
    /// Seconds since the epoch.
    pub at: i64,
    /// From NVIDIA's Xid catalog, where the code is listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meaning: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub container: String,
    /// The device the kubelet assigned: the GPU's UUID or one of its MIG devices'.
    pub device: String,
}

/// One event of the stream: a new snapshot when anything changed, or an
/// XID the moment NVML reports it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum StreamEvent {
    Snapshot { snapshot: Box<AgentSnapshot> },
    Xid { gpu: String, xid: XidReport },
}
