//! Pending pane: every pending pod, Workload and PodGroup with the first
//! step that blocks it; `enter` opens the isolation chain with its evidence
//! and kubectl commands.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};

use crate::app::{App, Pane, Section, Viewport, rows};
use crate::ui::theme::{Role, Theme};
use crate::ui::widgets::{self, block, fit, scrolled_text};
use crate::view_model::docs;
use crate::view_model::panes::Views;
use crate::view_model::rows as view_rows;
use crate::view_model::style::Doc;

pub fn draw(frame: &mut Frame, area: Rect, app: &App, shown: &mut Viewport, views: &Views, theme: &Theme) {
    if let Some(id) = app.drill.clone() {
        match views.analysis.pending.iter().find(|p| p.display_name() == id) {
            Some(item) => {
                let name = item.display_name();
                // Requeue acts on a Workload or PodGroup, not on a lone pod.
                let requeue = if docs::offers_requeue(item) { " · R requeue" } else { "" };
                let title = match app.breadcrumb(&name) {
                    Some(path) => format!(" {path} · esc: back · y copy{requeue} "),
                    None => format!(" Why pending: {name} · esc back · y copy{requeue} "),
                };
                return drill(frame, area, app, shown, &docs::why(item), title, theme);
            }
            None => {
                let text = format!("{id} is no longer pending (scheduled, admitted or deleted); esc goes back");
                widgets::empty(frame, area, block(" Why pending ", true, theme), &text, theme);
                return;
            }
        }
    }
    let items = rows::pending(views, app.filter(Pane::Pending), app.sorting(Pane::Pending, Section::First));
    let selected = app.selected_position(Pane::Pending, items.iter().map(|p| p.display_name()));
    let raw = items.iter().filter(|p| p.scheduler_recognised == Some(false)).count();
    let sort = app.sort_title(Pane::Pending, Section::First, false);
    let title = if raw > 0 {
        format!(" Pending ({}){sort} · enter: why · {raw} scheduler message(s) not recognised ", items.len())
    } else {
        format!(" Pending ({}){sort} · enter: why ", items.len())
    };
    if views.analysis.pending.is_empty() {
        widgets::empty(frame, area, block(title, true, theme), "nothing is pending", theme);
        return;
    }
    let wide = area.width >= 120;
    // Wide: as wide as the longest name (of the first screens: those below
    // are cut to it), between 12 and 60; the reason takes the rest.
    let longest = items
        .iter()
        .take(1000)
        .map(|p| p.namespace.as_str().chars().count() + 1 + p.name.chars().count())
        .max()
        .unwrap_or(12);
    let name_w = if wide { longest.clamp(12, 60) } else { 24 };
    let make_row = |i: usize| {
        let r = view_rows::pending_row(items[i]);
        let mut cells = vec![widgets::styled(r.blocked.0, theme.style(r.blocked.1))];
        if wide {
            cells.push(widgets::styled(r.kind, theme.style(Role::Dim)));
        }
        cells.push(widgets::styled(widgets::fit_id(&r.name, name_w), theme.style(Role::Text)));
        if wide {
            cells.push(widgets::styled(r.age, theme.style(Role::Dim)));
        }
        cells.push(widgets::styled(fit(&r.shape, 9), theme.style(Role::Accent)));
        if wide {
            cells.push(widgets::styled(r.queue, theme.style(Role::Dim)));
        }
        cells.push(widgets::styled(r.why, theme.style(Role::Text)));
        cells
    };
    let mut header = vec!["BLOCKED"];
    let mut widths = vec![Constraint::Length(13)];
    if wide {
        header.push("KIND");
        widths.push(Constraint::Length(8));
    }
    header.push("NAME");
    widths.push(Constraint::Length(name_w as u16));
    if wide {
        header.push("AGE");
        widths.push(Constraint::Length(5));
    }
    header.push("SHAPE");
    widths.push(Constraint::Length(9));
    if wide {
        header.push("QUEUE");
        widths.push(Constraint::Length(12));
    }
    header.push("WHY");
    widths.push(Constraint::Min(10));
    let offset = app.offsets.get(&Pane::Pending).copied().unwrap_or(0);
    let offset = widgets::lazy_table(
        frame,
        area,
        block(title, true, theme),
        &header,
        &widths,
        items.len(),
        make_row,
        Some(selected),
        offset,
        theme,
    );
    shown.offsets.push((Pane::Pending, offset));
    shown.page = Some(usize::from(area.height.saturating_sub(3)));
}

fn drill(frame: &mut Frame, area: Rect, app: &App, shown: &mut Viewport, why: &Doc, title: String, theme: &Theme) {
    let lines = widgets::doc(why, theme, area.width.saturating_sub(2) as usize);
    shown.drill_scroll = Some(scrolled_text(frame, area, lines, app.drill_scroll, block(title, true, theme)));
}
