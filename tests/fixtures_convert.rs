//! The real node, Kueue and Volcano shapes in `tests/fixtures/` (verbatim
//! copies of `shared/fixtures/real`, sources in their first lines) convert
//! to the right model records; `--file` reads Lists, multi-document YAML and
//! directories, counts unknown kinds, and names a malformed file.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

use std::path::Path;

use kgpu::model::{GangKind, MigStrategy, Readiness, TaintEffect};
use kgpu::sources::file;
use kgpu::sources::kube::convert;
use serde_json::{Value, json};

fn fixture(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(path)).unwrap()
}

fn docs(path: &str) -> Vec<Value> {
    file::documents(Path::new(path), &fixture(path)).unwrap()
}

/// Fixture blocks are often status-only: give them an identity.
fn named(mut v: Value, kind: &str, api_version: &str, name: &str) -> Value {
    v["apiVersion"] = json!(api_version);
    v["kind"] = json!(kind);
    if v.pointer("/metadata/name").is_none() {
        v["metadata"] = json!({"name": name, "namespace": "default"});
    }
    v
}

#[test]
fn the_kwok_dgx_node() {
    let v = &docs("nodes/kwok-virtual-dgxa100-node.yaml")[0];
    let node = convert::node(&serde_json::from_value(v.clone()).unwrap()).unwrap();
    assert_eq!(node.name.as_str(), "virtual-gpu-node");
    assert_eq!(node.allocatable.gpu, 8);
    assert_eq!(node.allocatable.cpu_milli, 256_000);
    assert_eq!(node.allocatable.memory, 1 << 40);
    assert_eq!(node.allocatable.get("intel.com/mlnx_sriov_rdma1"), 1);
    assert_eq!(node.allocatable.get("ephemeral-storage"), 15 << 40);
    assert_eq!(node.taints.len(), 1);
    assert_eq!(
        (node.taints[0].key.as_str(), node.taints[0].value.as_str(), node.taints[0].effect),
        ("kwok.x-k8s.io/node", "fake", TaintEffect::NoSchedule)
    );
    assert_eq!(node.readiness, Readiness::Ready);
    assert!(node.is_gpu_node());
}

#[test]
fn real_gfd_label_sets() {
    // h100-80gb-mig-mixed-all-balanced.labels.json: driver 550.54.15, CUDA 12.4, mixed, all-balanced, success, upgrade-done
    let labels: Value = serde_json::from_str(&fixture("nodes/h100-80gb-mig-mixed-all-balanced.labels.json")).unwrap();
    let node = convert::node(&serde_json::from_value(json!({"metadata": {"name": "h100", "labels": labels}})).unwrap())
        .unwrap();
    assert_eq!(node.gpu.product.unwrap().as_str(), "NVIDIA-H100-80GB-HBM3");
    assert_eq!(node.gpu.count, Some(1));
    assert_eq!(node.gpu.memory_mib, Some(81559));
    assert_eq!(node.gpu.mig_strategy, Some(MigStrategy::Mixed));
    assert_eq!(node.gpu.driver.as_ref().unwrap().to_string(), "550.54.15");
    assert_eq!(node.gpu.cuda_runtime.unwrap().to_string(), "12.4");
    assert_eq!(node.operator.mig_config.unwrap().as_str(), "all-balanced");
    assert_eq!(node.operator.mig_config_state.unwrap().as_str(), "success");
    assert_eq!(node.operator.upgrade_state.unwrap().as_str(), "upgrade-done");
    assert!(!node.operator.paused_for_mig_change);
    // a100-40gb-mig-strategy-*.labels.json: driver 450.80.02 (deprecated cuda.driver.* labels only), CUDA 11.0
    // (GFD of that era wrote no mig.strategy label under --mig-strategy=none.)
    for (file, strategy) in [
        ("nodes/a100-40gb-mig-strategy-none.labels.json", None),
        ("nodes/a100-40gb-mig-strategy-single.labels.json", Some(MigStrategy::Single)),
        ("nodes/a100-40gb-mig-strategy-mixed.labels.json", Some(MigStrategy::Mixed)),
    ] {
        let labels: Value = serde_json::from_str(&fixture(file)).unwrap();
        let node =
            convert::node(&serde_json::from_value(json!({"metadata": {"name": "a100", "labels": labels}})).unwrap())
                .unwrap();
        assert_eq!(node.gpu.mig_strategy, strategy, "{file}");
        assert_eq!(node.gpu.driver.as_ref().unwrap().to_string(), "450.80.02", "{file}");
        assert_eq!(node.gpu.cuda_runtime.unwrap().to_string(), "11.0", "{file}");
    }
}

#[test]
fn the_nodes_of_a_pool_share_one_copy_of_their_labels() {
    // The real H100 label set on three nodes of one pool, each with its own
    // hostname and GFD timestamp as GFD writes them, and one more node
    // mid-upgrade (its driver upgrade state differs).
    let real: serde_json::Map<String, Value> =
        serde_json::from_str(&fixture("nodes/h100-80gb-mig-mixed-all-balanced.labels.json")).unwrap();
    let node = |name: &str, stamp: &str, upgrade: &str| {
        let mut labels = real.clone();
        labels.insert("kubernetes.io/hostname".into(), json!(name));
        labels.insert("nvidia.com/gfd.timestamp".into(), json!(stamp));
        labels.insert("nvidia.com/gpu-driver-upgrade-state".into(), json!(upgrade));
        let decoded =
            convert::node(&serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap())
                .unwrap();
        (decoded, labels)
    };
    let (a, a_labels) = node("s4124-0073", "1715709242", "upgrade-done");
    let (b, _) = node("s4124-0074", "1715709255", "upgrade-done");
    let (c, _) = node("s4124-0075", "1715709261", "upgrade-done");
    let (upgrading, _) = node("s4124-0076", "1715709270", "pod-restart-required");
    assert!(a.labels.shares_with(&b.labels) && b.labels.shares_with(&c.labels));
    assert!(!upgrading.labels.shares_with(&a.labels));
    // Each reads as its own complete, sorted label set, less GFD's timestamp
    // (new every minute on every node: never kept, so never interned).
    let mut expected: Vec<(String, String)> = a_labels
        .iter()
        .filter(|(k, _)| k.as_str() != "nvidia.com/gfd.timestamp")
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect();
    expected.sort();
    let read: Vec<(String, String)> = a.labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    assert_eq!(read, expected);
    assert_eq!(a.labels.len(), real.len() - 1);
    assert_eq!(b.label("kubernetes.io/hostname").unwrap().as_str(), "s4124-0074");
    assert_eq!(c.label("nvidia.com/gfd.timestamp"), None);
    assert_eq!(upgrading.operator.upgrade_state.unwrap().as_str(), "pod-restart-required");
    assert_eq!(b.operator.upgrade_state.unwrap().as_str(), "upgrade-done");
    assert_ne!(a.labels, b.labels);
}

#[test]
fn kueue_workload_status_blocks() {
    let blocks = docs("kueue/workload-status-examples-troubleshooting.yaml");
    let wl =
        |i: usize| convert::workload(&named(blocks[i].clone(), "Workload", "kueue.x-k8s.io/v1beta2", "w")).unwrap();
    // block 1: admission with podSetAssignments
    let admitted = wl(0);
    let adm = admitted.admission.unwrap();
    assert_eq!(adm.cluster_queue.as_str(), "cluster-queue");
    assert_eq!(adm.assignments[0].count, 3);
    assert_eq!(adm.assignments[0].flavors.len(), 2);
    assert_eq!(admitted.kind, GangKind::KueueWorkload);
    // block 2: QuotaReserved and Admitted True
    let w = wl(1);
    assert!(w.condition_true("QuotaReserved") && w.condition_true("Admitted"));
    assert!(w.has_quota());
    // block 3: pending, older wording
    let w = wl(2);
    let c = w.condition("QuotaReserved").unwrap();
    assert!(!c.status);
    assert_eq!(c.reason.as_str(), "Pending");
    assert!(c.message.contains("insufficient quota for cpu in flavor default-flavor in ClusterQueue"));
    assert!(!w.has_quota());
    // block 5: Inadmissible (no LocalQueue)
    assert_eq!(wl(4).condition("QuotaReserved").unwrap().message.as_ref(), "LocalQueue user-queue doesn't exist");
    // block 6: preempted and pending again
    let w = wl(5);
    assert!(w.condition_true("Evicted"));
    assert_eq!(w.condition("Admitted").unwrap().reason.as_str(), "NoReservation");
    assert!(w.condition("QuotaReserved").unwrap().message.contains("9 more needed"));

    let requeue = docs("kueue/workload-requeuestate-reclaimable.yaml");
    let w = convert::workload(&named(requeue[0].clone(), "Workload", "kueue.x-k8s.io/v1beta2", "r")).unwrap();
    let r = w.requeue.unwrap();
    assert_eq!(r.count, 5);
    assert_eq!(r.requeue_at, kgpu::model::time::parse_rfc3339("2024-02-11T04:51:03Z"));
}

#[test]
fn kueue_queues() {
    let blocks = docs("kueue/clusterqueue-localqueue-status-examples.yaml");
    let lq =
        convert::local_queue(&named(blocks[0].clone(), "LocalQueue", "kueue.x-k8s.io/v1beta2", "user-queue")).unwrap();
    assert!(!lq.is_active(), "Active=False ClusterQueueIsInactive");
    let cq = convert::cluster_queue(&named(blocks[1].clone(), "ClusterQueue", "kueue.x-k8s.io/v1beta2", "cq")).unwrap();
    assert!(!cq.is_active(), "FlavorNotFound");
    let cq = convert::cluster_queue(&named(blocks[2].clone(), "ClusterQueue", "kueue.x-k8s.io/v1beta2", "cq")).unwrap();
    assert!(cq.is_active());
    assert_eq!(cq.admitted, 1);
    // HAMi flavorsReservation with vGPU resources parses (no spec: no quotas)
    let cq =
        convert::cluster_queue(&named(blocks[3].clone(), "ClusterQueue", "kueue.x-k8s.io/v1beta2", "hami")).unwrap();
    assert!(cq.quotas.is_empty());
    // the ClusterQueue spec: cpu nominalQuota 40
    let cq = convert::cluster_queue(&blocks[4]).unwrap();
    assert_eq!(cq.name.as_str(), "cluster-queue");
    let q = cq.quota(Some(kgpu::model::Sym::new("default-flavor")), "cpu").unwrap();
    assert_eq!(q.nominal, 40_000);
}

#[test]
fn volcano_podgroups_and_queues() {
    let pg = convert::podgroup(&docs("volcano/podgroup-gpu-unschedulable-inqueue.yaml")[0]).unwrap();
    assert_eq!((pg.namespace.as_str(), &*pg.name), ("bita-user", "test-gpu-1"));
    assert_eq!(pg.min_members, 1);
    assert_eq!(pg.min_resources.as_ref().unwrap().gpu, 1);
    assert_eq!(pg.phase.as_ref().unwrap().as_str(), "Inqueue");
    assert!(pg.condition_true("Unschedulable"));
    assert_eq!(pg.owner.as_ref().unwrap().kind.as_str(), "Job");
    assert!(pg.has_quota(), "Inqueue: past the queue");
    let old = convert::podgroup(&docs("volcano/podgroup-mpijob-v1alpha1-inqueue.yaml")[0]).unwrap();
    assert_eq!(old.kind, GangKind::VolcanoPodGroup);
    let fragments = docs("volcano/podgroup-status-fragments.yaml");
    let unknown =
        convert::podgroup(&named(fragments[0].clone(), "PodGroup", "scheduling.volcano.sh/v1beta1", "pg")).unwrap();
    assert_eq!((unknown.phase.unwrap().as_str(), unknown.running), ("Unknown", 8));
    let queues = docs("volcano/queue-status.yaml");
    let q = convert::volcano_queue(&queues[0]).unwrap();
    assert_eq!(q.name.as_str(), "que02");
    assert_eq!(q.quota(None, "cpu").unwrap().nominal, 100_000);
    assert_eq!(q.quota(None, "memory").unwrap().nominal, 300 << 30);
    assert_eq!(q.state.as_ref().unwrap().as_str(), "Open");
    assert!(q.is_active());
    for doc in &queues {
        convert::volcano_queue(doc).unwrap();
    }
}

#[test]
fn file_source_reads_lists_yaml_and_directories() {
    let dir = tempfile::tempdir().unwrap();
    let list = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"nvidia.com/gpu.count": "8"}},
         "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "64", "memory": "512Gi", "pods": "110"},
                    "conditions": [{"type": "Ready", "status": "True"}]}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns", "creationTimestamp": "2026-11-30T08:00:00Z"},
         "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]},
         "status": {"phase": "Pending"}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bad", "namespace": "ns"},
         "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "lots"}}}]}}
    ]});
    std::fs::write(dir.path().join("dump.json"), serde_json::to_string(&list).unwrap()).unwrap();
    std::fs::create_dir(dir.path().join("kueue")).unwrap();
    std::fs::write(
        dir.path().join("kueue/queues.yaml"),
        fixture("kueue/clusterqueue-localqueue-status-examples.yaml").split("---").last().unwrap(),
    )
    .unwrap();
    std::fs::write(dir.path().join("notes.txt"), "ignored: not .json/.yaml").unwrap();
    let (events, now, stats) = file::load(&[dir.path().to_path_buf()]).unwrap();
    assert_eq!(stats.files, 2);
    assert_eq!(stats.objects, 3, "node, pod, ClusterQueue");
    assert_eq!(stats.unknown.get("ConfigMap"), Some(&1));
    assert_eq!(stats.skipped, 1, "the pod with an unparseable quantity");
    assert_eq!(now, kgpu::model::time::parse_rfc3339("2026-11-30T08:00:00Z").unwrap());
    let mut c =
        kgpu::model::Cluster::new(kgpu::model::SourceInfo { kind: kgpu::model::SourceKind::File, name: String::new() });
    c.apply_all(events);
    let snap = c.snapshot();
    assert_eq!(snap.nodes.len(), 1);
    assert_eq!(snap.pods.values().next().unwrap().requests.gpu, 2);
    assert_eq!(snap.queues.len(), 1);
    assert!(
        snap.skipped.values().any(|(n, why)| *n == 1 && why.contains("bad") && why.contains("lots")),
        "{:?}",
        snap.skipped
    );
    assert!(snap.feed_problem(kgpu::model::Feed::PodGroups).is_some(), "no Volcano objects in the files");

    std::fs::write(dir.path().join("broken.yaml"), "a: [unclosed\n").unwrap();
    let err = file::load(&[dir.path().join("broken.yaml")]).unwrap_err().to_string();
    assert!(err.contains("broken.yaml") && err.contains("not valid JSON or YAML"), "{err}");
    let err = file::load(&[dir.path().join("missing.json")]).unwrap_err().to_string();
    assert!(err.contains("missing.json"), "{err}");
}

#[test]
fn snapshot_and_why_from_files() {
    // The exported scenario is a kubectl-shaped dump: the offline analysis finds its signal.
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kgpu"))
        .args(["scenario", "export", "plugin-crash"])
        .output()
        .unwrap();
    std::fs::write(dir.path().join("bundle.yaml"), &out.stdout).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kgpu"))
        .args(["snapshot", "-o", "json", "--file"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["source"]["kind"], "file");
    let n = doc["fleet"]["nodes"].as_array().unwrap().iter().find(|n| n["name"] == "gpu-07").unwrap();
    assert!(n["issues"].to_string().contains("device-plugin-not-advertising"));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kgpu"))
        .args(["snapshot", "--file", "/nonexistent/dump.json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/dump.json"));
}

/// The captured clusters (real API server, scheduler, Kueue, KWOK): each
/// object reads the same in a page of the initial list (sonic-rs) as in a
/// watch event (serde_json).
#[test]
fn captured_objects_read_alike_in_a_list_page_and_a_watch_event() {
    use kgpu::sources::kube::{lean, pages};
    let mut compared = 0;
    for path in ["verdicts/fit-neighbours/cluster.yaml", "verdicts/kueue-neighbours/cluster.yaml"] {
        let items: Vec<Value> = docs(path)
            .into_iter()
            .flat_map(|d| match d.get("items") {
                Some(Value::Array(items)) => items.clone(),
                _ => vec![d],
            })
            .collect();
        fn both<K: serde::de::DeserializeOwned>(
            items: &[Value],
            kind: &str,
            read: impl Fn(&K) -> String + Copy,
        ) -> usize {
            let of_kind: Vec<&Value> = items.iter().filter(|i| i["kind"] == kind).collect();
            let page = json!({"metadata": {"resourceVersion": "9"}, "items": of_kind});
            let listed = pages::decode(&serde_json::to_vec(&page).unwrap(), read).unwrap();
            let watched: Vec<String> =
                of_kind.iter().map(|i| read(&serde_json::from_str::<K>(&i.to_string()).unwrap())).collect();
            assert_eq!(listed, watched, "{kind}");
            listed.len()
        }
        compared += both(&items, "Node", |n: &lean::Node| format!("{:?}", convert::node(n)));
        compared += both(&items, "Pod", |p: &lean::Pod| format!("{:?}", convert::pod(p)));
        compared += both(&items, "Event", |e: &k8s_openapi::api::core::v1::Event| format!("{:?}", convert::event(e)));
        compared += both(&items, "Workload", |o: &kube::api::DynamicObject| {
            format!("{:?}", convert::workload(&serde_json::to_value(o).unwrap()))
        });
    }
    assert!(compared >= 60, "{compared}");
}
