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
    assert!(bar.contains("pods: reconnecting 2m"), "{bar}");
    assert!(bar.contains("kueue workloads: not installed"), "{bar}");

    let a = analysis::analyze(&snap, NOW, &Thresholds::default());
    let doc = serde_json::to_value(json::document(&snap, &a, None, None)).unwrap();
    assert_eq!(doc["feeds"]["pods"]["state"], "reconnecting");
    assert_eq!(doc["feeds"]["pods"]["reason"], "connection refused");
    assert_eq!(doc["feeds"]["pods"]["ageSeconds"], 300, "{}", doc["feeds"]);
    assert_eq!(doc["feeds"]["kueue workloads"]["state"], "not installed");
    assert_eq!(doc["feeds"]["nodes"]["state"], "live");

    let out = text::render(&snap, &a, None);
    assert!(out.contains("feed pods: reconnecting, data 5m old (connection refused)"), "{out}");
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
}
