//! Scenario `fair-share`: One team hoards what the cohort lends.

use super::super::SimCluster;
use super::super::catalog::{H100, R550};

use super::Scenario;
use super::blocks::*;

pub const SCENARIO: Scenario = Scenario {
    name: "fair-share",
    title: "One team hoards what the cohort lends",
    story: "Cohort research: team-a and team-b have 32 H100 GPUs nominal each, team-c 16, on 80 GPUs. While team-a was quiet, team-b submitted nine 8-GPU jobs and borrowed its idle quota. Now team-a's three jobs wait within their own quota, and nothing takes it back.",
    signal: "team-a's workloads wait at the quota step while team-b borrows 24 GPUs (fair share 300 against team-a's 0); reclaimWithinCohort Never: no preemption",
    manifests: include_str!("../../../../assets/scenarios/fair-share/scenario.yaml"),
    build,
};

fn build(sim: &mut SimCluster) {
    gpu_pool(sim, "gpu", 10, pool("h100", H100, 8, R550, false));
    sim.add_flavor(flavor("h100", "h100", false));
    for (team, nominal) in [("team-a", 32), ("team-b", 32), ("team-c", 16)] {
        sim.add_queue(cluster_queue(team, Some("research"), &[("h100", nominal, None)]));
        sim.add_queue(local_queue(team, "default", team));
    }
    submit(sim, workload("team-a", "eval-harness", "default", 1, 8, 50, ago(400)), 8, None);
    submit(sim, workload("team-c", "asr-train", "default", 2, 8, 50, ago(390)), 8, None);
    for i in 0..9 {
        let job = format!("sweep-lr-{i}");
        submit(sim, workload("team-b", &job, "default", 1, 8, 50, ago(300 - i)), 8, None);
    }
    sim.settle();
    age_running(sim, 200, 290);
    for job in ["llama-sft", "llama-dpo", "reward-model"] {
        submit(sim, workload("team-a", job, "default", 1, 8, 50, ago(45)), 8, None);
    }
}
