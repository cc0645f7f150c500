//! Actions without a cluster: the app's confirm / dry-run / cancel /
//! read-only flows (keys in, effects out), and the executor on the demo's
//! simulated cluster, with its audit log — including a repartition that the
//! simulated mig-manager finishes and one it wedges.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

use std::sync::Arc;
use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use kgpu::actions::audit::AuditLog;
use kgpu::actions::backend::Backend;
use kgpu::actions::defrag::RESERVATION_TAINT;
use kgpu::actions::exec::Executor;
use kgpu::actions::{Action, ActionRequest, PlanTarget, Progress};
use kgpu::analysis::Thresholds;
use kgpu::analysis::index::Index;
use kgpu::app::{App, Effect, Msg, Overlay, Pane};
use kgpu::model::{Snapshot, SourceInfo, SourceKind, Sym};
use kgpu::sources::sim::{driver, scenarios};
use kgpu::view_model::panes::Views;
use serde_json::Value;
use tokio::sync::{mpsc, watch};

fn views(scenario: &str) -> Views {
    let (snap, now) = kgpu::runtime::load::demo(scenario, 1, 0).unwrap();
    Views::build(Arc::new(snap), now, &Thresholds::default(), None)
}

fn key(app: &mut App, views: &Views, c: char) -> Vec<Effect> {
    app.update(Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)), views)
}

/// An app on the Fleet pane's node list, first node selected.
fn fleet_app(read_only: bool) -> App {
    let mut app = App::new(read_only, "dark", true);
    app.pane = Pane::Fleet;
    app.aggregate = Some(false);
    app
}

fn notice(app: &App) -> String {
    app.notice.as_ref().map(|n| n.text.clone()).unwrap_or_default()
}

#[test]
fn on_production_a_disruptive_action_runs_only_once_its_target_is_typed() {
    let v = views("default");
    let mut app = fleet_app(false).with_production(true);
    let first = v.nodes[0].name.clone();
    let press = |app: &mut App, code: KeyCode| app.update(Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)), &v);
    key(&mut app, &v, 'r');
    assert!(matches!(&app.overlay, Some(Overlay::Confirm(c)) if c.typed.as_deref() == Some("")));
    // y is a letter here, and enter with the wrong name runs nothing.
    assert!(key(&mut app, &v, 'y').is_empty());
    assert!(press(&mut app, KeyCode::Enter).is_empty());
    assert!(notice(&app).starts_with(&format!("type {first} exactly")), "{}", notice(&app));
    press(&mut app, KeyCode::Backspace);
    for c in first.as_str().chars() {
        assert!(key(&mut app, &v, c).is_empty());
    }
    let drain = Action::Drain { node: first, gpu_only: false, force: false };
    assert_eq!(
        press(&mut app, KeyCode::Enter),
        [Effect::Execute { id: 1, request: ActionRequest { action: drain.clone(), dry_run: false } }]
    );
    // tab dry-runs without typing; a cordon (not disruptive) needs no typing at all.
    key(&mut app, &v, 'r');
    assert_eq!(
        press(&mut app, KeyCode::Tab),
        [Effect::Execute { id: 2, request: ActionRequest { action: drain, dry_run: true } }]
    );
    key(&mut app, &v, 'c');
    assert!(matches!(&app.overlay, Some(Overlay::Confirm(c)) if c.typed.is_none()));
}

#[test]
fn read_only_refuses_every_action_and_says_so() {
    let v = views("default");
    let mut app = fleet_app(true);
    for c in ['c', 'u', 'r', 'm', 'x'] {
        assert!(key(&mut app, &v, c).is_empty(), "{c}");
        assert!(app.overlay.is_none(), "{c}: no dialog in read-only mode");
        assert!(notice(&app).starts_with("read-only"), "{c}: {}", notice(&app));
    }
    app.pane = Pane::Gangs;
    assert!(key(&mut app, &v, 'R').is_empty());
    assert!(notice(&app).starts_with("read-only"));
}

#[test]
fn confirm_runs_dry_runs_or_cancels() {
    let v = views("default");
    let first = v.nodes[0].name.clone();
    let mut app = fleet_app(false);

    // c opens the dialog; n cancels: nothing runs.
    assert!(key(&mut app, &v, 'c').is_empty());
    assert!(matches!(&app.overlay, Some(Overlay::Confirm(c)) if c.action == Action::Cordon { node: first.clone() }));
    assert!(key(&mut app, &v, 'n').is_empty());
    assert!(app.overlay.is_none());
    assert_eq!(notice(&app), "cordon cancelled");

    // y runs it.
    key(&mut app, &v, 'c');
    let effects = key(&mut app, &v, 'y');
    assert_eq!(
        effects,
        [Effect::Execute {
            id: 1,
            request: ActionRequest { action: Action::Cordon { node: first.clone() }, dry_run: false }
        }]
    );
    assert_eq!(app.in_flight.len(), 1);

    // enter confirms a cordon, never a drain: a reflexive enter evicts nothing.
    key(&mut app, &v, 'c');
    let enter = |app: &mut App| app.update(Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)), &v);
    assert_eq!(enter(&mut app).len(), 1);
    key(&mut app, &v, 'r');
    assert!(enter(&mut app).is_empty());
    assert!(matches!(&app.overlay, Some(Overlay::Confirm(_))), "the dialog stays open");
    assert!(notice(&app).starts_with("enter does not confirm a drain"), "{}", notice(&app));
    key(&mut app, &v, 'n');

    // d in the dialog is a server-side dry run.
    key(&mut app, &v, 'r');
    let effects = key(&mut app, &v, 'd');
    assert_eq!(
        effects,
        [Effect::Execute {
            id: 3,
            request: ActionRequest {
                action: Action::Drain { node: first.clone(), gpu_only: false, force: false },
                dry_run: true
            }
        }]
    );

    // g toggles "GPU pods only" on a drain; the blast radius is recomputed.
    key(&mut app, &v, 'r');
    key(&mut app, &v, 'g');
    assert!(
        matches!(&app.overlay, Some(Overlay::Confirm(c)) if c.action == Action::Drain { node: first, gpu_only: true, force: false })
    );
    key(&mut app, &v, 'q');

    // X with three actions on the selected node asks which...
    let x = |app: &mut App| app.update(Msg::Key(KeyEvent::new(KeyCode::Char('X'), KeyModifiers::SHIFT)), &v);
    assert_eq!(app.in_flight.iter().map(|f| f.id).collect::<Vec<_>>(), [1, 2, 3]);
    assert!(x(&mut app).is_empty());
    assert!(notice(&app).contains("select the node of the one to cancel"), "{}", notice(&app));
    // ...a final report clears its own action only...
    for id in [2, 3] {
        app.update(Msg::Action(Progress { id, text: "done".into(), error: false, done: true }), &v);
    }
    assert_eq!(app.in_flight.iter().map(|f| f.id).collect::<Vec<_>>(), [1]);
    // ...the one left is cancelled...
    assert_eq!(x(&mut app), [Effect::Cancel(1)]);
    // ...and with actions on two nodes, the selected node's.
    key(&mut app, &v, 'j');
    key(&mut app, &v, 'c');
    key(&mut app, &v, 'y');
    assert_eq!(x(&mut app), [Effect::Cancel(4)]);
    key(&mut app, &v, 'k');
    assert_eq!(x(&mut app), [Effect::Cancel(1)]);
    for id in [1, 4] {
        app.update(Msg::Action(Progress { id, text: "done".into(), error: false, done: true }), &v);
    }
    assert!(x(&mut app).is_empty());
    assert_eq!(notice(&app), "no action is running");
}

#[test]
fn repartition_offers_only_the_configs_of_the_nodes_gpu() {
    let v = views("mig-mismatch");
    let mut app = App::new(false, "dark", true);
    app.pane = Pane::Mig;
    key(&mut app, &v, 'm');
    let Some(Overlay::MigPicker { configs, .. }) = &app.overlay else { panic!("{:?}", notice(&app)) };
    assert!(configs.iter().any(|c| c == "all-3g.40gb"), "{configs:?}");
    assert!(configs.iter().all(|c| !c.contains("1g.5gb")), "A100/H100-80GB profiles only: {configs:?}");
}

/// The demo's simulated cluster with an executor over it, fast.
struct Demo {
    executor: Executor,
    reports: mpsc::Receiver<Progress>,
    snapshots: watch::Receiver<Arc<Snapshot>>,
    cancel: watch::Sender<std::collections::BTreeSet<u64>>,
    _dir: tempfile::TempDir,
}

fn demo(scenario: &str) -> Demo {
    let sim = scenarios::build(scenario, 1).unwrap();
    let (events_tx, events_rx) = mpsc::channel(1024);
    let (snapshots, _model) =
        kgpu::runtime::source::spawn_model(SourceInfo { kind: SourceKind::Demo, name: scenario.into() }, events_rx);
    // One simulated second every 20 ms.
    let (handle, _sim) = driver::spawn(sim, events_tx, Duration::from_millis(20));
    let (reports_tx, reports) = mpsc::channel(256);
    let (cancel, cancel_rx) = watch::channel(Default::default());
    let dir = tempfile::tempdir().unwrap();
    let executor = Executor {
        backend: Backend::Sim(handle),
        snapshots: snapshots.clone(),
        reports: reports_tx,
        audit: Some(AuditLog { path: dir.path().join("audit.jsonl") }),
        context: format!("demo:{scenario}"),
        user: "tester".into(),
        mig_timeout: Duration::from_secs(8),
        drain_timeout: Duration::from_secs(2),
        place_timeout: Duration::from_secs(20),
        id: 7,
        cancel: cancel_rx,
    };
    Demo { executor, reports, snapshots, cancel, _dir: dir }
}

impl Demo {
    async fn synced(&mut self) {
        while self.snapshots.borrow().nodes.is_empty() {
            self.snapshots.changed().await.unwrap();
        }
    }

    fn audit(&self) -> Vec<Value> {
        let path = &self.executor.audit.as_ref().unwrap().path;
        std::fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    /// Every report so far, progress and final, in order.
    fn reports_so_far(&mut self) -> Vec<Progress> {
        let mut out = Vec::new();
        while let Ok(m) = self.reports.try_recv() {
            out.push(m);
        }
        out
    }

    /// The final report of the last action.
    async fn last_report(&mut self) -> (String, bool) {
        let mut last = None;
        while let Ok(m) = self.reports.try_recv() {
            if let Progress { text, error, done: true, .. } = m {
                last = Some((text, error));
            }
        }
        last.expect("a final report")
    }

    /// Runs `request` on an executor whose model lags the cluster (a slow
    /// watch: it still shows every pod when the cancel comes), cancels it at
    /// its first report starting with `eviction` (the API server, here the
    /// simulation, has taken that eviction), and returns the reports after.
    async fn cancel_on_a_lagging_model(&mut self, request: ActionRequest, eviction: &str) -> Vec<Progress> {
        let (_frozen, lagging) = watch::channel(self.snapshots.borrow().clone());
        let executor = Executor { snapshots: lagging, ..self.executor.clone() };
        let run = tokio::spawn(async move { executor.run(request).await });
        loop {
            match self.reports.recv().await.expect("reports") {
                Progress { text, .. } if text.starts_with(eviction) => break,
                Progress { done: true, text, .. } => panic!("finished before an eviction: {text}"),
                _ => {}
            }
        }
        self.cancel.send_modify(|c| {
            c.insert(7);
        });
        run.await.unwrap();
        std::iter::from_fn(|| self.reports.try_recv().ok()).collect()
    }

    /// Drains `node` to its goal: its pods gone, the report naming where
    /// their replacements went.
    async fn drain(&mut self, node: &Sym, gpu_only: bool) {
        let action = Action::Drain { node: node.clone(), gpu_only, force: false };
        self.executor.run(ActionRequest { action, dry_run: false }).await;
        let (text, error) = self.last_report().await;
        assert!(!error, "{text}");
        assert!(text.contains("all gone, replacements: "), "{text}");
    }

    /// Waits for the model to show what an action did.
    async fn until(&mut self, what: &str, check: impl Fn(&Snapshot) -> bool) {
        let wait = async {
            while !check(&self.snapshots.borrow_and_update()) {
                self.snapshots.changed().await.unwrap();
            }
        };
        tokio::time::timeout(Duration::from_secs(10), wait).await.unwrap_or_else(|_| panic!("timed out: {what}"));
    }
}

#[tokio::test]
async fn demo_actions_are_audited_and_dry_runs_change_nothing() {
    let mut d = demo("default");
    d.synced().await;
    let node = d.snapshots.borrow().nodes.keys().next().unwrap().clone();

    d.executor.run(ActionRequest { action: Action::Cordon { node: node.clone() }, dry_run: true }).await;
    assert!(!d.snapshots.borrow().nodes[&node].unschedulable, "a dry run changes nothing");
    d.executor.run(ActionRequest { action: Action::Cordon { node: node.clone() }, dry_run: false }).await;
    assert!(d.snapshots.borrow().nodes[&node].unschedulable, "a cordon ends when the watch shows it");
    d.executor.run(ActionRequest { action: Action::Cordon { node: node.clone() }, dry_run: false }).await;
    let (text, error) = d.last_report().await;
    assert!(!error);
    assert_eq!(text, format!("node/{node} already cordoned"), "repeating an action is harmless");

    let audit = d.audit();
    // The dry run when it ends; each real run when it starts and when it ends.
    assert_eq!(
        audit.iter().map(|e| e["result"].as_str().unwrap()).collect::<Vec<_>>(),
        ["ok", "started", "ok", "started", "ok"]
    );
    let first = &audit[0];
    assert_eq!(first["action"], "cordon");
    assert_eq!(first["targets"][0], format!("node/{node}"));
    assert_eq!(first["dryRun"], true);
    assert_eq!(first["result"], "ok");
    assert_eq!(first["context"], "demo:default");
    assert_eq!(first["user"], "tester");
    assert!(first["time"].as_str().unwrap().ends_with('Z'), "RFC 3339 UTC: {}", first["time"]);
    assert_eq!(audit[2]["dryRun"], false);
    assert!(audit[2]["detail"].as_str().unwrap().contains("cordoned"));
}

#[tokio::test(start_paused = true)]
async fn a_cordon_the_watch_never_shows_is_reported_not_claimed() {
    let mut d = demo("default");
    d.synced().await;
    let node = d.snapshots.borrow().nodes.keys().next().unwrap().clone();
    // A stalled feed: the executor's view never moves past this snapshot.
    let (_frozen, stalled) = watch::channel(d.snapshots.borrow().clone());
    d.executor.snapshots = stalled;
    d.executor.run(ActionRequest { action: Action::Cordon { node }, dry_run: false }).await;
    let (text, error) = d.last_report().await;
    assert!(error, "{text}");
    assert!(text.contains("the watch still shows it schedulable") && text.contains("kubectl get node"), "{text}");
    assert_eq!(d.audit().last().unwrap()["result"], "error");
}

#[tokio::test]
async fn nothing_changes_when_the_audit_log_cannot_be_written() {
    let mut d = demo("default");
    d.synced().await;
    let node = d.snapshots.borrow().nodes.keys().next().unwrap().clone();
    // A path under a regular file: no directory can be made there.
    let blocker = d._dir.path().join("not-a-dir");
    std::fs::write(&blocker, "").unwrap();
    d.executor.audit = Some(AuditLog { path: blocker.join("audit.jsonl") });
    d.executor.run(ActionRequest { action: Action::Cordon { node: node.clone() }, dry_run: false }).await;
    let (text, error) = d.last_report().await;
    assert!(error && text.starts_with("cordon not started: the audit log"), "{text}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!d.snapshots.borrow().nodes[&node].unschedulable, "the node was not cordoned");
    d.executor.audit = None;
    d.executor
        .run(ActionRequest { action: Action::Drain { node, gpu_only: true, force: false }, dry_run: false })
        .await;
    let (text, _) = d.last_report().await;
    assert!(text.contains("not started: there is no audit log"), "{text}");
}

#[tokio::test]
async fn the_simulated_mig_manager_finishes_a_repartition_and_wedges_another() {
    let mut d = demo("mig-mismatch");
    d.synced().await;

    // A healthy MIG node: cordon, drain GPU pods, label, wait, uncordon.
    let healthy = Sym::new("mig-01");
    d.executor
        .run(ActionRequest {
            action: Action::RepartitionMig { node: healthy.clone(), config: "all-3g.40gb".into() },
            dry_run: false,
        })
        .await;
    let reports = d.reports_so_far();
    // The minute-long wait reports each state the mig-manager writes, with the time so far.
    assert!(
        reports.iter().any(|r| !r.done && r.text.starts_with("mig-01: mig.config.state pending after ")),
        "{:?}",
        reports.iter().map(|r| &r.text).collect::<Vec<_>>()
    );
    let (text, error) =
        reports.iter().rev().find(|r| r.done).map(|r| (r.text.clone(), r.error)).expect("a final report");
    assert!(!error, "{text}");
    assert!(text.contains("repartitioned to all-3g.40gb and uncordoned"), "{text}");
    d.until("mig-01 uncordoned with the new config", |s| {
        let n = &s.nodes[&healthy];
        !n.unschedulable && n.operator.mig_config_state.as_ref().is_some_and(|s| s.as_str() == "success")
    })
    .await;

    // mig-08's mig-manager is wedged: the action reports it and leaves the node cordoned.
    let wedged = Sym::new("mig-08");
    d.executor
        .run(ActionRequest {
            action: Action::RepartitionMig { node: wedged.clone(), config: "all-2g.20gb".into() },
            dry_run: false,
        })
        .await;
    let (text, error) = d.last_report().await;
    assert!(error);
    assert!(text.contains("looks wedged") && text.contains("stays cordoned"), "{text}");
    assert!(d.snapshots.borrow().nodes[&wedged].unschedulable);
    let audit = d.audit();
    let last = audit.last().unwrap();
    assert_eq!(last["action"], "repartition-mig");
    assert_eq!(last["targets"], serde_json::json!(["node/mig-08", "mig.config=all-2g.20gb"]));
    assert_eq!(last["result"], "error");
}

#[tokio::test]
async fn cancel_stops_a_running_action_and_the_audit_says_so() {
    let mut d = demo("mig-mismatch");
    d.synced().await;
    let executor = d.executor.clone();
    let run = tokio::spawn(async move {
        executor
            .run(ActionRequest {
                action: Action::RepartitionMig { node: Sym::new("mig-08"), config: "all-2g.20gb".into() },
                dry_run: false,
            })
            .await
    });
    tokio::time::sleep(Duration::from_millis(700)).await;
    d.cancel.send_modify(|c| {
        c.insert(7);
    });
    run.await.unwrap();
    let (text, error) = d.last_report().await;
    assert!(error);
    assert!(text.starts_with("repartition-mig cancelled"), "{text}");
    // It says what was done, what is left, and how to undo it.
    assert!(text.contains("nvidia.com/mig.config=all-2g.20gb set") && text.contains("stays cordoned"), "{text}");
    assert!(text.contains("undo: kubectl label node mig-08 nvidia.com/mig.config="), "{text}");
    assert!(text.contains("kubectl uncordon mig-08"), "{text}");
    assert!(d.snapshots.borrow().nodes[&Sym::new("mig-08")].unschedulable, "left cordoned, as it says");
    assert_eq!(d.audit().last().unwrap()["result"], "cancelled");
}

/// The plan's action as the app builds it from `x` then `y`, from the
/// demo's current snapshot.
fn plan_action(d: &Demo) -> ActionRequest {
    let snap = d.snapshots.borrow().clone();
    let v = Views::build(snap.clone(), snap.clock, &Thresholds::default(), None);
    let mut app = fleet_app(false);
    key(&mut app, &v, 'x');
    let effects = key(&mut app, &v, 'y');
    match effects.as_slice() {
        [Effect::Execute { request, .. }] => request.clone(),
        other => panic!("x, y gave {other:?}; notice {}", notice(&app)),
    }
}

fn reserved_nodes(snap: &Snapshot) -> Vec<String> {
    snap.nodes
        .values()
        .filter(|n| n.taints.iter().any(|t| t.key.as_str() == RESERVATION_TAINT))
        .map(|n| n.name.to_string())
        .collect()
}

#[tokio::test]
async fn the_defrag_plan_places_the_gang_on_the_nodes_it_freed_and_releases_them() {
    let mut d = demo("fragmented");
    d.synced().await;
    let request = plan_action(&d);
    let Action::RunPlan { target: PlanTarget::Gang(gang), reserve, evictions, .. } = request.action.clone() else {
        panic!("{request:?}")
    };
    d.executor.run(request).await;
    let (text, error) = d.last_report().await;
    assert!(!error, "{text}");
    assert!(text.contains("placed on"), "{text}");

    // The model shows the release a moment after the executor's last step.
    d.until("the reservation released", |s| reserved_nodes(s).is_empty()).await;
    let snap = d.snapshots.borrow().clone();
    let index = Index::build(&snap, snap.clock);
    let members = index.members(&gang);
    assert_eq!(members.len(), 2);
    // The gang runs on the nodes the plan reserved for it...
    for m in members {
        assert!(
            m.node.as_ref().is_some_and(|n| reserve.contains(n)),
            "{} on {:?}, reserved {reserve:?}",
            m.name,
            m.node
        );
    }
    // ...the moved pods' replacements run elsewhere...
    for p in
        snap.pods.values().filter(|p| p.owner.is_some() && p.created > 0 && !members.iter().any(|m| m.key() == p.key()))
    {
        if let Some(n) = p.node.clone()
            && reserve.contains(&n)
        {
            assert!(!evictions.contains(&p.key()), "{} was evicted but is still on {n}", p.name);
        }
    }
    let audit = d.audit();
    assert_eq!(audit.len(), 2, "a line when it starts, one when it ends");
    assert_eq!(
        (audit[0]["result"].as_str(), audit[0]["targets"].clone()),
        (Some("started"), audit[1]["targets"].clone())
    );
    assert_eq!(audit.last().unwrap()["result"], "ok");
    assert!(audit.last().unwrap()["targets"][0].as_str().unwrap().starts_with("target workload/"));
    // Nothing left to plan for.
    let v = Views::build(snap.clone(), snap.clock, &Thresholds::default(), None);
    assert!(v.analysis.pending.is_empty(), "{:?}", v.analysis.pending.iter().map(|p| &p.name).collect::<Vec<_>>());
}

/// On DRA nodes the plan's goal is the same: the moved pods' claims are
/// made again and allocated elsewhere, and the target's claim gets the
/// whole node the plan freed.
#[tokio::test]
async fn the_defrag_plan_frees_a_dra_node_and_the_targets_claim_gets_it() {
    use kgpu::model::{DraObject, PodKey};
    let mut d = demo("dra-claims");
    d.synced().await;
    let request = plan_action(&d);
    let Action::RunPlan { target: PlanTarget::Pod(target), reserve, evictions, .. } = request.action.clone() else {
        panic!("{request:?}")
    };
    assert_eq!(target, PodKey::new("ml", "finetune-70b-0"));
    assert_eq!((reserve.len(), evictions.len()), (1, 2), "{reserve:?} {evictions:?}");
    d.executor.run(request).await;
    let (text, error) = d.last_report().await;
    assert!(!error, "{text}");
    assert!(text.contains("placed on"), "{text}");
    d.until("the reservation released", |s| reserved_nodes(s).is_empty()).await;
    let snap = d.snapshots.borrow().clone();
    let pod = &snap.pods[&target];
    assert_eq!(pod.node.as_ref(), Some(&reserve[0]));
    // Its claim holds eight devices of the node it was placed on.
    let generated = pod.claims[0].generated.clone().expect("its claim's name");
    let claim = snap
        .dra
        .values()
        .find_map(|o| match &**o {
            DraObject::Claim(c) if c.name == generated && !c.template => Some(c.clone()),
            _ => None,
        })
        .expect("its claim");
    assert_eq!((claim.allocated_node.as_ref(), claim.allocated.len()), (Some(&reserve[0]), 8));
    assert!(claim.reserved_for.contains(&pod.name));
    // The moved pods run again elsewhere with claims of their own.
    for evicted in &evictions {
        assert!(!snap.pods.contains_key(evicted), "{} evicted", evicted.name);
    }
    let moved = snap
        .pods
        .values()
        .filter(|p| p.owner.as_ref().is_some_and(|o| o.name.as_str() == "embed-5d8c7"))
        .filter(|p| p.node.as_ref().is_some_and(|n| *n != reserve[0]))
        .count();
    assert_eq!(moved, 6, "every embed replica runs off the freed node");
    let audit = d.audit();
    assert_eq!(audit.last().unwrap()["result"], "ok");
    // finetune-70b no longer waits; the H200 claim still does.
    let v = Views::build(snap.clone(), snap.clock, &Thresholds::default(), None);
    let names: Vec<_> = v.analysis.pending.iter().map(|p| p.name.to_string()).collect();
    assert_eq!(names, ["llm-serve-7f9c4-x2kq8"]);
}

#[tokio::test]
async fn a_cancelled_defrag_plan_leaves_no_reservation_behind() {
    let mut d = demo("fragmented");
    d.synced().await;
    let request = plan_action(&d);
    let Action::RunPlan { evictions, .. } = request.action.clone() else { panic!() };
    let after = d.cancel_on_a_lagging_model(request, "defrag: evicted").await;
    let evicted = 1 + after.iter().filter(|m| m.text.starts_with("defrag: evicted")).count();
    let Some(Progress { text, error, .. }) = after.into_iter().rfind(|m| m.done) else { panic!("a final report") };
    assert!(error);
    assert!(text.starts_with("run-defrag-plan cancelled") && text.contains("reservation released"), "{text}");
    // The report counts the evictions made, whatever the model showed at
    // the cancel (counted from the model, it said 0 here)...
    assert!(text.contains(&format!("cancelled: {evicted} evicted before the cancel")), "{evicted}: {text}");
    // ...and the model, once it caught up, agrees.
    d.until("the reservation released", |s| reserved_nodes(s).is_empty()).await;
    d.until("the evicted pods gone", |s| evictions.iter().filter(|k| !s.pods.contains_key(*k)).count() >= evicted)
        .await;
    assert_eq!(d.audit().last().unwrap()["result"], "cancelled");
}

#[test]
fn quitting_while_an_action_runs_asks_first() {
    let v = views("default");
    let mut app = fleet_app(false);
    key(&mut app, &v, 'r');
    assert_eq!(key(&mut app, &v, 'y').len(), 1);
    assert!(key(&mut app, &v, 'q').is_empty(), "no quit while a drain runs");
    assert!(matches!(app.overlay, Some(Overlay::QuitWhileRunning)));
    key(&mut app, &v, 'n');
    assert!(app.overlay.is_none() && !app.quit);
    key(&mut app, &v, 'q');
    assert_eq!(key(&mut app, &v, 'y'), [Effect::Quit]);
    // With nothing running, q quits at once.
    let mut idle = fleet_app(false);
    assert_eq!(key(&mut idle, &v, 'q'), [Effect::Quit]);
}

/// `kgpu ARGS` with its own data dir: (exit code, stdout + stderr, audit lines).
fn kgpu(args: &[&str]) -> (Option<i32>, String, Vec<Value>) {
    let data = tempfile::tempdir().unwrap();
    kgpu_in(data.path(), args)
}

/// `kgpu ARGS` with the data dir `data`.
fn kgpu_in(data: &std::path::Path, args: &[&str]) -> (Option<i32>, String, Vec<Value>) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kgpu"))
        .args(args)
        .env("KGPU_DATA_DIR", data)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let audit = std::fs::read_to_string(data.join("audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (out.status.code(), text, audit)
}

#[test]
fn actions_from_the_command_line_confirm_report_and_exit_by_the_goal() {
    // Without --yes and without a terminal: the blast radius, then exit 2, nothing done.
    let (code, text, audit) = kgpu(&["defrag", "-s", "fragmented"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("blast radius: 5 pod(s)") && text.contains("kgpu.dev/defrag="), "{text}");
    assert!(text.contains("not run: confirm with --yes"), "{text}");
    assert!(audit.is_empty());
    // With --yes the plan runs to its goal: exit 0, the report, two audit lines.
    let (code, text, audit) = kgpu(&["defrag", "research/job-llm-sft-295a1", "-s", "fragmented", "--yes"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("placed on gpu-03 gpu-07"), "{text}");
    assert_eq!(audit.iter().map(|e| e["result"].as_str().unwrap()).collect::<Vec<_>>(), ["started", "ok"]);
    // A dry run needs no --yes and changes nothing.
    let (code, text, _) = kgpu(&["drain", "gpu-03", "-s", "fragmented", "--dry-run"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("dry run: node/gpu-03 would be drained"), "{text}");
    // Every line a dry run prints says it would, not that it did.
    for line in text.lines().filter(|l| !["  pod ", "  gang ", "  $ ", "by hand:"].iter().any(|s| l.starts_with(s))) {
        assert!(line.contains("would"), "a dry run's line that does not say would: {line}\n{text}");
    }
    // Bad targets and --read-only are usage errors (exit 2) that say why.
    for (args, says) in [
        (&["requeue", "research/nope", "-s", "fragmented", "--yes"][..], "no Kueue Workload or Volcano PodGroup"),
        (&["repartition", "gpu-03", "all-9g", "-s", "fragmented", "--yes"][..], "is not a MIG config"),
        (&["cordon", "gpu-99", "-s", "fragmented", "--yes"][..], "node gpu-99 not found"),
        (&["--read-only", "cordon", "gpu-01", "-s", "fragmented", "--yes"][..], "--read-only"),
        (&["defrag", "nope", "-s", "fragmented", "--yes"][..], "is not NAMESPACE/NAME"),
    ] {
        let (code, text, audit) = kgpu(args);
        assert_eq!(code, Some(2), "{args:?}: {text}");
        assert!(text.contains(says), "{args:?}: {text}");
        assert!(audit.is_empty(), "{args:?}");
    }
    // Work held by its queue gets no plan, and the exit code says the goal is out of reach.
    let (code, text, _) = kgpu(&["defrag", "team-a/job-finetune-xl-399ef", "-s", "quota-starvation", "--yes"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("no plan:") && text.contains("held at quota"), "{text}");
}

#[tokio::test]
async fn a_demo_drain_moves_the_pods_elsewhere_and_they_run() {
    let mut d = demo("fragmented");
    d.synced().await;
    let node = Sym::new("gpu-03");
    let before: Vec<String> = d
        .snapshots
        .borrow()
        .pods
        .values()
        .filter(|p| p.node.as_ref() == Some(&node) && p.wants_gpu())
        .filter_map(|p| Some(p.owner.as_ref()?.name.to_string()))
        .collect();
    assert_eq!(before.len(), 2);
    // Done when the pods are gone, and the report says where the replacements went.
    d.drain(&node, false).await;
    // Each drained Job has a replacement running on another node; none is left on gpu-03.
    d.until("the replacements running elsewhere", |s| {
        before.iter().all(|job| {
            s.pods.values().any(|p| {
                p.owner.as_ref().is_some_and(|o| o.name.as_str() == job)
                    && p.node.as_ref().is_some_and(|n| *n != node)
                    && p.phase == kgpu::model::PodPhase::Running
            })
        }) && !s.pods.values().any(|p| p.node.as_ref() == Some(&node) && p.wants_gpu())
    })
    .await;
    assert!(d.snapshots.borrow().nodes[&node].unschedulable);
}

/// A drained DRA node's pods come back with claims of their own, made from
/// their template and allocated on another node; the old claims go with
/// the old pods, and nothing holds the drained node's devices.
#[tokio::test]
async fn a_demo_drain_of_a_dra_node_moves_the_claims_with_the_pods() {
    use kgpu::model::{DraObject, PodPhase};
    let mut d = demo("dra-claims");
    d.synced().await;
    let node = Sym::new("h100-dra-02");
    let before: Vec<String> = d
        .snapshots
        .borrow()
        .pods
        .values()
        .filter(|p| p.node.as_ref() == Some(&node) && !p.claims.is_empty())
        .map(|p| p.name.to_string())
        .collect();
    assert_eq!(before.len(), 4, "the scenario's embed pods");
    d.drain(&node, true).await;
    let claims_of = |s: &Snapshot| -> Vec<kgpu::model::dra::ResourceClaim> {
        s.dra
            .values()
            .filter_map(|o| match &**o {
                DraObject::Claim(c) if !c.template => Some(c.clone()),
                _ => None,
            })
            .collect()
    };
    d.until("four embed replacements running on h100-dra-03 with their claims", |s| {
        let running: Vec<_> = s
            .pods
            .values()
            .filter(|p| p.name.starts_with("embed-5d8c7-") && p.phase == PodPhase::Running)
            .filter(|p| p.node.as_ref().is_some_and(|n| n.as_str() == "h100-dra-03"))
            .collect();
        running.len() == 6
            && running.iter().all(|p| {
                claims_of(s).iter().any(|c| {
                    c.reserved_for.contains(&p.name)
                        && c.allocated_node.as_ref().is_some_and(|n| n.as_str() == "h100-dra-03")
                        && c.allocated.len() == 1
                })
            })
    })
    .await;
    let snap = d.snapshots.borrow().clone();
    let claims = claims_of(&snap);
    for old in &before {
        assert!(
            !claims.iter().any(|c| c.owner_pod.as_deref() == Some(old.as_str())),
            "the claim made for {old} went with it"
        );
    }
    assert!(!claims.iter().any(|c| c.allocated_node.as_ref() == Some(&node)), "nothing holds {node}'s devices");
    // The six claims on h100-dra-03 hold six different GPUs.
    let mut devices: Vec<_> = claims
        .iter()
        .filter(|c| c.allocated_node.as_ref().is_some_and(|n| n.as_str() == "h100-dra-03"))
        .flat_map(|c| c.allocated.iter().map(|a| a.device.clone()))
        .collect();
    devices.sort();
    devices.dedup();
    assert_eq!(devices.len(), 6);
    // The Fleet counts them where they are.
    let v = Views::build(snap.clone(), snap.clock, &Thresholds::default(), None);
    let row = v.nodes.iter().find(|n| n.name.as_str() == "h100-dra-03").expect("the node's row");
    assert_eq!(row.used_of(), (6, 8), "{}", row.used_text());
}

/// `kgpu defrag` of the fragmented demo's gang with --yes and the data dir
/// `data`, its output piped.
fn defrag_in(data: &std::path::Path) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_kgpu"))
        .args(["defrag", "research/job-llm-sft-295a1", "-s", "fragmented", "--yes"])
        .env("KGPU_DATA_DIR", data)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// A command-line action that a signal stops (SIGTERM from a supervisor,
/// SIGHUP from an SSH session that drops) releases what it holds, says what
/// it did and left, records the end in the audit log, and exits 128 + the
/// signal's number, as a shell reports it. It used to die at once, its
/// nodes still reserved and only `started` in the audit log.
#[test]
fn a_signal_cancels_a_command_line_defrag_which_releases_its_nodes_and_says_so() {
    use std::io::{BufRead, BufReader};
    for (signal, code) in [("TERM", 143), ("HUP", 129)] {
        // The demo places the gang within milliseconds: a plan that finished
        // before the signal landed is run again (a few tries at most).
        let (data, text, status) = (0..5)
            .map(|_| {
                let data = tempfile::tempdir().unwrap();
                let mut child = defrag_in(data.path());
                let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
                let mut text = String::new();
                for line in lines.by_ref() {
                    let line = line.unwrap();
                    text.push_str(&line);
                    text.push('\n');
                    if line.contains("defrag: reserved") {
                        break;
                    }
                }
                assert!(text.contains("defrag: reserved"), "SIG{signal}: {text}");
                let sent =
                    std::process::Command::new("kill").arg(format!("-{signal}")).arg(child.id().to_string()).status();
                assert!(sent.unwrap().success());
                for line in lines {
                    text.push_str(&line.unwrap());
                    text.push('\n');
                }
                (data, text, child.wait().unwrap())
            })
            .find(|(_, text, status)| !(status.success() && text.contains(": placed on ")))
            .expect("the signal landed before the plan finished in one of five tries");
        assert_eq!(status.code(), Some(code), "SIG{signal}: {text}");
        assert!(text.contains(&format!("SIG{signal}: cancelling at the next step")), "{text}");
        assert!(text.contains("run-defrag-plan cancelled") && text.contains("reservation released"), "{text}");
        assert!(text.contains(&format!("stopped by SIG{signal}")), "{text}");
        let audit: Vec<Value> = std::fs::read_to_string(data.path().join("audit.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let results: Vec<&str> = audit.iter().map(|e| e["result"].as_str().unwrap()).collect();
        assert_eq!(results, ["started", "cancelled"], "SIG{signal}");
        assert!(audit[1]["detail"].as_str().unwrap().contains("reservation released"), "{}", audit[1]);
    }
}

/// SIGKILL cannot be caught: a defrag killed after reserving its nodes
/// leaves only its `started` line. The next kgpu says so before any action,
/// `kgpu release` lists it with what it left and, confirmed, closes it in
/// the audit log; after that nothing is left to release.
#[test]
fn a_later_kgpu_finds_what_a_killed_one_left_and_releases_it() {
    use std::io::{BufRead, BufReader};
    // As above: a plan that finished before the kill landed is run again.
    let (data, pid) = (0..5)
        .map(|_| {
            let data = tempfile::tempdir().unwrap();
            let mut child = defrag_in(data.path());
            let pid = child.id();
            let reserved = BufReader::new(child.stdout.take().unwrap())
                .lines()
                .map_while(Result::ok)
                .any(|line| line.contains("defrag: reserved"));
            assert!(reserved);
            child.kill().unwrap();
            child.wait().unwrap();
            (data, pid)
        })
        .find(|(data, _)| {
            let audit = std::fs::read_to_string(data.path().join("audit.jsonl")).unwrap_or_default();
            audit.lines().count() == 1
        })
        .expect("the kill landed before the plan finished in one of five tries");

    let (code, text, _) = kgpu_in(data.path(), &["cordon", "gpu-01", "-s", "fragmented", "--dry-run"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("note: 1 action(s) of a kgpu that ended without finishing"), "{text}");
    // Listed, not run, without --yes.
    let (code, text, _) = kgpu_in(data.path(), &["release", "-s", "fragmented"]);
    assert_eq!(code, Some(2), "{text}");
    let said = "abandoned: run-defrag-plan target workload/research/job-llm-sft-295a1";
    assert!(text.contains(said) && text.contains(&format!("kgpu pid {pid} on ")), "{text}");
    // A fresh demo holds none of the killed one's reservations.
    assert!(text.contains("left nothing in the cluster now"), "{text}");
    let (code, text, audit) = kgpu_in(data.path(), &["release", "-s", "fragmented", "--yes"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("1 abandoned action(s) closed in the audit log"), "{text}");
    let lines: Vec<(&str, &str)> =
        audit.iter().map(|e| (e["action"].as_str().unwrap(), e["result"].as_str().unwrap())).collect();
    assert!(lines.contains(&("run-defrag-plan", "abandoned")), "{lines:?}");
    let closed = audit.iter().find(|e| e["result"] == "abandoned").unwrap();
    assert_eq!(closed["run"]["pid"], pid, "the close names the killed run: {closed}");
    let (code, text, _) = kgpu_in(data.path(), &["release", "-s", "fragmented"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("nothing left behind"), "{text}");
}

/// `:release` in the cockpit: what abandoned actions left, in the same
/// confirmation as every action; with none, it says nothing is left.
#[test]
fn the_palettes_release_confirms_what_abandoned_actions_left() {
    let type_line = |app: &mut App, v: &Views, line: &str| {
        for c in line.chars() {
            key(app, v, c);
        }
        app.update(Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)), v)
    };
    let mut v = views("fragmented");
    let mut app = fleet_app(false);
    type_line(&mut app, &v, ":release");
    assert!(notice(&app).contains("nothing left behind"), "{}", notice(&app));
    assert!(app.overlay.is_none());
    let killed = kgpu::model::audit::AuditEntry {
        time: "2026-12-05T08:00:00Z".into(),
        context: "demo".into(),
        user: "sre".into(),
        action: "drain".into(),
        targets: vec!["node/gpu-03".into()],
        dry_run: false,
        result: "started".into(),
        detail: String::new(),
        run: Some(kgpu::model::audit::RunMark { host: "jump-1".into(), pid: 4242, action: 1 }),
    };
    v.abandoned = vec![killed.clone()];
    type_line(&mut app, &v, ":release");
    match &app.overlay {
        Some(Overlay::Confirm(c)) => {
            assert_eq!(c.action, Action::Release { nodes: vec![], abandoned: vec![killed] });
            assert!(c.impact.warnings.iter().any(|w| w.contains("abandoned: drain node/gpu-03")), "{:?}", c.impact);
        }
        other => panic!("no confirmation: {other:?}"),
    }
}

/// A drain cancelled before its evictions end says that the node stays
/// cordoned, how many pods went, and how to undo it; the audit too.
#[tokio::test]
async fn a_cancelled_drain_says_it_left_its_node_cordoned() {
    let mut d = demo("fragmented");
    d.synced().await;
    d.cancel.send_modify(|c| {
        c.insert(7);
    });
    let node = Sym::new("gpu-03");
    d.executor
        .run(ActionRequest {
            action: Action::Drain { node: node.clone(), gpu_only: false, force: false },
            dry_run: false,
        })
        .await;
    let (text, error) = d.last_report().await;
    assert!(error);
    assert!(text.starts_with("drain cancelled: 0 of 2 pod(s) evicted or leaving"), "{text}");
    assert!(text.contains("node/gpu-03 left cordoned (undo: kubectl uncordon gpu-03)"), "{text}");
    let last = d.audit().last().unwrap().clone();
    assert_eq!(last["result"], "cancelled");
    assert!(last["detail"].as_str().unwrap().contains("left cordoned"), "{last}");
    d.until("the cordon seen", |s| s.nodes[&node].unschedulable).await;
}

/// A drain cancelled after an eviction the model does not show yet counts
/// it: the report says what the drain did, not what the watch had seen.
#[tokio::test]
async fn a_cancelled_drain_counts_the_evictions_its_model_has_not_seen() {
    let mut d = demo("fragmented");
    d.synced().await;
    let request = ActionRequest {
        action: Action::Drain { node: Sym::new("gpu-03"), gpu_only: false, force: false },
        dry_run: false,
    };
    let after = d.cancel_on_a_lagging_model(request, "drain gpu-03: evicted").await;
    let Some(Progress { text, error, .. }) = after.into_iter().rfind(|m| m.done) else { panic!("a final report") };
    assert!(error);
    // Both of its pods went, or the first only: never none.
    assert!(
        text.starts_with("drain cancelled: 1 of 2 pod(s) evicted or leaving")
            || text.starts_with("drain cancelled: 2 of 2 pod(s) evicted or leaving"),
        "{text}"
    );
    assert!(text.contains("node/gpu-03 left cordoned"), "{text}");
}

/// `y` on the Pending pane (a selected row, or the why view opened on it)
/// copies the blocking step's kubectl commands whole, read-only or not: a
/// command wrapped in a narrow terminal cannot be copied off the screen.
#[test]
fn y_copies_the_blocking_steps_commands() {
    let v = views("quota-starvation");
    let mut app = App::new(true, "dark", true);
    app.pane = Pane::Pending;
    let item = v.analysis.pending.first().expect("a pending item");
    let step = item.steps.iter().find(|s| Some(s.step) == item.blocking).expect("a blocking step");
    assert!(!step.commands.is_empty());
    let expected = step.commands.join("\n");
    for open_why in [false, true] {
        if open_why {
            app.update(Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)), &v);
            assert_eq!(app.drill.as_deref(), Some(item.display_name().as_str()));
        }
        let effects = key(&mut app, &v, 'y');
        assert!(matches!(effects.as_slice(), [Effect::Copy(text)] if *text == expected), "{open_why}: {effects:?}");
        assert!(notice(&app).starts_with("copied "), "{}", notice(&app));
    }
}
