//! `kgpu scenario apply` of every scenario onto the real control plane, and
//! the real kube-scheduler's verdicts on the scenario pods match the story.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

mod support;

use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use support::controlplane::ControlPlane;
use support::kube::{client, eventually};

fn kgpu(cp: &ControlPlane, args: &[&str]) -> String {
    let out =
        Command::new(env!("CARGO_BIN_EXE_kgpu")).args(args).arg("--kubeconfig").arg(&cp.kubeconfig).output().unwrap();
    assert!(
        out.status.success(),
        "kgpu {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// The FailedScheduling message of each pending pod whose name starts with `prefix`.
async fn failed_scheduling(client: &kube::Client, ns: &str, prefix: &str, count: usize) -> Vec<String> {
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    eventually(&format!("FailedScheduling for {count} pod(s) {ns}/{prefix}*"), Duration::from_secs(60), || {
        let events = events.clone();
        async move {
            let list = events.list(&ListParams::default()).await.ok()?;
            let msgs: Vec<String> = list
                .items
                .into_iter()
                .filter(|e| e.reason.as_deref() == Some("FailedScheduling"))
                .filter(|e| e.involved_object.name.as_deref().is_some_and(|n| n.starts_with(prefix)))
                .filter_map(|e| e.message)
                .collect();
            (msgs.len() >= count).then_some(msgs)
        }
    })
    .await
}

fn assert_all(messages: &[String], needle: &str) {
    for m in messages {
        assert!(m.contains(needle), "expected {needle:?} in: {m}");
        assert!(kgpu::analysis::scheduler_msg::parse(m).recognised, "kgpu reads it: {m}");
    }
}

async fn node_of(client: &kube::Client, ns: &str, prefix: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    eventually(&format!("{ns}/{prefix}* bound"), Duration::from_secs(60), || {
        let pods = pods.clone();
        async move {
            let list = pods.list(&ListParams::default()).await.ok()?;
            list.items
                .into_iter()
                .filter(|p| p.metadata.name.as_deref().is_some_and(|n| n.starts_with(prefix)))
                .find_map(|p| p.spec.and_then(|s| s.node_name))
        }
    })
    .await
}

#[tokio::test]
async fn every_scenario_applies_and_the_real_scheduler_agrees_with_its_story() {
    let Some(cp) = ControlPlane::shared_if_enabled() else { return };
    let mut crds = cp.kueue_crds();
    crds.extend(cp.volcano_crds());
    crds.extend(cp.binaries.crd_files("kwok"));
    cp.install_crds(&crds).unwrap();
    let client = client(cp).await;

    for name in [
        "fragmented",
        "plugin-crash",
        "gang-deadlock",
        "quota-starvation",
        "taint-mismatch",
        "mig-mismatch",
        "driver-skew",
        "black-hole",
        "topology-split",
        "idle-holders",
        "driver-canary",
        "fair-share",
        "preemption-cost",
        "spot-breakeven",
        "mig-vs-timeslicing",
        "dra-claims",
        "default",
    ] {
        eprintln!("scenario {name}");
        let out = kgpu(cp, &["scenario", "apply", name]);
        assert!(out.contains("applied"), "{out}");
        assert!(!out.contains("skipped"), "every CRD is installed: {out}");
        // Applying again is harmless.
        kgpu(cp, &["scenario", "apply", name]);
        match name {
            // Two 8-GPU members, no node with 8 free: 36 of 64 GPUs used by small jobs.
            "fragmented" => assert_all(
                &failed_scheduling(&client, "research", "llm-sft-", 2).await,
                "8 Insufficient nvidia.com/gpu",
            ),
            // One member on gpu-16; gpu-07 advertises 0; 14 nodes full.
            "plugin-crash" => {
                assert_all(&failed_scheduling(&client, "ml", "bert-large-", 1).await, "16 Insufficient nvidia.com/gpu")
            }
            "gang-deadlock" => {
                assert_all(&failed_scheduling(&client, "team-a", "gpt-a-4-", 1).await, "8 Insufficient nvidia.com/gpu");
                assert_all(&failed_scheduling(&client, "team-b", "gpt-b-4-", 1).await, "8 Insufficient nvidia.com/gpu");
            }
            "quota-starvation" => {
                let ar = ApiResource::from_gvk_with_plural(
                    &GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta2", "Workload"),
                    "workloads",
                );
                let wl: Api<DynamicObject> = Api::namespaced_with(client.clone(), "team-a", &ar);
                let list = wl.list(&ListParams::default()).await.unwrap();
                let starving =
                    list.items.iter().find(|w| w.metadata.name.as_deref().unwrap().contains("finetune-xl")).unwrap();
                let text = starving.data["status"]["conditions"].to_string();
                assert!(
                    text.contains("insufficient unused quota for nvidia.com/gpu in flavor h100, 16 more needed"),
                    "{text}"
                );
            }
            "taint-mismatch" => {
                let m = failed_scheduling(&client, "vision", "resnet-train-", 1).await;
                assert_all(&m, "8 node(s) had untolerated taint(s)");
                assert_all(&m, "4 Insufficient nvidia.com/gpu");
                assert_all(
                    &failed_scheduling(&client, "vision", "bert-infer-", 1).await,
                    "12 node(s) didn't match Pod's node affinity/selector",
                );
            }
            "mig-mismatch" => assert_all(
                &failed_scheduling(&client, "inference", "llm-70b-", 3).await,
                "Insufficient nvidia.com/mig-3g.40gb",
            ),
            "driver-skew" => {
                // The 12.8 pods on 550 nodes stay where they are, unable to start.
                assert!(node_of(&client, "llm", "vlm-train-3-").await.starts_with("h100-1"));
            }
            // The emptiest node attracts the next pod: the black hole.
            "black-hole" => assert_eq!(node_of(&client, "serving", "serve-llama-64f9d-").await, "gpu-03"),
            "topology-split" => assert_eq!(node_of(&client, "serving", "tp-llama-70b-0-").await, "gpu-03"),
            // Every GPU allocated: the 8-GPU fine-tune fits nowhere.
            "idle-holders" => {
                assert_all(&failed_scheduling(&client, "ml", "finetune-8x-", 1).await, "6 Insufficient nvidia.com/gpu")
            }
            // Nothing waits; the failed canary is cordoned.
            "driver-canary" => {
                let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
                let canary = nodes.get("h100-01").await.unwrap();
                assert_eq!(canary.spec.and_then(|s| s.unschedulable), Some(true));
            }
            "fair-share" => {
                let ar = ApiResource::from_gvk_with_plural(
                    &GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta2", "Workload"),
                    "workloads",
                );
                let wl: Api<DynamicObject> = Api::namespaced_with(client.clone(), "team-a", &ar);
                let list = wl.list(&ListParams::default()).await.unwrap();
                let waiting = list.items.iter().filter(|w| w.data["status"]["admission"].is_null()).count();
                assert_eq!(waiting, 3, "team-a's three new workloads wait");
            }
            // The real scheduler does not preempt for a non-preempting PriorityClass.
            "preemption-cost" => {
                let m = failed_scheduling(&client, "eval", "release-eval-0-", 1).await;
                eprintln!("preemption-cost: the scheduler said {m:?}");
                assert_all(&m, "8 Insufficient nvidia.com/gpu");
                assert_all(&m, "preemptionPolicy=Never");
            }
            // All placed: the gang's four pods stay on their spot nodes.
            "spot-breakeven" => assert!(node_of(&client, "research", "pretrain-13b-0-").await.starts_with("spot-")),
            // The real scheduler places rerank replicas on the time-sliced node's 32.
            "mig-vs-timeslicing" => assert_eq!(node_of(&client, "inference", "rerank-6b8f4-").await, "ts-01"),
            // This control plane runs no kube-controller-manager, so no claim
            // is made from the templates and the scheduler never tries the
            // pods (it writes nothing): kgpu, reading the real API server's
            // DRA objects, says so. (With the controllers, `kgpu lab`, the
            // real scheduler allocates the H100 claims and says `5 cannot
            // allocate all claims` for the H200 one: tests/fixtures/verdicts/dra.)
            "dra-claims" => {
                let why = kgpu(cp, &["why", "ml/llm-serve-7f9c4-x2kq8"]);
                assert!(why.contains("blocked at: claims"), "{why}");
                assert!(why.contains("claim from template one-h200 is not created yet"), "{why}");
                assert!(why.contains("writes no event and no condition"), "{why}");
            }
            "default" => assert_all(
                &failed_scheduling(&client, "inference", "rerank-2g-", 4).await,
                "Insufficient nvidia.com/mig-2g.20gb",
            ),
            _ => unreachable!(),
        }
        // The lesson reads the real cluster's numbers and finds its signal there,
        // but for `default`'s idle holders: no agent or exporter reports here.
        let lesson = kgpu(cp, &["lesson", "show", name, "--answer", "--cluster"]);
        let no_usage_source = matches!(name, "default" | "idle-holders" | "mig-vs-timeslicing");
        assert_eq!(lesson.contains("not on the cluster now"), no_usage_source, "{name}:\n{lesson}");
        let out = kgpu(cp, &["scenario", "delete", name]);
        assert!(out.contains("deleted"), "{out}");
    }
}

#[tokio::test]
async fn apply_without_crds_skips_them_and_says_so() {
    if !ControlPlane::enabled() {
        return;
    }
    // A control plane of its own: the shared one has the CRDs installed.
    let cp = ControlPlane::start().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kgpu"))
        .args(["scenario", "apply", "gang-deadlock", "--kubeconfig"])
        .arg(&cp.kubeconfig)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("skipped kueue.x-k8s.io (CRDs not installed)"), "{stdout}");
    // The viewer has no RBAC: a clear refusal naming the permission, exit 1.
    let out = Command::new(env!("CARGO_BIN_EXE_kgpu"))
        .args(["scenario", "apply", "gang-deadlock", "--kubeconfig"])
        .arg(&cp.viewer_kubeconfig)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("RBAC: cannot 'patch'"), "{err}");
}

#[test]
fn an_unreachable_cluster_fails_fast_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    std::fs::write(
        &kc,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: gone\n  context:\n    cluster: c\n    user: u\ncurrent-context: gone\n",
    )
    .unwrap();
    let start = std::time::Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_kgpu"))
        .args(["scenario", "apply", "fragmented", "--kubeconfig"])
        .arg(&kc)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot reach the cluster") && err.contains("kgpu demo"), "{err}");
    assert!(start.elapsed() < Duration::from_secs(20), "no hang");
    let out = Command::new(env!("CARGO_BIN_EXE_kgpu"))
        .args(["scenario", "apply", "fragmented", "--context", "nope", "--kubeconfig"])
        .arg(&kc)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("context 'nope' is not in the kubeconfig; contexts there: gone")
    );
    // A $KUBECONFIG that names a file that is not there: the error names it.
    let missing = dir.path().join("typo-config");
    let out = Command::new(env!("CARGO_BIN_EXE_kgpu"))
        .args(["snapshot"])
        .env("KUBECONFIG", &missing)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("$KUBECONFIG names {} (no such file)", missing.display())), "{err}");
    // A link loop and a link to nothing say so.
    let (a, b, dangling) = (dir.path().join("loop-a"), dir.path().join("loop-b"), dir.path().join("dangling"));
    std::os::unix::fs::symlink(&b, &a).unwrap();
    std::os::unix::fs::symlink(&a, &b).unwrap();
    std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kgpu"))
        .args(["snapshot"])
        .env("KUBECONFIG", std::env::join_paths([&a, &dangling]).unwrap())
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("(too many levels of symbolic links)") && err.contains("(a link to nothing: "), "{err}");
}
