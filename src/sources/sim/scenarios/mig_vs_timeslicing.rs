//! Scenario `mig-vs-timeslicing`: Two ways to share a GPU.

use crate::model::build::pod;
use crate::model::keys;

use super::super::catalog::{H100, NodeSpec, R550};
use super::super::{PodPlan, SimCluster};

use super::Scenario;
use super::blocks::*;

pub const SCENARIO: Scenario = Scenario {
    name: "mig-vs-timeslicing",
    title: "Two ways to share a GPU",
    story: "Two inference services share H100s two ways. embed runs on MIG 1g.10gb slices of mig-01, each replica with its own 10 GB and compute. rerank runs time-sliced on ts-01, four replicas per GPU: they take turns on the whole GPU and share its 80 GB with no limit; p99 latency doubles when the neighbours are busy.",
    signal: "ts-01 flagged shared-gpu-memory-full: 4 rerank pods use 76 of 79.6 GiB on each of 6 GPUs; 14 of mig-01's 56 1g.10gb slices hold nothing, too small for a 19 GB rerank replica",
    manifests: include_str!("../../../../assets/scenarios/mig-vs-timeslicing/scenario.yaml"),
    build,
};

/// GPU memory each replica uses, MiB.
const EMBED_MIB: u64 = 6 * 1024;
const RERANK_MIB: u64 = 19 * 1024;

fn build(sim: &mut SimCluster) {
    let mut mig = NodeSpec::new("mig-01", "mig", H100, 8, R550);
    mig.mig_config = Some("all-1g.10gb".into());
    mig.created = ago(60 * 24 * 60);
    sim.add_gpu_node(mig);
    let mut shared = NodeSpec::new("ts-01", "shared", H100, 8, R550);
    shared.time_slicing = Some(4);
    shared.created = ago(60 * 24 * 60);
    sim.add_gpu_node(shared);
    for i in 0..42 {
        let name = format!("embed-5c7d9-{}", sim.next_suffix());
        let p = pod(&name)
            .ns("inference")
            .mig("1g.10gb", 1)
            .cpu_milli(2000)
            .memory_gi(16)
            .tolerate(keys::RESOURCE_GPU)
            .owner("ReplicaSet", "embed-5c7d9")
            .image(IMAGE_SERVE)
            .created(ago(400 + i))
            .build();
        sim.add_pod(p, PodPlan::default());
        sim.gpu_memory("inference", &name, EMBED_MIB);
    }
    for i in 0..24 {
        let name = format!("rerank-6b8f4-{}", sim.next_suffix());
        let p = pod(&name)
            .ns("inference")
            .gpus(1)
            .cpu_milli(4000)
            .memory_gi(32)
            .tolerate(keys::RESOURCE_GPU)
            .owner("ReplicaSet", "rerank-6b8f4")
            .image(IMAGE_SERVE)
            .created(ago(300 + i))
            .build();
        sim.add_pod(p, PodPlan::default());
        sim.gpu_memory("inference", &name, RERANK_MIB);
    }
    sim.settle();
    age_running(sim, 200, 290);
}
