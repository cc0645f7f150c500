//! Scenario `topology-split`: A tensor-parallel job split over two nodes.

use super::super::SimCluster;
use super::super::catalog::{H100, R550};

use super::Scenario;
use super::blocks::*;

pub const SCENARIO: Scenario = Scenario {
    name: "topology-split",
    title: "A tensor-parallel job split over two nodes",
    story: "A 2×4-GPU tensor-parallel server should share one NVLink domain. The scheduler spread it: 4 GPUs on gpu-03 and 4 on gpu-11, while gpu-05 had all 8 free.",
    signal: "the gang is flagged topology-split across gpu-03 and gpu-11",
    manifests: include_str!("../../../../assets/scenarios/topology-split/scenario.yaml"),
    build,
};

fn build(sim: &mut SimCluster) {
    let nodes = gpu_pool(sim, "gpu", 16, pool("h100", H100, 8, R550, false));
    sim.add_flavor(flavor("h100", "h100", false));
    sim.add_queue(cluster_queue("serving", None, &[("h100", 64, None)]));
    sim.add_queue(local_queue("serving", "serving", "serving"));
    for (i, node) in nodes.iter().enumerate() {
        let used = match node.as_str() {
            "gpu-05" => continue,
            "gpu-03" | "gpu-11" => 4,
            _ => [6u64, 7, 8][i % 3],
        };
        let job = format!("batch-{}", node.as_str());
        let p = gpu_pod("batch", &format!("{job}-{}", sim.next_suffix()), used).owner("Job", &job);
        running_on(sim, p, node.as_str(), 60 + i as i64 * 5);
    }
    let gang = admitted(workload("serving", "tp-llama-70b", "serving", 2, 4, 200, ago(90)), "serving", "h100", ago(89));
    sim.add_gang(gang, None);
    for (i, node) in ["gpu-03", "gpu-11"].iter().enumerate() {
        let s = sim.next_suffix();
        let p = member("serving", "tp-llama-70b", i as u32, 4, &s);
        running_on(sim, p, node, 88);
    }
}
