//! The live source against the real control plane: objects created through
//! the API appear, updates and deletes propagate within seconds, an API
//! server restart is shown and recovered from (deletes made meanwhile are
//! not lost), a missing CRD and a forbidden feed are reported per feed.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

mod support;

use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kgpu::model::{Feed, FeedProblem, FeedState, GangKind, PodKey, Snapshot, Sym};
use kgpu::sources::kube::client::Liveness;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::controlplane::ControlPlane;
use support::kube::{client, gpu_node, gpu_pod, namespace, source, unique, until};

fn kgpu_json(args: &[&str], kubeconfig: &std::path::Path) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_kgpu"))
        .args(args)
        .arg("-o")
        .arg("json")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn feed_state(s: &Snapshot, f: Feed) -> Option<FeedState> {
    s.feed(f).map(|x| x.state.clone())
}

#[tokio::test]
async fn objects_updates_and_deletes_propagate() {
    let Some(cp) = ControlPlane::shared_if_enabled() else { return };
    let mut crds = cp.kueue_crds();
    crds.extend(cp.volcano_crds());
    cp.install_crds(&crds).unwrap();
    let client = client(cp).await;
    let (snapshots, _tasks) = source(cp, &cp.kubeconfig).await;

    let node = unique("live-node");
    gpu_node(&client, &node, 8, json!({"kgpu.test/pool": node}), json!([])).await;
    let ns = unique("live");
    namespace(&client, &ns).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    pods.create(&PostParams::default(), &gpu_pod("trainer", 4, json!({"nodeSelector": {"kgpu.test/pool": node}})))
        .await
        .unwrap();
    let n = Sym::new(&node);
    let key = PodKey::new(&ns, "trainer");
    until(&snapshots, "node and pod appear", |s| s.nodes.contains_key(&n) && s.pods.contains_key(&key)).await;
    assert_eq!(snapshots.borrow().nodes[&n].allocatable.gpu, 8);
    // The real scheduler binds the pod: the binding shows up.
    until(&snapshots, "pod bound", |s| s.pods.get(&key).is_some_and(|p| p.node.as_ref() == Some(&n))).await;
    // Cordon and a label change.
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .patch(&node, &PatchParams::default(), &Patch::Merge(json!({"spec": {"unschedulable": true}, "metadata": {"labels": {"nvidia.com/mig.config": "all-balanced"}}})))
        .await
        .unwrap();
    until(&snapshots, "cordon and label", |s| {
        s.nodes.get(&n).is_some_and(|x| {
            x.unschedulable && x.operator.mig_config.as_ref().is_some_and(|c| c.as_str() == "all-balanced")
        })
    })
    .await;
    // Kueue and Volcano objects.
    let wl = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta2", "Workload"),
        "workloads",
    );
    let workloads: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &wl);
    let w: DynamicObject = serde_json::from_value(json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "job-train-1", "namespace": ns},
        "spec": {"queueName": "research", "podSets": [{"name": "main", "count": 2, "template": {"spec": {"containers": [{"name": "c", "image": "x",
            "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}}]}}))
    .unwrap();
    workloads.create(&PostParams::default(), &w).await.unwrap();
    let pgr = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("scheduling.volcano.sh", "v1beta1", "PodGroup"),
        "podgroups",
    );
    let podgroups: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &pgr);
    let pg: DynamicObject =
        serde_json::from_value(json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "pg-1", "namespace": ns}, "spec": {"minMember": 4, "queue": "default"}}))
        .unwrap();
    podgroups.create(&PostParams::default(), &pg).await.unwrap();
    until(&snapshots, "workload and podgroup", |s| {
        s.gangs.keys().any(|k| k.kind == GangKind::KueueWorkload && &*k.name == "job-train-1")
            && s.gangs.keys().any(|k| k.kind == GangKind::VolcanoPodGroup && &*k.name == "pg-1")
    })
    .await;
    let g = snapshots.borrow().gangs.values().find(|g| &*g.name == "job-train-1").unwrap().clone();
    assert_eq!(g.total_requests().gpu, 16);
    // Deletes.
    pods.delete("trainer", &DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() }).await.unwrap();
    workloads.delete("job-train-1", &DeleteParams::default()).await.unwrap();
    until(&snapshots, "deletes", |s| !s.pods.contains_key(&key) && !s.gangs.keys().any(|k| &*k.name == "job-train-1"))
        .await;

    // The same through the binary, as a script would see it.
    let doc = kgpu_json(&["snapshot"], &cp.kubeconfig);
    assert_eq!(doc["source"]["kind"], "kube");
    let row = doc["fleet"]["nodes"].as_array().unwrap().iter().find(|x| x["name"] == node.as_str()).unwrap();
    assert_eq!(row["cordoned"], true);
    assert!(row["issues"].to_string().contains("cordoned"));
    assert!(doc["gangs"].as_array().unwrap().iter().any(|g| g["name"] == "pg-1" && g["kind"] == "PodGroup"));
    assert_eq!(doc["feeds"]["kueue workloads"]["state"], "live");
    // The real API server streams every collection (WatchList), the custom
    // resources' too: no feed fell back to pages.
    for feed in ["nodes", "pods", "events", "namespaces", "kueue workloads", "volcano podgroups"] {
        assert_eq!(doc["feeds"][feed]["listedBy"], "stream", "{feed}: {}", doc["feeds"][feed]);
        assert!(doc["feeds"][feed].get("streamRefused").is_none(), "{feed}");
    }
    assert_eq!(snapshots.borrow().feed(Feed::Pods).and_then(|f| f.listed.clone()), Some(kgpu::model::Listing::Stream));
}

#[tokio::test]
async fn an_apiserver_restart_is_shown_and_recovered_from() {
    if !ControlPlane::enabled() {
        return;
    }
    // Its own control plane: the restart must not disturb other tests.
    let cp = ControlPlane::start().unwrap();
    let client = client(&cp).await;
    let (snapshots, _tasks) = source(&cp, &cp.kubeconfig).await;
    for name in ["keep", "doomed"] {
        gpu_node(&client, name, 8, json!({}), json!([])).await;
    }
    until(&snapshots, "both nodes", |s| s.nodes.len() == 2).await;
    until(&snapshots, "nodes live", |s| feed_state(s, Feed::Nodes) == Some(FeedState::Live)).await;

    cp.stop_apiserver();
    until(&snapshots, "the outage shown", |s| {
        matches!(feed_state(s, Feed::Nodes), Some(FeedState::Reconnecting { .. }))
    })
    .await;
    assert_eq!(snapshots.borrow().nodes.len(), 2, "stale data stays, with its age");
    cp.start_apiserver().unwrap();
    // Delete before kgpu's watcher has come back (it is still backing off).
    let nodes: Api<Node> = Api::all(client.clone());
    nodes.delete("doomed", &DeleteParams::default()).await.unwrap();
    until(&snapshots, "recovered, without the node deleted meanwhile", |s| {
        feed_state(s, Feed::Nodes) == Some(FeedState::Live)
            && s.nodes.len() == 1
            && s.nodes.contains_key(&Sym::new("keep"))
    })
    .await;
}

/// kgpu's source with a short stall timeout (4 s: the probe asks every
/// 1.3 s, each watch lasts 40 s): a paused server is noticed within seconds.
async fn quick_source(cp: &ControlPlane) -> (Snapshots, Vec<tokio::task::JoinHandle<()>>) {
    let scope = kgpu::sources::kube::watch::Scope {
        liveness: Liveness { stall_after: Duration::from_secs(4) },
        ..Default::default()
    };
    support::kube::source_with(cp, &cp.kubeconfig, scope).await
}

async fn node_names(client: &kube::Client) -> Vec<String> {
    let mut names: Vec<String> = Api::<Node>::all(client.clone())
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    names.sort();
    names
}

fn model_node_names(s: &Snapshot) -> Vec<String> {
    let mut names: Vec<String> = s.nodes.keys().map(|k| k.to_string()).collect();
    names.sort();
    names
}

type Snapshots = tokio::sync::watch::Receiver<std::sync::Arc<Snapshot>>;

/// A control plane of its own (the tests stop or pause it) with nodes
/// `keep` and `doomed`, and kgpu's quick source showing them live.
async fn two_nodes_live() -> (ControlPlane, kube::Client, Snapshots, Vec<tokio::task::JoinHandle<()>>) {
    let cp = ControlPlane::start().unwrap();
    let client = client(&cp).await;
    let (snapshots, tasks) = quick_source(&cp).await;
    for name in ["keep", "doomed"] {
        gpu_node(&client, name, 8, json!({}), json!([])).await;
    }
    until(&snapshots, "nodes live", |s| s.nodes.len() == 2 && feed_state(s, Feed::Nodes) == Some(FeedState::Live))
        .await;
    (cp, client, snapshots, tasks)
}

/// The API server paused (SIGSTOP) for longer than a watch lasts: its
/// connections stay open and silent. kgpu says so per feed within the stall
/// timeout, keeps the data with its age, and once the server runs again
/// shows the feeds live with exactly what a fresh list says.
#[tokio::test]
async fn a_paused_apiserver_is_shown_as_stale_and_then_followed_by_a_fresh_list() {
    if !ControlPlane::enabled() {
        return;
    }
    let (cp, client, snapshots, _tasks) = two_nodes_live().await;
    // A healthy server on a quiet cluster: its watches say nothing for
    // longer than the stall timeout, the probe gets answers, and no feed
    // ever looks stalled.
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let s = snapshots.borrow().clone();
        for f in [Feed::Nodes, Feed::Pods, Feed::Events] {
            assert_eq!(feed_state(&s, f), Some(FeedState::Live), "{f:?} while nothing is wrong");
        }
    }

    cp.pause_apiserver();
    let paused = std::time::Instant::now();
    until(&snapshots, "the stall shown on nodes and pods", |s| {
        [Feed::Nodes, Feed::Pods].iter().all(|f| {
            matches!(feed_state(s, *f), Some(FeedState::Reconnecting { error, .. }) if error.contains("sent nothing"))
        })
    })
    .await;
    eprintln!("stall shown after {:.1}s", paused.elapsed().as_secs_f64());
    // Longer than the stall timeout, still paused.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let snap = snapshots.borrow().clone();
    assert_eq!(snap.nodes.len(), 2, "stale data stays");
    let now = kgpu::clock::wall_clock();
    let (bar, _) = kgpu::view_model::feeds::summary(&snap, now);
    assert!(bar.contains("feeds reconnecting"), "every feed stalls at once, said in one item: {bar}");
    let health = kgpu::view_model::feeds::health(&snap, now);
    let nodes_age = health.iter().find(|h| h.feed == Feed::Nodes).and_then(|h| h.age).unwrap();
    assert!(nodes_age >= 8, "the data's age counts from when the server went quiet: {nodes_age}s");

    cp.resume_apiserver();
    let nodes: Api<Node> = Api::all(client.clone());
    nodes.delete("doomed", &DeleteParams::default()).await.unwrap();
    gpu_node(&client, "born", 8, json!({}), json!([])).await;
    until(&snapshots, "live again, with the changes made since", |s| {
        feed_state(s, Feed::Nodes) == Some(FeedState::Live)
            && feed_state(s, Feed::Pods) == Some(FeedState::Live)
            && model_node_names(s) == ["born", "keep"]
    })
    .await;
    // The fresh list first: a snapshot borrowed across an await holds the
    // channel's lock, and the source publishing meanwhile (same thread)
    // would wait on it for ever.
    let fresh = node_names(&client).await;
    assert_eq!(model_node_names(&snapshots.borrow()), fresh, "equal to a fresh list");
}

/// etcd compacted while the API server is down: resuming a watch from what
/// kgpu last saw answers 410 Gone. kgpu lists afresh instead, so nothing
/// changed meanwhile is lost.
#[tokio::test]
async fn after_an_etcd_compaction_the_feeds_equal_a_fresh_list() {
    if !ControlPlane::enabled() {
        return;
    }
    let (cp, client, snapshots, _tasks) = two_nodes_live().await;
    let seen = Api::<Node>::all(client.clone()).list(&Default::default()).await.unwrap().metadata.resource_version;
    let seen = seen.unwrap();

    cp.stop_apiserver();
    until(&snapshots, "the outage shown", |s| {
        matches!(feed_state(s, Feed::Nodes), Some(FeedState::Reconnecting { .. }))
    })
    .await;
    cp.start_apiserver().unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    nodes.delete("doomed", &DeleteParams::default()).await.unwrap();
    gpu_node(&client, "born", 8, json!({}), json!([])).await;
    let compacted = cp.compact_etcd();
    assert!(compacted > seen.parse::<i64>().unwrap());

    // The fault is real: a client that resumed its watch would be told 410.
    let (code, body) = support::controlplane::curl(
        &cp.server,
        &cp.tokens.admin,
        &[],
        &format!("/api/v1/nodes?watch=1&resourceVersion={seen}&timeoutSeconds=1"),
    )
    .unwrap();
    assert!(code == 410 || body.contains("\"code\":410"), "{code} {body}");

    until(&snapshots, "live again, equal to a fresh list", |s| {
        feed_state(s, Feed::Nodes) == Some(FeedState::Live) && model_node_names(s) == ["born", "keep"]
    })
    .await;
    let fresh = node_names(&client).await;
    assert_eq!(model_node_names(&snapshots.borrow()), fresh);
}

#[tokio::test]
async fn missing_crds_and_forbidden_feeds_are_reported_per_feed() {
    if !ControlPlane::enabled() {
        return;
    }
    // Without the CRDs: a control plane of its own.
    let bare = ControlPlane::start().unwrap();
    let doc = kgpu_json(&["snapshot"], &bare.kubeconfig);
    assert_eq!(doc["feeds"]["kueue workloads"]["state"], "not installed", "{}", doc["feeds"]);
    assert!(doc["feeds"]["kueue workloads"]["reason"].as_str().unwrap().contains("Kueue CRDs"));
    assert_eq!(doc["feeds"]["volcano podgroups"]["state"], "not installed");
    assert_eq!(doc["feeds"]["nodes"]["state"], "live");
    let out = Command::new(env!("CARGO_BIN_EXE_kgpu"))
        .args(["snapshot", "--pane", "queues", "--kubeconfig"])
        .arg(&bare.kubeconfig)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("feed kueue clusterqueues: not installed"), "{text}");

    // Forbidden: the viewer may read nodes, pods and events, not Kueue or Volcano.
    let cp = ControlPlane::shared();
    let mut crds = cp.kueue_crds();
    crds.extend(cp.volcano_crds());
    cp.install_crds(&crds).unwrap();
    let client = client(cp).await;
    let role: ClusterRole = serde_json::from_value(json!({"metadata": {"name": "kgpu-viewer"},
        "rules": [{"apiGroups": [""], "resources": ["nodes", "pods", "events"], "verbs": ["get", "list", "watch"]}]}))
    .unwrap();
    let _ = Api::<ClusterRole>::all(client.clone()).create(&PostParams::default(), &role).await;
    let binding: ClusterRoleBinding = serde_json::from_value(json!({"metadata": {"name": "kgpu-viewer"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "kgpu-viewer"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "viewer"}]}))
    .unwrap();
    let _ = Api::<ClusterRoleBinding>::all(client.clone()).create(&PostParams::default(), &binding).await;
    let node = unique("viewer-node");
    gpu_node(&client, &node, 4, json!({}), json!([])).await;
    let (snapshots, _tasks) = source(cp, &cp.viewer_kubeconfig).await;
    until(&snapshots, "forbidden kueue feed, live nodes", |s| {
        matches!(s.feed_problem(Feed::Workloads), Some(FeedProblem::Forbidden(_)))
            && feed_state(s, Feed::Nodes) == Some(FeedState::Live)
    })
    .await;
    let why = snapshots.borrow().feed_problem(Feed::Workloads).unwrap().describe().to_string();
    assert!(why.contains("RBAC: cannot list/watch workloads.kueue.x-k8s.io"), "{why}");
    // Forbidden feeds are partial data: printed, and exit 1 naming them.
    let out = Command::new(env!("CARGO_BIN_EXE_kgpu"))
        .args(["snapshot", "-o", "json", "--kubeconfig"])
        .arg(&cp.viewer_kubeconfig)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("kueue workloads (forbidden: RBAC"), "{stderr}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["feeds"]["kueue workloads"]["state"], "forbidden");
    assert_eq!(doc["feeds"]["pods"]["state"], "live");
    assert!(
        doc["fleet"]["nodes"].as_array().unwrap().iter().any(|n| n["name"] == node.as_str()),
        "everything else works"
    );
}

#[tokio::test]
async fn the_tui_follows_the_cluster() {
    let Some(cp) = ControlPlane::shared_if_enabled() else { return };
    let client = client(cp).await;
    let node = unique("tui-node");
    gpu_node(&client, &node, 8, json!({}), json!([])).await;
    let t = support::tmux::Tmux::start(200, 50, "live");
    let bin = env!("CARGO_BIN_EXE_kgpu");
    t.literal(&format!("{bin} --kubeconfig {} ; echo EXIT=$?", cp.kubeconfig.display()));
    t.keys(&["Enter"]);
    t.wait_for(&node);
    let nodes: Api<Node> = Api::all(client.clone());
    nodes.patch(&node, &PatchParams::default(), &Patch::Merge(json!({"spec": {"unschedulable": true}}))).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let screen = t.screen();
        if screen.lines().any(|l| l.contains(&node) && l.contains("cordon")) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "cordon never shown:\n{screen}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    nodes.delete(&node, &DeleteParams::default()).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while t.screen().contains(&node) {
        assert!(std::time::Instant::now() < deadline, "deleted node still shown");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    t.keys(&["q"]);
    t.wait_for("EXIT=0");
}

/// `:ns` and `:ctx` in the cockpit switch what it watches without a
/// restart: the feeds start again on the new scope, the title says both,
/// and what the screen lists follows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_palette_switches_namespace_and_context_live() {
    use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
    let Some(cp) = ControlPlane::shared_if_enabled() else { return };
    let client = client(cp).await;
    for ns in ["switch-a", "switch-b"] {
        namespace(&client, ns).await;
        let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
        let name = format!("want-{}", &ns[7..]);
        pods.create(&PostParams::default(), &gpu_pod(&name, 64, json!({}))).await.unwrap();
    }
    // One kubeconfig, two contexts on the same cluster.
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let token = &cp.tokens.admin;
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n    insecure-skip-tls-verify: true\nusers:\n- name: admin\n  user:\n    token: {token}\ncontexts:\n- name: alpha\n  context:\n    cluster: c\n    user: admin\n- name: beta\n  context:\n    cluster: c\n    user: admin\ncurrent-context: alpha\n",
            cp.server
        ),
    )
    .unwrap();
    let scope = kgpu::sources::kube::watch::Scope {
        agents: kgpu::sources::agents::Config {
            transport: kgpu::sources::agents::Transport::Off,
            ..Default::default()
        },
        ..Default::default()
    };
    let target = kgpu::sources::kube::client::Target { kubeconfig: Some(kubeconfig), context: None };
    let from = kgpu::runtime::source::Source::Kube { target, scope: Box::new(scope) };
    let paths = kgpu::config::Paths { config_dir: None, data_dir: Some(dir.path().to_path_buf()) };
    let cockpit = kgpu::runtime::tui::Cockpit::start(&from, paths, "dark", false, true).await.unwrap();
    let (keys, input) = futures::channel::mpsc::unbounded::<std::io::Result<Event>>();
    let task = tokio::spawn(async move {
        let mut terminal = ratatui::Terminal::new(ratatui::backend::TestBackend::new(160, 40)).unwrap();
        let result = kgpu::runtime::tui::drive(&mut terminal, input, cockpit).await;
        (result, terminal)
    });
    let send = |text: &str| {
        for c in text.chars() {
            let code = if c == '\n' { KeyCode::Enter } else { KeyCode::Char(c) };
            keys.unbounded_send(Ok(Event::Key(KeyEvent::new(code, KeyModifiers::NONE)))).unwrap();
        }
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    send(":ns switch-a\n");
    tokio::time::sleep(Duration::from_secs(3)).await;
    send(":po\n:ctx beta\n");
    tokio::time::sleep(Duration::from_secs(4)).await;
    drop(keys);
    let (result, terminal) = task.await.unwrap();
    result.unwrap();
    let screen = format!("{}", terminal.backend());
    let title = screen.lines().next().unwrap();
    assert!(title.contains("beta") && title.contains("namespace switch-a"), "{title}");
    assert!(screen.contains("want-a"), "the namespace's pending pod is listed:\n{screen}");
    assert!(!screen.contains("want-b"), "no other namespace's pods:\n{screen}");
}
