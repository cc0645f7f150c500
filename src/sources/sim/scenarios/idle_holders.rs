//! Scenario `idle-holders`: GPUs held, no work done.

use crate::model::build::pod;

use super::super::catalog::{H100, R550};
use super::super::{PodPlan, SimCluster};

use super::Scenario;
use super::blocks::*;

pub const SCENARIO: Scenario = Scenario {
    name: "idle-holders",
    title: "GPUs held, no work done",
    story: "6 nodes × 8 H100, every GPU allocated, an 8-GPU fine-tune waits. Four training jobs are busy; notebooks opened this morning fill gpu-05 and a forgotten debug deployment sits on gpu-06: 11 GPUs held at 0–2% for hours.",
    signal: "the Usage pane ranks the idle holders: 11 GPUs held idle, all 8 of gpu-05's by notebooks: reclaiming them lets the 1×8 fine-tune start",
    manifests: include_str!("../../../../assets/scenarios/idle-holders/scenario.yaml"),
    build,
};

/// A small holder: pod, GPUs, minutes running, minutes idle (if idle).
type Holder = (&'static str, u64, i64, Option<i64>);

/// Per node, its small holders.
const HOLDERS: [(&str, &[Holder]); 2] = [
    (
        "gpu-05",
        &[
            ("notebook-alice-0", 1, 420, Some(390)),
            ("notebook-bob-0", 1, 380, Some(300)),
            ("notebook-chen-0", 1, 300, Some(240)),
            ("notebook-dara-0", 1, 260, Some(200)),
            ("notebook-eli-0", 2, 240, Some(180)),
            ("notebook-fay-0", 2, 200, Some(150)),
        ],
    ),
    (
        "gpu-06",
        &[
            ("notebook-gus-0", 1, 500, Some(470)),
            ("notebook-hana-0", 1, 120, None),
            ("notebook-ivan-0", 2, 90, None),
            ("notebook-jo-0", 2, 60, None),
        ],
    ),
];

fn build(sim: &mut SimCluster) {
    let nodes = gpu_pool(sim, "gpu", 6, pool("h100", H100, 8, R550, false));
    for (i, node) in nodes.iter().take(4).enumerate() {
        let job = format!("pretrain-{i}");
        let p = gpu_pod("ml", &format!("{job}-0-{}", sim.next_suffix()), 8).owner("Job", &job);
        running_on(sim, p, node.as_str(), 300 + i as i64 * 40);
    }
    for (node, holders) in HOLDERS {
        for (name, gpus, minutes, idle) in holders.iter().copied() {
            let set = name.trim_end_matches("-0");
            let p = pod(name)
                .ns("notebooks")
                .gpus(gpus)
                .cpu_milli(8000 * gpus)
                .memory_gi(64 * gpus)
                .owner("StatefulSet", set)
                .image(IMAGE_NOTEBOOK)
                .on(node)
                .running()
                .created(ago(minutes + 1))
                .transitioned(ago(minutes))
                .build();
            sim.add_pod(p, PodPlan::default());
            if let Some(idle) = idle {
                sim.idle_holder("notebooks", name, ago(idle));
            }
        }
    }
    // A debug deployment left scaled up after an incident, on gpu-06.
    let p = pod("debug-nccl-7c9d4-x2k8p")
        .ns("platform")
        .gpus(2)
        .cpu_milli(16_000)
        .memory_gi(128)
        .owner("ReplicaSet", "debug-nccl-7c9d4")
        .image(IMAGE_CUDA_12_4)
        .on("gpu-06")
        .running()
        .created(ago(900))
        .transitioned(ago(899))
        .build();
    sim.add_pod(p, PodPlan::default());
    sim.idle_holder("platform", "debug-nccl-7c9d4-x2k8p", ago(860));
    let p =
        gpu_pod("ml", &format!("finetune-8x-0-{}", sim.next_suffix()), 8).owner("Job", "finetune-8x").created(ago(50));
    sim.add_pod(p.build(), PodPlan::default());
}
