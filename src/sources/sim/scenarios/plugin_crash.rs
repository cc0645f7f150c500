//! Scenario `plugin-crash`: Healthy GPUs, Kubernetes sees none.

use crate::model::{Resources, Sym, keys};

use super::super::SimCluster;
use super::super::catalog::{H100, R550};

use super::Scenario;
use super::blocks::*;

pub const SCENARIO: Scenario = Scenario {
    name: "plugin-crash",
    title: "Healthy GPUs, Kubernetes sees none",
    story: "The NVIDIA device plugin on gpu-07 crashed. The node is Ready, GFD still says 8 GPUs, but nvidia.com/gpu allocatable is 0, so a 2×8 job gets one member placed and waits for the other forever.",
    signal: "gpu-07 flagged device-plugin-not-advertising; the pending workload is blocked at the device-plugin step",
    manifests: include_str!("../../../../assets/scenarios/plugin-crash/scenario.yaml"),
    build,
};

fn build(sim: &mut SimCluster) {
    let nodes = gpu_pool(sim, "gpu", 16, pool("h100", H100, 8, R550, true));
    sim.add_flavor(flavor("h100", "h100", true));
    sim.add_queue(cluster_queue("training", None, &[("h100", 128, None)]));
    sim.add_queue(local_queue("ml", "training", "training"));
    // The device plugin on gpu-07 is gone: kubelet reports 0 allocatable.
    sim.edit_node("gpu-07", |n| {
        n.allocatable =
            Resources::from_pairs(n.allocatable.iter().map(|(k, v)| (k, if k == keys::RESOURCE_GPU { 0 } else { v })));
    });
    sim.record(
        crate::model::EventType::Warning,
        super::super::Involved { kind: "Pod", namespace: Sym::new("gpu-operator"), name: "nvidia-device-plugin-daemonset-x7k2q" },
        "BackOff",
        "Back-off restarting failed container nvidia-device-plugin-ctr in pod nvidia-device-plugin-daemonset-x7k2q_gpu-operator",
        "kubelet",
    );
    for node in nodes.iter().filter(|n| !matches!(n.as_str(), "gpu-07" | "gpu-16")) {
        let job = format!("train-{}", node.as_str());
        let p = gpu_pod("ml", &format!("{job}-0-{}", sim.next_suffix()), 8).owner("Job", &job);
        running_on(sim, p, node.as_str(), 240);
    }
    submit(sim, workload("ml", "bert-large", "training", 2, 8, 100, ago(50)), 8, None);
    sim.settle();
    age_running(sim, 40, 45);
}
