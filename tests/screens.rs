//! Screen snapshots: every pane of the cockpit at 80×24 and 200×60, drawn
//! into a `TestBackend` from a demo scenario at its fixed start time.
//! `cargo insta review` accepts intended changes.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use kgpu::analysis::Thresholds;
use kgpu::app::{App, Msg, Pane};
use kgpu::runtime::load;
use kgpu::ui::{self, Context, Theme};
use kgpu::view_model::panes::Views;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

fn views(scenario: &str) -> Views {
    let (snap, now) = load::demo(scenario, 1, 0).unwrap();
    Views::build(Arc::new(snap), now, &Thresholds::default(), None)
}

fn context(scenario: &str) -> Context {
    Context { source: format!("demo:{scenario}"), subtitle: "scenario".into(), production: false }
}

fn render(app: &mut App, views: &Views, scenario: &str, w: u16, h: u16) -> Terminal<TestBackend> {
    let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
    let theme = Theme::builtin("dark");
    let mut shown = Default::default();
    terminal.draw(|f| shown = ui::draw(f, app, views, &theme, &context(scenario))).unwrap();
    // As the cockpit does: the app keeps what the frame showed.
    app.update(Msg::Viewport(shown), views);
    terminal
}

fn key(app: &mut App, views: &Views, code: KeyCode) {
    app.update(Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)), views);
}

fn pane_at(scenario: &str, pane: Pane, w: u16, h: u16) -> String {
    let v = views(scenario);
    let mut app = App::new(false, "dark", true);
    app.pane = pane;
    format!("{}", render(&mut app, &v, scenario, w, h).backend())
}

macro_rules! pane_tests {
    ($($name:ident: $scenario:expr, $pane:expr;)*) => {$(
        #[test]
        fn $name() {
            insta::assert_snapshot!(concat!(stringify!($name), "_80x24"), pane_at($scenario, $pane, 80, 24));
            insta::assert_snapshot!(concat!(stringify!($name), "_200x60"), pane_at($scenario, $pane, 200, 60));
        }
    )*};
}

pane_tests! {
    fleet_map_of_a_fragmented_pool: "fragmented", Pane::Fleet;
    fleet_map_of_the_default_fleet: "default", Pane::Fleet;
    pending_list_with_taints_and_selectors: "taint-mismatch", Pane::Pending;
    gangs_and_queues_in_a_deadlock: "gang-deadlock", Pane::Gangs;
    gangs_and_queues_of_the_default_fleet: "default", Pane::Gangs;
    mig_slices_with_a_wedged_reconfiguration: "mig-mismatch", Pane::Mig;
    drivers_matrix_and_waves_mid_rollout: "driver-skew", Pane::Drivers;
    events_of_a_black_hole: "black-hole", Pane::Events;
    usage_idle_holders_of_the_default_fleet: "default", Pane::Usage;
    usage_of_a_gang_deadlock: "gang-deadlock", Pane::Usage;
}

/// MIG partitions NVIDIA's DRA driver publishes (DynamicMIG), from the
/// cluster captured from the lab's kube-scheduler: the held one on its
/// slices, its claim, what a claim could get now.
#[test]
fn mig_partitions_published_through_dra() {
    use kgpu::model::{Cluster, SourceInfo, SourceKind};
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/verdicts/dra-partitions/cluster.yaml");
    let (events, newest, _) = kgpu::sources::file::load(&[path.into()]).unwrap();
    let mut cluster = Cluster::new(SourceInfo { kind: SourceKind::File, name: "dra-partitions".into() });
    cluster.apply_all(events);
    let v = Views::build(Arc::new(cluster.snapshot()), newest, &Thresholds::default(), None);
    // The Fleet map draws the GPU as the MIG pane does: its one held
    // partition a MIG cell, not a whole GPU in use.
    let node = v.nodes.iter().find(|n| n.name.as_str() == "mig-h100-0").unwrap();
    assert_eq!(node.cells, [kgpu::view_model::panes::Cell::MigUsed], "{:?}", node.cells);
    for (w, h) in [(80, 24), (200, 60)] {
        let mut app = App::new(false, "dark", true);
        app.pane = Pane::Mig;
        let screen = format!("{}", render(&mut app, &v, "dra-partitions", w, h).backend());
        insta::assert_snapshot!(format!("mig_partitions_published_through_dra_{w}x{h}"), screen);
    }
}

#[test]
fn usage_detail_and_the_view_without_a_source() {
    let v = views("default");
    let mut app = App::new(false, "dark", true);
    app.pane = Pane::Usage;
    render(&mut app, &v, "default", 80, 24);
    key(&mut app, &v, KeyCode::Enter);
    insta::assert_snapshot!(
        "usage_detail_of_an_idle_notebook_80x24",
        format!("{}", render(&mut app, &v, "default", 80, 24).backend())
    );
    // A cluster read without agents or an exporter: what to install, and the rest unaffected.
    let (mut snap, now) = load::demo("default", 1, 0).unwrap();
    snap.usage = Default::default();
    let bare = Views::build(Arc::new(snap), now, &Thresholds::default(), None);
    let mut app = App::new(false, "dark", true);
    app.pane = Pane::Usage;
    insta::assert_snapshot!(
        "usage_without_a_source_80x24",
        format!("{}", render(&mut app, &bare, "default", 80, 24).backend())
    );
}

#[test]
fn usage_by_workload_and_back_to_a_workloads_pods() {
    let v = views("default");
    let mut app = App::new(false, "dark", true);
    app.pane = Pane::Usage;
    render(&mut app, &v, "default", 80, 24);
    key(&mut app, &v, KeyCode::Tab);
    insta::assert_snapshot!(
        "usage_by_workload_80x24",
        format!("{}", render(&mut app, &v, "default", 80, 24).backend())
    );
    insta::assert_snapshot!(
        "usage_by_workload_200x60",
        format!("{}", render(&mut app, &v, "default", 200, 60).backend())
    );
    // The first row is the notebooks StatefulSet: enter lists its pods, and only its pods.
    key(&mut app, &v, KeyCode::Enter);
    let pods = format!("{}", render(&mut app, &v, "default", 80, 24).backend());
    assert!(pods.contains("Usage (6 of "), "{pods}");
    assert_eq!(pods.matches("notebooks/notebooks-").count(), 6, "{pods}");
    // Esc goes back to the workloads, unfiltered.
    key(&mut app, &v, KeyCode::Esc);
    let back = format!("{}", render(&mut app, &v, "default", 80, 24).backend());
    assert!(back.contains("Workloads (12)"), "{back}");
    key(&mut app, &v, KeyCode::Tab);
    let all = format!("{}", render(&mut app, &v, "default", 80, 24).backend());
    assert!(all.contains("Usage (141 pods)"), "the workload's filter went with it: {all}");
}

#[test]
fn pending_drilldown_shows_the_chain() {
    let v = views("quota-starvation");
    let mut app = App::new(false, "dark", true);
    app.pane = Pane::Pending;
    key(&mut app, &v, KeyCode::Enter);
    insta::assert_snapshot!(
        "pending_drilldown_quota_80x24",
        format!("{}", render(&mut app, &v, "quota-starvation", 80, 24).backend())
    );
    insta::assert_snapshot!(
        "pending_drilldown_quota_200x60",
        format!("{}", render(&mut app, &v, "quota-starvation", 200, 60).backend())
    );
}

#[test]
fn help_overlay_lists_every_key() {
    let v = views("default");
    let mut app = App::new(false, "dark", true);
    key(&mut app, &v, KeyCode::Char('?'));
    let screen = format!("{}", render(&mut app, &v, "default", 200, 60).backend());
    for b in kgpu::app::keys::BINDINGS {
        assert!(screen.contains(b.help), "help lacks '{}'", b.help);
    }
    insta::assert_snapshot!("help_overlay_80x24", format!("{}", render(&mut app, &v, "default", 80, 24).backend()));
}

#[test]
fn help_lists_the_keys_of_every_dialog_too() {
    use kgpu::app::dialog_keys::{DIALOG_BINDINGS, Dialog};
    let v = views("default");
    let mut app = App::new(false, "dark", true);
    key(&mut app, &v, KeyCode::Char('?'));
    // The dialogs' keys come after the panes'; read the help to its end.
    let mut seen = String::new();
    for _ in 0..12 {
        seen.push_str(&format!("{}", render(&mut app, &v, "default", 200, 60).backend()));
        key(&mut app, &v, KeyCode::PageDown);
    }
    for d in Dialog::ALL {
        assert!(seen.contains(d.title()), "help lacks '{}'", d.title());
    }
    for b in DIALOG_BINDINGS {
        assert!(seen.contains(b.help), "help lacks '{}'", b.help);
    }
}

#[test]
fn the_mig_picker_says_what_each_config_cuts_and_serves() {
    let v = views("mig-mismatch");
    let mut app = App::new(false, "dark", true);
    key(&mut app, &v, KeyCode::Char('4'));
    key(&mut app, &v, KeyCode::Char('m'));
    let screen = format!("{}", render(&mut app, &v, "mig-mismatch", 200, 60).backend());
    assert!(screen.contains("mig.config for") && screen.contains("← serves"), "{screen}");
    insta::assert_snapshot!("mig_picker_80x24", format!("{}", render(&mut app, &v, "mig-mismatch", 80, 24).backend()));
    insta::assert_snapshot!("mig_picker_200x60", screen);
}

#[test]
fn confirm_dialog_shows_the_blast_radius() {
    let v = views("fragmented");
    let mut app = App::new(false, "dark", true);
    // gpu-03 is the third node: drain it.
    key(&mut app, &v, KeyCode::Down);
    key(&mut app, &v, KeyCode::Down);
    key(&mut app, &v, KeyCode::Char('r'));
    insta::assert_snapshot!("confirm_drain_80x24", format!("{}", render(&mut app, &v, "fragmented", 80, 24).backend()));
    insta::assert_snapshot!(
        "confirm_drain_200x60",
        format!("{}", render(&mut app, &v, "fragmented", 200, 60).backend())
    );
}

#[test]
fn aggregated_map_of_five_thousand_nodes() {
    use kgpu::model::build::{node, pod};
    use kgpu::model::{Cluster, ModelEvent, Object, SourceInfo, SourceKind};
    let mut c = Cluster::new(SourceInfo { kind: SourceKind::Demo, name: "big".into() });
    for i in 0..5000 {
        let pool = ["h100-a", "h100-b", "a100", "l40s", "h200"][i % 5];
        let n = node(&format!("{pool}-{i:05}")).gpus(8).label("kgpu.dev/pool", pool).build();
        c.apply(ModelEvent::Upsert(Object::Node(n)));
        let p = pod(&format!("p-{i}")).gpus((i % 9) as u64).on(&format!("{pool}-{i:05}")).running().build();
        c.apply(ModelEvent::Upsert(Object::Pod(p)));
    }
    let v = Views::build(Arc::new(c.snapshot()), 0, &Thresholds::default(), None);
    let mut app = App::new(false, "dark", false);
    insta::assert_snapshot!(
        "fleet_aggregated_5000_nodes_80x24",
        format!("{}", render(&mut app, &v, "big", 80, 24).backend())
    );
    insta::assert_snapshot!(
        "fleet_aggregated_5000_nodes_200x60",
        format!("{}", render(&mut app, &v, "big", 200, 60).backend())
    );
}

#[test]
fn too_small_says_so() {
    let v = views("default");
    let mut app = App::new(false, "dark", true);
    insta::assert_snapshot!("too_small_40x10", format!("{}", render(&mut app, &v, "default", 40, 10).backend()));
    // Degenerate sizes never panic.
    for (w, h) in [(0, 0), (1, 1), (59, 24), (80, 15), (500, 3)] {
        render(&mut app, &v, "default", w, h);
    }
}

#[test]
fn every_pane_draws_at_odd_sizes_without_panicking() {
    for scenario in ["default", "driver-skew", "mig-mismatch"] {
        let v = views(scenario);
        for pane in Pane::ALL {
            let mut app = App::new(false, "dark", true);
            app.pane = pane;
            for (w, h) in [(60, 16), (61, 17), (99, 30), (120, 40), (250, 80)] {
                render(&mut app, &v, scenario, w, h);
            }
        }
    }
}

#[test]
fn colours_of_the_fleet_map() {
    // One buffer dump with styles, to record the dark theme's roles.
    let v = views("fragmented");
    let mut app = App::new(false, "dark", true);
    let terminal = render(&mut app, &v, "fragmented", 80, 24);
    let buffer = terminal.backend().buffer().clone();
    let mut spans = Vec::new();
    for x in 0..80 {
        let cell = &buffer[(x, 4)];
        spans.push(format!("{}:{:?}", cell.symbol(), cell.fg));
    }
    insta::assert_debug_snapshot!("fleet_row_colours", spans);
}

#[test]
fn queues_pane_says_when_the_crds_are_missing() {
    use kgpu::model::{Cluster, Feed, FeedProblem, FeedState, ModelEvent, SourceInfo, SourceKind};
    let mut c = Cluster::new(SourceInfo { kind: SourceKind::Kube, name: "prod-east".into() });
    for feed in [Feed::Workloads, Feed::ClusterQueues, Feed::LocalQueues, Feed::ResourceFlavors] {
        c.apply(ModelEvent::Feed {
            feed,
            state: FeedState::Unavailable(FeedProblem::Missing(
                "the Kueue CRDs (kueue.x-k8s.io/v1beta2) are not installed in this cluster".into(),
            )),
        });
    }
    for feed in [Feed::PodGroups, Feed::VolcanoQueues] {
        c.apply(ModelEvent::Feed {
            feed,
            state: FeedState::Unavailable(FeedProblem::Forbidden(
                "RBAC: cannot list/watch podgroups.scheduling.volcano.sh; grant list and watch on it".into(),
            )),
        });
    }
    let v = Views::build(Arc::new(c.snapshot()), 0, &Thresholds::default(), None);
    let mut app = App::new(false, "dark", false);
    app.pane = Pane::Gangs;
    let mut terminal = Terminal::new(TestBackend::new(120, 24)).unwrap();
    let ctx = Context { source: "prod-east".into(), subtitle: String::new(), production: true };
    terminal
        .draw(|f| {
            ui::draw(f, &app, &v, &Theme::builtin("dark"), &ctx);
        })
        .unwrap();
    let screen = format!("{}", terminal.backend());
    assert!(screen.contains("not installed"), "{screen}");
    assert!(screen.contains("forbidden"), "{screen}");
    insta::assert_snapshot!("gangs_pane_without_kueue_crds_120x24", screen);
}

/// The last line of what was drawn.
fn bottom_line(terminal: &Terminal<TestBackend>) -> String {
    let buffer = terminal.backend().buffer();
    let y = buffer.area.height - 1;
    (0..buffer.area.width).map(|x| buffer[(x, y)].symbol().to_string()).collect()
}

#[test]
fn a_notice_leads_the_status_bar_at_80_columns_and_goes_with_the_next_key() {
    let v = views("fragmented");
    let mut app = App::new(false, "dark", true);
    key(&mut app, &v, KeyCode::Char('s'));
    let bar = bottom_line(&render(&mut app, &v, "fragmented", 80, 24));
    assert!(bar.trim_start().starts_with("sorted by"), "{bar}");
    key(&mut app, &v, KeyCode::Char('j'));
    let bar = bottom_line(&render(&mut app, &v, "fragmented", 80, 24));
    assert!(!bar.contains("sorted by") && bar.contains("GPU"), "{bar}");
    // A source failure stays: the data behind it is stale.
    app.update(Msg::Notice { text: "the source stopped".into(), error: true }, &v);
    key(&mut app, &v, KeyCode::Char('j'));
    let bar = bottom_line(&render(&mut app, &v, "fragmented", 80, 24));
    assert!(bar.contains("the source stopped"), "{bar}");
}

#[test]
fn the_pending_drilldown_scrolls_to_its_last_wrapped_line_at_80x24() {
    let scenarios = ["default", "fragmented", "gang-deadlock", "quota-starvation", "taint-mismatch", "black-hole"];
    for scenario in scenarios {
        let v = views(scenario);
        for (row, item) in v.analysis.pending.iter().enumerate().take(4) {
            let mut app = App::new(false, "dark", true);
            app.pane = Pane::Pending;
            for _ in 0..row {
                key(&mut app, &v, KeyCode::Char('j'));
            }
            key(&mut app, &v, KeyCode::Enter);
            key(&mut app, &v, KeyCode::Char('G'));
            let screen = format!("{}", render(&mut app, &v, scenario, 80, 24).backend());
            assert!(screen.contains(&*item.name), "{scenario}: the drilldown of {} is open", item.name);
            // The chain's last words are on screen, however its lines wrapped.
            let Some(last) = item.unblock.last().or(item.hints.last()) else { continue };
            let tail: String = last.split_whitespace().last().unwrap().chars().take(12).collect();
            assert!(screen.contains(&tail), "{scenario}/{}: {tail:?} not on\n{screen}", item.name);
        }
    }
}

#[test]
fn the_pending_badge_marks_exactly_the_node_acted_on() {
    // gpu-1 and gpu-10: a drain of gpu-10 must not badge gpu-1 (the old
    // substring match on "node/gpu-1" did).
    use kgpu::analysis::testing::{node, snapshot};
    let nodes = vec![node("gpu-1").gpus(8).build(), node("gpu-10").gpus(8).build(), node("gpu-2").gpus(8).build()];
    let snap = snapshot(nodes, vec![], vec![], 1_000);
    let v = Views::build(Arc::new(snap), 1_000, &Thresholds::default(), None);
    let mut app = App::new(false, "dark", true);
    app.aggregate = Some(false);
    key(&mut app, &v, KeyCode::Char('j'));
    key(&mut app, &v, KeyCode::Char('r'));
    key(&mut app, &v, KeyCode::Char('y'));
    assert_eq!(app.in_flight[0].action.nodes()[0].as_str(), "gpu-10");
    let screen = format!("{}", render(&mut app, &v, "test", 200, 60).backend());
    // The status bar says what runs, and for how long.
    assert!(screen.lines().last().is_some_and(|l| l.contains("│ ⟳ drain 0s")), "{screen}");
    let badged: Vec<&str> = screen
        .lines()
        .filter(|l| l.contains("⟳pending"))
        .filter_map(|l| l.trim_start_matches(['"', '│']).split_whitespace().next())
        .collect();
    assert_eq!(badged, ["gpu-10"], "{screen}");
}

#[test]
fn the_events_filter_matches_the_type_and_says_when_nothing_matches() {
    let v = views("black-hole");
    let total = v.events.len();
    let warnings = v.events.iter().filter(|e| e.warning).count();
    assert!(warnings > 0 && warnings < total, "the scenario has both kinds");
    let mut app = App::new(false, "dark", true);
    app.pane = Pane::Events;
    app.filters.insert(Pane::Events, "warning".into());
    let screen = format!("{}", render(&mut app, &v, "black-hole", 200, 60).backend());
    assert!(screen.contains(&format!("Events ({warnings} of {total}) · /warning")), "{screen}");
    app.filters.insert(Pane::Events, "no-such-thing".into());
    let screen = format!("{}", render(&mut app, &v, "black-hole", 80, 24).backend());
    assert!(screen.contains("no match") && screen.contains("REASON"), "the header stays: {screen}");
}

#[test]
fn the_runtime_reaches_the_app_only_through_messages() {
    use kgpu::app::Effect;
    let v = views("default");
    let mut app = App::new(false, "dark", true);
    let palette = |app: &mut App, line: &str| {
        let mut effects = app.update(Msg::Key(KeyEvent::new(KeyCode::Char(':'), KeyModifiers::NONE)), &v);
        for c in line.chars() {
            effects.extend(app.update(Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)), &v));
        }
        effects.extend(app.update(Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)), &v));
        effects
    };
    // A bad version is refused by the app itself: no effect, no pane switch.
    let effects = palette(&mut app, "plan 57x");
    assert!(effects.is_empty(), "{effects:?}");
    assert_eq!(app.pane, Pane::Fleet);
    assert!(app.notice.as_ref().is_some_and(|n| n.error && n.text.contains("'57x' is not a driver version")));
    // A good one travels parsed.
    let effects = palette(&mut app, "plan 570.124.06");
    assert!(matches!(&effects[..], [Effect::PlanWaves(Some(v))] if v.to_string() == "570.124.06"), "{effects:?}");
    assert_eq!(app.pane, Pane::Drivers);
    // The theme the runtime loaded, and a source that stopped.
    app.update(Msg::ThemeLoaded { name: "dark".into(), warning: Some("themes/x.toml:3: bad colour".into()) }, &v);
    assert_eq!(app.theme_name, "dark");
    assert!(app.notice.as_ref().is_some_and(|n| n.error && n.text.contains("bad colour")));
    app.update(Msg::SourceStopped, &v);
    key(&mut app, &v, KeyCode::Char('j'));
    assert!(
        app.notice.as_ref().is_some_and(|n| n.text == "the source stopped"),
        "a stopped source stays on the status line"
    );
}

#[test]
fn a_production_confirmation_asks_for_the_name() {
    let v = views("default");
    let mut app = App::new(false, "dark", true).with_production(true);
    app.aggregate = Some(false);
    key(&mut app, &v, KeyCode::Char('r'));
    for c in "a100".chars() {
        key(&mut app, &v, KeyCode::Char(c));
    }
    let screen = format!("{}", render(&mut app, &v, "default", 80, 24).backend());
    let node = v.nodes[0].name.clone();
    assert!(screen.contains(&format!("type {node} to run it: a100")), "{screen}");
    assert!(screen.contains("NAME enter") && screen.contains("tab") && !screen.contains("n/esc"), "{screen}");
}

fn type_text(app: &mut App, views: &Views, text: &str) -> Vec<kgpu::app::Effect> {
    let mut effects = Vec::new();
    for c in text.chars() {
        let code = match c {
            '\t' => KeyCode::Tab,
            '\n' => KeyCode::Enter,
            c => KeyCode::Char(c),
        };
        effects.extend(app.update(Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)), views));
    }
    effects
}

fn palette_line(app: &App) -> String {
    match &app.overlay {
        Some(kgpu::app::Overlay::Palette(area)) => area.lines().first().cloned().unwrap_or_default(),
        other => panic!("the palette is not open: {other:?}"),
    }
}

/// The palette completes with Tab (commands, then their arguments: themes,
/// scenarios, namespaces, pending items) and suggests as you type.
#[test]
fn the_palette_completes_commands_and_arguments_with_tab() {
    let v = views("default");
    let mut app = App::new(false, "dark", true);
    app.known.scenarios = vec!["default".into(), "fragmented".into(), "gang-deadlock".into()];
    type_text(&mut app, &v, ":th\t");
    assert_eq!(palette_line(&app), "theme ");
    type_text(&mut app, &v, "hi\t");
    assert_eq!(palette_line(&app), "theme high-contrast");
    let effects = type_text(&mut app, &v, "\n");
    assert_eq!(effects, [kgpu::app::Effect::SetTheme("high-contrast".into())]);

    // Namespaces come from the data; the hint lists them as you type.
    type_text(&mut app, &v, ":ns ");
    let screen = format!("{}", render(&mut app, &v, "default", 80, 24).backend());
    assert!(screen.contains(" all") && screen.contains(" team-a") && screen.contains(" inference"), "{screen}");
    type_text(&mut app, &v, "inf\t");
    assert_eq!(palette_line(&app), "ns inference");
    insta::assert_snapshot!("palette_suggests_namespaces_80x24", screen);
    // In the demo, :ns is refused with the reason rather than attempted.
    let effects = type_text(&mut app, &v, "\n");
    assert!(effects.is_empty());
    assert!(app.notice.as_ref().is_some_and(|n| n.text.contains("live cluster")), "{:?}", app.notice);

    type_text(&mut app, &v, ":scenario fr\t");
    assert_eq!(palette_line(&app), "scenario fragmented");
    let effects = type_text(&mut app, &v, "\n");
    assert_eq!(effects, [kgpu::app::Effect::SwitchSource(kgpu::app::SourceSwitch::Scenario("fragmented".into()))]);

    // k9s's aliases.
    type_text(&mut app, &v, ":po\n");
    assert_eq!(app.pane, Pane::Pending);
    type_text(&mut app, &v, ":no\n");
    assert_eq!(app.pane, Pane::Fleet);
}

fn node_names_on(screen: &str) -> Vec<String> {
    screen
        .lines()
        .filter_map(|l| l.trim_matches('"').strip_prefix('│'))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.contains('-') && w.chars().next().is_some_and(|c| c.is_ascii_lowercase()))
        .map(str::to_string)
        .collect()
}

/// `/` as k9s users type it: a regex, the inverse, a label selector; every
/// visible column is searched; no match keeps the header and says so.
#[test]
fn filters_take_regexes_inverses_and_label_selectors() {
    let v = views("default");
    let fleet = |filter: &str| {
        let mut app = App::new(false, "dark", true);
        app.filters.insert(Pane::Fleet, filter.to_string());
        format!("{}", render(&mut app, &v, "default", 200, 60).backend())
    };
    assert_eq!(node_names_on(&fleet("h100-0[12]")), ["h100-01", "h100-02"]);
    let not_a100 = node_names_on(&fleet("!a100"));
    assert!(!not_a100.is_empty() && not_a100.iter().all(|n| !n.starts_with("a100")), "{not_a100:?}");
    let l40s = node_names_on(&fleet("-l nvidia.com/gpu.product=NVIDIA-L40S"));
    assert_eq!(l40s.len(), 8, "{l40s:?}");
    assert!(l40s.iter().all(|n| n.starts_with("l40s")));
    let no_match = fleet("no-such-node");
    assert!(no_match.contains("NODE") && no_match.contains("no match"), "the header stays:\n{no_match}");
    let mut app = App::new(false, "dark", true);
    app.filters.insert(Pane::Fleet, "no-such-node".into());
    let screen = format!("{}", render(&mut app, &v, "default", 80, 24).backend());
    insta::assert_snapshot!("fleet_filter_without_a_match_80x24", screen);

    // The Events TYPE column is searched too.
    let v = views("black-hole");
    let mut app = App::new(false, "dark", true);
    app.pane = Pane::Events;
    app.filters.insert(Pane::Events, "warning".into());
    let screen = format!("{}", render(&mut app, &v, "black-hole", 200, 60).backend());
    assert!(screen.contains("UnexpectedAdmissi") && screen.contains("Events (1 of 2)"), "{screen}");

    // A bad regex is matched as text, and the status line says so.
    let mut app = App::new(false, "dark", true);
    type_text(&mut app, &v, "/h100-0[");
    assert!(app.notice.as_ref().is_some_and(|n| n.text.contains("not a regex")), "{:?}", app.notice);
}

/// `esc` goes back to where a jump came from, and the title shows the path.
#[test]
fn esc_returns_to_where_the_jump_came_from() {
    let v = views("gang-deadlock");
    let mut app = App::new(false, "dark", true);
    app.pane = Pane::Gangs;
    key(&mut app, &v, KeyCode::Enter);
    assert_eq!(app.pane, Pane::Pending, "enter on a pending gang opens its chain");
    let name = app.drill.clone().expect("the chain is open");
    let screen = format!("{}", render(&mut app, &v, "gang-deadlock", 200, 60).backend());
    assert!(screen.contains(&format!("Gangs & Queues › {name} · esc: back")), "{screen}");
    key(&mut app, &v, KeyCode::Esc);
    assert_eq!((app.pane, app.drill.as_deref()), (Pane::Gangs, None), "back where it came from");

    // A direct move forgets the way back: esc then only closes the chain.
    key(&mut app, &v, KeyCode::Enter);
    key(&mut app, &v, KeyCode::Char('2'));
    key(&mut app, &v, KeyCode::Esc);
    assert_eq!(app.pane, Pane::Pending);

    // Enter on a pool lists its nodes; esc returns to the pools.
    let v = views("default");
    let mut app = App::new(false, "dark", true);
    app.aggregate = Some(true);
    key(&mut app, &v, KeyCode::Enter);
    let pool = app.filters.get(&Pane::Fleet).cloned().expect("narrowed to a pool");
    let screen = format!("{}", render(&mut app, &v, "default", 200, 60).backend());
    assert!(screen.contains(&format!("Pools › {pool} (")), "{screen}");
    key(&mut app, &v, KeyCode::Esc);
    assert!(!app.filters.contains_key(&Pane::Fleet) && app.aggregated(&v));
}

/// The pools' title counts what the table shows: under a filter, the nodes
/// of the pools it keeps (the nodes' title does the same).
#[test]
fn the_pools_title_counts_the_nodes_of_the_pools_shown() {
    let v = views("default");
    let mut app = App::new(false, "dark", true);
    app.aggregate = Some(true);
    let all = format!("{}", render(&mut app, &v, "default", 80, 24).backend());
    let pools: std::collections::BTreeSet<_> = v.nodes.iter().map(|r| r.pool.clone()).collect();
    assert!(all.contains(&format!("Pools ({} nodes in {} pools)", v.nodes.len(), pools.len())), "{all}");
    app.filters.insert(Pane::Fleet, "h100".into());
    let h100 = v.nodes.iter().filter(|r| r.pool.as_str() == "h100").count();
    assert!(h100 > 0 && h100 < v.nodes.len());
    let screen = format!("{}", render(&mut app, &v, "default", 80, 24).backend());
    assert!(screen.contains(&format!("Pools ({h100} nodes in 1 pool)")), "{screen}");
}

/// An error stays on the status line until esc; one too long for the line
/// is cut where it says so, and `:messages` has every message whole.
#[test]
fn errors_stay_until_dismissed_and_messages_keeps_them_whole() {
    let v = views("default");
    let mut app = App::new(false, "dark", true);
    let long = format!(
        "drain gpu-07: cordoned, 3 of 5 pod(s) evicted; {}",
        "pod team-a/x blocked by a PodDisruptionBudget; ".repeat(3)
    );
    app.update(Msg::Notice { text: long.clone(), error: true }, &v);
    key(&mut app, &v, KeyCode::Char('j'));
    assert!(app.notice.is_some(), "an error outlives the next key");
    let screen = format!("{}", render(&mut app, &v, "default", 80, 24).backend());
    let status = screen.lines().last().unwrap();
    assert!(status.contains("drain gpu-07: cordoned") && status.contains("(:messages)"), "{status}");
    app.update(Msg::Notice { text: "theme light".into(), error: false }, &v);
    type_text(&mut app, &v, ":messages\n");
    let screen = format!("{}", render(&mut app, &v, "default", 200, 60).backend());
    assert!(screen.contains("messages (2 of at most 200)"), "{screen}");
    assert!(screen.contains("blocked by a PodDisruptionBudget; pod team-a/x blocked"), "whole: {screen}");
    let newest = screen.find("theme light").unwrap();
    let older = screen.find("drain gpu-07").unwrap();
    assert!(newest < older, "newest first");
    key(&mut app, &v, KeyCode::Esc);
    assert!(app.overlay.is_none());
    // An error is dismissed by esc before esc does anything else.
    app.update(Msg::Notice { text: "the source stopped".into(), error: true }, &v);
    app.filters.insert(Pane::Fleet, "h100".into());
    key(&mut app, &v, KeyCode::Esc);
    assert!(app.notice.is_none() && app.filters.contains_key(&Pane::Fleet));
    key(&mut app, &v, KeyCode::Esc);
    assert!(!app.filters.contains_key(&Pane::Fleet));
}

/// Enter opens what a row cuts short: an event in full, a running gang, a
/// queue; the node detail has conditions, allocated against allocatable,
/// its agent's GPUs and its recent events.
#[test]
fn enter_opens_events_gangs_queues_and_full_node_details() {
    let v = views("black-hole");
    let mut app = App::new(false, "dark", true);
    app.pane = Pane::Events;
    app.filters.insert(Pane::Events, "warning".into());
    key(&mut app, &v, KeyCode::Enter);
    let screen = format!("{}", render(&mut app, &v, "black-hole", 200, 60).backend());
    assert!(screen.contains(" event · esc close "), "{screen}");
    assert!(screen.contains("which is unexpected"), "the whole message: {screen}");

    // The node the pods bounce off: its conditions, allocation and events.
    let mut app = App::new(false, "dark", true);
    app.selected.insert(Pane::Fleet, "gpu-03".into());
    key(&mut app, &v, KeyCode::Enter);
    let screen = format!("{}", render(&mut app, &v, "black-hole", 200, 60).backend());
    for part in [
        "conditions: Ready=True",
        "allocated (requests) of allocatable:",
        "nvidia.com/gpu",
        "recent events (",
        "UnexpectedAdmissionError",
        "agent:",
    ] {
        assert!(screen.contains(part), "node detail lacks '{part}':\n{screen}");
    }
    insta::assert_snapshot!("node_detail_of_a_black_hole_200x60", screen);

    let v = views("default");
    let running = v.analysis.gangs.iter().find(|g| g.state.as_str() == "running").expect("a running gang");
    let mut app = App::new(false, "dark", true);
    app.pane = Pane::Gangs;
    app.selected.insert(Pane::Gangs, kgpu::app::gang_id(&running.key));
    key(&mut app, &v, KeyCode::Enter);
    let screen = format!("{}", render(&mut app, &v, "default", 200, 60).backend());
    assert!(screen.contains(" gang · esc close ") && screen.contains(&running.display_name()), "{screen}");
    assert!(screen.contains("nodes:") && screen.contains("kubectl get "), "{screen}");
    let age = kgpu::model::time::age(running.age);
    assert!(screen.contains(&format!("age: {age}")), "the gang's age as its row says it ({age}): {screen}");
    key(&mut app, &v, KeyCode::Esc);
    key(&mut app, &v, KeyCode::Tab);
    key(&mut app, &v, KeyCode::Enter);
    let screen = format!("{}", render(&mut app, &v, "default", 200, 60).backend());
    assert!(screen.contains(" queue · esc close ") && screen.contains("nominal"), "{screen}");
}

/// Shift and a column's letter sorts a table by it, again reverses, and the
/// title says so; every table has its letters.
#[test]
fn shift_letters_sort_every_table_and_the_title_says_how() {
    let v = views("default");
    let mut app = App::new(false, "dark", true);
    key(&mut app, &v, KeyCode::Char('F'));
    let screen = format!("{}", render(&mut app, &v, "default", 200, 60).backend());
    assert!(screen.contains("Nodes (64) · sort: free GPUs"), "{screen}");
    let names = node_names_on(&screen);
    // Free as the totals count it: a cordoned node's GPUs are unavailable, not free.
    let free_of = |n: &str| v.nodes.iter().find(|r| r.name.as_str() == n).unwrap().buckets.free;
    let frees: Vec<u64> = names.iter().map(|n| free_of(n)).collect();
    assert!(frees.windows(2).all(|w| w[0] >= w[1]), "most free first: {frees:?}");
    key(&mut app, &v, KeyCode::Char('F'));
    let screen = format!("{}", render(&mut app, &v, "default", 200, 60).backend());
    assert!(screen.contains("sort: free GPUs (reversed)"), "{screen}");
    let frees: Vec<u64> = node_names_on(&screen).iter().map(|n| free_of(n)).collect();
    assert!(frees.windows(2).all(|w| w[0] <= w[1]), "least free first: {frees:?}");

    // Pending by age; the selection follows its row, not its place.
    let mut app = App::new(false, "dark", true);
    app.pane = Pane::Pending;
    key(&mut app, &v, KeyCode::Char('A'));
    let rows = kgpu::app::rows::pending(&v, "", app.sorting(Pane::Pending, kgpu::app::Section::First));
    assert!(rows.windows(2).all(|w| w[0].age >= w[1].age), "oldest first");
    let screen = format!("{}", render(&mut app, &v, "default", 200, 60).backend());
    assert!(screen.contains("Pending (5) · sort: oldest"), "{screen}");

    // Every table with columns answers to each of its letters.
    for pane in Pane::ALL {
        let mut app = App::new(false, "dark", true);
        app.pane = pane;
        if pane == Pane::Drivers {
            key(&mut app, &v, KeyCode::Tab);
        }
        for column in app.sort_columns(&v) {
            key(&mut app, &v, KeyCode::Char(column.letter));
            assert_eq!(app.sorting(pane, app.section(pane)).map(|s| s.letter), Some(column.letter), "{pane:?}");
        }
    }
}

/// PgDn moves by the rows the table shows, not a fixed ten.
#[test]
fn page_down_moves_a_screenful() {
    let v = views("default");
    for h in [24u16, 60] {
        let mut app = App::new(false, "dark", true);
        render(&mut app, &v, "default", 200, h);
        key(&mut app, &v, KeyCode::PageDown);
        let ids = app.row_ids(Pane::Fleet, &v);
        let at = ids.iter().position(|id| Some(id) == app.selected.get(&Pane::Fleet)).unwrap();
        let shown = render(&mut app, &v, "default", 200, h);
        let rows = format!("{}", shown.backend())
            .lines()
            .filter(|l| l.contains("│a100-") || l.contains("│h100-") || l.contains("│cpu-") || l.contains("│l40s-"))
            .count();
        assert_eq!(at, rows, "at {h} lines PgDn moved {at}, the table shows {rows} rows");
        assert_ne!(at, 10);
    }
}

/// At 80 columns an identifying column keeps what tells rows apart: names
/// whole where there is room, else cut in the middle, never to one prefix.
#[test]
fn narrow_identifying_columns_keep_names_apart() {
    use kgpu::ui::widgets::fit_id;
    let a = "team-research/long-running-queue-alpha";
    let b = "team-research/long-running-queue-bravo";
    for width in [8, 14, 20] {
        assert_ne!(fit_id(a, width), fit_id(b, width), "at {width}");
        assert!(fit_id(a, width).chars().count() <= width);
    }
    assert_eq!(fit_id("short", 20), "short");
    // The default fleet's gangs at 80 columns: every name whole.
    let v = views("default");
    let mut app = App::new(false, "dark", true);
    app.pane = Pane::Gangs;
    let screen = format!("{}", render(&mut app, &v, "default", 80, 24).backend());
    for g in &v.analysis.gangs {
        assert!(screen.contains(&g.display_name()), "{} cut:\n{screen}", g.display_name());
    }
}

/// The README's key table names every key the handler binds (the help is
/// generated from the same table, so it cannot drift; the README can).
#[test]
fn the_readme_key_table_names_every_bound_key() {
    let readme = include_str!("../README.md");
    let start = readme.find("## Keys").unwrap();
    let end = start + readme[start..].find("\n## ").unwrap_or(readme.len() - start);
    let section = &readme[start..end];
    let mut tokens = std::collections::HashSet::new();
    for quoted in section.split('`').skip(1).step_by(2) {
        for t in quoted.split_whitespace() {
            tokens.insert(t.to_string());
            if t.chars().all(|c| "←→↑↓".contains(c)) {
                tokens.extend(t.chars().map(String::from));
            }
        }
    }
    for binding in kgpu::app::keys::BINDINGS {
        for token in binding.label.split_whitespace() {
            let digit_range =
                token.len() == 1 && token.chars().all(|c| c.is_ascii_digit()) && section.contains("`1`…`7`");
            assert!(digit_range || tokens.contains(token), "README's key table lacks `{token}` ({})", binding.help);
        }
    }
}

#[test]
fn the_status_bar_offers_requeue_only_for_a_gang() {
    let (mut gangs, mut pods) = (0, 0);
    for scenario in ["default", "quota-starvation", "taint-mismatch", "fragmented"] {
        let v = views(scenario);
        let mut app = App::new(false, "dark", true);
        app.pane = Pane::Pending;
        for _ in 0..v.analysis.pending.len() {
            let Some(id) = app.selected_id(Pane::Pending, &v) else { break };
            let Some(item) = v.analysis.pending.iter().find(|p| p.display_name() == id) else { break };
            let is_gang = item.kind != kgpu::analysis::pending::PendingKind::Pod;
            let bar = bottom_line(&render(&mut app, &v, scenario, 200, 60));
            assert_eq!(bar.contains("R requeue"), is_gang, "{scenario} {id}: {bar}");
            // The why view says the same.
            key(&mut app, &v, KeyCode::Enter);
            let bar = bottom_line(&render(&mut app, &v, scenario, 200, 60));
            assert_eq!(bar.contains("R requeue"), is_gang, "{scenario} {id} (why view): {bar}");
            key(&mut app, &v, KeyCode::Esc);
            if is_gang {
                gangs += 1
            } else {
                pods += 1
            }
            key(&mut app, &v, KeyCode::Char('j'));
        }
    }
    assert!(gangs > 0 && pods > 0, "both kinds seen ({gangs} gangs, {pods} pods)");
}

#[test]
fn a_long_confirmation_scrolls_to_its_last_step_at_80x24() {
    // A repartition's steps end with the mig.config label and the uncordon:
    // below the fold at 80×24, reached with G, and the border says so.
    let v = views("mig-mismatch");
    let mut app = App::new(false, "dark", true);
    app.aggregate = Some(false);
    key(&mut app, &v, KeyCode::Char('m'));
    key(&mut app, &v, KeyCode::Enter);
    let top = format!("{}", render(&mut app, &v, "mig-mismatch", 80, 24).backend());
    assert!(top.contains("confirm repartition"), "{top}");
    assert!(top.contains("more line(s): j/PgDn") && !top.contains("kubectl uncordon"), "{top}");
    key(&mut app, &v, KeyCode::Char('G'));
    let bottom = format!("{}", render(&mut app, &v, "mig-mismatch", 80, 24).backend());
    assert!(bottom.contains("kubectl uncordon") && bottom.contains("mig.config="), "{bottom}");
    assert!(!bottom.contains("more line(s)") && bottom.contains("k/PgUp"), "{bottom}");
    // The question and the keys stay in sight while it scrolls.
    assert!(bottom.contains(" y  run") && bottom.contains("Repartition"), "{bottom}");
    key(&mut app, &v, KeyCode::Char('k'));
    let back = format!("{}", render(&mut app, &v, "mig-mismatch", 80, 24).backend());
    assert!(back.contains("more line(s)"), "{back}");
}

#[test]
fn ctrl_u_clears_the_palette_line_as_a_shell_does() {
    let v = views("default");
    let mut app = App::new(false, "dark", true);
    key(&mut app, &v, KeyCode::Char(':'));
    for c in "gangs".chars() {
        key(&mut app, &v, KeyCode::Char(c));
    }
    app.update(Msg::Key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL)), &v);
    for c in "pending".chars() {
        key(&mut app, &v, KeyCode::Char(c));
    }
    key(&mut app, &v, KeyCode::Enter);
    assert_eq!(app.pane, kgpu::app::Pane::Pending);
}

#[test]
fn why_from_a_small_fleet_is_titled_from_the_fleet_not_the_pools() {
    let v = views("mig-mismatch");
    let mut app = App::new(false, "dark", true);
    assert!(!app.aggregated(&v), "a small fleet lists its nodes");
    key(&mut app, &v, KeyCode::Char(':'));
    for c in "why inference/llm-70b-7f6c5-0".chars() {
        key(&mut app, &v, KeyCode::Char(c));
    }
    key(&mut app, &v, KeyCode::Enter);
    let screen = format!("{}", render(&mut app, &v, "mig-mismatch", 80, 24).backend());
    assert!(screen.contains("Fleet › inference/llm-70b"), "{screen}");
    assert!(!screen.contains("Pools ›"), "{screen}");
}

/// The pools' map asked for (`a`) on a small fleet, `:why`, then esc: back
/// on the pools' map, where the title said the way led.
#[test]
fn esc_from_why_returns_to_the_pools_it_came_from() {
    let v = views("mig-mismatch");
    let mut app = App::new(false, "dark", true);
    key(&mut app, &v, KeyCode::Char('a'));
    assert!(app.aggregated(&v));
    key(&mut app, &v, KeyCode::Char(':'));
    for c in "why inference/llm-70b-7f6c5-0".chars() {
        key(&mut app, &v, KeyCode::Char(c));
    }
    key(&mut app, &v, KeyCode::Enter);
    let screen = format!("{}", render(&mut app, &v, "mig-mismatch", 80, 24).backend());
    assert!(screen.contains("Pools › inference/llm-70b"), "{screen}");
    key(&mut app, &v, KeyCode::Esc);
    key(&mut app, &v, KeyCode::Esc);
    assert_eq!(app.pane, kgpu::app::Pane::Fleet);
    assert!(app.aggregated(&v), "back on the pools' map");
}

#[test]
fn an_xid_48_gpu_gets_the_advice_an_expert_gives() {
    use kgpu::view_model::style::DocLine;
    let v = views("default");
    let doc = kgpu::view_model::docs::node(&v, kgpu::model::Sym::new("h100-07"));
    let text: Vec<String> = doc
        .lines
        .iter()
        .map(|l| match l {
            DocLine::Pieces(pieces) => pieces.iter().map(|(_, t)| t.as_str()).collect::<String>(),
            DocLine::Command { prefix, text } => format!("{prefix}{text}"),
        })
        .collect();
    let advice = text.iter().find(|l| l.starts_with("→ Xid 48")).unwrap_or_else(|| panic!("{text:#?}"));
    assert!(advice.contains("cordon h100-07 so no new pod lands on the GPU"), "{advice}");
    assert!(advice.contains("nvidia-smi -q -d ROW_REMAPPER -i 3") && advice.contains("RMA"), "{advice}");
}

/// Every box title of every pane (both sections), in every scenario, at
/// 80, 100 and 200 columns: a title too long for its box gives way to a
/// shorter one or ends in `…`, never runs into the corner, cut mid-word.
#[test]
fn no_title_runs_into_its_corner() {
    for scenario in kgpu::sources::sim::scenarios::names() {
        let v = views(scenario);
        for (w, h) in [(80, 24), (100, 30), (200, 60)] {
            for pane in Pane::ALL {
                for section in 0..2 {
                    let mut app = App::new(false, "dark", true);
                    app.pane = pane;
                    render(&mut app, &v, scenario, w, h);
                    if section == 1 {
                        key(&mut app, &v, KeyCode::Tab);
                    }
                    let screen = format!("{}", render(&mut app, &v, scenario, w, h).backend());
                    for line in screen.lines() {
                        let chars: Vec<char> = line.trim_matches('"').chars().collect();
                        let Some(corner) = chars.iter().rposition(|c| *c == '┐') else { continue };
                        let before = corner.checked_sub(1).map(|i| chars[i]);
                        assert!(
                            matches!(before, Some('─' | ' ' | '┌')),
                            "{scenario} {pane:?} section {section} at {w}×{h}: a title runs into its corner:\n{line}"
                        );
                    }
                }
            }
        }
    }
}

/// `:` while reading a node's details opens the palette, as from a pane;
/// the status bar names the keys of what is open, not the pane's under it.
#[test]
fn the_palette_opens_from_a_reader_and_the_status_bar_names_the_readers_keys() {
    let v = views("black-hole");
    let mut app = App::new(false, "dark", true);
    key(&mut app, &v, KeyCode::Enter);
    assert!(matches!(app.overlay, Some(kgpu::app::Overlay::NodeDetail { .. })));
    let screen = format!("{}", render(&mut app, &v, "black-hole", 80, 24).backend());
    let bar = screen.lines().last().unwrap_or("");
    assert!(bar.contains("esc/q/enter close") && !bar.contains("c cordon"), "{bar}");
    key(&mut app, &v, KeyCode::Char(':'));
    assert!(matches!(app.overlay, Some(kgpu::app::Overlay::Palette(_))));
}

/// A node with more GPU cells than the map's column (a MIG node's slices)
/// ends its map in `…`, inside the column, not cut off by it.
#[test]
fn a_map_wider_than_its_column_says_so() {
    let screen = pane_at("mig-vs-timeslicing", Pane::Fleet, 80, 24);
    let row = screen.lines().find(|l| l.contains("mig-01")).unwrap_or_else(|| panic!("{screen}"));
    assert!(row.contains("…"), "{row}");
}

/// A label selector typed on Drivers or MIG keeps the rows of the nodes it
/// selects (their labels are looked up only then), and no filter keeps all.
#[test]
fn a_label_selector_filters_the_drivers_and_mig_rows() {
    for (scenario, rows) in [
        (
            "driver-skew",
            (|v: &Views, f: &str| {
                kgpu::app::rows::upgrades(v, f, None).iter().map(|u| u.node.to_string()).collect::<Vec<_>>()
            }) as fn(&Views, &str) -> Vec<String>,
        ),
        ("mig-mismatch", |v: &Views, f: &str| {
            kgpu::app::rows::mig(v, f, None).iter().map(|m| m.node.to_string()).collect()
        }),
    ] {
        let v = views(scenario);
        let all = rows(&v, "");
        assert!(all.len() > 1, "{scenario}: {all:?}");
        let first = &all[0];
        let selected = rows(&v, &format!("-l kubernetes.io/hostname={first}"));
        assert_eq!(selected, std::slice::from_ref(first), "{scenario}");
        assert!(rows(&v, "-l kubernetes.io/hostname=no-such-node").is_empty(), "{scenario}");
    }
}

/// A refusal nobody has confirmed (it rests on consumable capacity, which
/// kgpu does not model, and the scheduler has said nothing): the why view
/// marks its step `?`, not `✗`, and says whose word is missing.
#[test]
fn a_step_kgpu_cannot_tell_is_marked_as_undecided_in_the_why_view() {
    use kgpu::model::{Cluster, SourceInfo, SourceKind};
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/verdicts/hand-made/dra-unmodelled.yaml");
    let (events, newest, _) = kgpu::sources::file::load(&[path.into()]).unwrap();
    let mut cluster = Cluster::new(SourceInfo { kind: SourceKind::File, name: "dra-unmodelled".into() });
    cluster.apply_all(events);
    let v = Views::build(Arc::new(cluster.snapshot()), newest, &Thresholds::default(), None);
    let mut app = App::new(false, "dark", true);
    key(&mut app, &v, KeyCode::Char(':'));
    for c in "why ml/rerank-0".chars() {
        key(&mut app, &v, KeyCode::Char(c));
    }
    key(&mut app, &v, KeyCode::Enter);
    let screen = format!("{}", render(&mut app, &v, "dra-unmodelled", 200, 60).backend());
    assert!(screen.contains("3 ? DRA resource claims: kgpu cannot tell"), "{screen}");
    assert!(!screen.contains("3 ✗"), "{screen}");
    // A step the scheduler refused is still a block.
    key(&mut app, &v, KeyCode::Esc);
    key(&mut app, &v, KeyCode::Char(':'));
    for c in "why ml/rerank-big-0".chars() {
        key(&mut app, &v, KeyCode::Char(c));
    }
    key(&mut app, &v, KeyCode::Enter);
    let screen = format!("{}", render(&mut app, &v, "dra-unmodelled", 200, 60).backend());
    assert!(screen.contains("3 ✗ DRA resource claims: the scheduler says"), "{screen}");
}

/// Every pane's status bar names the help key at 80 columns: it is the way
/// to every other key (a newcomer on Fleet and MIG saw `r drain` and no `?`).
#[test]
fn the_help_key_is_named_on_every_pane_at_80_columns() {
    for pane in [Pane::Fleet, Pane::Pending, Pane::Gangs, Pane::Mig, Pane::Drivers, Pane::Events, Pane::Usage] {
        let screen = pane_at("default", pane, 80, 24);
        let status = screen.lines().rev().find(|l| !l.trim_matches(['"', ' ']).is_empty()).unwrap_or("");
        assert!(status.contains("? help"), "{pane:?}: {status}");
    }
}

/// A DRA node's detail counts its pods' GPUs as their claims hold them (a
/// newcomer read `gpu 0` beside the Usage pane's `HELD 1`), leaves out an
/// empty nvidia.com/gpu row, and says why it has no GPU labels.
#[test]
fn a_dra_nodes_detail_counts_the_gpus_its_pods_claims_hold() {
    let v = views("dra-claims");
    let node = v.nodes.iter().find(|n| n.name.as_str() == "h100-dra-02").expect("h100-dra-02");
    let dra = node.dra.expect("published through DRA");
    let mut app = App::new(false, "dark", true);
    app.selected.insert(Pane::Fleet, "h100-dra-02".into());
    key(&mut app, &v, KeyCode::Enter);
    let screen = format!("{}", render(&mut app, &v, "dra-claims", 200, 60).backend());
    let held_lines = screen.lines().filter(|l| l.contains("gpu 1 (1 through DRA claims)")).count() as u64;
    assert_eq!(held_lines, dra.allocated, "{screen}");
    assert!(!screen.contains("nvidia.com/gpu            0 of"), "{screen}");
    assert!(
        screen.contains("none (no GPU Feature Discovery labels; its ResourceSlices describe the GPUs)"),
        "{screen}"
    );
}

/// `m` on a node whose GPUs come through DRA and that no MIG manager
/// labels: it says so and why, with the product the slices publish (it had
/// said `no MIG configs known for this GPU (unknown product)`).
#[test]
fn repartitioning_a_dra_node_says_why_there_is_nothing_to_change() {
    let v = views("dra-claims");
    let no = kgpu::actions::choose::mig_configs(&v.snap, kgpu::model::Sym::new("h100-dra-02")).unwrap_err();
    assert!(
        no.words().starts_with(
            "h100-dra-02 publishes its GPUs through DRA (NVIDIA H100 80GB HBM3) and has no nvidia.com/mig.config label"
        ),
        "{}",
        no.words()
    );
}

/// `:why` with a name that is not pending says whether it exists at all (a
/// typo read the same as a placed pod).
#[test]
fn why_of_a_name_that_is_not_pending_says_whether_it_exists() {
    let v = views("default");
    let said = |target: &str| {
        let mut app = App::new(false, "dark", true);
        key(&mut app, &v, KeyCode::Char(':'));
        for c in format!("why {target}").chars() {
            key(&mut app, &v, KeyCode::Char(c));
        }
        key(&mut app, &v, KeyCode::Enter);
        format!("{}", render(&mut app, &v, "default", 200, 60).backend())
    };
    for (target, what) in
        [("ml/no-such-pod", "does not exist (namespace/name)"), ("kube-system/nope", "does not exist")]
    {
        let screen = said(target);
        assert!(screen.contains(&format!("{target} {what}")), "{screen}");
    }
    let running = v.snap.pods.values().find(|p| p.node.is_some()).expect("a placed pod");
    let target = format!("{}/{}", running.namespace, running.name);
    let screen = said(&target);
    assert!(screen.contains(&format!("{target} is not pending")), "{screen}");
}

/// Nodes the GPU Operator's upgrade controller has not labelled (DRA nodes
/// without the operator) read as such in the waves table, not `unknown
/// unknown`.
#[test]
fn nodes_without_an_upgrade_label_say_so_in_the_waves_table() {
    let v = views("dra-claims");
    let mut app = App::new(false, "dark", true);
    app.pane = Pane::Drivers;
    let screen = format!("{}", render(&mut app, &v, "dra-claims", 200, 60).backend());
    let row = screen.lines().find(|l| l.contains("h100-dra-01")).unwrap_or_else(|| panic!("{screen}"));
    assert!(row.contains("no upgrade label") && !row.contains("unknown"), "{row}");
}

/// The help says how every shape the SHAPE columns write reads.
#[test]
fn the_help_explains_every_shape_the_panes_write() {
    let v = views("default");
    let mut app = App::new(false, "dark", true);
    key(&mut app, &v, KeyCode::Char('?'));
    let mut seen = String::new();
    for _ in 0..6 {
        seen.push_str(&format!("{}", render(&mut app, &v, "default", 200, 60).backend()));
        key(&mut app, &v, KeyCode::PageDown);
    }
    for shape in ["1×2 DRA MIG", "1×? DRA", "1×DRA devices", "1×1 example.com/gpu", "1×cpu + 4×8"] {
        assert!(seen.contains(shape), "{shape} not in the help:\n{seen}");
    }
}

/// A Fragmentation panel cut by the terminal's height says how much is
/// hidden and where it is whole (at 80×24 the plan's reason ended
/// mid-sentence with no mark).
#[test]
fn a_cut_fragmentation_panel_says_what_it_hides() {
    let screen = pane_at("taint-mismatch", Pane::Fleet, 80, 24);
    assert!(screen.contains("more line(s) (kgpu snapshot --pane fragmentation)"), "{screen}");
    let screen = pane_at("taint-mismatch", Pane::Fleet, 200, 60);
    assert!(!screen.contains("more line(s)"), "{screen}");
}

/// Where some node gives its GPUs through DRA, the Fleet says how each
/// node gives them (a newcomer could not tell the DRA nodes apart); a fleet
/// without DRA keeps its columns.
#[test]
fn the_fleet_says_which_nodes_give_gpus_through_dra() {
    for (w, h) in [(80, 24), (200, 60)] {
        let screen = pane_at("dra-claims", Pane::Fleet, w, h);
        assert!(screen.contains(" VIA "), "{screen}");
        let row = |name: &str| screen.lines().find(|l| l.contains(name)).unwrap_or_default().to_string();
        assert!(row("h100-dra-01").contains(" DRA "), "{screen}");
        assert!(row("h100-dp-01").contains(" plugin "), "{screen}");
    }
    assert!(!pane_at("fragmented", Pane::Fleet, 200, 60).contains(" VIA "));
}
