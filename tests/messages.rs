//! Every real message in tests/fixtures/events/failed-scheduling.txt (copied
//! verbatim from ../shared/fixtures/real/events/, sources inline) is read
//! into what kgpu understands of it, or marked raw; and no input at all
//! makes the readers panic.

use kgpu::analysis::queue_msg::GangMessage;
use kgpu::analysis::scheduler_msg::{self, Said};
use proptest::prelude::*;

const FIXTURE: &str = include_str!("fixtures/events/failed-scheduling.txt");

fn messages() -> Vec<&'static str> {
    FIXTURE.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')).collect()
}

/// One line per message: what kgpu read, in its own codes.
fn summary(said: &Said) -> String {
    match said {
        Said::Scheduler(p) => {
            let total = p.total_nodes.map_or("?".to_string(), |n| n.to_string());
            let reasons: Vec<String> = p
                .reasons
                .iter()
                .map(|(r, n)| format!("{}={n}", scheduler_msg::reason_code(r).unwrap_or_else(|| format!("'{r}'"))))
                .collect();
            let preempted: u32 = p.preemption.iter().map(|(_, n)| n).sum();
            let post = if p.preemption.is_empty() { String::new() } else { format!(" | preemption {preempted}") };
            format!("scheduler {total}: {}{post}", reasons.join(" "))
        }
        Said::Gang(GangMessage { waiting, tasks, why, min_available, phases, pending_reasons }) => {
            let list = |v: &[(String, u32)]| v.iter().map(|(k, n)| format!("{n} {k}")).collect::<Vec<_>>().join(" ");
            format!(
                "gang {waiting}/{tasks} min={} why='{why}' phases=[{}] pending=[{}]",
                min_available.map_or("-".into(), |m| m.to_string()),
                list(phases),
                list(pending_reasons)
            )
        }
        Said::Quota(q) => format!("kueue: {}", q.describe()),
        Said::Unrecognised => "raw".into(),
    }
}

#[test]
fn every_fixture_message_is_read_or_marked_raw() {
    let expected = [
        // kube-scheduler
        "scheduler 1: insufficient-gpu=1 | preemption 1",
        "scheduler 1: untolerated-taint:gpu=1 | preemption 1",
        // only the preemption part survived in that issue title: not misread
        "raw",
        "scheduler 6: selector-mismatch=3 insufficient-gpu=6",
        "scheduler 2: insufficient-gpu=1 cordoned=1",
        "scheduler 9: selector-mismatch=9 | preemption 9",
        // cluster-autoscaler, not a scheduler
        "raw",
        "scheduler 1: insufficient:nvidia.com/pgpu=1",
        "scheduler 2: 'ExceedsGPUQuota'=2",
        "scheduler 2: insufficient:aliyun.com/gpu-mem=2",
        "scheduler 3: 'Insufficient GPU Memory in one device'=1 insufficient:aliyun.com/gpu-mem=2",
        "scheduler 2: insufficient-memory=1 'Pod is waiting for preemptible or free resource to appear: have to use at least one bad node 1/xx.xx.xx.xx when scheduling in VC default'=1 selector-mismatch=1",
        "scheduler 1: not-ready=1 | preemption 1",
        "scheduler ?: insufficient-cpu=9 insufficient-memory=15 selector-mismatch=18",
        // HAMi prints the scheduler's format
        "scheduler 4: 'NodeUnfitPod'=1 not-ready=1 'node unregistered'=2 | preemption 4",
        "raw",
        "raw",
        // KAI's PodGroup condition
        "raw",
        // Volcano
        "gang 1/1 min=1 why='pod group is not ready' phases=[1 Pending] pending=[1 Undetermined]",
        "gang 1/1 min=1 why='pod group is not ready' phases=[1 Pending] pending=[1 Unschedulable]",
        "raw",
        "gang 1/1 min=1 why='pod group is not ready' phases=[1 Pending] pending=[1 Unschedulable]",
        "gang 1/0 min=1 why='pod group is not ready' phases=[] pending=[]",
        "gang 1/1 min=1 why='pod group is not ready' phases=[1 Pending] pending=[]",
        "gang 12/8 min=20 why='pod group is not ready' phases=[8 Running] pending=[]",
        "gang 10/6 min=10 why='job is not ready' phases=[6 Pending] pending=[]",
        "gang 1/0 min=- why='0 nodes are available' phases=[] pending=[]",
        "scheduler ?: 'plugin InterPodAffinity predicates failed node(s) didn't match pod affinity/anti-affinity, node(s) didn't match pod affinity rules'=1 'node(s) resource fit failed'=2",
        // Volcano's per-task FitErrors: "nodes are unavailable"
        "scheduler 1: 'hami-vgpuDeviceSharing error'=1",
        // Kueue
        "kueue: pod set main: 9 more cpu needed in flavor default-flavor (others use the quota)",
        "kueue: pod set main: asks for more cpu than flavor default-flavor can ever give",
        "kueue: LocalQueue user-queue does not exist",
        "kueue: pod set main: 20G more example.com/accelerator-memory needed in flavor default-flavor (others use the quota)",
        "kueue: pod set main: asks for more cpu than flavor on-demand can ever give",
        "kueue: pod set main: no flavor of the ClusterQueue covers example.com/gpu",
        // a status dump, not a message
        "raw",
        "kueue: pod set llama3-2-1b-fsdp-hpto-pods-podset: topology hyperpod-default has no domain for 8 pod(s)",
        "kueue: another workload took the quota in the same admission cycle",
        "kueue: pod set rank: 8 more nvidia.com/gpu needed in flavor gb200 (others use the quota)",
        "kueue: pod set gpu-workers: 8 more nvidia.com/gpu needed in flavor gpu-flavor (others use the quota)",
        // host ports (NodePorts)
        "scheduler 1: ports-taken=1",
        "scheduler 3: ports-taken=1 selector-mismatch=2",
        "scheduler 3: insufficient-gpu=1 ports-taken=2 | preemption 3",
        // volumes: older and v1.36 wordings, PreFilter reasons counted per node (1.19-1.25) and alone (1.26+)
        "scheduler 3: untolerated-taint:node-role.kubernetes.io/master=1 volume-node-affinity=2",
        "scheduler 10: volume-node-affinity=3 selector-mismatch=7 | preemption 10",
        // InterPodAffinity's 1.10-1.19 wording does not say which rule: the scheduler's words
        "scheduler 9: 'node(s) didn't match pod affinity/anti-affinity'=1 volume-node-affinity=8",
        "scheduler 1: volume-node-affinity=1",
        "scheduler 5: 'node(s) were out of disk space'=1 'node(s) were not ready'=2 volume-unbindable=3",
        "scheduler 3: 'pod has unbound immediate PersistentVolumeClaims'=3 | preemption 3",
        "scheduler 1: 'pod has unbound immediate PersistentVolumeClaims'=1",
        // a filter error wrapper (1.16-1.17) and Kubernetes 1.5's summary: the pending chain shows them raw
        "raw",
        "raw",
        "scheduler 3: volume-zone=1 insufficient-gpu=2 | preemption 3",
        "scheduler 3: insufficient-gpu=1 volume-in-use=2 | preemption 3",
        // a v1.36 PreFilter reason alone: the volumes step compares it (scheduler_msg::whole_pod_reason)
        "raw",
    ];
    let got: Vec<String> = messages().iter().map(|m| summary(&scheduler_msg::read(m))).collect();
    for (i, (g, e)) in got.iter().zip(expected.iter()).enumerate() {
        assert_eq!(g, e, "message {i}: {}", messages()[i]);
    }
    assert_eq!(got.len(), expected.len(), "one expectation per fixture message");
    // What the pending pane counts as "not recognised".
    assert_eq!(got.iter().filter(|s| *s == "raw").count(), 10);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Arbitrary text never panics any reader.
    #[test]
    fn readers_never_panic(text in "\\PC{0,200}") {
        let _ = scheduler_msg::read(&text);
        let _ = scheduler_msg::parse(&text);
    }

    /// Text built from the messages' own pieces, in any order, never panics
    /// either (this reaches the parsers' inner branches far more often).
    #[test]
    fn readers_never_panic_on_message_like_text(
        parts in proptest::collection::vec(prop_oneof![
            proptest::sample::select(PIECES).prop_map(String::from),
            "[0-9]{1,3}",
            "[a-z./-]{1,8}",
        ], 0..24)
    ) {
        let text: String = parts.concat();
        let _ = scheduler_msg::read(&text);
    }
}

const PIECES: &[&str] = &[
    "0/",
    " nodes are available:",
    " preemption: ",
    ". ",
    ", ",
    "Insufficient nvidia.com/gpu",
    "node(s) had untolerated taint {",
    "}",
    " tasks in gang unschedulable:",
    "; Pending:",
    " minAvailable",
    "couldn't assign flavors to pod set ",
    ": ",
    "insufficient unused quota for ",
    " in flavor ",
    " more needed",
    "topology ",
    " doesn't allow to fit any of ",
    "LocalQueue ",
    " doesn't exist",
    "all nodes are unavailable: ",
    "No nodes are available that match all of the following predicates::",
    " (",
    ")",
    "é",
    "/",
    " ",
];
