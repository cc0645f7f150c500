//! Scenario `black-hole`: A Ready node that eats GPU pods.

use crate::model::build::pod;

use super::super::catalog::{H100, R550};
use super::super::{Fault, PodPlan, SimCluster};

use super::Scenario;
use super::blocks::*;

pub const SCENARIO: Scenario = Scenario {
    name: "black-hole",
    title: "A Ready node that eats GPU pods",
    story: "gpu-03 is Ready and advertises 8 GPUs, but its device plugin rejects every allocation. Being the emptiest node, the scheduler keeps sending pods there; each one fails UnexpectedAdmissionError and is replaced.",
    signal: "gpu-03 flagged black-hole",
    manifests: include_str!("../../../../assets/scenarios/black-hole/scenario.yaml"),
    build,
};

fn build(sim: &mut SimCluster) {
    let nodes = gpu_pool(sim, "gpu", 16, pool("h100", H100, 8, R550, false));
    sim.fault("gpu-03", Fault::BlackHole);
    for (i, node) in nodes.iter().enumerate().filter(|(_, n)| n.as_str() != "gpu-03") {
        let job = format!("train-{i}");
        let p = gpu_pod("ml", &format!("{job}-0-{}", sim.next_suffix()), 4 + (i as u64 % 2) * 2).owner("Job", &job);
        running_on(sim, p, node.as_str(), 100 + i as i64 * 7);
    }
    // The last hour on gpu-03: a failed pod every few minutes.
    for i in 0..12 {
        let minutes = 55 - i * 4;
        let p = pod(&format!("serve-llama-64f9d-{}", sim.next_suffix()))
            .ns("serving")
            .gpus(1)
            .cpu_milli(8000)
            .memory_gi(64)
            .owner("ReplicaSet", "serve-llama-64f9d")
            .image(IMAGE_SERVE)
            .on("gpu-03")
            .failed(
                "UnexpectedAdmissionError",
                "Pod was rejected: Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. Requested: 1, Available: 0, which is unexpected",
            )
            .created(ago(minutes + 1))
            .transitioned(ago(minutes))
            .build();
        sim.add_pod(p, PodPlan::default());
    }
    let p = pod(&format!("serve-llama-64f9d-{}", sim.next_suffix()))
        .ns("serving")
        .gpus(1)
        .cpu_milli(8000)
        .memory_gi(64)
        .owner("ReplicaSet", "serve-llama-64f9d")
        .image(IMAGE_SERVE)
        .created(ago(1))
        .build();
    sim.add_pod(p, PodPlan { runs_for: None, replace_on_failure: true });
}
