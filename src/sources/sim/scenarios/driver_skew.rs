//! Scenario `driver-skew`: A driver rollout half done.

use crate::model::build::pod;
use crate::model::{Sym, keys};

use super::super::catalog::{A100_80, H100, NodeSpec, R535, R550, R570};
use super::super::{Fault, PodPlan, SimCluster};

use super::Scenario;
use super::blocks::*;

pub const SCENARIO: Scenario = Scenario {
    name: "driver-skew",
    title: "A driver rollout half done",
    story: "The fleet is moving from 550 to 570 for CUDA 12.8. Eight nodes are done, one is stuck in validation-required for three hours, one failed, and CUDA 12.8 pods the scheduler put on 550 nodes cannot start.",
    signal: "the matrix shows CUDA 12.8 on 550.54.15 incompatible with pods placed there, and Pending holds those pods at the start step; the stuck node heads the upgrade board",
    manifests: include_str!("../../../../assets/scenarios/driver-skew/scenario.yaml"),
    build,
};

fn build(sim: &mut SimCluster) {
    let done = gpu_pool(sim, "h100", 10, pool("h100", H100, 8, R570, false));
    let old: Vec<Sym> = (11..=20)
        .map(|i| {
            let mut spec = NodeSpec::new(format!("h100-{i:02}"), "h100", H100, 8, R550);
            spec.created = ago(60 * 24 * 90);
            sim.add_gpu_node(spec)
        })
        .collect();
    let a100 = gpu_pool(sim, "a100", 4, pool("a100", A100_80, 8, R535, false));
    sim.set_upgrade_target(R570);
    // h100-09: done with the driver but never validated; h100-10: failed.
    for (node, state, minutes) in [("h100-09", "validation-required", 180), ("h100-10", "upgrade-failed", 95)] {
        sim.set_node_label(node, keys::DRIVER_UPGRADE_STATE, Some(state));
        sim.edit_node(node, |n| n.operator.upgrade_since = Some(ago(minutes)));
    }
    sim.fault("h100-09", Fault::UpgradeStuck);
    sim.edit_node("h100-09", |n| n.unschedulable = true);
    for node in &old {
        let n = node.as_str().to_string();
        sim.set_node_label(&n, keys::DRIVER_UPGRADE_STATE, Some("upgrade-required"));
        sim.edit_node(&n, |x| x.operator.upgrade_since = Some(ago(200)));
    }
    // CUDA 12.8 jobs: three landed on 570 nodes and run, three on 550 nodes and cannot start.
    for (i, node) in done.iter().take(3).chain(old.iter().take(3)).enumerate() {
        let name = format!("vlm-train-{i}-{}", sim.next_suffix());
        let p = pod(&name)
            .ns("llm")
            .gpus(8)
            .cpu_milli(96_000)
            .memory_gi(960)
            .owner("Job", &format!("vlm-train-{i}"))
            .image(IMAGE_CUDA_12_8)
            .cuda_require("cuda>=12.8")
            .created(ago(30))
            .build();
        let key = sim.add_pod(p, PodPlan::default());
        if let Some(p) = sim.pods.get_mut(&key) {
            p.node = Some(node.clone());
            p.transitioned = ago(29);
        }
    }
    // 12.4 work runs everywhere; on R535 it relies on minor-version compatibility.
    for node in done.iter().skip(4).take(3).chain(old.iter().skip(4).take(3)).chain(a100.iter()) {
        let job = format!("bert-{}", node.as_str());
        let p = gpu_pod("nlp", &format!("{job}-{}", sim.next_suffix()), 4).owner("Job", &job);
        running_on(sim, p, node.as_str(), 120);
    }
    let p = pod("notebook-cu126-0")
        .ns("notebooks")
        .gpus(1)
        .cpu_milli(8000)
        .memory_gi(64)
        .owner("StatefulSet", "notebook-cu126")
        .image("pytorch/pytorch:2.6.0-cuda12.6-cudnn9-runtime")
        .on(a100[0].as_str())
        .running()
        .created(ago(300))
        .transitioned(ago(299))
        .build();
    sim.add_pod(p, PodPlan::default());
    sim.settle();
}
