//! Scenario `preemption-cost`: "Just preempt it" has a price.

use super::super::catalog::{H100, R550};
use super::super::{PodPlan, SimCluster};

use super::Scenario;
use super::blocks::*;

pub const SCENARIO: Scenario = Scenario {
    name: "preemption-cost",
    title: "\"Just preempt it\" has a price",
    story: "8 nodes × 8 H100, all busy: two 3-node pretraining gangs and two single-node fine-tunes. A high-priority 8-GPU evaluation waits: its PriorityClass does not preempt, and someone asks to make it. The gangs checkpoint every hour; one fine-tune never wrote a checkpoint.",
    signal: "the pending chain prices preemption: kube-scheduler's pick loses whole gangs' work since their last checkpoint plus restart, another node far less",
    manifests: include_str!("../../../../assets/scenarios/preemption-cost/scenario.yaml"),
    build,
};

fn build(sim: &mut SimCluster) {
    let nodes = gpu_pool(sim, "gpu", 8, pool("h100", H100, 8, R550, false));
    // (job, nodes, minutes running, minutes since the last checkpoint, restart seconds)
    type Job = (&'static str, &'static [usize], i64, Option<i64>, u32);
    let gangs: [Job; 4] = [
        ("pretrain-a", &[0, 1, 2], 420, Some(52), 900),
        ("pretrain-b", &[3, 4, 5], 300, Some(8), 900),
        ("finetune-c", &[6], 200, None, 300),
        ("finetune-d", &[7], 240, Some(20), 300),
    ];
    for (job, on, minutes, checkpoint, restart) in gangs {
        for (i, n) in on.iter().enumerate() {
            let mut p = member("research", job, i as u32, 8, &sim.next_suffix()).priority(100);
            if let Some(c) = checkpoint {
                p = p.checkpointed(ago(c), restart);
            }
            running_on(sim, p, nodes[*n].as_str(), minutes);
        }
        if on.len() > 1 {
            let gang = admitted(
                workload("research", job, "research", on.len() as u32, 8, 100, ago(minutes + 2)),
                "research",
                "h100",
                ago(minutes + 1),
            );
            sim.add_gang(gang, None);
        }
    }
    let p = gpu_pod("eval", &format!("release-eval-0-{}", sim.next_suffix()), 8)
        .owner("Job", "release-eval")
        .priority(10_000)
        .preempt_never()
        .created(ago(25))
        .build();
    sim.add_pod(p, PodPlan::default());
}
