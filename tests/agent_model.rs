//! Agent data merged with node objects: the agent snapshots in
//! tests/fixtures/agent/ (shaped after real nvidia-smi outputs) converted at
//! the edge, next to nodes built from real GFD labels, drive the MIG pane's
//! slice placements, the XID marks and the hardware-vs-advertised check.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

use std::sync::Arc;

use kgpu::agent::wire::AgentSnapshot;
use kgpu::analysis::Thresholds;
use kgpu::analysis::fleet::IssueCode;
use kgpu::model::build::node;
use kgpu::model::{AgentStatus, Cluster, ModelEvent, Node, NodeDevices, Object, SourceInfo, SourceKind, Sym};
use kgpu::sources::agents::to_model;
use kgpu::view_model::panes::{Cell, Views};

const NOW: i64 = 1_796_029_200;

fn fixture(name: &str) -> AgentSnapshot {
    let path = format!("{}/tests/fixtures/agent/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn views(nodes: Vec<Node>, devices: Vec<NodeDevices>) -> Views {
    let mut c = Cluster::new(SourceInfo { kind: SourceKind::Kube, name: "test".into() });
    c.apply(ModelEvent::Clock(NOW));
    c.apply_all(nodes.into_iter().map(|n| ModelEvent::Upsert(Object::Node(n))));
    c.apply_all(devices.into_iter().map(|d| ModelEvent::Upsert(Object::Devices(d))));
    Views::build(Arc::new(c.snapshot()), NOW, &Thresholds::default(), None)
}

/// The real H100 node of the fixture: every label GFD put on it, and the
/// MIG resources its all-balanced config advertises.
fn h100_node(name: &str) -> Node {
    let text = std::fs::read_to_string(format!(
        "{}/tests/fixtures/nodes/h100-80gb-mig-mixed-all-balanced.labels.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let labels: std::collections::BTreeMap<String, String> = serde_json::from_str(&text).unwrap();
    let mut b = node(name);
    for (k, v) in &labels {
        b = b.label(k, v);
    }
    b.mig("1g.10gb", 2).mig("2g.20gb", 1).mig("3g.40gb", 1).build()
}

#[test]
fn the_mig_pane_draws_the_agents_real_placements() {
    let devices = to_model(&fixture("h100-mig-all-balanced.json"), NOW);
    assert_eq!(devices.status, AgentStatus::Reporting);
    assert_eq!(devices.gpus[0].product.as_str(), "NVIDIA-H100-80GB-HBM3", "GFD's spelling");
    let v = views(vec![h100_node("h100-mig-0")], vec![devices]);
    let row = v.mig.iter().find(|r| r.node.as_str() == "h100-mig-0").expect("a MIG row");
    let layout: Vec<(&str, u8, u8)> = row.gpus[0].instances.iter().map(|(p, s, z, _)| (p.as_str(), *s, *z)).collect();
    assert_eq!(layout, [("1g.10gb", 0, 1), ("1g.10gb", 1, 1), ("2g.20gb", 2, 2), ("3g.40gb", 4, 4)]);
    // The fleet map draws the same four slices.
    let fleet = v.nodes.iter().find(|n| n.name.as_str() == "h100-mig-0").unwrap();
    assert_eq!(fleet.cells.iter().filter(|c| matches!(c, Cell::MigFree | Cell::MigUsed)).count(), 4);
}

#[test]
fn without_placements_the_geometry_gives_a_valid_layout() {
    let mut snap = fixture("h100-mig-all-balanced.json");
    for i in &mut snap.gpus[0].mig.as_mut().unwrap().instances {
        i.placement = None;
    }
    let devices = to_model(&snap, NOW);
    let mut layout: Vec<(u8, u8)> = devices.gpus[0].instances.iter().map(|i| (i.start, i.size)).collect();
    layout.sort();
    // Four instances on 8 memory slices, none overlapping.
    assert_eq!(layout.len(), 4);
    assert!(layout.windows(2).all(|w| w[0].0 + w[0].1 <= w[1].0), "{layout:?}");
    assert!(layout.iter().all(|(s, z)| s + z <= 8));
}

#[test]
fn an_xid_79_gpu_is_unhealthy_not_a_silent_device_plugin() {
    // describe-node-xid79: 8 GPUs, 7 allocatable after the Xid; GFD still says 8.
    let n = node("gpu-node-1").gpus(7).label("nvidia.com/gpu.count", "8").product("NVIDIA-A100-SXM4-80GB").build();
    let devices = to_model(&fixture("xid79-8gpu.json"), NOW);
    let v = views(vec![n], vec![devices]);
    let s = v.analysis.nodes.iter().find(|n| n.name.as_str() == "gpu-node-1").unwrap();
    assert_eq!(s.hardware, Some(8));
    assert_eq!(s.gpu_unhealthy, 1);
    assert_eq!(s.gpu_unadvertised, 0, "the missing GPU is explained by its health");
    assert!(!s.has(IssueCode::DevicePluginNotAdvertising));
    let xid = s.issues.iter().find(|i| i.code == IssueCode::XidErrors).expect("the Xid is a node issue");
    assert!(xid.detail.starts_with("Xid 79 on GPU 3"), "{}", xid.detail);
    let row = v.nodes.iter().find(|n| n.name.as_str() == "gpu-node-1").unwrap();
    assert_eq!(row.cells.iter().filter(|c| **c == Cell::Unhealthy).count(), 1);
}

#[test]
fn a_healthy_gpu_with_a_recent_xid_is_marked_on_the_map() {
    let mut snap = fixture("xid79-8gpu.json");
    // Xid 48 (double-bit ECC) an hour ago on GPU 5, which is still healthy.
    snap.gpus[3].xids.clear();
    snap.gpus[3].health = "healthy".into();
    snap.gpus[5].xids.push(kgpu::agent::wire::XidReport { code: 48, at: NOW - 3600, meaning: None });
    let n = node("gpu-node-1").gpus(8).label("nvidia.com/gpu.count", "8").build();
    let v = views(vec![n], vec![to_model(&snap, NOW)]);
    let row = v.nodes.iter().find(|n| n.name.as_str() == "gpu-node-1").unwrap();
    assert_eq!(row.cells.iter().filter(|c| **c == Cell::Xid).count(), 1);
    assert_eq!(row.cells.len(), 8, "marked in place, not added");
}

#[test]
fn the_agents_count_stands_in_for_gfd() {
    // No GFD labels at all; the device plugin advertises 6 of the 8 GPUs the agent sees.
    let n = node("plain").gpus(6).build();
    let mut snap = fixture("xid79-8gpu.json");
    snap.node = "plain".into();
    for g in &mut snap.gpus {
        g.xids.clear();
        g.health = "healthy".into();
    }
    let v = views(vec![n], vec![to_model(&snap, NOW)]);
    let s = v.analysis.nodes.iter().find(|n| n.name.as_str() == "plain").unwrap();
    assert_eq!((s.hardware, s.gpu_unadvertised), (Some(8), 2));
    let issue = s.issues.iter().find(|i| i.code == IssueCode::DevicePluginNotAdvertising).unwrap();
    assert_eq!(issue.detail, "8 GPU(s) in hardware, 6 advertised to Kubernetes (2 missing)");
}

#[test]
fn an_agent_without_nvml_or_out_of_reach_is_shown_on_its_node() {
    let n = node("cpu-node-1").build();
    let devices = to_model(&fixture("no-driver.json"), NOW);
    assert!(matches!(devices.status, AgentStatus::Unavailable(_)));
    let v = views(vec![n, node("gpu-node-1").gpus(8).build()], vec![devices]);
    let s = v.analysis.nodes.iter().find(|n| n.name.as_str() == "cpu-node-1").unwrap();
    let issue = s.issues.iter().find(|i| i.code == IssueCode::AgentUnavailable).unwrap();
    assert!(issue.detail.contains("no NVIDIA driver"), "{}", issue.detail);
    // The other node is untouched.
    let other = v.analysis.nodes.iter().find(|n| n.name == Sym::new("gpu-node-1")).unwrap();
    assert!(other.issues.is_empty());
}

/// The value after `Key : ` on the first line of `nvidia-smi -q` output that
/// starts with the key (after its indentation).
fn nvsmi_field<'a>(text: &'a str, key: &str) -> &'a str {
    text.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(" : ")?;
            (k.trim() == key).then(|| v.trim())
        })
        .unwrap_or_else(|| panic!("no {key} in nvidia-smi -q"))
}

#[test]
fn a_recorded_h200_agent_agrees_with_nvidia_smi_on_the_same_machine() {
    // Recorded on a lent H200 (tests/fixtures/agent/README.md): the agent's
    // /v1/snapshot and nvidia-smi's own listing, seconds apart.
    let dir = format!("{}/tests/fixtures/agent/h200-recorded", env!("CARGO_MANIFEST_DIR"));
    let q = std::fs::read_to_string(format!("{dir}/nvidia-smi-q.txt")).unwrap();
    let snap = fixture("h200-nvml-recorded.json");
    assert_eq!(snap.backend, "nvml");
    assert_eq!(snap.driver_version.as_deref(), Some(nvsmi_field(&q, "Driver Version")));
    assert_eq!(snap.cuda_driver_version.as_deref(), Some(nvsmi_field(&q, "CUDA Version")));
    assert_eq!(snap.gpus.len().to_string(), nvsmi_field(&q, "Attached GPUs"));
    let g = &snap.gpus[0];
    assert_eq!(g.uuid, nvsmi_field(&q, "GPU UUID"));
    assert_eq!(g.name, nvsmi_field(&q, "Product Name"));
    assert_eq!(g.pci_bus_id.as_deref(), Some(nvsmi_field(&q, "Bus Id")));
    // "FB Memory Usage / Total": the first Total in the output.
    assert_eq!(format!("{} MiB", g.memory_total_mib), nvsmi_field(&q, "Total"));
    assert!(!g.mig.as_ref().unwrap().enabled, "MIG Mode Current: {}", nvsmi_field(&q, "Current"));

    // Converted at the edge: one healthy H200 whose product matches GFD's
    // label spelling and whose MIG geometry is the H200's (PCI device
    // 0x233510DE, which nvidia-smi names, is mig-parted's H200-141GB).
    assert_eq!(nvsmi_field(&q, "Device Id"), "0x233510DE");
    let devices = to_model(&snap, NOW);
    assert_eq!(devices.status, AgentStatus::Reporting);
    assert_eq!(devices.driver.as_ref().map(|d| d.to_string()).as_deref(), Some("580.159.04"));
    let gpu = &devices.gpus[0];
    assert_eq!(gpu.product.as_str(), "NVIDIA-H200");
    assert_eq!(kgpu::reference::mig::model_for_product(gpu.product.as_str()), Some("H200-141GB"));
    assert!(gpu.instances.is_empty());

    // On a node that advertises its one GPU and carries GFD's labels for
    // it, the agent adds no issue and its count agrees.
    let n = node("h200-device")
        .label("nvidia.com/gpu.product", "NVIDIA-H200")
        .label("nvidia.com/gpu.count", "1")
        .gpus(1)
        .build();
    let v = views(vec![n], vec![devices]);
    let s = v.analysis.nodes.iter().find(|n| n.name.as_str() == "h200-device").unwrap();
    assert_eq!((s.hardware, s.gpu_unadvertised), (Some(1), 0));
    assert!(s.issues.is_empty(), "{:?}", s.issues);
}
