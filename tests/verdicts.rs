//! kgpu's verdicts on cluster dumps it has never been tuned on, read the way a
//! user reads them: `kgpu snapshot --file DUMP -o json` and `kgpu why`.
//!
//! `tests/fixtures/verdicts/<case>/cluster.yaml` were captured from the real
//! components (`capture.sh <case>`: the case's input applied to `kgpu lab`,
//! then `kubectl get -o yaml`), so the scheduler's and Kueue's own words are
//! in them and kgpu must agree. `hand-made/*.yaml` are built from real shapes
//! where no controller of that kind runs here (JobSet, Volcano, the GPU
//! Operator), each with its sources in its header.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

use std::process::Command;

use serde_json::Value;

fn fixture(path: &str) -> String {
    format!("{}/tests/fixtures/verdicts/{path}", env!("CARGO_MANIFEST_DIR"))
}

fn kgpu(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_kgpu")).args(args).output().expect("run kgpu");
    assert!(out.status.success(), "kgpu {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn snapshot(path: &str, extra: &[&str]) -> Value {
    let file = fixture(path);
    let mut args = vec!["snapshot", "--file", file.as_str(), "-o", "json"];
    args.extend_from_slice(extra);
    serde_json::from_str(&kgpu(&args)).expect("valid JSON")
}

fn why(path: &str, target: &str) -> String {
    kgpu(&["why", target, "--file", &fixture(path)])
}

fn pending<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["pending"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("{name} not pending: {}", doc["pending"]))
}

/// The pending item in `namespace` whose name starts with `prefix` (Kueue
/// names a Job's Workload `job-<name>-<hash>`).
fn pending_like<'a>(doc: &'a Value, namespace: &str, prefix: &str) -> Option<&'a Value> {
    doc["pending"]
        .as_array()?
        .iter()
        .find(|p| p["namespace"] == namespace && p["name"].as_str().is_some_and(|n| n.starts_with(prefix)))
}

fn gang<'a>(doc: &'a Value, name_prefix: &str) -> &'a Value {
    doc["gangs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"].as_str().unwrap().starts_with(name_prefix))
        .unwrap_or_else(|| panic!("no gang {name_prefix}"))
}

fn node_issues(doc: &Value, name: &str) -> Vec<String> {
    let node = doc["fleet"]["nodes"].as_array().unwrap().iter().find(|n| n["name"] == name).unwrap();
    node["issues"].as_array().unwrap().iter().map(|i| i.as_str().unwrap().to_string()).collect()
}

fn step<'a>(item: &'a Value, name: &str) -> &'a Value {
    item["steps"].as_array().unwrap().iter().find(|s| s["step"] == name).unwrap()
}

const FIT: &str = "fit-neighbours/cluster.yaml";

#[test]
fn six_nodes_six_reasons_and_kgpu_agrees_with_the_scheduler() {
    // Six nodes, six reasons: NotReady (unreachable taint), cordoned with a
    // taint too, two untolerated taints, 4 GPUs busy, too few CPUs, no GPUs.
    let doc = snapshot(FIT, &[]);
    for name in ["prep-0", "train-0"] {
        let item = pending(&doc, name);
        assert_eq!(item["blockingStep"], "fit", "{name}");
        assert_eq!(item["agreesWithScheduler"], true, "{name}: {}", item["disagreement"]);
        let reasons = &item["nodeReasons"];
        assert_eq!(reasons["cordoned"], 1, "{name}: {reasons}");
        assert_eq!(reasons["not-ready"], 1, "{name}: {reasons}");
        assert_eq!(reasons["insufficient-cpu"], 1, "{name}: {reasons}");
        // The cordon is one reason: never a hint to tolerate the cordon's or
        // the node lifecycle's own taints.
        assert!(reasons.get("untolerated-taint:node.kubernetes.io/unschedulable").is_none(), "{name}: {reasons}");
        let hints = item["hints"].to_string();
        assert!(!hints.contains("node.kubernetes.io/"), "{name}: {hints}");
    }
}

#[test]
fn a_native_sidecar_and_the_runtime_class_overhead_count_toward_the_fit() {
    // train-0 asks 6 CPUs, its sidecar (restartPolicy Always) 2, its
    // RuntimeClass 1: 9 > 8 on gpu-small-cpu. The scheduler said so too.
    let text = why(FIT, "ml/train-0");
    assert!(text.contains("1 node(s): insufficient-cpu"), "{text}");
    // Per-node reasons are not a partition, and the drilldown says so.
    assert!(text.contains("a node can fail several checks, so these add up to 9 for 6 node(s)"), "{text}");
    assert!(text.contains("kgpu agrees with the scheduler."), "{text}");
    assert!(text.contains("free 4 more GPU(s) on gpu-busy"), "{text}");
}

#[test]
fn a_pod_bound_to_a_node_that_went_not_ready_is_pending_and_says_why() {
    let doc = snapshot(FIT, &[]);
    let item = pending(&doc, "eval-1");
    assert_eq!(item["blockingStep"], "device-plugin");
    let summary = item["summary"].as_str().unwrap();
    assert!(summary.contains("bound to gpu-nr, which is NotReady"), "{summary}");
    let text = why(FIT, "ml/eval-1");
    assert!(text.contains("node.kubernetes.io/unreachable:NoExecute"), "{text}");
    assert!(text.contains("nothing recreates it"), "a bare pod: {text}");
}

const KUEUE: &str = "kueue-neighbours/cluster.yaml";

#[test]
fn quota_shortfalls_match_kueue_and_name_the_borrower() {
    let doc = snapshot(KUEUE, &[]);
    let item = doc["pending"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"].as_str().unwrap().starts_with("job-pretrain-"))
        .unwrap();
    assert_eq!(item["blockingStep"], "quota");
    let quota = step(item, "quota");
    let details: Vec<&str> = quota["details"].as_array().unwrap().iter().map(|d| d.as_str().unwrap()).collect();
    // The dump's Kueue message was written before the last admission in the
    // cohort; kgpu reads the queues as they are now and says both.
    assert!(details.iter().any(|d| d.contains("8 more needed")), "{details:?}");
    assert!(
        details.iter().any(|d| d.contains("ClusterQueue team-b holds 24 nvidia.com/gpu on a nominal 16")),
        "{details:?}"
    );
    assert!(
        item["unblock"][0].as_str().unwrap().starts_with("16 more nvidia.com/gpu in flavor h100"),
        "{}",
        item["unblock"]
    );
}

#[test]
fn an_admission_check_holds_a_workload_whose_quota_is_reserved() {
    let doc = snapshot(KUEUE, &[]);
    let item = doc["pending"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"].as_str().unwrap().starts_with("job-capacity-wait-"))
        .unwrap();
    assert_eq!(item["blockingStep"], "admission-check");
    assert_eq!(step(item, "quota")["verdict"], "pass");
    assert!(item["summary"].as_str().unwrap().contains("waiting for admission check capacity"), "{}", item["summary"]);
}

#[test]
fn a_launcher_and_workers_are_two_pod_sets_and_a_workload_without_pods_is_named() {
    let doc = snapshot(KUEUE, &[]);
    let item = pending(&doc, "mpi-allreduce");
    assert_eq!(item["shape"], "1×cpu + 2×8");
    // Admitted by the real Kueue, but no controller owns it: no pod will come.
    assert_eq!(item["blockingStep"], "gang", "{}", item["summary"]);
    assert!(item["summary"].as_str().unwrap().contains("no controller owns this Workload"), "{}", item["summary"]);
}

#[test]
fn a_gang_the_scheduler_spread_while_a_node_was_free_is_split() {
    let doc = snapshot(KUEUE, &[]);
    let g = gang(&doc, "job-tp-serve-");
    assert_eq!(g["issues"], serde_json::json!(["topology-split"]), "{g}");
    assert_eq!(g["nodes"].as_object().unwrap().len(), 2, "{g}");
}

#[test]
fn a_gang_without_start_times_is_of_unknown_topology_not_split() {
    // The same dump with every time of the pods gone (no creationTimestamp,
    // as kubectl-neat writes them; the status cut down to its phase): kgpu
    // cannot tell what was free when the gang was placed.
    let text = std::fs::read_to_string(fixture(KUEUE)).unwrap();
    let mut dump: Value = serde_yaml::from_str(&text).unwrap();
    for item in dump["items"].as_array_mut().unwrap() {
        if item["kind"] == "Pod" {
            item["metadata"].as_object_mut().unwrap().remove("creationTimestamp");
            item["status"] = serde_json::json!({"phase": item["status"]["phase"].clone()});
        }
    }
    let dir = std::env::temp_dir().join(format!("kgpu-verdicts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("no-times.json");
    std::fs::write(&path, serde_json::to_string(&dump).unwrap()).unwrap();
    let out = kgpu(&["snapshot", "--file", path.to_str().unwrap(), "-o", "json", "--pane", "gangs"]);
    let _ = std::fs::remove_dir_all(&dir);
    let doc: Value = serde_json::from_str(&out).unwrap();
    let g = gang(&doc, "job-tp-serve-");
    assert_eq!(g["issues"], serde_json::json!(["topology-unknown"]), "{g}");
}

const NOT_STARTING: &str = "hand-made/not-starting.yaml";

/// GPU pods placed on a Ready node whose containers do not start
/// (`hand-made/not-starting.yaml`, the kubelet's own waiting reasons and
/// messages): each is pending at the `start` step with what would unblock
/// it; a GPU pod still creating its container and a CPU pod are left alone.
#[test]
fn placed_gpu_pods_that_do_not_start_are_pending_at_the_start_step() {
    let doc = snapshot(NOT_STARTING, &[]);
    for (ns, name, says, fix) in [
        ("ml", "train-pull-0", "its image cannot be pulled on gpu-01 (ImagePullBackOff)", "pull secret"),
        ("ml", "weights-init-0", "its image cannot be pulled on gpu-01 (ErrImagePull)", "pull secret"),
        ("ml", "train-crash-0", "keeps exiting on gpu-01 (CrashLoopBackOff)", "kubectl logs --previous"),
        (
            "llm",
            "vlm-train-0",
            "the NVIDIA container runtime refuses to start it on gpu-01: the image needs cuda>=12.8 and gpu-01 runs driver 550.54.15",
            "nvidia.com/cuda.driver-version.major Gt 569",
        ),
    ] {
        let item =
            pending_like(&doc, ns, name).unwrap_or_else(|| panic!("{ns}/{name} not pending: {}", doc["pending"]));
        assert_eq!(item["blockingStep"], "start", "{ns}/{name}");
        assert!(item["summary"].as_str().unwrap().contains(says), "{ns}/{name}: {}", item["summary"]);
        assert!(item["unblock"].to_string().contains(fix), "{ns}/{name}: {}", item["unblock"]);
    }
    assert!(pending_like(&doc, "ml", "starting-0").is_none(), "a container being created is not stuck");
    assert!(pending_like(&doc, "ml", "cpu-pull-0").is_none(), "not GPU demand");
    // The header counts them with the pending work, and why explains one.
    let text = kgpu(&["snapshot", "--file", &fixture(NOT_STARTING), "--pane", "pending"]);
    assert!(text.contains("PENDING  4 item(s)"), "{text}");
    let why = why(NOT_STARTING, "ml/train-crash-0");
    assert!(why.contains("blocked at: start") && why.contains("kubectl logs -n ml train-crash-0 --previous"), "{why}");
}

const JOBSET: &str = "hand-made/jobset-gang.yaml";

#[test]
fn jobset_pods_belong_to_the_workload_their_jobset_owns() {
    // The pods' owner is a Job, the Workload's is the JobSet: the JobSet
    // label links them, so the waiting pod waits as the gang.
    let doc = snapshot(JOBSET, &[]);
    let g = gang(&doc, "jobset-llama-pretrain-");
    assert_eq!(g["state"], "partially-placed", "{g}");
    assert_eq!(g["placed"], 1, "{g}");
    let items = doc["pending"].as_array().unwrap();
    assert_eq!(items.len(), 1, "one item, the gang: {items:?}");
    assert_eq!(items[0]["kind"], "Workload");
    assert_eq!(items[0]["agreesWithScheduler"], true, "{}", items[0]["disagreement"]);
    // The JobSet that runs whole is running and asks for nothing more.
    assert_eq!(gang(&doc, "jobset-eval-suite-")["state"], "running");
    let sources: Vec<&str> =
        doc["fragmentation"]["shapes"].as_array().unwrap().iter().map(|s| s["source"].as_str().unwrap()).collect();
    assert!(!sources.iter().any(|s| s.contains("eval-suite")), "{sources:?}");
    // Its demand is the missing member, not the whole gang.
    let shape = doc["fragmentation"]["shapes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["source"].as_str().unwrap().contains("llama"))
        .unwrap();
    assert_eq!((shape["gpusPerPod"].as_u64(), shape["pods"].as_u64()), (Some(8), Some(1)), "{shape}");
}

const RAY: &str = "hand-made/ray-job.yaml";

#[test]
fn ray_pods_owned_by_their_raycluster_belong_to_the_rayjobs_workload() {
    // RayJob → RayCluster → Pod: the pods name the RayJob in KubeRay's
    // originated-from labels; the Workload is the RayJob's.
    let doc = snapshot(RAY, &[]);
    let g = gang(&doc, "rayjob-llm-batch-");
    assert_eq!((g["state"].as_str(), g["placed"].as_u64()), (Some("partially-placed"), Some(2)), "{g}");
    let items = doc["pending"].as_array().unwrap();
    assert_eq!(items.len(), 1, "the gang, not its pod: {items:?}");
    // Head and submitter are CPU pod sets: shape, not GPU demand.
    assert_eq!(items[0]["shape"], "1×cpu + 2×4 + 1×cpu");
    assert_eq!(items[0]["agreesWithScheduler"], true, "{}", items[0]["disagreement"]);
    let shape = doc["fragmentation"]["shapes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["source"].as_str().unwrap().contains("rayjob"))
        .unwrap();
    assert_eq!((shape["gpusPerPod"].as_u64(), shape["pods"].as_u64()), (Some(4), Some(1)), "{shape}");
}

const BLACK_HOLE: &str = "hand-made/black-hole.yaml";

#[test]
fn a_black_hole_is_not_room_and_the_pod_that_only_fits_there_says_so() {
    let doc = snapshot(BLACK_HOLE, &[]);
    assert!(node_issues(&doc, "gpu-01").contains(&"black-hole".to_string()));
    assert!(!node_issues(&doc, "gpu-02").contains(&"black-hole".to_string()));
    // gpu-01's 8 idle GPUs are not free capacity.
    let t = &doc["fleet"]["totals"];
    assert_eq!((t["free"].as_u64(), t["unavailable"].as_u64()), (Some(4), Some(8)), "{t}");
    let item = pending(&doc, "sweep-8gpu-3-zt6rc");
    assert_eq!(item["blockingStep"], "fit");
    assert!(
        item["summary"].as_str().unwrap().contains("only 1 black-hole node(s) would take it"),
        "{}",
        item["summary"]
    );
}

const VOLCANO: &str = "hand-made/volcano-elastic.yaml";

#[test]
fn an_elastic_volcano_jobs_extra_members_wait_as_themselves_in_the_gangs_context() {
    let doc = snapshot(VOLCANO, &[]);
    assert_eq!(gang(&doc, "resnet-")["state"], "running");
    for name in ["resnet-worker-2", "resnet-worker-3"] {
        let item = pending(&doc, name);
        assert_eq!(item["blockingStep"], "fit");
        assert!(step(item, "gang")["summary"].as_str().unwrap().contains("which has its minimum"), "{item}");
        // Volcano's own wording ("nodes are unavailable") is read and agreed with.
        assert_eq!(item["agreesWithScheduler"], true, "{}", item["disagreement"]);
        assert!(item["hints"].as_array().unwrap().is_empty(), "volcano is this pod's scheduler: {}", item["hints"]);
    }
}

const OPERATOR: &str = "hand-made/operator-states.yaml";

#[test]
fn operator_states_are_read_as_the_operator_means_them() {
    let doc = snapshot(OPERATOR, &["--target-driver", "570.124.06", "--max-unavailable", "2"]);
    // Paused by the MIG manager: not a crashed device plugin.
    let paused = node_issues(&doc, "gpu-01");
    assert!(paused.contains(&"mig-config-pending".to_string()), "{paused:?}");
    assert!(!paused.contains(&"device-plugin-not-advertising".to_string()), "{paused:?}");
    assert!(node_issues(&doc, "gpu-02").contains(&"mig-invalid".to_string()));
    // Time-slicing under renameByDefault: nvidia.com/gpu.shared replicas, no
    // nvidia.com/gpu; not a silent device plugin, and replicas are not GPUs.
    assert!(node_issues(&doc, "gpu-09").is_empty(), "{:?}", node_issues(&doc, "gpu-09"));
    let t = &doc["fleet"]["totals"];
    assert_eq!(t["replicas"], serde_json::json!({"advertised": 32, "allocated": 1}), "{t}");
    assert_eq!(t["gpus"], 64, "8 GPUs on each of gpu-01 and gpu-03..09, none known on the MIG-INVALID node: {t}");
    // Labels carry no times: how long is unknown, not zero.
    let upgrades = doc["drivers"]["upgrades"].as_array().unwrap();
    let failed = upgrades.iter().find(|u| u["node"] == "gpu-05").unwrap();
    assert_eq!(failed["state"], "upgrade-failed");
    assert!(failed["sinceSeconds"].is_null(), "{failed}");
    // A NotReady and a cordoned node use up maxUnavailable 2.
    let stalled = doc["drivers"]["waves"]["stalled"].as_str().unwrap();
    assert!(stalled.contains("2 node(s) are already cordoned or NotReady (gpu-03, gpu-04)"), "{stalled}");
}

#[test]
fn every_dump_keeps_every_gpu_in_one_bucket() {
    for path in
        [FIT, KUEUE, JOBSET, VOLCANO, OPERATOR, BLACK_HOLE, RAY, PLACEMENT, "kueue-stopped/cluster.yaml", GPU_STACK]
    {
        let doc = snapshot(path, &[]);
        let t = &doc["fleet"]["totals"];
        let n = |k: &str| t[k].as_u64().unwrap();
        assert_eq!(
            n("gpus"),
            n("allocated") + n("free") + n("unavailable") + n("unadvertised") + n("unhealthy"),
            "{path}: {t}"
        );
    }
}

/// A pod set pinned to a GPU product its ClusterQueue's only flavor does
/// not carry (`nodeLabels`): kgpu skips the flavor as Kueue does and says
/// so in Kueue's words, never "Kueue should reserve it".
#[test]
fn a_flavor_whose_node_labels_do_not_match_the_pod_set_is_skipped_as_kueue_does() {
    let doc = snapshot("hand-made/kueue-flavor-affinity.yaml", &[]);
    let item = pending(&doc, "job-pretrain-6e26b");
    assert_eq!(item["blockingStep"], "quota");
    let summary = item["summary"].as_str().unwrap();
    assert!(
        summary
            .ends_with("no flavor of ClusterQueue team-a suits its pod sets: flavor h100 doesn't match node affinity"),
        "{summary}"
    );
    assert!(!summary.contains("should reserve"), "{summary}");
    let text = why("hand-made/kueue-flavor-affinity.yaml", "team-a/job-pretrain-6e26b");
    assert!(text.contains("QuotaReserved=False (Pending): couldn't assign flavors to pod set main: flavor h100 doesn't match node affinity"), "{text}");
}

/// DRA (`dra/`, captured from the lab: the real kube-scheduler's
/// DynamicResources plugin allocated the claims and wrote the conditions).
/// GPUs published in ResourceSlices are counted as GPUs, each pod's claims
/// are judged as the scheduler judged them, and every view agrees.
#[test]
fn dra_gpus_are_counted_and_claims_judged_as_the_scheduler_did() {
    let doc = snapshot("dra/cluster.yaml", &[]);
    let totals = &doc["fleet"]["totals"];
    // 4 published GPUs: 3 allocated to the train-* claims, 1 tainted (Xid).
    assert_eq!(
        (&totals["gpus"], &totals["allocated"], &totals["free"], &totals["unhealthy"], &totals["unadvertised"]),
        (&Value::from(4), &Value::from(3), &Value::from(0), &Value::from(1), &Value::from(0)),
        "{totals}"
    );
    assert_eq!(totals["migGpus"], 0, "DRA GPUs are not MIG slices");
    let nodes = doc["fleet"]["nodes"].as_array().unwrap();
    for n in nodes {
        let physical = &n["gpu"]["physical"];
        let sum: u64 = ["used", "free", "unavailable", "unadvertised", "unhealthy"]
            .iter()
            .map(|k| physical[k].as_u64().unwrap())
            .sum();
        assert_eq!(Some(sum), n["gpu"]["hardware"].as_u64(), "{n}");
        assert_eq!(n["gpu"]["dra"]["published"], 2, "{n}");
        assert!(!node_issues(&doc, n["name"].as_str().unwrap()).contains(&"device-plugin-not-advertising".to_string()));
    }
    assert_eq!(node_issues(&doc, "dra-h100-1"), ["device-tainted"]);
    assert_eq!(nodes[0]["product"], "NVIDIA-H100-80GB-HBM3");

    // Where the scheduler tried and failed, kgpu blocks at the claims step
    // and agrees with it; its per-node detail says why.
    for name in ["wants-four", "wants-h200", "wants-100gi", "wants-mig-profile"] {
        let p = pending(&doc, name);
        assert_eq!(p["blockingStep"], "claims", "{name}: {p}");
        assert_eq!(p["agreesWithScheduler"], true, "{name}: {}", p["schedulerMessage"]);
    }
    assert!(
        pending(&doc, "wants-four")["summary"].as_str().unwrap().contains("no node has 4 matching devices (at most 2)")
    );
    assert!(pending(&doc, "wants-h200")["summary"].as_str().unwrap().contains("no published device matches"));
    assert!(pending(&doc, "wants-four")["shape"].as_str().unwrap().starts_with("1×4"));
    let why_mig = why("dra/cluster.yaml", "ml/wants-mig-profile");
    assert!(why_mig.contains("No such key: profile"), "{why_mig}");
    // Claims the scheduler never tries: kgpu names the missing object.
    for (name, what) in
        [("shared-claim-missing", "ResourceClaim team-gpu does not exist"), ("template-missing", "no-such-template")]
    {
        let p = pending(&doc, name);
        assert_eq!(p["blockingStep"], "claims");
        assert!(p["summary"].as_str().unwrap().contains(what), "{p}");
        assert!(p["schedulerMessage"].is_null(), "the scheduler wrote nothing about {name}");
    }
    // The placed pods are not pending; their claims hold the 3 used GPUs.
    for name in ["train-0", "train-1", "train-2"] {
        assert!(!doc["pending"].as_array().unwrap().iter().any(|p| p["name"] == name));
    }
    // The text output's header counts the same.
    let text = kgpu(&["snapshot", "--file", &fixture("dra/cluster.yaml")]);
    assert!(text.contains("FLEET  4 GPUs: 3 in use, 0 free"), "{text}");
}

/// DRA beyond whole GPUs (`dra-partitions/`, captured from the lab's
/// kube-scheduler 1.36): partitions drawing on a GPU's shared counters,
/// matchAttribute and distinctAttribute constraints, a claim the scheduler's
/// search places by going back, admin access. kgpu places and blocks what the
/// scheduler placed and blocked, and says why.
#[test]
fn dra_partitions_constraints_and_admin_access_are_judged_as_the_scheduler_did() {
    const CASE: &str = "dra-partitions/cluster.yaml";
    let doc = snapshot(CASE, &[]);
    // Placed by the scheduler: not pending here either.
    for name in ["small-0", "any-and-root-15", "gpu-watch"] {
        assert!(!doc["pending"].as_array().unwrap().iter().any(|p| p["name"] == name), "{name}");
    }
    let summaries: Vec<(String, String)> = doc["pending"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            assert_eq!(p["blockingStep"], "claims", "{p}");
            assert_eq!(p["agreesWithScheduler"], true, "{p}");
            (p["name"].as_str().unwrap().to_string(), p["summary"].as_str().unwrap().to_string())
        })
        .collect();
    let summary = |name: &str| summaries.iter().find(|(n, _)| n == name).map(|(_, s)| s.clone()).unwrap();
    assert_eq!(summaries.len(), 5, "{summaries:?}");
    assert!(summary("wants-3g-and-four-1g").contains("shared counters"), "{summaries:?}");
    // MIG devices are partitions, labelled so (as 1×2g.20gb is for the device
    // plugin), in the pending list and the fragmentation map alike.
    let shape_of =
        |name: &str| doc["pending"].as_array().unwrap().iter().find(|p| p["name"] == name).unwrap()["shape"].clone();
    assert_eq!(shape_of("wants-3g-and-four-1g"), "1×5 DRA MIG");
    assert_eq!(shape_of("wants-pair-same-root"), "1×2 DRA");
    let text = kgpu(&["snapshot", "--file", &fixture(CASE), "--pane", "fragmentation"]);
    assert!(text.contains("1×5 DRA MIG  no"), "{text}");
    // Requests short together: the selectors of each are in the why.
    let why_counters = why(CASE, "ml/wants-3g-and-four-1g");
    for request in ["/big: ", "/small: "] {
        assert!(why_counters.contains(request), "{why_counters}");
    }
    assert!(summary("wants-pair-same-root").contains("share one resource.kubernetes.io/pcieRoot"));
    assert!(summary("wants-pair-distinct-roots").contains("differ in resource.kubernetes.io/pcieRoot"));
    let two = why(CASE, "ml/wants-two-3g");
    assert!(
        two.contains(
            "wants 2; 2 device(s) match, 1 of them free (1 more not free: a partition of the same GPU is held)"
        ),
        "{two}"
    );
    assert!(why(CASE, "ml/wants-whole-gpu").contains("wants 1; 1 device(s) match, 0 of them free"));
    // The partition held makes its GPU in use; admin access holds nothing.
    let node = |name: &str| {
        doc["fleet"]["nodes"].as_array().unwrap().iter().find(|n| n["name"] == name).unwrap()["gpu"]["physical"].clone()
    };
    assert_eq!((node("mig-h100-0")["used"].as_u64(), node("mig-h100-0")["free"].as_u64()), (Some(1), Some(0)));
    assert_eq!((node("pcie-h100-1")["used"].as_u64(), node("pcie-h100-1")["free"].as_u64()), (Some(0), Some(2)));
    let totals = &doc["fleet"]["totals"];
    assert_eq!(
        (&totals["gpus"], &totals["allocated"], &totals["free"]),
        (&Value::from(7), &Value::from(3), &Value::from(4))
    );

    // The MIG pane, the text and the JSON say the same of the partitions.
    let mig = &doc["mig"][0];
    assert_eq!((&mig["node"], &mig["through"]), (&Value::from("mig-h100-0"), &Value::from("dra")), "{mig}");
    let gpu = &mig["gpus"][0];
    assert_eq!(gpu["instances"].as_array().unwrap().len(), 1, "{gpu}");
    assert_eq!(gpu["instances"][0]["profile"], "1g.10gb");
    assert!(gpu["instances"][0]["heldBy"].as_str().unwrap().starts_with("ml/small-0-gpu-"));
    let placeable: Vec<String> = gpu["placeable"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| format!("{}@{}", p["profile"].as_str().unwrap(), p["start"]))
        .collect();
    assert_eq!(placeable, ["1g.10gb@1", "1g.10gb@2", "1g.10gb@3", "1g.10gb@4", "3g.40gb@4", "1g.10gb@5", "1g.10gb@6"]);
    let text = kgpu(&["snapshot", "--file", &fixture(CASE), "--pane", "mig"]);
    assert!(text.contains("DRA: held 1g.10gb ×1 · placeable 1g.10gb ×6, 3g.40gb ×1 (overlapping)"), "{text}");

    // A GPU partitioned on allocation has no mig.config to change.
    {
        use kgpu::model::{Cluster, SourceInfo, SourceKind, Sym};
        let (events, _, _) = kgpu::sources::file::load(&[fixture(CASE).into()]).unwrap();
        let mut cluster = Cluster::new(SourceInfo { kind: SourceKind::File, name: "dra-partitions".into() });
        cluster.apply_all(events);
        let no = kgpu::actions::choose::mig_configs(&cluster.snapshot(), Sym::new("mig-h100-0")).unwrap_err();
        assert!(no.words().contains("DynamicMIG") && no.is_error(), "{no:?}");
    }

    // And what it placed, kgpu would place: each placed pod taken back
    // (unbound, its claim's allocation undone) fits where the scheduler put it.
    use kgpu::model::{Cluster, DraObject, ModelEvent, Object, PodPhase, SourceInfo, SourceKind, Sym};
    let (events, newest, _) = kgpu::sources::file::load(&[fixture(CASE).into()]).unwrap();
    for (name, node) in [("small-0", "mig-h100-0"), ("any-and-root-15", "pcie-h100-2"), ("gpu-watch", "pcie-h100-1")] {
        let mut cluster = Cluster::new(SourceInfo { kind: SourceKind::File, name: "dra-partitions".into() });
        let unplace = |o: Object| match o {
            Object::Pod(mut p) if &*p.name == name => {
                p.node = None;
                p.phase = PodPhase::Pending;
                Object::Pod(p)
            }
            Object::Dra(DraObject::Claim(mut c)) if c.reserved_for.iter().any(|p| &**p == name) => {
                c.allocated = Box::new([]);
                c.allocated_node = None;
                c.reserved_for = Box::new([]);
                Object::Dra(DraObject::Claim(c))
            }
            other => other,
        };
        cluster.apply_all(events.iter().cloned().map(|e| match e {
            ModelEvent::Upsert(o) => ModelEvent::Upsert(unplace(o)),
            ModelEvent::Resync { feed, objects } => {
                ModelEvent::Resync { feed, objects: objects.into_iter().map(unplace).collect() }
            }
            other => other,
        }));
        let snap = cluster.snapshot();
        let index = kgpu::analysis::index::Index::build(&snap, newest);
        let pod = snap.pods.values().find(|p| &*p.name == name).unwrap();
        let mut selectors = kgpu::analysis::dra::cel::Selectors::default();
        let v = kgpu::analysis::dra::claims::verdict(&index, &mut selectors, pod).unwrap();
        assert_eq!(v.nodes_fit, [Sym::new(node)], "{name}: {v:?}");
    }
}

/// A drain's blast radius counts the GPUs pods hold through DRA claims:
/// `--gpu-only` takes them, each holds 1 GPU, and their work is priced.
#[test]
fn a_drain_of_a_dra_node_counts_the_gpus_its_pods_hold_through_claims() {
    use kgpu::actions::Action;
    use kgpu::model::{Cluster, SourceInfo, SourceKind, Sym};
    let (events, newest, _) = kgpu::sources::file::load(&[fixture("dra/cluster.yaml").into()]).unwrap();
    let mut cluster = Cluster::new(SourceInfo { kind: SourceKind::File, name: "dra".into() });
    cluster.apply_all(events);
    let snap = cluster.snapshot();
    let index = kgpu::analysis::index::Index::build(&snap, newest);
    let drain = Action::Drain { node: Sym::new("dra-h100-0"), gpu_only: true, force: true };
    let i = drain.impact(&index);
    let pods: Vec<String> = i.pods.iter().map(|(k, _, holds)| format!("{} {holds}", k.name)).collect();
    assert_eq!(pods, ["train-0 1 GPU", "train-1 1 GPU"], "{i:?}");
    assert!(i.gpu_hours > 0.0, "their work is priced: {i:?}");
}

const PLACEMENT: &str = "placement/cluster.yaml";

/// Host ports (`placement/`, captured from the lab: the real kube-scheduler
/// wrote the messages). A third hostNetwork DDP worker finds port 29500
/// bound on two nodes and the third full: kgpu counts as the scheduler did
/// and names who holds the port and where to look.
#[test]
fn a_host_port_taken_on_two_nodes_is_a_reason_kgpu_counts_as_the_scheduler_does() {
    let doc = snapshot(PLACEMENT, &[]);
    let item = pending(&doc, "ddp-2");
    assert_eq!(item["blockingStep"], "fit");
    assert_eq!(item["verdictSource"], "kgpu");
    assert_eq!(item["nodeReasons"]["ports-taken"], 2, "{}", item["nodeReasons"]);
    assert_eq!(item["nodeReasons"]["insufficient-gpu"], 1, "{}", item["nodeReasons"]);
    assert_eq!(item["agreesWithScheduler"], true, "{}", item["disagreement"]);
    let unblock = item["unblock"].to_string();
    assert!(unblock.contains("host port 29500/TCP is taken on gpu-a by ml/ddp-0 (and 1 more node(s))"), "{unblock}");
    // gpu-c is promised to the preemptor: freeing GPUs there is no advice for ddp-2.
    assert!(!unblock.contains("gpu-c"), "{unblock}");
    let text = why(PLACEMENT, "ml/ddp-2");
    assert!(text.contains("kgpu agrees with the scheduler."), "{text}");
    assert!(text.contains("--field-selector spec.nodeName=gpu-a -o jsonpath="), "{text}");
}

/// The preemptor `urgent` is nominated to gpu-c, whose batch pod a finalizer
/// holds in Terminating: kgpu says it waits for that pod, offers no plan of
/// its own and agrees with the scheduler's message.
#[test]
fn a_nominated_pod_waits_for_the_pod_preempted_for_it_and_no_plan_evicts_more() {
    let doc = snapshot(PLACEMENT, &[]);
    let item = pending(&doc, "urgent");
    assert_eq!(item["nominatedNode"], "gpu-c");
    assert_eq!(item["blockingStep"], "fit");
    let summary = item["summary"].as_str().unwrap();
    assert!(
        summary.ends_with("the scheduler preempted for it on gpu-c and waits for 1 pod(s) to terminate: ml/batch-low"),
        "{summary}"
    );
    assert_eq!(item["agreesWithScheduler"], true, "{}", item["disagreement"]);
    assert!(
        item["unblock"][0].as_str().unwrap().starts_with("none by hand while they terminate"),
        "{}",
        item["unblock"]
    );
    assert!(item.get("preemption").is_none(), "{item}");
    let text = why(PLACEMENT, "ml/urgent");
    assert!(text.contains("{.metadata.finalizers}"), "{text}");
    // No plan evicts anything: its target is ddp-2 (urgent only waits), whose
    // host ports keep it off the nodes where pods could move, as the
    // fragmentation pane agrees: no pending shape here fits now.
    let fleet = kgpu(&["snapshot", "--file", &fixture(PLACEMENT)]);
    assert!(fleet.contains("plan for Pod ml/ddp-2: none — "), "{fleet}");
    let shapes = doc["fragmentation"]["shapes"].as_array().unwrap();
    for name in ["ddp-2", "eval-apart", "serve-2"] {
        let shape = shapes.iter().find(|s| s["source"] == format!("Pod ml/{name}")).unwrap();
        assert_eq!(shape["fitsNow"], false, "{name}: the pending chain blocks it at fit");
    }
}

/// Required pod anti-affinity and topology spread, captured from the real
/// kube-scheduler v1.36 (`placement/`): kgpu models both filters, blocks at
/// the fit step with the same per-node histogram, names the pod and the
/// domain in the advice; a pod for a scheduler that does not run says so.
#[test]
fn anti_affinity_and_spread_agree_with_the_real_scheduler() {
    let doc = snapshot(PLACEMENT, &[]);
    for (name, code, advice) in [
        ("eval-apart", "pod-anti-affinity", "will not share kubernetes.io/hostname=gpu-a with ml/ddp-0"),
        ("serve-2", "topology-spread", "matching pods per domain: zone-1: 2, zone-2: 0"),
    ] {
        let item = pending(&doc, name);
        assert_eq!(item["blockingStep"], "fit", "{name}");
        assert_eq!(item["verdictSource"], "kgpu", "{name}");
        assert_eq!(item["nodeReasons"][code], 2, "{name}: {}", item["nodeReasons"]);
        assert_eq!(item["agreesWithScheduler"], true, "{name}: {}", item["disagreement"]);
        assert!(item["unblock"].to_string().contains(advice), "{name}: {}", item["unblock"]);
        assert!(!item["summary"].as_str().unwrap().contains("nothing blocks it"), "{name}");
    }
    let kai = pending(&doc, "kai-job");
    assert_eq!(kai["blockingStep"], "scheduler");
    assert!(kai["summary"].as_str().unwrap().contains("is 'kai-scheduler' running?"), "{}", kai["summary"]);
}

const NAMESPACES: &str = "namespaces/cluster.yaml";

/// Affinity terms that choose their namespaces by label, captured from the
/// real kube-scheduler v1.36 (`namespaces/`): the guard in `vision` refuses
/// trainers of both namespaces labelled team=vision on gpu-a, not those of
/// `speech` or `infer` (placed); a follower finds its server through its
/// namespace's label, another finds none in the namespace named `infer` by
/// the API server's own label. kgpu reads the namespaces and agrees.
#[test]
fn namespace_selectors_read_the_namespaces_labels_as_the_scheduler_does() {
    let doc = snapshot(NAMESPACES, &[]);
    let items = doc["pending"].as_array().unwrap();
    let pending: Vec<String> =
        items.iter().map(|p| format!("{}/{}", p["namespace"].as_str().unwrap(), p["name"].as_str().unwrap())).collect();
    assert_eq!(pending.len(), 3, "{pending:?}");
    for (ns, name, code) in [
        ("vision", "trainer", "existing-anti-affinity"),
        ("vision-eval", "trainer", "existing-anti-affinity"),
        ("speech", "follower", "pod-affinity"),
    ] {
        let item = pending_like(&doc, ns, name).unwrap_or_else(|| panic!("{ns}/{name} not pending: {pending:?}"));
        assert_eq!(item["blockingStep"], "fit", "{ns}/{name}");
        assert_eq!(item["verdictSource"], "kgpu", "{ns}/{name}");
        assert!(item["nodeReasons"][code].as_u64().is_some_and(|n| n >= 1), "{ns}/{name}: {}", item["nodeReasons"]);
        assert_eq!(item["agreesWithScheduler"], true, "{ns}/{name}: {}", item["disagreement"]);
    }
    let text = why(NAMESPACES, "vision-eval/trainer");
    assert!(text.contains("kgpu agrees with the scheduler."), "{text}");
    assert!(text.contains("vision/guard"), "the advice names the guard: {text}");
}

/// The same dump without its namespaces (as an older bundle would be): kgpu
/// cannot tell which namespaces the guard's `team=vision` selector picks, so
/// it does not evaluate the pod rules, and the scheduler's word is the
/// headline, marked as not evaluated — never "nothing blocks it".
#[test]
fn without_the_namespaces_a_namespace_selector_is_not_evaluated_and_the_scheduler_speaks() {
    let text = std::fs::read_to_string(fixture(NAMESPACES)).unwrap();
    let mut dump: Value = serde_yaml::from_str(&text).unwrap();
    dump["items"].as_array_mut().unwrap().retain(|item| item["kind"] != "Namespace");
    let dir = std::env::temp_dir().join(format!("kgpu-verdicts-ns-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("no-namespaces.json");
    std::fs::write(&path, serde_json::to_string(&dump).unwrap()).unwrap();
    let out = kgpu(&["snapshot", "--file", path.to_str().unwrap(), "-o", "json"]);
    let text = kgpu(&["why", "vision/trainer", "--file", path.to_str().unwrap()]);
    let _ = std::fs::remove_dir_all(&dir);
    let doc: Value = serde_json::from_str(&out).unwrap();
    let item = pending_like(&doc, "vision", "trainer").expect("vision/trainer pending");
    assert_eq!(item["blockingStep"], "scheduler", "{item}");
    assert_eq!(item["verdictSource"], "scheduler", "{item}");
    assert!(!item["summary"].as_str().unwrap().contains("nothing blocks it"), "{item}");
    assert!(text.contains("anti-affinity rules") && text.contains("not evaluated by kgpu"), "{text}");
    assert!(text.contains("select namespaces by label, and kgpu cannot read the namespaces"), "{text}");
}

/// The volume filters, captured from the real kube-scheduler v1.36 and PV
/// controller (`volumes/`): a claim that does not exist and an Immediate claim
/// no volume matches stop the pod before any node (its volumes step, in the
/// scheduler's words); a local volume pinned to a full node, a bound volume in
/// the other zone, a bound volume whose node affinity names a busy node and a
/// ReadWriteOncePod claim another pod holds give the scheduler's histogram at
/// the fit step, with advice that names the volume.
#[test]
fn volume_filters_agree_with_the_real_scheduler() {
    let doc = snapshot("volumes/cluster.yaml", &[]);
    for (name, summary) in [
        ("ckpt-reader", "PersistentVolumeClaim checkpoints does not exist"),
        ("dataset-loader", "claim(s) dataset bind at once (Immediate) and are not bound"),
    ] {
        let item = pending(&doc, name);
        assert_eq!(item["blockingStep"], "volumes", "{name}");
        assert_eq!(item["verdictSource"], "kgpu", "{name}");
        assert!(item["summary"].as_str().unwrap().ends_with(summary), "{name}: {}", item["summary"]);
        assert_eq!(item["agreesWithScheduler"], true, "{name}: {}", item["disagreement"]);
    }
    for (name, code, nodes, advice) in [
        ("local-trainer", "volume-unbindable", 2, "find no Available PersistentVolume"),
        ("zone-trainer", "volume-zone", 1, "ckpt-zone-1 is in topology.kubernetes.io/zone=zone-1"),
        (
            "cached-serve",
            "volume-node-affinity",
            2,
            "cache-gpu-b is usable only on nodes its nodeAffinity selects (gpu-b)",
        ),
        ("ledger-writer-0", "volume-in-use", 3, "pod ml/ledger-writer-1 uses it"),
    ] {
        let item = pending(&doc, name);
        assert_eq!(item["blockingStep"], "fit", "{name}");
        assert_eq!(item["nodeReasons"][code], nodes, "{name}: {}", item["nodeReasons"]);
        assert_eq!(item["agreesWithScheduler"], true, "{name}: {}", item["disagreement"]);
        assert!(item["unblock"].to_string().contains(advice), "{name}: {}", item["unblock"]);
    }
    // Where a volume pins the pod, the GPUs to free are on the node it may use.
    assert!(pending(&doc, "cached-serve")["unblock"][0].as_str().unwrap().contains("on gpu-b"));
    // The fragmentation pane agrees: none of their shapes fits now.
    for name in ["ckpt-reader", "dataset-loader", "local-trainer", "zone-trainer", "cached-serve", "ledger-writer-0"] {
        let shape = doc["fragmentation"]["shapes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["source"] == format!("Pod ml/{name}"))
            .unwrap_or_else(|| panic!("no shape for {name}"));
        assert_eq!(shape["fitsNow"], false, "{name}: {shape}");
    }
}

/// Queues their owners stopped (`kueue-stopped/`, captured with the real
/// Kueue v0.17 manager): the workload behind a LocalQueue on Hold and the
/// one behind a ClusterQueue on HoldAndDrain block at quota on the stopped
/// queue (the ClusterQueue named, not the LocalQueue it makes inactive),
/// with Kueue's words and the patch that resumes it.
#[test]
fn a_stopped_queue_is_the_quota_step_with_the_patch_that_resumes_it() {
    let path = "kueue-stopped/cluster.yaml";
    let doc = snapshot(path, &[]);
    let tune = pending_like(&doc, "team-a", "job-tune-").unwrap();
    assert_eq!(tune["blockingStep"], "quota");
    assert!(
        tune["summary"]
            .as_str()
            .unwrap()
            .ends_with("LocalQueue paused is stopped (spec.stopPolicy Hold); Kueue: LocalQueue is stopped"),
        "{}",
        tune["summary"]
    );
    assert_eq!(
        tune["unblock"][0],
        "kubectl patch localqueue paused -n team-a --type merge -p '{\"spec\":{\"stopPolicy\":\"None\"}}' (stopped with Hold)"
    );
    let sweep = pending_like(&doc, "team-b", "job-sweep-").unwrap();
    assert!(
        sweep["summary"].as_str().unwrap().contains("ClusterQueue drained is stopped (spec.stopPolicy HoldAndDrain)"),
        "{}",
        sweep["summary"]
    );
    assert!(
        sweep["unblock"][0].as_str().unwrap().contains("its admitted workloads were evicted too"),
        "{}",
        sweep["unblock"]
    );
    // The open queue's workload was admitted and runs.
    assert!(pending_like(&doc, "team-a", "job-eval-").is_none(), "{}", doc["pending"]);
}

const GPU_STACK: &str = "hand-made/gpu-stack.yaml";

/// The GPU Operator's stack, layer by layer (`hand-made/gpu-stack.yaml`,
/// states as in gpu-operator issues #160, #35, #1982): the first broken
/// layer is named on each node — the crashing driver, not the toolkit
/// waiting for it — and the pending pod's device-plugin step says which
/// layer keeps the GPUs from Kubernetes and shows its log.
#[test]
fn the_first_broken_layer_of_the_gpu_operators_stack_is_named_where_gpus_go_missing() {
    let doc = snapshot(GPU_STACK, &[]);
    let details = |name: &str| {
        let node = doc["fleet"]["nodes"].as_array().unwrap().iter().find(|n| n["name"] == name).unwrap();
        node["issueDetails"].as_array().unwrap().iter().map(|d| d.as_str().unwrap().to_string()).collect::<Vec<_>>()
    };
    assert!(node_issues(&doc, "gpu-11").is_empty());
    let gpu12 = details("gpu-12").join("\n");
    assert!(gpu12.contains("gpu-stack: the GPU Operator's driver is not ready here (gpu-operator/nvidia-driver-daemonset-q45bl CrashLoopBackOff, 7 restart(s)"), "{gpu12}");
    assert!(!gpu12.contains("container toolkit"), "{gpu12}");
    assert!(gpu12.contains("kubectl logs -n gpu-operator nvidia-driver-daemonset-q45bl --all-containers"), "{gpu12}");
    assert!(details("gpu-13").join("\n").contains("device plugin is not ready here (gpu-operator/nvidia-device-plugin-daemonset-5crlk CrashLoopBackOff, 12 restart(s)"));
    // A failing validator costs no GPU, and is still said.
    assert_eq!(node_issues(&doc, "gpu-14"), ["gpu-stack"]);
    assert!(details("gpu-14").join("\n").contains(
        "operator validator is not ready here (gpu-operator/nvidia-operator-validator-m3x9q RunContainerError"
    ));
    let item = pending(&doc, "sft-0");
    assert_eq!(item["blockingStep"], "device-plugin");
    let summary = item["summary"].as_str().unwrap();
    assert!(summary.ends_with("GPU Operator stack broken: driver on gpu-12, device plugin on gpu-13"), "{summary}");
    assert!(
        item["unblock"][0]
            .as_str()
            .unwrap()
            .starts_with("fix gpu-12 first: the GPU Operator's driver is not ready here"),
        "{}",
        item["unblock"]
    );
    let text = why(GPU_STACK, "ml/sft-0");
    assert!(
        text.contains("$ kubectl logs -n gpu-operator nvidia-driver-daemonset-q45bl --all-containers --tail=50"),
        "{text}"
    );
}

/// StrictFIFO (`kueue-strict-fifo/`, captured with the real Kueue v0.17):
/// a 1×2 job that fits its ClusterQueue waits behind a high-priority 2×4
/// head that cannot be admitted; Kueue writes nothing on the small one, so
/// kgpu must not say "Kueue should reserve it". Under BestEffortFIFO the
/// same small job was admitted.
#[test]
fn a_workload_behind_a_blocked_strict_fifo_head_names_the_head() {
    let path = "kueue-strict-fifo/cluster.yaml";
    let doc = snapshot(path, &[]);
    let find = |ns: &str, prefix: &str| pending_like(&doc, ns, prefix);
    let eval = find("team-a", "job-eval-").expect("the small job waits in the StrictFIFO queue");
    assert_eq!(eval["blockingStep"], "quota");
    let summary = eval["summary"].as_str().unwrap();
    assert!(
        summary.contains("waits behind the head of StrictFIFO ClusterQueue strict: workload team-a/job-pretrain-"),
        "{summary}"
    );
    assert!(summary.contains("(priority 1000, 2×4) cannot be admitted"), "{summary}");
    assert!(!summary.contains("should reserve"), "{summary}");
    assert!(
        eval["unblock"][0].as_str().unwrap().contains("\"queueingStrategy\":\"BestEffortFIFO\""),
        "{}",
        eval["unblock"]
    );
    assert!(find("team-b", "job-eval-").is_none(), "BestEffortFIFO admitted it: {}", doc["pending"]);
    let head = find("team-a", "job-pretrain-").unwrap();
    assert!(!head["summary"].as_str().unwrap().contains("waits behind"), "{}", head["summary"]);
}

/// The same queue with the head moved to a stopped LocalQueue of the same
/// ClusterQueue: Kueue drops a stopped LocalQueue's workloads from its
/// queues (v0.17 `DeleteLocalQueue`), so the head no longer holds anyone
/// back; the head itself is held by the stop, and the small job is not
/// "behind" it.
#[test]
fn a_head_in_a_stopped_local_queue_holds_no_one_back() {
    let text = std::fs::read_to_string(fixture("kueue-strict-fifo/cluster.yaml")).unwrap();
    let mut dump: Value = serde_yaml::from_str(&text).unwrap();
    let items = dump["items"].as_array_mut().unwrap();
    let mut paused =
        items.iter().find(|i| i["kind"] == "LocalQueue" && i["metadata"]["namespace"] == "team-a").unwrap().clone();
    paused["metadata"]["name"] = serde_json::json!("paused");
    paused["spec"]["stopPolicy"] = serde_json::json!("Hold");
    items.push(paused);
    for item in items.iter_mut() {
        let pretrain = item["metadata"]["name"].as_str().is_some_and(|n| n.starts_with("job-pretrain-"));
        if item["kind"] == "Workload" && item["metadata"]["namespace"] == "team-a" && pretrain {
            item["spec"]["queueName"] = serde_json::json!("paused");
        }
    }
    let dir = std::env::temp_dir().join(format!("kgpu-verdicts-fifo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("stopped-head.json");
    std::fs::write(&path, serde_json::to_string(&dump).unwrap()).unwrap();
    let out = kgpu(&["snapshot", "--file", path.to_str().unwrap(), "-o", "json"]);
    let _ = std::fs::remove_dir_all(&dir);
    let doc: Value = serde_json::from_str(&out).unwrap();
    let head = pending_like(&doc, "team-a", "job-pretrain-").expect("the head waits");
    assert!(head["summary"].as_str().unwrap().contains("LocalQueue paused is stopped"), "{}", head["summary"]);
    let eval = pending_like(&doc, "team-a", "job-eval-").expect("the small job has no reservation in the dump");
    assert!(!eval["summary"].as_str().unwrap().contains("waits behind"), "{}", eval["summary"]);
}

/// A GPU node too small in CPU for the pod (`fit-neighbours/`, captured) is
/// advised on CPU, beside the busy node where GPUs could be freed.
#[test]
fn a_gpu_node_short_of_cpu_is_advised_on_cpu() {
    let doc = snapshot(FIT, &[]);
    let unblock = pending(&doc, "prep-0")["unblock"].to_string();
    assert!(
        unblock.contains("gpu-small-cpu has the GPUs but offers only 8 cpu in all: ask for no more than that"),
        "{unblock}"
    );
}

/// Flavors (`kueue-flavors/`, captured with the real Kueue v0.17): a job
/// pinned to H100s that does not tolerate the spot flavor's taint fits no
/// flavor, for the two reasons Kueue itself gives; the one that tolerates
/// spot was admitted on it.
#[test]
fn a_flavors_taints_and_node_labels_are_matched_against_the_pod_set_as_kueue_does() {
    let path = "kueue-flavors/cluster.yaml";
    let doc = snapshot(path, &[]);
    let items = doc["pending"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{items:?}");
    let item = &items[0];
    assert!(item["name"].as_str().unwrap().starts_with("job-on-demand-only-"));
    let summary = item["summary"].as_str().unwrap();
    for reason in
        ["untolerated taint spot=true:NoSchedule in flavor spot-h100", "flavor h200 doesn't match node affinity"]
    {
        assert!(summary.contains(reason), "{summary}");
        // Kueue wrote the same reasons (its taint in Go's struct form).
        assert!(step(item, "quota")["details"].to_string().contains("flavor h200 doesn't match node affinity, untolerated taint {spot true NoSchedule <nil>} in flavor spot-h100"));
    }
}

const COMPUTE_DOMAIN: &str = "hand-made/compute-domain.yaml";

/// The fixture with its objects changed by `edit`, as a file kgpu reads.
fn edited(path: &str, name: &str, edit: impl Fn(&mut Vec<Value>)) -> (tempfile::TempDir, String) {
    let mut dump: Value = serde_yaml::from_str(&std::fs::read_to_string(fixture(path)).unwrap()).unwrap();
    edit(dump["items"].as_array_mut().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(name);
    std::fs::write(&file, serde_json::to_string(&dump).unwrap()).unwrap();
    let file = file.to_str().unwrap().to_string();
    (dir, file)
}

/// Pods bound to a Ready node whose channel claim NVIDIA's compute-domain
/// plugin does not prepare: each says which domain, which node and why
/// (daemon not Ready, not joined, the node still in a deleted domain, the
/// domain deleted), with the kubelet's words where it wrote an event; the
/// running worker and the IMEX daemons themselves are not pending work.
#[test]
fn pods_waiting_for_their_compute_domain_say_which_node_is_not_ready_and_why() {
    let doc = snapshot(COMPUTE_DOMAIN, &[]);
    assert_eq!(doc["feeds"]["dra computedomains"]["state"], "live", "{}", doc["feeds"]);
    for (ns, name, says, fix) in [
        (
            "ml",
            "nccl-worker-1",
            "gb200-02's IMEX daemon is not Ready in ComputeDomain ml/nccl-cd (1 of 2 joined node(s) Ready)",
            "kubectl logs -n nvidia-dra-driver-gpu nccl-cd-5ln2h-w8f4d",
        ),
        (
            "ml",
            "nccl-worker-2",
            "gb200-03 still belongs to ComputeDomain uid 0df751bf-10dd-485c-945f-b1a2cc4ae56d, which no longer exists",
            "kubectl label node gb200-03 resource.nvidia.com/computeDomain-",
        ),
        (
            "ml",
            "nccl-worker-3",
            "gb200-04's IMEX daemon has not joined ComputeDomain ml/nccl-cd",
            "DaemonSet has no pod on gb200-04",
        ),
        (
            "infer",
            "vllm-decode-0",
            "its ComputeDomain was deleted (uid 9a1f3c2d-4b5e-4f60-8a71-b2c3d4e5f607)",
            "a new domain of the same name is another one",
        ),
    ] {
        let item =
            pending_like(&doc, ns, name).unwrap_or_else(|| panic!("{ns}/{name} not pending: {}", doc["pending"]));
        assert_eq!(item["blockingStep"], "start", "{ns}/{name}");
        assert!(item["summary"].as_str().unwrap().contains(says), "{ns}/{name}: {}", item["summary"]);
        assert!(item["unblock"].to_string().contains(fix), "{ns}/{name}: {}", item["unblock"]);
        assert_eq!(step(item, "claims")["verdict"], "pass", "{ns}/{name}");
    }
    assert_eq!(doc["pending"].as_array().unwrap().len(), 4, "{}", doc["pending"]);
    // The kubelet's own words where it wrote them.
    let worker_1 = pending(&doc, "nccl-worker-1");
    assert!(step(worker_1, "start").to_string().contains("current node not ready in ComputeDomain"), "{worker_1}");
    // Header, pending pane and why agree.
    assert_eq!(doc["fleet"]["totals"]["heldNotStarted"], 16);
    let text = kgpu(&["snapshot", "--file", &fixture(COMPUTE_DOMAIN), "--pane", "pending"]);
    assert!(text.contains("PENDING  4 item(s)"), "{text}");
    // The Fleet pane names the nodes where pods wait on their domain.
    for node in ["gb200-02", "gb200-03", "gb200-04"] {
        assert_eq!(node_issues(&doc, node), ["compute-domain-not-ready"], "{node}");
    }
    for node in ["gb200-01", "gb200-05"] {
        assert!(node_issues(&doc, node).is_empty(), "{node}");
    }
    // The stale label's own domain: what of it still runs on the node.
    let worker_2 = step(pending(&doc, "nccl-worker-2"), "start")["commands"].to_string();
    assert!(
        worker_2.contains("computeDomain=0df751bf-10dd-485c-945f-b1a2cc4ae56d --field-selector spec.nodeName=gb200-03"),
        "{worker_2}"
    );
    let why = why(COMPUTE_DOMAIN, "ml/nccl-worker-1");
    assert!(
        why.contains("blocked at: start") && why.contains("kubectl get computedomain -n ml nccl-cd -o yaml"),
        "{why}"
    );

    // A pod bound a moment ago is given the grace the daemon needs to start.
    let (_dir, young) = edited(COMPUTE_DOMAIN, "young.json", |items| {
        for item in items.iter_mut().filter(|i| i["metadata"]["name"] == "nccl-worker-3") {
            let moment: Value = "2026-11-30T08:59:30Z".into();
            item["metadata"]["creationTimestamp"] = moment.clone();
            item["status"]["startTime"] = moment.clone();
            item["status"]["conditions"][0]["lastTransitionTime"] = moment;
        }
    });
    let doc = serde_json::from_str::<Value>(&kgpu(&["snapshot", "--file", &young, "-o", "json"])).unwrap();
    assert!(pending_like(&doc, "ml", "nccl-worker-3").is_none(), "{}", doc["pending"]);
    assert!(pending_like(&doc, "ml", "nccl-worker-1").is_some());

    // Without NVIDIA's CRDs kgpu cannot read the domains: only the pod whose
    // kubelet said so is listed, and it says kgpu cannot tell more.
    let (_dir, unread) = edited(COMPUTE_DOMAIN, "unread.json", |items| items.retain(|i| i["kind"] != "ComputeDomain"));
    let doc = serde_json::from_str::<Value>(&kgpu(&["snapshot", "--file", &unread, "-o", "json"])).unwrap();
    let names: Vec<&str> = doc["pending"].as_array().unwrap().iter().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(names, ["nccl-worker-1"], "{}", doc["pending"]);
    assert!(
        doc["pending"][0]["summary"].as_str().unwrap().contains("kgpu cannot read ComputeDomains: not installed"),
        "{}",
        doc["pending"][0]["summary"]
    );
}

/// DRA-only nodes (no nvidia.com/gpu, no GFD labels) are GPU nodes to the
/// upgrade board, the wave planner and Usage, as they are to the Fleet pane:
/// their driver is what their slices publish.
#[test]
fn dra_only_nodes_are_on_the_upgrade_board_and_in_the_waves() {
    let case = "dra-partitions/cluster.yaml";
    let doc = snapshot(case, &["--target-driver", "580.105.08"]);
    let fleet: Vec<&str> =
        doc["fleet"]["nodes"].as_array().unwrap().iter().filter_map(|n| n["name"].as_str()).collect();
    let board: Vec<&str> =
        doc["drivers"]["upgrades"].as_array().unwrap().iter().filter_map(|u| u["node"].as_str()).collect();
    assert_eq!(board, fleet, "{}", doc["drivers"]["upgrades"]);
    assert!(doc["drivers"]["upgrades"].as_array().unwrap().iter().all(|u| u["driver"] == "580.95.5"));
    let waved: Vec<&str> = doc["drivers"]["waves"]["waves"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|w| w["nodes"].as_array().unwrap().iter().filter_map(|n| n.as_str()))
        .collect();
    assert_eq!(waved.len(), 4, "{}", doc["drivers"]["waves"]);
    // No agent or exporter reads them: Usage says so of every one.
    assert_eq!(doc["utilization"]["nodesUnreported"], 4);
}

/// Kueue v0.17's quota for DRA devices, captured from the real Kueue manager
/// with its DynamicResourceAllocation gate on and NVIDIA's classes mapped
/// (`kueue-dra/`): kgpu counts what Kueue counts (`whole-gpus`, from the
/// workload's own status) and agrees on the shortfall, and says in its
/// words each claim shape Kueue refuses, with what would unblock it.
#[test]
fn kueue_dra_quota_is_counted_as_kueue_counts_it_and_its_refusals_explained() {
    let case = "kueue-dra/cluster.yaml";
    let doc = snapshot(case, &[]);
    assert!(pending_like(&doc, "ml", "job-fits-").is_none(), "admitted: {}", doc["pending"]);
    let over = pending_like(&doc, "ml", "job-over-quota-").unwrap();
    assert_eq!(over["shape"], "1×2 DRA", "{over}");
    let quota = step(over, "quota");
    assert_eq!(over["blockingStep"], "quota");
    let said = quota["details"].to_string();
    assert!(said.contains("needs 2 whole-gpus in flavor default: nominal 3, reserved 2"), "{said}");
    assert!(said.contains("unblock: 1 more whole-gpus in flavor default of ClusterQueue dra"), "{said}");
    assert!(!said.contains("finds room"), "kgpu's arithmetic agrees with Kueue's: {said}");
    for (prefix, says, fix) in [
        (
            "job-by-selector-",
            "CEL selectors in template h100-by-selector: Kueue's DRA quota does not count it",
            "drop CEL selectors",
        ),
        (
            "job-first-available-",
            "FirstAvailable device selection in template any-gpu: Kueue's DRA quota does not count it",
            "any-gpu",
        ),
        ("job-shared-claim-", "counts claim templates only", "resourceClaimTemplateName"),
        (
            "job-vfio-",
            "DeviceClass vfio.gpu.nvidia.com (pod set main) has no deviceClassMapping",
            "resources.deviceClassMappings",
        ),
    ] {
        let item = pending_like(&doc, "ml", prefix).unwrap_or_else(|| panic!("{prefix}: {}", doc["pending"]));
        assert_eq!(item["blockingStep"], "quota", "{prefix}");
        assert!(item["summary"].as_str().unwrap().contains(says), "{prefix}: {}", item["summary"]);
        let quota = step(item, "quota")["details"].to_string();
        assert!(quota.contains(fix), "{prefix}: {quota}");
        assert!(quota.contains("QuotaReserved=False (Inadmissible)"), "Kueue's own words stay: {quota}");
    }
    // The queue's whole-gpus as Kueue reserved them.
    let row = doc["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["name"] == "dra" && q["resource"] == "whole-gpus")
        .unwrap_or_else(|| panic!("{}", doc["queues"]));
    assert_eq!((row["nominal"].as_u64(), row["used"].as_u64()), (Some(3), Some(2)));
    // Kueue's pending count leaves out what it found inadmissible; the
    // queue says both, and together they are the Pending pane's workloads.
    assert_eq!((row["pending"].as_u64(), row["inadmissible"].as_u64()), (Some(2), Some(4)), "{row}");
    assert_eq!(doc["pending"].as_array().unwrap().len(), 6);
    let text = kgpu(&["snapshot", "--file", &fixture(case)]);
    assert!(text.contains("2+4"), "{text}");
    // The workload asking nvidia.com/gpu of a DRA-only fleet is told to ask through a claim.
    let plugin = pending_like(&doc, "ml", "job-device-plugin-").unwrap();
    assert!(plugin["unblock"].to_string().contains("ResourceClaimTemplate"), "{plugin}");
}

/// With Kueue's DynamicResourceAllocation gate off, Kueue admits a workload
/// whose pods ask GPUs through claim templates without counting them: its
/// admission's resourceUsage has cpu and memory only (the captured admitted
/// workload with `whole-gpus` taken out, as Kueue writes it then). kgpu says
/// so of that workload, and not of the one Kueue counted.
#[test]
fn dra_gpus_kueue_admitted_without_counting_are_said() {
    let case = "kueue-dra/cluster.yaml";
    let counted = snapshot(case, &[]);
    let fits = gang(&counted, "job-fits-");
    assert_eq!(fits["issues"], serde_json::json!([]), "{fits}");
    let (_dir, gate_off) = edited(case, "gate-off.json", |items| {
        for item in items.iter_mut().filter(|i| i["kind"] == "Workload") {
            let usage = item.pointer_mut("/status/admission/podSetAssignments/0/resourceUsage");
            if let Some(usage) = usage.and_then(Value::as_object_mut) {
                usage.remove("whole-gpus");
            }
        }
    });
    let doc: Value = serde_json::from_str(&kgpu(&["snapshot", "--file", &gate_off, "-o", "json"])).unwrap();
    let fits = gang(&doc, "job-fits-");
    assert_eq!(fits["issues"], serde_json::json!(["dra-not-in-quota"]), "{fits}");
    let text = kgpu(&["snapshot", "--file", &gate_off, "--pane", "gangs"]);
    assert!(text.contains("2 DRA GPU(s) not counted in Kueue's quota"), "{text}");
}

/// DRA beyond kgpu's allocator (`hand-made/dra-unmodelled.yaml`): a claim
/// for part of a shareable device's capacity, devices bound on the driver's
/// word, a network-attached slice. kgpu names each where the snapshot
/// starts, and a refusal that rests on one is not passed off as the
/// cluster's: with no word from the scheduler, it says that it cannot tell.
/// An extended resource a DeviceClass serves is weighed as the claim the
/// scheduler would make for it.
#[test]
fn dra_features_kgpu_does_not_model_are_named_and_not_passed_off_as_verdicts() {
    const CASE: &str = "hand-made/dra-unmodelled.yaml";
    let doc = snapshot(CASE, &[]);
    let features: Vec<&str> =
        doc["draUnmodelled"].as_array().unwrap().iter().map(|f| f["feature"].as_str().unwrap()).collect();
    assert_eq!(features, ["consumable capacity", "device binding conditions", "network-attached devices",]);
    let text = kgpu(&["snapshot", "--file", &fixture(CASE), "--pane", "pending"]);
    assert!(text.contains("dra: kgpu does not model consumable capacity"), "{text}");
    // The shareable GPU is held, so kgpu alone would call the claim short.
    let rerank = pending(&doc, "rerank-0");
    assert_eq!(rerank["blockingStep"], "claims");
    let summary = rerank["summary"].as_str().unwrap();
    assert!(summary.contains("kgpu cannot tell: consumable capacity in use"), "{summary}");
    assert!(summary.contains("its own reading: too few free devices on gpu-a"), "{summary}");
    // Nobody's verdict: not kgpu's block, not the scheduler's, and not "nothing blocks it".
    assert_eq!(rerank["verdictSource"], "undecided", "{rerank}");
    // No node advertises example.com/gpu; a DeviceClass serves it: gpu-a
    // can allocate the claim the scheduler would make (attached-0 is free).
    let extended = pending(&doc, "asks-extended-0");
    let claims = step(extended, "claims");
    assert_eq!(claims["verdict"], "pass", "{extended}");
    let summary = claims["summary"].as_str().unwrap();
    assert!(summary.starts_with("1 node(s) can allocate its claims: gpu-a (as kgpu reads them"), "{summary}");
    assert!(
        claims["details"][0].as_str().unwrap().contains("1 example.com/gpu through DeviceClass gpu.example.com"),
        "{claims}"
    );
    assert_eq!(step(extended, "fit")["verdict"], "pass", "{extended}");
    assert_eq!(step(extended, "device-plugin")["verdict"], "n/a", "{extended}");
    // Its pass rests on devices with binding conditions, which kgpu does not
    // model: not "the scheduler should place it", and nobody's verdict.
    assert_eq!(extended["verdictSource"], "undecided", "{extended}");
    assert!(extended["summary"].as_str().unwrap().starts_with("nothing blocks it as kgpu reads it, but"), "{extended}");
    assert_eq!(extended["shape"], "1×1 example.com/gpu", "{extended}");
    let why = why(CASE, "ml/rerank-0");
    assert!(why.contains("kgpu does not model consumable capacity"), "{why}");
    assert!(why.contains("3. [ ?? ] DRA resource claims: kgpu cannot tell"), "{why}");
    assert!(why.contains("blocked at: claims (kgpu cannot tell, and the scheduler has not said yet)"), "{why}");
    // With the scheduler's word, the headline is the scheduler's, and says whose.
    let big = pending(&doc, "rerank-big-0");
    let summary = big["summary"].as_str().unwrap();
    assert!(summary.contains("the scheduler says: 0/1 nodes are available: 1 cannot allocate all claims"), "{summary}");
    assert_eq!(big["verdictSource"], "scheduler", "{big}");
}
