//! Feed health is said one way: the status bar, the text snapshot and the
//! JSON snapshot name the same feeds in the same states, and a reconnecting
//! feed (data that may be stale) is in all three, not only the cockpit.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

use std::sync::Arc;

use kgpu::analysis::{self, Thresholds};
use kgpu::app::App;
use kgpu::model::{Cluster, Feed, FeedProblem, FeedState, ModelEvent, SourceInfo, SourceKind};
use kgpu::ui::{self, Context, Theme};
use kgpu::view_model::panes::Views;
use kgpu::view_model::{feeds, json, text};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

const NOW: i64 = 1_796_029_200;

fn snapshot() -> kgpu::model::Snapshot {
    let mut cluster = Cluster::new(SourceInfo { kind: SourceKind::Kube, name: "lab".into() });
    let mut events = vec![ModelEvent::Clock(NOW - 300)];
    for feed in [Feed::Nodes, Feed::Pods, Feed::Workloads] {
        events.push(ModelEvent::Resync { feed, objects: Vec::new() });
    }
    events.push(ModelEvent::Clock(NOW - 120));
    events.push(ModelEvent::Feed {
        feed: Feed::Pods,
        state: FeedState::Reconnecting { since: NOW - 120, error: "connection refused".into() },
    });
    events.push(ModelEvent::Feed {
        feed: Feed::Workloads,
        state: FeedState::Unavailable(FeedProblem::Missing("kueue.x-k8s.io is not installed".into())),
    });
    events.push(ModelEvent::Clock(NOW));
    cluster.apply_all(events);
    cluster.snapshot()
}

#[test]
fn the_status_bar_text_and_json_agree_on_every_feed() {
    let snap = snapshot();
    let health = feeds::health(&snap, NOW);
    let state = |f: Feed| health.iter().find(|h| h.feed == f).map(|h| h.state);
    assert_eq!(state(Feed::Nodes), Some("live"));
    assert_eq!(state(Feed::Pods), Some("reconnecting"));
    assert_eq!(state(Feed::Workloads), Some("not installed"));

    let (bar, _) = feeds::summary(&snap, NOW);
    // The screen is as current as its oldest feed: the stale pods, not the live nodes.
    assert!(bar.starts_with("data 2m · "), "{bar}");
    assert!(bar.contains("pods: reconnecting 2m"), "{bar}");
    assert!(bar.contains("kueue workloads: not installed"), "{bar}");

    let a = analysis::analyze(&snap, NOW, &Thresholds::default());
    let doc = serde_json::to_value(json::document(&snap, &a, None, None)).unwrap();
    assert_eq!(doc["feeds"]["pods"]["state"], "reconnecting");
    assert_eq!(doc["feeds"]["pods"]["reason"], "connection refused");
    // Its data was last known current when the connection broke, not when
    // it last changed.
    assert_eq!(doc["feeds"]["pods"]["ageSeconds"], 120, "{}", doc["feeds"]);
    // A live watch is current, however long ago its objects last changed.
    assert_eq!(doc["feeds"]["nodes"]["ageSeconds"], 0, "{}", doc["feeds"]);
    assert_eq!(doc["feeds"]["kueue workloads"]["state"], "not installed");
    assert_eq!(doc["feeds"]["nodes"]["state"], "live");

    let out = text::render(&snap, &a, None, None);
    assert!(out.contains("feed pods: reconnecting, data 2m old (connection refused)"), "{out}");
    assert!(out.contains("feed kueue workloads: not installed (kueue.x-k8s.io is not installed)"), "{out}");
    assert!(!out.contains("feed nodes"), "a live feed is not a problem: {out}");

    // The cockpit's status bar says the same.
    let views = Views::build(Arc::new(snap), NOW, &Thresholds::default(), None);
    let app = App::new(true, "dark", false);
    let mut terminal = Terminal::new(TestBackend::new(200, 20)).unwrap();
    let ctx = Context { source: "lab".into(), subtitle: String::new(), production: false };
    terminal
        .draw(|f| {
            ui::draw(f, &app, &views, &Theme::builtin("dark"), &ctx);
        })
        .unwrap();
    let screen = format!("{}", terminal.backend());
    assert!(screen.contains("pods: reconnecting 2m"), "{screen}");
    // The Fleet headline, where the eye starts, says its numbers are old.
    let headline = screen.lines().nth(1).unwrap_or("");
    assert!(headline.contains(" as of 2m ago · 0 GPUs"), "{screen}");
    assert_eq!(feeds::stale_for(&views.snap, NOW), Some(120));
}

/// A screen whose feeds are all live does not say its data is old.
#[test]
fn a_live_headline_carries_no_age() {
    let mut cluster = Cluster::new(SourceInfo { kind: SourceKind::Kube, name: "lab".into() });
    cluster.apply_all(vec![
        ModelEvent::Clock(NOW - 300),
        ModelEvent::Resync { feed: Feed::Nodes, objects: Vec::new() },
        ModelEvent::Clock(NOW),
    ]);
    assert_eq!(feeds::stale_for(&cluster.snapshot(), NOW), None);
}

/// An object kgpu could not read is named with its reason in every view,
/// not only counted.
#[test]
fn a_skipped_object_is_named_with_its_reason_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("dump.json");
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-1", "creationTimestamp": "2026-11-30T08:00:00Z"},
         "status": {"allocatable": {"nvidia.com/gpu": "8"}, "capacity": {"nvidia.com/gpu": "8"}}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bad", "namespace": "ml", "creationTimestamp": "2026-11-30T08:00:00Z"},
         "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "lots"}}}]}}
    ]});
    std::fs::write(&dump, list.to_string()).unwrap();
    let bin = env!("CARGO_BIN_EXE_kgpu");
    let run = |args: &[&str]| std::process::Command::new(bin).args(args).arg("--file").arg(&dump).output().unwrap();
    let text = run(&["snapshot"]);
    let (stdout, stderr) = (String::from_utf8_lossy(&text.stdout), String::from_utf8_lossy(&text.stderr));
    for out in [&stdout, &stderr] {
        assert!(
            out.contains("feed pods: 1 object(s) skipped as malformed")
                && out.contains("Pod bad")
                && out.contains("lots"),
            "{out}"
        );
    }
    let json: serde_json::Value = serde_json::from_slice(&run(&["snapshot", "-o", "json"]).stdout).unwrap();
    assert_eq!(json["feeds"]["pods"]["skipped"], 1);
    assert!(json["feeds"]["pods"]["skippedReason"].as_str().unwrap().contains("lots"), "{}", json["feeds"]);
    // The cockpit's status line.
    let (snap, now) = kgpu::runtime::load::once(&kgpu::runtime::source::Source::File(vec![dump])).unwrap();
    let (bar, _) = feeds::summary(&snap, now);
    assert!(bar.contains("pods: 1 skipped"), "{bar}");
}

/// A list that never completed: the view says it is partial (and the
/// one-shot commands exit 1 on it, `complete_or_failure`).
#[test]
fn a_feed_that_never_listed_marks_the_snapshot_incomplete() {
    let mut cluster = Cluster::new(SourceInfo { kind: SourceKind::Kube, name: "lab".into() });
    cluster.apply_all([
        ModelEvent::Clock(NOW),
        ModelEvent::Resync { feed: Feed::Nodes, objects: Vec::new() },
        ModelEvent::Feed { feed: Feed::Pods, state: FeedState::Syncing },
        ModelEvent::Feed {
            feed: Feed::Events,
            state: FeedState::Reconnecting { since: NOW - 30, error: "connection reset".into() },
        },
    ]);
    let snap = cluster.snapshot();
    assert_eq!(feeds::incomplete(&snap), [Feed::Pods, Feed::Events], "never listed, however it failed");
    let a = analysis::analyze(&snap, NOW, &Thresholds::default());
    let out = text::render(&snap, &a, None, None);
    assert!(out.contains("feed pods: never listed — INCOMPLETE"), "{out}");
    let doc = serde_json::to_value(json::document(&snap, &a, None, None)).unwrap();
    assert_eq!(doc["feeds"]["pods"]["state"], "syncing");
    // Once listed, a feed that later reconnects is stale, not incomplete.
    cluster.apply(ModelEvent::Resync { feed: Feed::Pods, objects: Vec::new() });
    cluster.apply(ModelEvent::Resync { feed: Feed::Events, objects: Vec::new() });
    assert!(feeds::incomplete(&cluster.snapshot()).is_empty());
}

/// Credentials that may not read a feed leave the view partial (a one-shot
/// exits 1 and says which); a CRD that is not installed has nothing to miss.
#[test]
fn a_forbidden_feed_is_partial_data_a_missing_crd_is_not() {
    let mut cluster = Cluster::new(SourceInfo { kind: SourceKind::Kube, name: "lab".into() });
    cluster.apply_all([
        ModelEvent::Clock(NOW),
        ModelEvent::Resync { feed: Feed::Nodes, objects: Vec::new() },
        ModelEvent::Feed {
            feed: Feed::Pods,
            state: FeedState::Unavailable(FeedProblem::Forbidden("RBAC: cannot list/watch pods".into())),
        },
        ModelEvent::Feed {
            feed: Feed::Workloads,
            state: FeedState::Unavailable(FeedProblem::Missing("CRD not installed".into())),
        },
    ]);
    let snap = cluster.snapshot();
    assert!(feeds::incomplete(&snap).contains(&Feed::Pods));
    assert!(!feeds::incomplete(&snap).contains(&Feed::Workloads));
    let a = analysis::analyze(&snap, NOW, &Thresholds::default());
    let out = text::render(&snap, &a, None, None);
    assert!(out.contains("feed pods: forbidden (RBAC: cannot list/watch pods) — INCOMPLETE"), "{out}");
}

/// The data age says how far behind the cluster the screen may be: a quiet
/// but live watch is current, however long ago its objects last changed;
/// the polled agents are as old as their last answer; the status bar shows
/// the oldest.
#[test]
fn the_data_age_is_how_old_the_data_may_be_and_the_bar_shows_the_oldest() {
    let mut cluster = Cluster::new(SourceInfo { kind: SourceKind::Kube, name: "lab".into() });
    cluster.apply_all(vec![
        ModelEvent::Clock(NOW - 3600),
        ModelEvent::Resync { feed: Feed::Nodes, objects: Vec::new() },
        ModelEvent::Clock(NOW - 40),
        ModelEvent::Resync { feed: Feed::Agents, objects: Vec::new() },
        ModelEvent::Clock(NOW),
    ]);
    let snap = cluster.snapshot();
    let health = feeds::health(&snap, NOW);
    let age = |f: Feed| health.iter().find(|h| h.feed == f).and_then(|h| h.age);
    assert_eq!(age(Feed::Nodes), Some(0), "listed an hour ago and watched since");
    assert_eq!(age(Feed::Agents), Some(40));
    assert_eq!(feeds::summary(&snap, NOW).0, "data 40s");
    // The demo's simulated agents are not polled: they are current.
    let mut demo = Cluster::new(SourceInfo { kind: SourceKind::Demo, name: "default".into() });
    demo.apply_all(vec![
        ModelEvent::Clock(NOW - 40),
        ModelEvent::Resync { feed: Feed::Agents, objects: Vec::new() },
        ModelEvent::Clock(NOW),
    ]);
    assert_eq!(feeds::summary(&demo.snapshot(), NOW).0, "data 0s");
}

/// An API server that stops answering stalls every feed: the status bar
/// says so in one item that fits 80 columns, not nine cut off.
#[test]
fn many_stalled_feeds_are_one_item_in_the_status_bar() {
    let mut cluster = Cluster::new(SourceInfo { kind: SourceKind::Kube, name: "lab".into() });
    let mut events = vec![ModelEvent::Clock(NOW - 100)];
    let feeds = [Feed::Nodes, Feed::Pods, Feed::Events, Feed::Workloads];
    for feed in feeds {
        events.push(ModelEvent::Resync { feed, objects: Vec::new() });
    }
    for (i, feed) in feeds.into_iter().enumerate() {
        let since = NOW - 40 - i as i64;
        events.push(ModelEvent::Feed { feed, state: FeedState::Reconnecting { since, error: "stalled".into() } });
    }
    events.push(ModelEvent::Clock(NOW));
    cluster.apply_all(events);
    let (bar, _) = feeds::summary(&cluster.snapshot(), NOW);
    assert_eq!(bar, "data 43s · 4 feeds reconnecting 43s");
}
