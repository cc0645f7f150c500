//! Scenario `mig-mismatch`: The slice you need is not offered.

use crate::model::build::pod;
use crate::model::{Resources, Sym, keys};

use super::super::catalog::{H100, NodeSpec, R550};
use super::super::{Fault, PodPlan, SimCluster};

use super::Scenario;
use super::blocks::*;

pub const SCENARIO: Scenario = Scenario {
    name: "mig-mismatch",
    title: "The slice you need is not offered",
    story: "The inference pool is partitioned all-1g.10gb. A 70B model needs 3g.40gb slices, which no node offers; an attempt to repartition mig-08 to all-3g.40gb has been pending for 40 minutes with its GPU operands paused.",
    signal: "insufficient-mig:3g.40gb on every MIG node, the mig-profile-not-offered hint, and mig-08 flagged mig-config-pending (wedged)",
    manifests: include_str!("../../../../assets/scenarios/mig-mismatch/scenario.yaml"),
    build,
};

fn build(sim: &mut SimCluster) {
    for i in 1..=8 {
        let mut spec = NodeSpec::new(format!("mig-{i:02}"), "mig", H100, 8, R550);
        spec.tainted = true;
        spec.mig_config = Some("all-1g.10gb".into());
        spec.created = ago(60 * 24 * 60);
        sim.add_gpu_node(spec);
    }
    for i in 0..40 {
        let p = pod(&format!("embed-small-{i}"))
            .ns("inference")
            .mig("1g.10gb", 1)
            .cpu_milli(2000)
            .memory_gi(16)
            .tolerate(keys::RESOURCE_GPU)
            .owner("ReplicaSet", "embed-small")
            .image(IMAGE_SERVE)
            .created(ago(400))
            .build();
        sim.add_pod(p, PodPlan::default());
    }
    for i in 0..3 {
        let p = pod(&format!("llm-70b-7f6c5-{i}"))
            .ns("inference")
            .mig("3g.40gb", 1)
            .cpu_milli(8000)
            .memory_gi(64)
            .tolerate(keys::RESOURCE_GPU)
            .owner("ReplicaSet", "llm-70b-7f6c5")
            .image(IMAGE_SERVE)
            .created(ago(45))
            .build();
        sim.add_pod(p, PodPlan::default());
    }
    // Someone asked mig-08 for all-3g.40gb 40 minutes ago; the mig-manager wedged.
    sim.fault("mig-08", Fault::MigWedge);
    sim.set_node_label("mig-08", keys::MIG_CONFIG, Some("all-3g.40gb"));
    sim.set_node_label("mig-08", keys::MIG_CONFIG_STATE, Some("pending"));
    for operand in ["device-plugin", "gpu-feature-discovery", "dcgm-exporter", "dcgm", "nvsm"] {
        sim.set_node_label(
            "mig-08",
            &format!("{}{operand}", keys::GPU_DEPLOY_PREFIX),
            Some(keys::PAUSED_FOR_MIG_CHANGE),
        );
    }
    sim.edit_node("mig-08", |n| {
        n.operator.mig_config_since = Some(ago(40));
        // The paused device plugin advertises nothing.
        n.allocatable =
            Resources::from_pairs(n.allocatable.iter().map(|(k, v)| (k, if keys::is_gpu_resource(k) { 0 } else { v })));
    });
    sim.mig_jobs.insert(Sym::new("mig-08"), super::super::MigJob { config: "all-3g.40gb".into(), done_at: None });
    sim.settle();
    age_running(sim, 300, 400);
}
