//! The labels of the benchmarks' GPU nodes: a real H100 node's (GPU Feature
//! Discovery, NFD, the GPU Operator's), as GFD writes them for eight whole
//! GPUs. The node they were taken from had one GPU in MIG slices; its MIG
//! profile labels are left out and its count made 8, MIG off, so that the
//! labels agree with the eight GPUs the benchmarks advertise.

const LABELS: &str = include_str!("../../tests/fixtures/nodes/h100-80gb-mig-mixed-all-balanced.labels.json");

pub fn h100x8() -> serde_json::Map<String, serde_json::Value> {
    let mut labels: serde_json::Map<String, serde_json::Value> = serde_json::from_str(LABELS).unwrap();
    labels.retain(|k, _| !k.starts_with("nvidia.com/mig-"));
    labels.insert("nvidia.com/gpu.count".into(), "8".into());
    labels.insert("nvidia.com/mig.config".into(), "all-disabled".into());
    labels
}
