//! Scenario `taint-mismatch`: Taints, tolerations and a selector that requests nothing.

use crate::model::build::pod;
use crate::model::keys;

use super::super::catalog::{self, H100, R550};
use super::super::{PodPlan, SimCluster};

use super::Scenario;
use super::blocks::*;

pub const SCENARIO: Scenario = Scenario {
    name: "taint-mismatch",
    title: "Taints, tolerations and a selector that requests nothing",
    story: "Every GPU node carries nvidia.com/gpu=present:NoSchedule. One job forgot the toleration; another wrote nodeSelector nvidia.com/gpu: \"8\" instead of a resource limit.",
    signal: "untolerated-taint:nvidia.com/gpu on every GPU node, and the gpu-count-in-node-selector hint",
    manifests: include_str!("../../../../assets/scenarios/taint-mismatch/scenario.yaml"),
    build,
};

fn build(sim: &mut SimCluster) {
    let nodes = gpu_pool(sim, "gpu", 8, pool("h100", H100, 8, R550, true));
    for i in 1..=4 {
        sim.add_node(catalog::cpu_node(&format!("cpu-{i:02}"), ago(60 * 24 * 100)));
    }
    for node in nodes.iter().take(4) {
        let job = format!("serve-{}", node.as_str());
        let p = gpu_pod("vision", &format!("{job}-{}", sim.next_suffix()), 4).owner("ReplicaSet", &job);
        running_on(sim, p, node.as_str(), 300);
    }
    // Forgot the toleration for the GPU taint.
    let p = pod("resnet-train-0-k9xq2")
        .ns("vision")
        .gpus(1)
        .cpu_milli(12_000)
        .memory_gi(120)
        .owner("Job", "resnet-train")
        .image(IMAGE_CUDA_12_4)
        .cuda_require(require_12_4())
        .created(ago(18))
        .build();
    sim.add_pod(p, PodPlan::default());
    // Asked for GPUs with a node selector instead of resources.limits.
    let p = pod("bert-infer-5c8d9-wq7tn")
        .ns("vision")
        .cpu_milli(4000)
        .memory_gi(32)
        .selector(keys::RESOURCE_GPU, "8")
        .tolerate(keys::RESOURCE_GPU)
        .owner("ReplicaSet", "bert-infer-5c8d9")
        .image(IMAGE_CUDA_12_4)
        .created(ago(12))
        .build();
    sim.add_pod(p, PodPlan::default());
}
