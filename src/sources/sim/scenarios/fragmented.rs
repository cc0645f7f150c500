//! Scenario `fragmented`: Free GPUs nobody can use.

use super::super::catalog::{H100, R550};
use super::super::{PodPlan, SimCluster};

use super::Scenario;
use super::blocks::*;

pub const SCENARIO: Scenario = Scenario {
    name: "fragmented",
    title: "Free GPUs nobody can use",
    story: "8 nodes × 8 H100. Small jobs are scattered so every node has 3 to 6 GPUs busy: 28 GPUs are free, yet the 2×8 fine-tuning gang cannot start.",
    signal: "28 free GPUs, 0 usable for the 2×8 gang (all 28 stranded); the plan moves 5 pods (7.1 GPU-hours of work lost) to free two nodes",
    manifests: include_str!("../../../../assets/scenarios/fragmented/scenario.yaml"),
    build,
};

/// Per node: (GPUs, minutes running) of each small job, chosen so the plan
/// can be checked by hand (see tests/scenarios.rs).
pub const FRAGMENTED_LAYOUT: [&[(u64, i64)]; 8] = [
    &[(2, 300), (2, 240), (1, 600)],
    &[(2, 180), (1, 120), (1, 90)],
    &[(2, 60), (1, 120)],
    &[(4, 300), (1, 60)],
    &[(2, 180), (2, 120)],
    &[(4, 360), (2, 60)],
    &[(1, 30), (1, 45), (1, 50)],
    &[(4, 180), (2, 120)],
];

fn build(sim: &mut SimCluster) {
    let nodes = gpu_pool(sim, "gpu", 8, pool("h100", H100, 8, R550, false));
    sim.add_flavor(flavor("h100", "h100", false));
    sim.add_queue(cluster_queue("research", None, &[("h100", 64, None)]));
    sim.add_queue(local_queue("research", "research", "research"));
    for (node, jobs) in nodes.iter().zip(FRAGMENTED_LAYOUT) {
        for (j, (gpus, minutes)) in jobs.iter().enumerate() {
            let name = format!("sweep-{}-{j}", node.as_str().trim_start_matches("gpu-"));
            let p = gpu_pod("research", &format!("{name}-{}", sim.next_suffix()), *gpus).owner("Job", &name);
            running_on(sim, p, node.as_str(), *minutes);
        }
    }
    let gang = admitted(workload("research", "llm-sft", "research", 2, 8, 100, ago(35)), "research", "h100", ago(34));
    let key = sim.add_gang(gang, None);
    for i in 0..2 {
        let s = sim.next_suffix();
        let p = member("research", "llm-sft", i, 8, &s).created(ago(34)).build();
        sim.add_pod(p, PodPlan::default());
    }
    let _ = key;
}
