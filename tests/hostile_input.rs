//! What a cluster, an agent or a file sends cannot crash the cockpit:
//! absurd counts and placements are drawn as numbers, within the screen.
//! (Issue 20's probes, kept so that they stay fixed.)

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use kgpu::analysis::Thresholds;
use kgpu::app::{App, Msg, Pane};
use kgpu::model::build::{node, pod};
use kgpu::model::{Cluster, ModelEvent, Object, SourceInfo, SourceKind, Sym};
use kgpu::ui::{self, Context, Theme};
use kgpu::view_model::panes::{MAX_CELLS, MigGpuRow, Views};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

const NOW: i64 = 1_796_029_200;

fn screen(app: &mut App, views: &Views, w: u16, h: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
    let mut shown = Default::default();
    terminal.draw(|f| shown = ui::draw(f, app, views, &Theme::builtin("dark"), &Context::default())).unwrap();
    app.update(Msg::Viewport(shown), views);
    format!("{}", terminal.backend())
}

#[test]
fn a_node_that_claims_a_trillion_gpus_is_a_number_not_a_trillion_cells() {
    let mut cluster = Cluster::new(SourceInfo { kind: SourceKind::File, name: "hostile".into() });
    cluster.apply_all([
        ModelEvent::Clock(NOW),
        ModelEvent::Upsert(Object::Node(node("huge").gpus(1_000_000_000_000).build())),
        ModelEvent::Upsert(Object::Node(node("normal").gpus(8).build())),
        ModelEvent::Upsert(Object::Pod(pod("train").gpus(4).on("normal").running().transitioned(NOW - 60).build())),
    ]);
    let views = Views::build(Arc::new(cluster.snapshot()), NOW, &Thresholds::default(), None);
    let huge = views.nodes.iter().find(|r| r.name.as_str() == "huge").unwrap();
    assert!(huge.cells.len() <= MAX_CELLS, "{} cells", huge.cells.len());
    assert_eq!(huge.allocatable, 1_000_000_000_000);
    let mut app = App::new(true, "dark", false);
    for (w, h) in [(80, 24), (200, 60)] {
        let s = screen(&mut app, &views, w, h);
        assert!(s.contains("huge"), "{s}");
    }
    // The pools view, the node detail and every other pane draw too.
    for code in [KeyCode::Char('a'), KeyCode::Char('a'), KeyCode::Enter] {
        app.update(Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)), &views);
        screen(&mut app, &views, 80, 24);
    }
    app.update(Msg::Key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE)), &views);
    for pane in Pane::ALL {
        app.pane = pane;
        screen(&mut app, &views, 200, 60);
    }
}

#[test]
fn a_mig_bar_skips_placements_no_gpu_can_have() {
    let theme = Theme::builtin("dark");
    let p = Sym::new("1g.10gb");
    let gpu = MigGpuRow {
        index: 0,
        enabled: true,
        healthy: true,
        instances: vec![(p, 0, 0, true), (p, 7, 2, false), (p, 250, 10, true), (p, 2, 1, true), (p, 2, 1, false)],
    };
    let bar = ui::panes::mig::slice_bar(&gpu, &theme);
    let text: String = bar.spans.iter().map(|s| s.content.as_ref()).collect();
    // GPU label, then 8 slices of 3 columns between brackets: never wider.
    assert!(text.chars().count() <= 5 + 2 + 8 * 3, "{text}");
    assert_eq!(text.matches("1g").count(), 1, "only the valid instance is drawn: {text}");
}
