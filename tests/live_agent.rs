//! The agent end to end: `kgpu agent` runs as a process with the fake
//! backend; on the real control plane, assets/agent/ is applied (its
//! Secret holds the token) and a pod object in kgpu-system stands for the
//! agent on its node; the cockpit's agents source finds that pod, reads the
//! token from the Secret, reads the agent and shows its GPUs.
//!
//! How the tests reach the agent: a pod object's IP is set by the test. At
//! 127.0.0.1 the cockpit uses its `direct` transport (the API server will
//! not proxy to loopback). At this machine's network address the API
//! server's pod proxy forwards to it as it would to a pod, so the default
//! path (`/api/v1/namespaces/NS/pods/NAME:PORT/proxy/...`, the token in
//! `X-Kgpu-Token`) is tried for real, for the agent and for dcgm-exporter;
//! those two tests say so and stop where there is no network address.
//! dcgm-exporter is a stand-in serving verbatim exporter output
//! (tests/fixtures/dcgm-exporter/).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

mod support;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kgpu::model::{AgentStatus, Feed, FeedState, Snapshot, Sym};
use kgpu::sources::agents::{Config, DEFAULT_NAMESPACE, DEFAULT_PORT, TOKEN_SECRET, Transport};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use support::controlplane::ControlPlane;
use support::kube::{client, gpu_node, source_with, until};
use tokio::sync::watch as tokio_watch;

const MANIFEST: &str = include_str!("../assets/agent/kgpu-agent.yaml");
const RBAC: &str = include_str!("../assets/agent/cockpit-rbac.yaml");
const TOKEN: &str = "live-test-token-6f1c0e2b9a7d4e38";

fn docs(text: &str) -> Vec<serde_json::Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|d| serde_yaml::from_value::<serde_json::Value>(serde::Deserialize::deserialize(d).unwrap()).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

#[test]
fn the_daemonset_runs_on_gpu_nodes_only_and_matches_what_the_cockpit_looks_for() {
    let all = docs(MANIFEST);
    let ds: DaemonSet = serde_json::from_value(all.iter().find(|d| d["kind"] == "DaemonSet").unwrap().clone()).unwrap();
    assert_eq!(ds.metadata.namespace.as_deref(), Some(DEFAULT_NAMESPACE));
    let pod = ds.spec.unwrap().template;
    let labels = pod.metadata.unwrap().labels.unwrap();
    let (key, value) = kgpu::sources::agents::SELECTOR.split_once('=').unwrap();
    assert_eq!(labels[key], value, "the cockpit finds the pods by this label");
    let spec = pod.spec.unwrap();
    assert_eq!(spec.node_selector.unwrap()["nvidia.com/gpu.present"], "true", "GFD's label: GPU nodes only");
    let toleration = &spec.tolerations.unwrap()[0];
    assert_eq!(toleration.key.as_deref(), Some("nvidia.com/gpu"));
    assert_eq!(toleration.operator.as_deref(), Some("Exists"));
    let c = &spec.containers[0];
    let port = &c.ports.as_ref().unwrap()[0];
    assert_eq!((port.name.as_deref(), port.container_port), (Some("http"), i32::from(DEFAULT_PORT)));
    assert!(c.args.as_ref().unwrap().iter().any(|a| a == "--token-file=/var/run/kgpu/token"));
    let volumes = spec.volumes.unwrap();
    let token = volumes.iter().find(|v| v.name == "token").unwrap();
    assert_eq!(token.secret.as_ref().unwrap().secret_name.as_deref(), Some(TOKEN_SECRET));
    assert_eq!(token.secret.as_ref().unwrap().default_mode, Some(0o400), "the agent refuses a token others can read");
    let podres = volumes.iter().find(|v| v.name == "pod-resources").unwrap();
    assert_eq!(podres.host_path.as_ref().unwrap().path, "/var/lib/kubelet/pod-resources");
    let security = c.security_context.as_ref().unwrap();
    assert_eq!(security.privileged, Some(false));
    assert_eq!(security.read_only_root_filesystem, Some(true));
    // No GPU requested: the agent never takes one from the scheduler.
    assert!(c.resources.as_ref().unwrap().limits.as_ref().unwrap().get("nvidia.com/gpu").is_none());
    // The cockpit's Role allows exactly what the agents source does.
    let role = docs(RBAC).into_iter().find(|d| d["kind"] == "Role").unwrap();
    let rules = role["rules"].as_array().unwrap();
    assert!(rules.iter().any(|r| r["resources"][0] == "pods/proxy" && r["verbs"][0] == "get"));
    assert!(rules.iter().any(|r| r["resources"][0] == "secrets" && r["resourceNames"][0] == TOKEN_SECRET));
}

struct AgentProcess(Child);

impl Drop for AgentProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A port outside the ephemeral range, so nothing else takes it before
/// the agent binds it.
fn free_port() -> u16 {
    kgpu::lab::cluster::free_port().unwrap()
}

fn kubectl_apply(cp: &ControlPlane, doc: &serde_json::Value) {
    let status = Command::new(support::controlplane::build().unwrap().bin.join("kubectl"))
        .args(["--kubeconfig"])
        .arg(&cp.kubeconfig)
        .args(["apply", "--server-side", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(serde_json::to_string(doc).unwrap().as_bytes())?;
            child.wait()
        })
        .unwrap();
    assert!(status.success(), "kubectl apply {}", doc["kind"]);
}

/// The cockpit's live source with agents read directly.
async fn cockpit(
    cp: &ControlPlane,
) -> (tokio_watch::Receiver<std::sync::Arc<Snapshot>>, Vec<tokio::task::JoinHandle<()>>) {
    let scope = kgpu::sources::kube::watch::Scope {
        namespace: None,
        agents: Config { transport: Transport::Direct, interval: Duration::from_millis(500), ..Config::default() },
        ..Default::default()
    };
    source_with(cp, &cp.kubeconfig, scope).await
}

/// A pod object standing for an agent on `node`, "running" at 127.0.0.1:port.
async fn agent_pod(pods: &Api<Pod>, name: &str, node: &str, port: u16) {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "kgpu-agent"}},
        "spec": {"nodeName": node, "containers": [{"name": "agent", "image": "kgpu:0.1.0",
            "ports": [{"name": "http", "containerPort": port}]}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let status = json!({"status": {"phase": "Running", "podIP": "127.0.0.1", "podIPs": [{"ip": "127.0.0.1"}]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
}

#[tokio::test]
async fn the_cockpit_shows_the_gpus_of_a_running_agent_and_marks_an_unreachable_one() {
    let Some(cp) = ControlPlane::shared_if_enabled() else { return };
    let client = client(cp).await;
    // The manifests apply to a real API server as they are.
    for doc in docs(MANIFEST).into_iter().chain(docs(RBAC)) {
        kubectl_apply(cp, &doc);
    }
    let secrets: Api<Secret> = Api::namespaced(client.clone(), DEFAULT_NAMESPACE);
    let secret: Secret =
        serde_json::from_value(json!({"metadata": {"name": TOKEN_SECRET}, "stringData": {"token": TOKEN}})).unwrap();
    secrets.create(&PostParams::default(), &secret).await.unwrap();

    // The agent, a real process with the fake backend.
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    std::fs::set_permissions(&token_file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let port = free_port();
    let fixture = format!("{}/tests/fixtures/agent/h100-mig-all-balanced.json", env!("CARGO_MANIFEST_DIR"));
    let _agent = AgentProcess(
        Command::new(env!("CARGO_BIN_EXE_kgpu"))
            .args(["agent", "--listen", &format!("127.0.0.1:{port}"), "--node-name", "agent-node-0"])
            .arg("--backend")
            .arg(format!("fake:{fixture}"))
            .arg("--token-file")
            .arg(&token_file)
            .env("KGPU_DATA_DIR", dir.path())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    gpu_node(&client, "agent-node-0", 0, json!({}), json!([])).await;
    gpu_node(&client, "agent-node-1", 8, json!({}), json!([])).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), DEFAULT_NAMESPACE);
    agent_pod(&pods, "kgpu-agent-live", "agent-node-0", port).await;
    // One whose agent does not answer: nothing listens on that port.
    agent_pod(&pods, "kgpu-agent-dead", "agent-node-1", free_port()).await;

    let (snapshots, _tasks) = cockpit(cp).await;
    let live = Sym::new("agent-node-0");
    let dead = Sym::new("agent-node-1");
    until(&snapshots, "the live agent's GPUs and the dead agent's state", |s| {
        s.devices.get(&live).is_some_and(|d| d.status == AgentStatus::Reporting && !d.gpus.is_empty())
            && s.devices.get(&dead).is_some_and(|d| matches!(d.status, AgentStatus::Unavailable(_)))
    })
    .await;
    let snap = snapshots.borrow().clone();
    assert_eq!(snap.feed(Feed::Agents).map(|f| f.state.clone()), Some(FeedState::Live));
    let d = &snap.devices[&live];
    assert_eq!(d.gpus[0].uuid.as_str(), "GPU-b4895dbf-9350-2524-a89b-98161ddd9fe4");
    let placements: Vec<(&str, u8)> = d.gpus[0].instances.iter().map(|i| (i.profile.as_str(), i.start)).collect();
    assert_eq!(placements, [("1g.10gb", 0), ("1g.10gb", 1), ("2g.20gb", 2), ("3g.40gb", 4)]);
    let AgentStatus::Unavailable(why) = &snap.devices[&dead].status else { unreachable!() };
    assert!(why.contains("127.0.0.1"), "{why}");
    // ...and the node shows it; the rest of the cockpit carries on.
    let a = kgpu::analysis::analyze(&snap, snap.clock, &kgpu::analysis::Thresholds::default());
    let node = a.nodes.iter().find(|n| n.name == dead).unwrap();
    assert!(node.has(kgpu::analysis::fleet::IssueCode::AgentUnavailable));
    // The same through the CLI: `kgpu snapshot --agents direct`.
    let out = Command::new(env!("CARGO_BIN_EXE_kgpu"))
        .args(["snapshot", "--pane", "mig", "-o", "json", "--agents", "direct", "--kubeconfig"])
        .arg(&cp.kubeconfig)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mig = doc["mig"].as_array().unwrap();
    let row =
        mig.iter().find(|r| r["node"] == "agent-node-0").unwrap_or_else(|| panic!("no MIG row: {}", doc["feeds"]));
    assert_eq!(row["gpus"][0]["instances"].as_array().unwrap().len(), 4, "{row}");
}

/// A dcgm-exporter stand-in on loopback: its port.
fn fake_exporter(text: String) -> u16 {
    support::exporter::serve("127.0.0.1", 0, text).0
}

#[tokio::test]
async fn dcgm_exporter_output_makes_its_mig_pods_idle_holders_in_the_cockpit_and_the_snapshot() {
    let Some(cp) = ControlPlane::shared_if_enabled() else { return };
    let client = client(cp).await;
    let text = std::fs::read_to_string(format!(
        "{}/tests/fixtures/dcgm-exporter/h100-mig-kserve.prom",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let port = fake_exporter(text);
    let node = "dcgm-node-0";
    gpu_node(&client, node, 0, json!({"nvidia.com/mig.strategy": "mixed"}), json!([])).await;
    // The two KServe pods the exporter names, running on that node.
    let ns = "model-playground-stg";
    support::kube::namespace(&client, ns).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    for name in [
        "text-embedding-predictor-00008-deployment-57946f6c67-vdtjl",
        "tts-predictor-00011-deployment-5554f75554-8j8pl",
    ] {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"nodeName": node, "containers": [{"name": "kserve-container", "image": "kserve:1",
                "resources": {"limits": {"nvidia.com/mig-1g.10gb": "1"}}}]}
        }))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
        let status = json!({"status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"}});
        pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    }
    // The exporter pod, as the GPU Operator labels it, "running" at the fake's port.
    support::kube::namespace(&client, "gpu-operator").await;
    for doc in docs(include_str!("../assets/agent/cockpit-rbac-dcgm.yaml")) {
        kubectl_apply(cp, &doc);
    }
    let operator: Api<Pod> = Api::namespaced(client.clone(), "gpu-operator");
    let exporter: Pod = serde_json::from_value(json!({
        "metadata": {"name": "nvidia-dcgm-exporter-x7k2p", "labels": {"app": "nvidia-dcgm-exporter"}},
        "spec": {"nodeName": node, "containers": [{"name": "nvidia-dcgm-exporter", "image": "dcgm-exporter:4",
            "ports": [{"name": "metrics", "containerPort": port}]}]}
    }))
    .unwrap();
    operator.create(&PostParams::default(), &exporter).await.unwrap();
    let status = json!({"status": {"phase": "Running", "podIP": "127.0.0.1", "podIPs": [{"ip": "127.0.0.1"}]}});
    operator.patch_status("nvidia-dcgm-exporter-x7k2p", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();

    let (snapshots, _tasks) = cockpit(cp).await;
    until(&snapshots, "two readings of the exporter's node", |s| {
        s.usage
            .get(&(kgpu::model::UsageSource::DcgmExporter, Sym::new(node)))
            .is_some_and(|h| h.devices.first().is_some_and(|d| d.idle_seconds().is_some_and(|i| i >= 1)))
    })
    .await;
    let snap = snapshots.borrow().clone();
    assert_eq!(snap.feed(Feed::DcgmExporter).map(|f| f.state.clone()), Some(FeedState::Live));
    let u = kgpu::analysis::usage::analyze(&snap, snap.clock);
    let idle: Vec<(String, Option<kgpu::model::Sym>, bool)> = u
        .holders
        .iter()
        .filter(|h| h.node.as_str() == node)
        .map(|h| (h.pod.name.to_string(), h.devices[0].profile.clone(), h.is_idle()))
        .collect();
    let profile = Some(Sym::new("1g.10gb"));
    assert_eq!(
        idle,
        [
            ("text-embedding-predictor-00008-deployment-57946f6c67-vdtjl".to_string(), profile.clone(), true),
            ("tts-predictor-00011-deployment-5554f75554-8j8pl".to_string(), profile, true),
        ]
    );
    let h = u.holders.iter().find(|h| h.node.as_str() == node).unwrap();
    assert!((h.gpus - 1.0 / 7.0).abs() < 1e-9, "a 1g slice is one seventh of a GPU");
    assert_eq!(h.source, kgpu::model::UsageSource::DcgmExporter);
    // The free slice 8 has no pod and does nothing (no work charged to nobody).
    let history = &snap.usage[&(kgpu::model::UsageSource::DcgmExporter, Sym::new(node))];
    let free = history.devices.iter().find(|d| d.reading.slice.as_ref().is_some_and(|s| s.id == 8)).unwrap();
    assert!(free.reading.holders.is_empty() && free.reading.busy_pct == Some(0.0), "{free:?}");

    // The same through the CLI, one shot: the pods named, idle, from the exporter.
    let out = Command::new(env!("CARGO_BIN_EXE_kgpu"))
        .args(["snapshot", "--pane", "utilization", "-o", "json", "--agents", "direct", "--kubeconfig"])
        .arg(&cp.kubeconfig)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows: Vec<&serde_json::Value> =
        doc["utilization"]["pods"].as_array().unwrap().iter().filter(|p| p["node"] == node).collect();
    assert_eq!(rows.len(), 2, "{}", doc["utilization"]);
    assert!(rows.iter().all(|p| p["source"] == "dcgm-exporter" && p["recentPercent"] == 0.0), "{rows:?}");
    assert_eq!(doc["feeds"]["dcgm-exporter"]["state"], "live", "{}", doc["feeds"]);
}

#[tokio::test]
async fn dcgm_exporter_is_read_through_the_api_servers_pod_proxy() {
    let Some(cp) = ControlPlane::shared_if_enabled() else { return };
    let Some(ip) = support::exporter::network_address() else {
        eprintln!("no network address here: the pod proxy cannot be tried (it refuses loopback)");
        return;
    };
    let client = client(cp).await;
    let text = std::fs::read_to_string(format!(
        "{}/tests/fixtures/dcgm-exporter/gpu-util-no-pod.prom",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let (port, _) = support::exporter::serve(&ip, 0, text);
    let node = "dcgm-proxy-node-0";
    gpu_node(&client, node, 1, json!({}), json!([])).await;
    support::kube::namespace(&client, "dcgm-standalone").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "dcgm-standalone");
    // The exporter's own Helm chart labels its pods this way.
    let exporter: Pod = serde_json::from_value(json!({
        "metadata": {"name": "dcgm-exporter-q8v4n", "labels": {"app.kubernetes.io/name": "dcgm-exporter"}},
        "spec": {"nodeName": node, "containers": [{"name": "exporter", "image": "dcgm-exporter:4",
            "ports": [{"name": "metrics", "containerPort": port}]}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &exporter).await.unwrap();
    let status = json!({"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}});
    pods.patch_status("dcgm-exporter-q8v4n", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();

    let scope = kgpu::sources::kube::watch::Scope {
        namespace: None,
        agents: Config { transport: Transport::PodProxy, interval: Duration::from_millis(500), ..Config::default() },
        ..Default::default()
    };
    let (snapshots, _tasks) = source_with(cp, &cp.kubeconfig, scope).await;
    let key = (kgpu::model::UsageSource::DcgmExporter, Sym::new(node));
    until(&snapshots, "the exporter read through the proxy", |s| {
        s.usage.get(&key).is_some_and(|h| !h.devices.is_empty() || h.problem.is_some())
    })
    .await;
    let snap = snapshots.borrow().clone();
    let h = &snap.usage[&key];
    assert_eq!(
        h.problem, None,
        "read through /api/v1/namespaces/dcgm-standalone/pods/dcgm-exporter-q8v4n:{port}/proxy/metrics"
    );
    // The fixture's GPU at 44% with no pod named: work nobody is charged for.
    assert_eq!(h.devices[0].reading.busy_pct, Some(44.0));
    let u = kgpu::analysis::usage::analyze(&snap, snap.clock);
    assert!(u.unattributed_busy >= 1, "{u:?}");
}

#[tokio::test]
async fn an_agent_is_read_through_the_api_servers_pod_proxy_with_its_nodes_token() {
    let Some(cp) = ControlPlane::shared_if_enabled() else { return };
    let Some(ip) = support::exporter::network_address() else {
        eprintln!("no network address here: the pod proxy cannot be tried (it refuses loopback)");
        return;
    };
    let client = client(cp).await;
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("key");
    let key = "proxy-test-key-3c9a1f7e5b2d4a68";
    std::fs::write(&key_file, format!("{key}\n")).unwrap();
    std::fs::set_permissions(&key_file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let port = free_port();
    let node = "agent-proxy-node-0";
    let fixture = format!("{}/tests/fixtures/agent/h100-mig-all-balanced.json", env!("CARGO_MANIFEST_DIR"));
    let _agent = AgentProcess(
        Command::new(env!("CARGO_BIN_EXE_kgpu"))
            .args(["agent", "--listen", &format!("{ip}:{port}"), "--node-name", node])
            .arg("--backend")
            .arg(format!("fake:{fixture}"))
            .arg("--token-file")
            .arg(&key_file)
            .env("KGPU_DATA_DIR", dir.path())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    gpu_node(&client, node, 0, json!({}), json!([])).await;
    support::kube::namespace(&client, "kgpu-proxy-test").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "kgpu-proxy-test");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "kgpu-agent-proxied", "labels": {"app.kubernetes.io/name": "kgpu-agent"}},
        "spec": {"nodeName": node, "containers": [{"name": "agent", "image": "kgpu:0.1.0",
            "ports": [{"name": "http", "containerPort": port}]}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let status = json!({"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}});
    pods.patch_status("kgpu-agent-proxied", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();

    // Through the pod proxy, which drops Authorization: the node's token
    // travels in X-Kgpu-Token, derived from the key file.
    let scope = kgpu::sources::kube::watch::Scope {
        namespace: None,
        agents: Config {
            namespace: "kgpu-proxy-test".into(),
            transport: Transport::PodProxy,
            token_file: Some(key_file.clone()),
            interval: Duration::from_millis(500),
            ..Config::default()
        },
        ..Default::default()
    };
    let (snapshots, _tasks) = source_with(cp, &cp.kubeconfig, scope).await;
    let n = Sym::new(node);
    until(&snapshots, "the agent read through the proxy", |s| {
        s.devices.get(&n).is_some_and(|d| d.status == AgentStatus::Reporting && !d.gpus.is_empty())
            || s.devices.get(&n).is_some_and(|d| matches!(d.status, AgentStatus::Unavailable(_)))
    })
    .await;
    let snap = snapshots.borrow().clone();
    assert_eq!(snap.devices[&n].status, AgentStatus::Reporting, "{:?}", snap.devices[&n].status);
    assert_eq!(snap.devices[&n].gpus[0].uuid.as_str(), "GPU-b4895dbf-9350-2524-a89b-98161ddd9fe4");
}

/// `--prometheus NAMESPACE/SERVICE:PORT`: one query through the real API
/// server's service proxy reaches a Prometheus stand-in (a Service without
/// selector, its Endpoints and EndpointSlice at this machine's address), and
/// its series land on their node in `kgpu snapshot`; a Service that does
/// not exist is said in the API server's words.
#[tokio::test]
async fn prometheus_is_asked_once_through_the_api_servers_service_proxy() {
    let Some(cp) = ControlPlane::shared_if_enabled() else { return };
    let Some(ip) = support::exporter::network_address() else {
        eprintln!("no network address here: the service proxy cannot be tried (it refuses loopback)");
        return;
    };
    let client = client(cp).await;
    let node = "prom-proxy-node-0";
    gpu_node(&client, node, 2, json!({}), json!([])).await;
    // The shape of gpu-operator#472's series after a scrape, on this node.
    let answer = json!({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": "nvidia-dcgm-exporter-57pvc", "UUID": "GPU-c89b14a3-ce7c-6725-8424-b55d37d9c332",
                    "gpu": "0", "instance": "10.244.1.9:9400", "job": "gpu-metrics", "node": node}, "value": [1796029200.1, "63"]}
    ]}});
    let (port, served) = support::exporter::serve(&ip, 0, answer.to_string());
    support::kube::namespace(&client, "monitoring").await;
    // The API server proxies only to an address of a pod it knows.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "monitoring");
    let prometheus: Pod = serde_json::from_value(json!({
        "metadata": {"name": "prometheus-k8s-0"},
        "spec": {"nodeName": node, "containers": [{"name": "prometheus", "image": "prom/prometheus:v3"}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &prometheus).await.unwrap();
    let status = json!({"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}});
    pods.patch_status("prometheus-k8s-0", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    let target = json!({"kind": "Pod", "name": "prometheus-k8s-0", "namespace": "monitoring"});
    for doc in [
        // Labelled as the Prometheus operator labels it: `auto` finds it.
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "prometheus-operated", "namespace": "monitoring",
                                                                  "labels": {"operated-prometheus": "true"}},
               "spec": {"ports": [{"name": "web", "port": 9090, "targetPort": port}]}}),
        json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "prometheus-operated", "namespace": "monitoring"},
               "subsets": [{"addresses": [{"ip": ip, "targetRef": target}], "ports": [{"name": "web", "port": port}]}]}),
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
               "metadata": {"name": "prometheus-operated-x", "namespace": "monitoring",
                            "labels": {"kubernetes.io/service-name": "prometheus-operated"}},
               "addressType": "IPv4", "endpoints": [{"addresses": [ip], "targetRef": target}], "ports": [{"name": "web", "port": port}]}),
    ] {
        kubectl_apply(cp, &doc);
    }
    let snapshot = |prometheus: &str| {
        Command::new(env!("CARGO_BIN_EXE_kgpu"))
            .args(["snapshot", "-o", "json", "--agents", "off", "--prometheus", prometheus, "--kubeconfig"])
            .arg(&cp.kubeconfig)
            .output()
            .unwrap()
    };
    let out = snapshot("monitoring/prometheus-operated:9090");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let feed = &doc["feeds"]["dcgm-exporter"];
    assert_eq!(feed["state"], "live", "{feed}");
    assert_eq!(feed["readFrom"], "Prometheus service monitoring/prometheus-operated:9090 (through the API server)");
    assert_eq!(doc["utilization"]["nodesReporting"]["dcgm-exporter"], 1, "{}", doc["utilization"]);
    assert!(served.load(std::sync::atomic::Ordering::Relaxed) >= 1);
    let out = snapshot("auto");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doc["feeds"]["dcgm-exporter"]["readFrom"],
        "Prometheus service monitoring/prometheus-operated:web (through the API server)"
    );
    assert_eq!(doc["utilization"]["nodesReporting"]["dcgm-exporter"], 1, "{}", doc["utilization"]);

    let out = snapshot("monitoring/no-such-prometheus:9090");
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains(r#"answered 404 Not Found: services "no-such-prometheus" not found; asked again in 10s"#),
        "{said}"
    );
}
