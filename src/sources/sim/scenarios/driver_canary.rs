//! Scenario `driver-canary`: The canary failed; the wave must not go on.

use crate::model::{EventType, Sym, keys};

use super::super::catalog::{H100, R550, R570};
use super::super::{Involved, SimCluster};

use super::Scenario;
use super::blocks::*;

pub const SCENARIO: Scenario = Scenario {
    name: "driver-canary",
    title: "The canary failed; the wave must not go on",
    story: "The GPU Operator's ClusterPolicy asks for 570.124.06. The operator held the fleet back with the skip label and let one canary, h100-01, upgrade first: it failed 40 minutes ago and sits cordoned in upgrade-failed. The eleven other nodes still run 550.54.15 and their training.",
    signal: "the upgrade board heads with h100-01 upgrade-failed; the wave plan is HALTED with a rollback to 550.54.15 (11 nodes run it)",
    manifests: include_str!("../../../../assets/scenarios/driver-canary/scenario.yaml"),
    build,
};

fn build(sim: &mut SimCluster) {
    sim.set_upgrade_target(R570);
    // The canary took the new driver and failed validation; the rest wait on 550.
    let nodes: Vec<Sym> = (1..=12)
        .map(|i| {
            let mut spec = pool("h100", H100, 8, if i == 1 { R570 } else { R550 }, false);
            spec.name = format!("h100-{i:02}");
            spec.created = ago(60 * 24 * 90);
            sim.add_gpu_node(spec)
        })
        .collect();
    sim.set_node_label("h100-01", keys::DRIVER_UPGRADE_STATE, Some("upgrade-failed"));
    sim.edit_node("h100-01", |n| {
        n.unschedulable = true;
        n.operator.upgrade_since = Some(ago(40));
    });
    let at = sim.now;
    sim.now = ago(40);
    sim.record(
        EventType::Warning,
        Involved { kind: "Node", namespace: Sym::new(""), name: "h100-01" },
        "GPUDriverUpgrade",
        "Failed to validate driver upgrade: nvidia-operator-validator pod is not ready (cuda-validation: Init:CrashLoopBackOff)",
        "nvidia-gpu-operator",
    );
    sim.now = at;
    for node in nodes.iter().skip(1) {
        let n = node.as_str().to_string();
        sim.set_node_label(&n, keys::DRIVER_UPGRADE_SKIP, Some("true"));
        sim.set_node_label(&n, keys::DRIVER_UPGRADE_STATE, Some("upgrade-required"));
        sim.edit_node(&n, |x| x.operator.upgrade_since = Some(ago(70)));
    }
    for (i, pair) in nodes[1..].chunks(2).enumerate() {
        let job = format!("pretrain-{i}");
        for (j, node) in pair.iter().enumerate() {
            let p = member("llm", &job, j as u32, 8, &sim.next_suffix());
            running_on(sim, p, node.as_str(), 200 + i as i64 * 30);
        }
    }
}
