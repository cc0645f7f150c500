//! The benchmarks' loopback list/watch server (benches/support/listwatch.rs)
//! speaks the protocol the way kube-apiserver does, as the real kube source
//! and kube-rs's watcher read it: a figure measured against it is a figure
//! of the product's own code path.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

#[path = "../benches/support/labels.rs"]
mod labels;
#[allow(dead_code)]
#[path = "../benches/support/listwatch.rs"]
mod listwatch;

use futures::StreamExt;
use kgpu::sources::kube::client::{Target, connect};
use kube::runtime::watcher::{self, Event};

async fn serve(nodes: usize, pods: usize) -> (std::sync::Arc<listwatch::Fleet>, tempfile::TempDir, Target) {
    let fleet = listwatch::Fleet::new(nodes, pods);
    let port = listwatch::serve(fleet.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    std::fs::write(&path, listwatch::kubeconfig(port)).unwrap();
    (fleet, dir, Target { kubeconfig: Some(path), context: None })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kube_source_loads_the_generated_fleet_page_by_page() {
    let (fleet, _dir, target) = serve(30, 1_234).await;
    let (snap, _) = kgpu::runtime::load::kube(&target, &Default::default()).await.unwrap();
    assert_eq!(snap.nodes.len(), 30);
    assert_eq!(snap.pods.len(), 1_234, "three pages of 500");
    let (_, gpus_held) = fleet.counts();
    let held: u64 = snap.pods.values().filter(|p| p.node.is_some()).map(|p| p.requests.get("nvidia.com/gpu")).sum();
    assert_eq!(held as usize, gpus_held);
    // Real shapes: a real H100 node's labels (158 once its MIG profile
    // labels are gone: benches/support/labels.rs), the pod's CUDA requirement.
    let node = snap.nodes.values().next().unwrap();
    assert!(node.labels.len() >= 150, "{}", node.labels.len());
    assert!(snap.pods.values().any(|p| p.cuda.is_some_and(|c| c.require_cuda.is_some())));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_follows_changes_and_a_compaction_answers_410_gone() {
    let (fleet, _dir, target) = serve(4, 20).await;
    let (client, _) = connect(&target).await.unwrap();
    let api: kube::Api<kgpu::sources::kube::lean::Pod> = kube::Api::all(client.clone());
    let stream = watcher::watcher(api, watcher::Config::default().page_size(7));
    futures::pin_mut!(stream);
    let mut listed = 0;
    loop {
        match stream.next().await.unwrap().unwrap() {
            Event::InitApply(_) => listed += 1,
            Event::InitDone => break,
            _ => {}
        }
    }
    assert_eq!(listed, 20);
    fleet.churn_pod(3);
    match stream.next().await.unwrap().unwrap() {
        Event::Delete(p) => assert!(p.metadata.name.unwrap().starts_with("train-")),
        other => panic!("expected the delete, got {other:?}"),
    }
    fleet.churn_pod(3);
    assert!(matches!(stream.next().await.unwrap().unwrap(), Event::Apply(_)));

    // A continue token and a watch from before a compaction are too old.
    let first =
        client.request_text(http::Request::get("/api/v1/pods?limit=5").body(Vec::new()).unwrap()).await.unwrap();
    let token = first.split_once(r#""continue":""#).unwrap().1.split_once('"').unwrap().0.to_string();
    // etcd compacts up to the newest revision: reading at it stays valid, before it not.
    fleet.churn_pod(4);
    fleet.compact();
    let expired = client
        .request_text(http::Request::get(format!("/api/v1/pods?limit=5&continue={token}")).body(Vec::new()).unwrap())
        .await;
    assert!(matches!(&expired, Err(kube::Error::Api(s)) if s.code == 410), "{expired:?}");
    let old = client
        .request_text(
            http::Request::get("/api/v1/pods?watch=true&resourceVersion=1&timeoutSeconds=1").body(Vec::new()).unwrap(),
        )
        .await
        .unwrap();
    assert!(old.contains(r#""type":"ERROR""#) && old.contains(r#""code":410"#), "{old}");
}

/// kgpu's own list (the next page asked for while this one decodes) and
/// watch: every object once, in the server's order, then the changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_source_lists_pages_ahead_in_order_then_follows_the_watch() {
    lists_in_order_then_follows_the_watch(kgpu::model::Listing::Pages { refused: None }).await;
}

/// The same, with the whole collection streamed over one watch (WatchList).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_source_streams_the_list_in_order_then_follows_the_watch() {
    lists_in_order_then_follows_the_watch(kgpu::model::Listing::Stream).await;
}

/// Where the server streams lists the source takes each collection from one
/// watch and says so; where it refuses (422, as 1.33's API server does), it
/// lists by pages from then on and says why, in the text and the JSON; where
/// it answers otherwise (429 from a watch cache still filling), it lists by
/// pages this time without calling it a refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_refuses_to_stream_is_listed_by_pages_and_the_feed_says_why() {
    use kgpu::model::{Feed, Listing};
    for server in ["busy", "streams", "refuses"] {
        let (fleet, _dir, target) = serve(6, 1_234).await;
        match server {
            "refuses" => fleet.refuse_streams(),
            "busy" => fleet.busy_streams(),
            _ => {}
        }
        let (snap, now) = kgpu::runtime::load::kube(&target, &Default::default()).await.unwrap();
        assert_eq!((snap.nodes.len(), snap.pods.len()), (6, 1_234), "{server}");
        let (pages, streams) = fleet.served();
        let listed = snap.feed(Feed::Pods).and_then(|f| f.listed.clone());
        let health = kgpu::view_model::feeds::health(&snap, now);
        let pages_lines = kgpu::view_model::feeds::pages_lines(&health);
        let pods = health.iter().find(|h| h.feed == Feed::Pods).unwrap();
        match server {
            "streams" => {
                assert_eq!((pages, streams), (0, 2), "nodes and pods each streamed once, no page");
                assert_eq!(listed, Some(Listing::Stream));
                assert_eq!(pods.listed_by(), Some(("stream", None)));
                assert!(pages_lines.is_empty(), "{pages_lines:?}");
            }
            "refuses" => {
                assert_eq!((pages, streams), (4, 0), "three pages of pods, one of nodes, no stream");
                let Some(Listing::Pages { refused: Some(why) }) = listed else { panic!("{listed:?}") };
                assert!(why.starts_with("HTTP 422: ") && why.contains("WatchList feature gate"), "{why}");
                assert_eq!(pods.listed_by().map(|(by, _)| by), Some("pages"));
                // One line for every feed the server refused alike.
                assert_eq!(pages_lines.len(), 1, "{pages_lines:?}");
                assert!(pages_lines[0].starts_with("feeds nodes, pods, events"), "{}", pages_lines[0]);
                assert!(pages_lines[0].contains("listed by pages (the API server refused a streamed list: HTTP 422"));
            }
            _ => {
                assert_eq!((pages, streams), (4, 0), "pages this time");
                assert_eq!(listed, Some(Listing::Pages { refused: None }));
                assert_eq!(pods.listed_by(), Some(("pages", None)));
                assert!(pages_lines.is_empty(), "not a refusal: {pages_lines:?}");
            }
        }
    }
}

async fn lists_in_order_then_follows_the_watch(listing: kgpu::model::Listing) {
    use kgpu::model::{Feed, ModelEvent, Object, ObjectKey};
    let (fleet, _dir, target) = serve(6, 2_345).await;
    let (client, _) = connect(&target).await.unwrap();
    // The reference: kube-rs's pages, one after the other.
    let api: kube::Api<kgpu::sources::kube::lean::Pod> = kube::Api::all(client.clone());
    let mut expected = Vec::new();
    let mut params = kube::api::ListParams::default().limit(500);
    loop {
        let page = api.list(&params).await.unwrap();
        expected.extend(page.items.iter().map(|p| p.metadata.name.clone().unwrap()));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(c) => params = params.continue_token(&c),
            None => break,
        }
    }
    assert_eq!(expected.len(), 2_345);

    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    // No model: the agents' pollers find no pods and stay quiet.
    let (_keep, nothing) =
        tokio::sync::watch::channel(std::sync::Arc::new(kgpu::model::Snapshot::empty(kgpu::model::SourceInfo {
            kind: kgpu::model::SourceKind::Kube,
            name: String::new(),
        })));
    let (clients, _) = kgpu::sources::kube::client::connect_clients(&target, Default::default()).await.unwrap();
    let pages = matches!(listing, kgpu::model::Listing::Pages { .. });
    let scope = kgpu::sources::kube::watch::Scope { pages, ..Default::default() };
    let _tasks = kgpu::sources::kube::watch::spawn_all(clients, scope, tx, nothing);
    let pod_name = |o: &Object| match o {
        Object::Pod(p) => p.name.to_string(),
        other => panic!("not a pod: {other:?}"),
    };
    let listed = loop {
        let events = tokio::time::timeout(std::time::Duration::from_secs(20), rx.recv()).await.unwrap().unwrap();
        if let Some(ModelEvent::Resync { objects, .. }) =
            events.into_iter().find(|e| matches!(e, ModelEvent::Resync { feed: Feed::Pods, .. }))
        {
            break objects;
        }
    };
    assert_eq!(listed.iter().map(pod_name).collect::<Vec<_>>(), expected, "every pod, in order, each once");

    // Pod 7's Job ends, and a new Job's pod (a fresh name) takes its place.
    fleet.churn_pod(7);
    fleet.churn_pod(7);
    let replacement = expected[7].replacen("-7-", "-r1-7-", 1);
    // A deadline for the whole wait: other feeds' events keep arriving, so a
    // per-receive timeout alone could wait forever for changes that never come.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let events = tokio::time::timeout_at(deadline, rx.recv()).await.expect("the churn within 60 s").unwrap();
        for e in events {
            match e {
                ModelEvent::Delete(ObjectKey::Pod(k)) => seen.push(format!("delete {}", k.name)),
                ModelEvent::Upsert(o @ Object::Pod(_)) => seen.push(format!("upsert {}", pod_name(&o))),
                // On a slow machine the watch can start after the server's
                // short history window and list again (410 Gone, as the real
                // server does after a compaction): the new list holds the
                // replacement and not the pod it replaced.
                ModelEvent::Resync { feed: Feed::Pods, objects } => {
                    assert!(objects.iter().any(|o| pod_name(o) == replacement), "the re-list holds the replacement");
                    assert!(!objects.iter().any(|o| pod_name(o) == expected[7]), "and not the pod it replaced");
                    seen = vec![format!("delete {}", expected[7]), format!("upsert {replacement}")];
                }
                _ => {}
            }
        }
    }
    assert_eq!(seen, [format!("delete {}", expected[7]), format!("upsert {replacement}")]);
}
