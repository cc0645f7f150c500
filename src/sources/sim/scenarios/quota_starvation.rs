//! Scenario `quota-starvation`: Idle GPUs, no quota.

use super::super::SimCluster;
use super::super::catalog::{H100, R550};

use super::Scenario;
use super::blocks::*;

pub const SCENARIO: Scenario = Scenario {
    name: "quota-starvation",
    title: "Idle GPUs, no quota",
    story: "team-a's ClusterQueue has 16 H100 GPUs nominal, all in use, and may not borrow. Its next job waits at Kueue while 80 GPUs sit idle in the cluster.",
    signal: "the pending workload is blocked at the quota step (16 more needed, borrowing limit 0) while 80 GPUs are free",
    manifests: include_str!("../../../../assets/scenarios/quota-starvation/scenario.yaml"),
    build,
};

fn build(sim: &mut SimCluster) {
    let nodes = gpu_pool(sim, "gpu", 16, pool("h100", H100, 8, R550, false));
    sim.add_flavor(flavor("h100", "h100", false));
    sim.add_queue(cluster_queue("team-a", Some("ml"), &[("h100", 16, Some(0))]));
    sim.add_queue(cluster_queue("team-b", Some("ml"), &[("h100", 32, None)]));
    sim.add_queue(local_queue("team-a", "default", "team-a"));
    sim.add_queue(local_queue("team-b", "default", "team-b"));
    let _ = nodes;
    submit(sim, workload("team-a", "pretrain-7b", "default", 2, 8, 50, ago(180)), 8, None);
    submit(sim, workload("team-b", "pretrain-13b", "default", 4, 8, 50, ago(170)), 8, None);
    sim.settle();
    age_running(sim, 150, 160);
    submit(sim, workload("team-a", "finetune-xl", "default", 2, 8, 50, ago(40)), 8, None);
}
