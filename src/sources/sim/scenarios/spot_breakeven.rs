//! Scenario `spot-breakeven`: Spot GPUs are cheap until a gang runs there.

use super::super::SimCluster;
use super::super::catalog::{H100, R550};

use super::Scenario;
use super::blocks::*;

pub const SCENARIO: Scenario = Scenario {
    name: "spot-breakeven",
    title: "Spot GPUs are cheap until a gang runs there",
    story: "Six H100 spot nodes (Karpenter capacity-type spot) beside four on-demand ones. Four spot nodes were replaced in the last day. A 4-node pretraining gang checkpoints every 4 hours on spot; a fine-tune on one spot node checkpoints every 30 minutes.",
    signal: "the gang's detail works out the break-even: 4 spot nodes × 0.047 preemptions/node-hour × (4h ÷ 2 + 20m restart) = 43.4% of its time lost, against 1.6% for the fine-tune",
    manifests: include_str!("../../../../assets/scenarios/spot-breakeven/scenario.yaml"),
    build,
};

/// Spot node ages in hours: four replaced within the day, two older.
const SPOT_AGES_HOURS: [i64; 6] = [2, 5, 11, 20, 72, 96];

fn build(sim: &mut SimCluster) {
    let on_demand = gpu_pool(sim, "od", 4, pool("h100", H100, 8, R550, false));
    for n in &on_demand {
        sim.set_node_label(n.as_str(), "karpenter.sh/capacity-type", Some("on-demand"));
    }
    let spot: Vec<String> = SPOT_AGES_HOURS
        .iter()
        .enumerate()
        .map(|(i, hours)| {
            let mut spec = pool("h100-spot", H100, 8, R550, false);
            spec.name = format!("spot-{:02}", i + 1);
            spec.created = ago(hours * 60);
            let name = sim.add_gpu_node(spec);
            sim.set_node_label(name.as_str(), "karpenter.sh/capacity-type", Some("spot"));
            name.to_string()
        })
        .collect();
    sim.add_flavor(flavor("h100", "h100", false));
    sim.add_queue(cluster_queue("research", None, &[("h100", 80, None)]));
    sim.add_queue(local_queue("research", "research", "research"));
    // The gang started on the two oldest spot nodes and two newer ones
    // (its last restart, 90 minutes ago, after a preemption).
    let gang =
        admitted(workload("research", "pretrain-13b", "research", 4, 8, 100, ago(600)), "research", "h100", ago(92));
    sim.add_gang(gang, None);
    for (i, node) in [&spot[4], &spot[5], &spot[1], &spot[2]].iter().enumerate() {
        let s = sim.next_suffix();
        let p = member("research", "pretrain-13b", i as u32, 8, &s).checkpoint_every(4 * 3600, 20 * 60);
        running_on(sim, p, node, 90);
    }
    let p = gpu_pod("research", &format!("finetune-7b-0-{}", sim.next_suffix()), 8)
        .owner("Job", "finetune-7b")
        .checkpoint_every(30 * 60, 5 * 60);
    running_on(sim, p, &spot[0], 100);
    for (i, node) in on_demand.iter().enumerate().take(3) {
        let job = format!("eval-{i}");
        let p = gpu_pod("research", &format!("{job}-0-{}", sim.next_suffix()), 8).owner("Job", &job);
        running_on(sim, p, node.as_str(), 50);
    }
}
