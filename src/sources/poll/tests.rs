use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::model::{Endpoint, Pod, PodPhase, keys};

fn target(node: &str) -> Target {
    Target {
        namespace: Sym::new("gpu-operator"),
        name: Arc::from(format!("nvidia-dcgm-exporter-{node}")),
        node: Sym::new(node),
        port: 9400,
        ip: None,
        running: true,
        gpus: 0,
    }
}

fn fleet(n: usize) -> Arc<[Target]> {
    (0..n).map(|i| target(&format!("gpu-{i:05}"))).collect()
}

/// A reader that counts its reads and answers as told.
struct Fake {
    reads: AtomicUsize,
    answer: fn(&Target) -> Result<Vec<Object>, ReadError>,
}

impl Reader for Fake {
    fn read<'a>(&'a self, target: &'a Target) -> BoxFuture<'a, Result<Vec<Object>, ReadError>> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        let answer = (self.answer)(target);
        Box::pin(async move { answer })
    }
    fn failed(&self, _: &Target, _: &str, _: Timestamp) -> Vec<Object> {
        Vec::new()
    }
    fn keys(&self, node: Sym) -> Vec<ObjectKey> {
        vec![ObjectKey::Devices(node)]
    }
}

fn states(events: &[ModelEvent]) -> Vec<FeedState> {
    events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::Feed { state, .. } => Some(state.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn the_selectors_and_the_labels_the_model_reads_are_the_same() {
    let (k, v) = keys::AGENT_LABEL;
    assert_eq!(crate::sources::agents::SELECTOR, format!("{k}={v}"));
    let labels: Vec<String> = keys::DCGM_EXPORTER_LABELS.iter().map(|(k, v)| format!("{k}={v}")).collect();
    assert_eq!(crate::sources::dcgm::SELECTORS.to_vec(), labels);
}

#[test]
fn the_budget_allows_a_burst_then_its_rate() {
    let budget = Budget::new(0.5);
    let t0 = Instant::now();
    let burst = (0..100).take_while(|_| budget.take(t0)).count();
    assert_eq!(burst, BURST as usize);
    assert!(!budget.take(t0 + Duration::from_millis(1500)), "1.5 s at 0.5/s is not yet a request");
    assert!(budget.take(t0 + Duration::from_secs(2)));
    // An hour later the bucket holds a burst, not 1,800 requests.
    let later = t0 + Duration::from_secs(3600);
    assert_eq!((0..10_000).take_while(|_| budget.take(later)).count(), BURST as usize);
}

#[test]
fn one_reporter_per_node_a_running_one_in_its_namespace() {
    let pod = |ns: &str, name: &str, node: &str, kind, phase| {
        let mut p = Pod::new(ns, name);
        p.node = Some(Sym::new(node));
        p.phase = phase;
        p.endpoint = Some(Box::new(Endpoint { kind, port: 9400, ip: None }));
        p
    };
    let pods = [
        // A rolling DaemonSet: the new pod still pending, the old one running.
        pod("kgpu-system", "kgpu-agent-aaaaa", "gpu-1", EndpointKind::Agent, PodPhase::Pending),
        pod("kgpu-system", "kgpu-agent-zzzzz", "gpu-1", EndpointKind::Agent, PodPhase::Running),
        pod("kgpu-system", "kgpu-agent-bbbbb", "gpu-2", EndpointKind::Agent, PodPhase::Failed),
        // Calls itself an agent, elsewhere: never given a node's token.
        pod("team-a", "kgpu-agent-fake", "gpu-3", EndpointKind::Agent, PodPhase::Running),
        pod("gpu-operator", "nvidia-dcgm-exporter-x", "gpu-3", EndpointKind::DcgmExporter, PodPhase::Running),
        Pod::new("team-a", "trainer"),
    ];
    let agents = targets(pods.iter(), EndpointKind::Agent, Some("kgpu-system"));
    let names: Vec<&str> = agents.iter().map(|t| &*t.name).collect();
    assert_eq!(names, ["kgpu-agent-zzzzz"]);
    let exporters = targets(pods.iter(), EndpointKind::DcgmExporter, None);
    assert_eq!(exporters.iter().map(|t| t.node.as_str()).collect::<Vec<_>>(), ["gpu-3"]);
}

#[test]
fn never_read_first_then_the_oldest_weighted_by_gpus() {
    let t0 = Instant::now();
    let interval = Duration::from_secs(10);
    let mut targets = fleet(4).to_vec();
    targets[2].gpus = 8;
    let mut s = Schedule::default();
    // Never read: the 8-GPU node first, then in order; a limit keeps the first.
    assert_eq!(s.due(&targets, t0, interval, usize::MAX), [2, 0, 1, 3]);
    assert_eq!(s.due(&targets, t0, interval, 2), [2, 0]);
    s.answered(targets[0].node.clone(), t0, 0);
    s.answered(targets[1].node.clone(), t0 + Duration::from_secs(5), 0);
    s.answered(targets[2].node.clone(), t0 + Duration::from_secs(5), 0);
    // gpu-3 never read; gpu-2 (8 GPUs) outranks gpu-0 though read later.
    assert_eq!(s.due(&targets, t0 + Duration::from_secs(20), interval, usize::MAX), [3, 2, 0, 1]);
    // Read within the interval: not due.
    assert_eq!(s.due(&targets, t0 + Duration::from_secs(12), interval, usize::MAX), [3, 0]);
}

#[test]
fn a_failing_reporter_waits_longer_each_time_up_to_ten_minutes() {
    let t0 = Instant::now();
    let mut s = Schedule::default();
    let node = Sym::new("gpu-9");
    let waits: Vec<u64> = (0..10).map(|_| s.failed(node.clone(), t0, Duration::from_secs(10)).as_secs()).collect();
    assert_eq!(waits, [20, 40, 80, 160, 320, 600, 600, 600, 600, 600]);
    let t = [target("gpu-9")];
    assert!(s.due(&t, t0 + Duration::from_secs(599), Duration::from_secs(10), 9).is_empty());
    assert_eq!(s.due(&t, t0 + Duration::from_secs(600), Duration::from_secs(10), 9), [0]);
}

/// An hour of a 2,000-node fleet: the requests stay within the budget,
/// whatever the interval asks for, and every node is read in turn.
#[tokio::test]
async fn an_hour_on_a_large_fleet_costs_the_budget_and_no_more() {
    let targets = fleet(2000);
    let reader = Fake { reads: AtomicUsize::new(0), answer: |_| Ok(Vec::new()) };
    let mut reader = reader;
    let budget = Budget::new(0.5);
    let mut p = Poller::new(Feed::DcgmExporter);
    let t0 = Instant::now();
    let interval = Duration::from_secs(10);
    let mut covered = Coverage::default();
    for second in 0..3600 {
        let now = t0 + Duration::from_secs(second);
        let events = p.round(Found::Targets(targets.clone()), &mut reader, Some(&budget), interval, now).await;
        for e in events {
            if let ModelEvent::Coverage { coverage, .. } = e {
                covered = coverage;
            }
        }
    }
    let reads = reader.reads.load(Ordering::Relaxed);
    assert!(reads <= BURST as usize + 1800, "{reads} requests in an hour at 0.5/s");
    assert!(reads >= 1800, "{reads}: the budget is used");
    assert_eq!(covered.reporters, 2000);
    assert_eq!(covered.read as usize, reads.min(2000));
    assert_eq!(covered.budget, Some(0.5));
}

/// Every answer a 403: the feed says forbidden once, and asks again less
/// and less often (was: every reporter, every round).
#[tokio::test]
async fn a_forbidden_feed_backs_off_and_says_so() {
    let targets = fleet(50);
    let mut reader =
        Fake { reads: AtomicUsize::new(0), answer: |_| Err(ReadError::Forbidden("needs get pods/proxy".into())) };
    let mut p = Poller::new(Feed::Agents);
    let t0 = Instant::now();
    let mut said = Vec::new();
    for second in 0..3600 {
        let now = t0 + Duration::from_secs(second);
        let events = p.round(Found::Targets(targets.clone()), &mut reader, None, Duration::from_secs(10), now).await;
        said.extend(states(&events));
    }
    let reads = reader.reads.load(Ordering::Relaxed);
    // The first round asks all 50 before the first 403 is seen; then one probe per hold.
    assert!(reads <= 50 + 20, "{reads} requests in an hour");
    assert!(said.iter().all(|s| matches!(s, FeedState::Unavailable(FeedProblem::Forbidden(_)))), "{said:?}");
    let FeedState::Unavailable(FeedProblem::Forbidden(why)) = &said[0] else { unreachable!() };
    assert!(why.contains("needs get pods/proxy") && why.contains("asked again in 5s"), "{why}");
}

#[tokio::test]
async fn a_reporter_that_goes_takes_its_nodes_data_with_it() {
    let mut reader = Fake { reads: AtomicUsize::new(0), answer: |_| Ok(Vec::new()) };
    let mut p = Poller::new(Feed::Agents);
    let t0 = Instant::now();
    let interval = Duration::from_secs(10);
    let events = p.round(Found::Targets(fleet(2)), &mut reader, None, interval, t0).await;
    assert_eq!(states(&events), [FeedState::Live]);
    let events = p.round(Found::Targets(fleet(1)), &mut reader, None, interval, t0).await;
    let deleted: Vec<&ModelEvent> = events.iter().filter(|e| matches!(e, ModelEvent::Delete(_))).collect();
    assert!(
        matches!(deleted[..], [ModelEvent::Delete(ObjectKey::Devices(n))] if n.as_str() == "gpu-00001"),
        "{events:?}"
    );
    // Nothing due and nothing changed: nothing sent, no analysis for nothing.
    let events = p.round(Found::Targets(fleet(1)), &mut reader, None, interval, t0).await;
    assert!(events.is_empty(), "{events:?}");
    let events = p.round(Found::Targets(Arc::from([])), &mut reader, None, interval, t0).await;
    assert!(matches!(states(&events)[..], [FeedState::Unavailable(FeedProblem::Missing(_))]), "{events:?}");
}
