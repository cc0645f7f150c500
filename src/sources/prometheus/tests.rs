use super::*;
use crate::model::build::{node, pod};
use crate::model::{Cluster, SourceInfo, SourceKind};

const ANSWER: &str = include_str!("../../../tests/fixtures/dcgm-exporter/prometheus-vector.json");

fn fleet() -> Snapshot {
    let mut cluster = Cluster::new(SourceInfo { kind: SourceKind::Kube, name: "t".into() });
    let nodes = ["node-1", "aks-gpunp-66230965-vmss000000", "gpu-3"];
    let mut events = vec![
        ModelEvent::Resync { feed: Feed::Nodes, objects: Vec::new() },
        ModelEvent::Resync { feed: Feed::Pods, objects: Vec::new() },
    ];
    events.extend(nodes.iter().map(|n| ModelEvent::Upsert(Object::Node(node(n).gpus(8).build()))));
    let mut exporter = pod("nvidia-dcgm-exporter-x9k2p").ns("gpu-operator").on("gpu-3").build();
    exporter.endpoint = Some(Box::new(crate::model::Endpoint {
        kind: EndpointKind::DcgmExporter,
        port: 9400,
        ip: "10.244.3.17".parse().ok(),
    }));
    events.push(ModelEvent::Upsert(Object::Pod(exporter)));
    cluster.apply_all(events);
    cluster.snapshot()
}

fn device_of<'a>(fleet: &'a Fleet, node: &str) -> &'a crate::model::DeviceReading {
    let usage = fleet.usage.iter().find(|u| u.node.as_str() == node).unwrap_or_else(|| panic!("{node}: {fleet:?}"));
    &usage.devices[0]
}

#[test]
fn each_series_is_put_on_its_node_by_the_labels_a_scrape_gives_it() {
    let fleet = parse(ANSWER, &Places::of(&fleet()), 100).unwrap();
    // By `Hostname`, the node's own name (scraped through the Service).
    assert_eq!(device_of(&fleet, "node-1").busy_pct, Some(27.0));
    // By the relabelled `node` (its `Hostname` is the exporter pod's).
    let a100 = device_of(&fleet, "aks-gpunp-66230965-vmss000000");
    assert_eq!((a100.busy_pct, a100.memory_used_mib), (Some(91.0), Some(40211)));
    // The workload's pod is `exported_pod`; `pod` is the exporter itself.
    assert_eq!(a100.holders.iter().map(|k| k.to_string()).collect::<Vec<_>>(), ["ml/trainer-0"]);
    // By the scrape target's address: an exporter pod on gpu-3; its own
    // `pod` label holds no GPU.
    let a5000 = device_of(&fleet, "gpu-3");
    assert_eq!((a5000.busy_pct, a5000.holders.len()), (Some(0.0), 0));
    // `k8s-gpu1` is no node kgpu knows.
    assert_eq!((fleet.usage.len(), fleet.unplaced), (3, 1));
    assert!(fleet.usage.iter().all(|u| u.source == UsageSource::DcgmExporter && u.at == 100));
}

#[test]
fn an_answer_that_is_not_an_instant_vector_says_what_it_is() {
    let places = Places::of(&fleet());
    let error = r#"{"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": 1:1: parse error"}"#;
    assert!(parse(error, &places, 0).unwrap_err().contains("the query failed: invalid parameter"));
    let matrix = r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#;
    assert!(parse(matrix, &places, 0).unwrap_err().contains("a matrix, not the instant vector"));
    let html = "<html><body>502 Bad Gateway</body></html>";
    assert!(parse(html, &places, 0).unwrap_err().contains("not a Prometheus query answer"));
    let empty = r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#;
    assert_eq!(parse(empty, &places, 0).unwrap(), Fleet { usage: Vec::new(), unplaced: 0 });
}

#[test]
fn where_prometheus_answers_is_a_url_or_a_service() {
    assert_eq!(
        Endpoint::parse("http://localhost:9090").unwrap(),
        Endpoint::Url { host: "localhost".into(), port: 9090, prefix: String::new() }
    );
    assert_eq!(
        Endpoint::parse("http://10.0.0.5/prometheus/").unwrap(),
        Endpoint::Url { host: "10.0.0.5".into(), port: 80, prefix: "/prometheus".into() }
    );
    assert_eq!(
        Endpoint::parse("http://[::1]:9090").unwrap(),
        Endpoint::Url { host: "::1".into(), port: 9090, prefix: String::new() }
    );
    assert_eq!(
        Endpoint::parse("monitoring/prometheus-operated:9090").unwrap(),
        Endpoint::Service { namespace: "monitoring".into(), name: "prometheus-operated".into(), port: "9090".into() }
    );
    assert_eq!(
        Endpoint::parse("monitoring/kube-prometheus-stack-prometheus:http-web").unwrap().path(),
        format!(
            "/api/v1/namespaces/monitoring/services/kube-prometheus-stack-prometheus:http-web/proxy/api/v1/query?query={}",
            encode(QUERY)
        )
    );
    assert_eq!(Choice::parse("auto").unwrap(), Choice::Find);
    assert!(matches!(Choice::parse("monitoring/prometheus-operated:web"), Ok(Choice::At(Endpoint::Service { .. }))));
    assert!(Endpoint::parse("https://prom.example.com").unwrap_err().contains("plain HTTP only"));
    for bad in ["prometheus:9090", "http://:9090", "http://h:port", "Mon/prom:9090", "a/b", "http://u@h:1", ""] {
        assert!(Endpoint::parse(bad).unwrap_err().contains("is not a Prometheus to ask"), "{bad}");
    }
}

#[test]
fn the_query_is_sent_encoded() {
    assert_eq!(encode("a b{\"c\"}|~"), "a%20b%7B%22c%22%7D%7C~");
    let path = Endpoint::parse("http://h:1/p").unwrap().path();
    assert!(path.starts_with("/p/api/v1/query?query=%7B__name__%3D~%22DCGM_FI_DEV_GPU_UTIL%7C"), "{path}");
}

/// A tiny Prometheus on loopback that answers every request with `status` and `body`.
async fn serve(status: u16, body: &'static str) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let app = axum::Router::new()
        .fallback(move || async move { (axum::http::StatusCode::from_u16(status).unwrap(), body.to_string()) });
    tokio::spawn(async move { axum::serve(listener, app).await });
    port
}

async fn first_events(port: u16, until: impl Fn(&[ModelEvent]) -> bool) -> Vec<ModelEvent> {
    let (tx, mut rx) = mpsc::channel(16);
    let (_keep, snapshots) = watch::channel(Arc::new(fleet()));
    let endpoint = Endpoint::parse(&format!("http://127.0.0.1:{port}")).unwrap();
    let client = Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
    let task = spawn(client, endpoint, snapshots, Duration::from_millis(50), tx);
    let mut seen = Vec::new();
    while !until(&seen) {
        let batch = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await.unwrap().unwrap();
        seen.extend(batch);
    }
    task.abort();
    seen
}

#[tokio::test]
async fn one_query_a_round_feeds_the_dcgm_exporter_feed() {
    let port = serve(200, ANSWER).await;
    let live = |e: &ModelEvent| matches!(e, ModelEvent::Feed { state: FeedState::Live, .. });
    let events = first_events(port, |seen| seen.iter().any(live)).await;
    assert!(matches!(events[0], ModelEvent::Feed { feed: Feed::DcgmExporter, state: FeedState::Syncing }));
    let nodes: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::Upsert(Object::Usage(u)) => Some(u.node.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(nodes, ["aks-gpunp-66230965-vmss000000", "gpu-3", "node-1"]);
    assert!(events.iter().any(|e| matches!(e, ModelEvent::Coverage { coverage, .. } if coverage.read == 3)));
}

#[tokio::test]
async fn a_failing_prometheus_is_said_and_asked_again_later() {
    let port = serve(503, "Service Unavailable").await;
    let down = |e: &ModelEvent| matches!(e, ModelEvent::Feed { state: FeedState::Unavailable(_), .. });
    let events = first_events(port, |seen| seen.iter().any(down)).await;
    let why = events
        .iter()
        .find_map(|e| match e {
            ModelEvent::Feed { state: FeedState::Unavailable(FeedProblem::Error(why)), .. } => Some(why.clone()),
            _ => None,
        })
        .unwrap();
    assert!(why.contains("Prometheus at http://127.0.0.1:"), "{why}");
    assert!(why.contains("503 Service Unavailable: Service Unavailable; asked again in 10s"), "{why}");
    assert!(!events.iter().any(|e| matches!(e, ModelEvent::Upsert(_) | ModelEvent::Delete(_))));
}
