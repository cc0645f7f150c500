//! Every built-in theme keeps text readable: no role's foreground is its
//! own background, and no cell of any pane — the selected row, the tabs,
//! the dialogs' colours included — is drawn in the colour it stands on.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use kgpu::analysis::Thresholds;
use kgpu::app::{App, Msg, Pane};
use kgpu::runtime::load;
use kgpu::ui::theme::{BUILTIN, Role};
use kgpu::ui::{self, Context, Theme};
use kgpu::view_model::panes::Views;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::style::{Color, Modifier};

#[test]
fn every_role_foreground_differs_from_its_background() {
    for (name, _) in BUILTIN {
        let theme = Theme::builtin(name);
        for role in Role::ALL {
            let style = theme.style(role);
            if let (Some(fg), Some(bg)) = (style.fg, style.bg) {
                assert_ne!(fg, bg, "theme {name}: role {} is {fg:?} on {bg:?}", role.name());
            }
        }
    }
}

/// The colours a cell shows: reversed swaps them.
fn shown(cell: &ratatui::buffer::Cell) -> (Color, Color) {
    if cell.modifier.contains(Modifier::REVERSED) { (cell.bg, cell.fg) } else { (cell.fg, cell.bg) }
}

#[test]
fn no_cell_of_any_pane_is_drawn_in_the_colour_it_stands_on() {
    let (snap, now) = load::demo("default", 1, 0).unwrap();
    let views = Views::build(Arc::new(snap), now, &Thresholds::default(), None);
    let context = Context { source: "demo:default".into(), subtitle: String::new(), production: true };
    for (name, _) in BUILTIN {
        let theme = Theme::builtin(name);
        // Every pane, and the overlays over one: the help, the pending
        // drilldown, the palette.
        let mut screens: Vec<(Pane, Option<KeyCode>)> = Pane::ALL.iter().map(|p| (*p, None)).collect();
        screens.extend([
            (Pane::Fleet, Some(KeyCode::Char('?'))),
            (Pane::Pending, Some(KeyCode::Enter)),
            (Pane::Fleet, Some(KeyCode::Char(':'))),
        ]);
        for (pane, key) in screens {
            for (w, h) in [(80, 24), (200, 60)] {
                let mut app = App::new(false, name, name == "mono");
                app.pane = pane;
                if let Some(code) = key {
                    app.update(Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)), &views);
                }
                let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
                let mut seen = Default::default();
                terminal.draw(|f| seen = ui::draw(f, &app, &views, &theme, &context)).unwrap();
                app.update(Msg::Viewport(seen), &views);
                terminal.draw(|f| _ = ui::draw(f, &app, &views, &theme, &context)).unwrap();
                let buffer = terminal.backend().buffer();
                for y in 0..h {
                    for x in 0..w {
                        let cell = &buffer[(x, y)];
                        let (fg, bg) = shown(cell);
                        if cell.symbol().trim().is_empty() || fg == Color::Reset || bg == Color::Reset {
                            continue;
                        }
                        assert_ne!(
                            fg,
                            bg,
                            "theme {name}, pane {pane:?} after {key:?} at {w}x{h}: '{}' at ({x},{y})",
                            cell.symbol()
                        );
                    }
                }
            }
        }
    }
}
