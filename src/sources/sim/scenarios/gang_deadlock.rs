//! Scenario `gang-deadlock`: Two gangs, each waiting for the other.

use super::super::catalog::{H100, R550};
use super::super::{PodPlan, SimCluster};

use super::Scenario;
use super::blocks::*;

pub const SCENARIO: Scenario = Scenario {
    name: "gang-deadlock",
    title: "Two gangs, each waiting for the other",
    story: "Two 5×8 training jobs were admitted on a 64-GPU cluster without gang scheduling. The scheduler placed four members of each: 64 GPUs are held, idle, and neither job can ever start.",
    signal: "both gangs partially placed (4/5), 32 GPUs held idle each, deadlocked with each other",
    manifests: include_str!("../../../../assets/scenarios/gang-deadlock/scenario.yaml"),
    build,
};

fn build(sim: &mut SimCluster) {
    let nodes = gpu_pool(sim, "gpu", 8, pool("h100", H100, 8, R550, false));
    sim.add_flavor(flavor("h100", "h100", false));
    sim.add_queue(cluster_queue("shared", None, &[("h100", 128, None)]));
    sim.add_queue(local_queue("team-a", "shared", "shared"));
    sim.add_queue(local_queue("team-b", "shared", "shared"));
    for (team, job, first_node) in [("team-a", "gpt-a", 0usize), ("team-b", "gpt-b", 1)] {
        let gang = admitted(workload(team, job, "shared", 5, 8, 50, ago(25)), "shared", "h100", ago(24));
        sim.add_gang(gang, None);
        for i in 0..5u32 {
            let s = sim.next_suffix();
            let p = member(team, job, i, 8, &s);
            // Interleaved binding: a on gpu-01,03,05,07; b on gpu-02,04,06,08.
            if i < 4 {
                let node = nodes[first_node + 2 * i as usize].clone();
                running_on(sim, p, node.as_str(), 23);
            } else {
                sim.add_pod(p.created(ago(24)).build(), PodPlan::default());
            }
        }
    }
}
