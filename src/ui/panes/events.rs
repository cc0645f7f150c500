//! Events pane: the cluster's events (FailedScheduling, evictions, driver
//! upgrade transitions, ...) newest first, and kgpu's own audit entries.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};

use crate::app::{App, Pane, Section, Viewport, rows};
use crate::ui::theme::{Role, Theme};
use crate::ui::widgets::{self, block, fit};
use crate::view_model::panes::Views;

pub fn draw(frame: &mut Frame, area: Rect, app: &App, shown: &mut Viewport, views: &Views, theme: &Theme) {
    let events = rows::events(views, app.filter(Pane::Events), app.sorting(Pane::Events, Section::First));
    let selected = app.selected_position(Pane::Events, (0..events.len()).map(|i| i.to_string()));
    let filter = app.filter(Pane::Events);
    let sort = app.sort_title(Pane::Events, Section::First, false);
    let title = if filter.is_empty() {
        format!(" Events ({}){sort} ", events.len())
    } else {
        format!(" Events ({} of {}) · /{filter}{sort} ", events.len(), views.events.len())
    };
    if views.events.is_empty() {
        widgets::empty(frame, area, block(title, true, theme), "no events (yet)", theme);
        return;
    }
    let wide = area.width >= 120;
    let make_row = |i: usize| {
        let e = &events[i];
        let mut cells = vec![
            widgets::styled(e.age.clone(), theme.style(Role::Dim)),
            widgets::styled(
                if e.warning { "Warning" } else { "Normal" },
                theme.style(if e.warning { Role::Warn } else { Role::Dim }),
            ),
            widgets::styled(fit(&e.reason, 18), theme.style(Role::Text)),
            widgets::styled(widgets::fit_id(&e.object, if wide { 44 } else { 26 }), theme.style(Role::Accent)),
        ];
        if wide {
            cells.push(widgets::styled(
                // Once is a count too: a blank read as a missing value.
                format!("x{}", e.count.max(1)),
                theme.style(Role::Dim),
            ));
        }
        cells.push(widgets::styled(e.message.clone(), theme.style(Role::Text)));
        cells
    };
    let mut header = vec!["AGE", "TYPE", "REASON", "OBJECT"];
    let mut widths = vec![
        Constraint::Length(5),
        Constraint::Length(7),
        Constraint::Length(18),
        Constraint::Length(if wide { 44 } else { 26 }),
    ];
    if wide {
        header.push("COUNT");
        widths.push(Constraint::Length(5));
    }
    header.push("MESSAGE");
    widths.push(Constraint::Min(10));
    let offset = app.offsets.get(&Pane::Events).copied().unwrap_or(0);
    let offset = widgets::lazy_table(
        frame,
        area,
        block(title, true, theme),
        &header,
        &widths,
        events.len(),
        make_row,
        Some(selected),
        offset,
        theme,
    );
    shown.offsets.push((Pane::Events, offset));
    shown.page = Some(usize::from(area.height.saturating_sub(3)));
}
