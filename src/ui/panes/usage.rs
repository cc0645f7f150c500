//! Usage pane: who holds GPUs and how busy they are, idle holders first,
//! from the kgpu agents or dcgm-exporter; without either, what to install.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Wrap};

use crate::app::{App, Pane, Section, Viewport, rows};
use crate::ui::theme::{Role, Theme};
use crate::ui::widgets::{self, block, fit};
use crate::view_model::panes::Views;
use crate::view_model::usage;

pub fn draw(frame: &mut Frame, area: Rect, app: &App, shown: &mut Viewport, views: &Views, theme: &Theme) {
    let u = &views.analysis.utilization;
    let filter = app.filter(Pane::Usage);
    let sort = app.sort_title(Pane::Usage, Section::First, false);
    let shown_rows = rows::usage(views, filter, app.sorting(Pane::Usage, Section::First));
    // What the numbers are, where they come from: the rules in a line.
    let about = usage::rules(u);
    let brief = usage::rules_brief(u);
    let count = if filter.is_empty() {
        format!("({} pods)", shown_rows.len())
    } else {
        format!("({} of {} pods) · /{filter}", shown_rows.len(), views.usage.len())
    };
    // The key hint goes first, then the rules' long words, when they do not fit.
    let hint = if filter.is_empty() { " · tab: by workload" } else { "" };
    let title = widgets::title(
        area.width,
        &[
            format!(" Usage {count}{sort}{hint} · {about} "),
            format!(" Usage {count}{sort} · {about} "),
            format!(" Usage {count}{sort} · {brief} "),
        ],
    );
    if !u.has_source() {
        let b = block(title, true, theme);
        let inner = b.inner(area);
        frame.render_widget(b, area);
        let lines: Vec<Line> =
            usage::notes(u, &views.snap).into_iter().map(|n| Line::styled(n, theme.style(Role::Text))).collect();
        let inner = Rect { x: inner.x + 1, width: inner.width.saturating_sub(2), ..inner };
        frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), inner);
        return;
    }
    let [summary, table] = Layout::vertical([Constraint::Length(1), Constraint::Min(3)]).areas(area);
    let idle_style = if u.gpus_idle > 0.0 { Role::Warn } else { Role::Ok };
    frame.render_widget(
        Paragraph::new(Line::styled(
            fit(&format!(" {}", usage::summary(u)), summary.width as usize),
            theme.style(idle_style),
        )),
        summary,
    );
    if views.usage.is_empty() {
        widgets::empty(frame, table, block(title, true, theme), "no pod holds a reported GPU", theme);
        return;
    }
    if app.section(Pane::Usage) == Section::Second {
        workloads(frame, table, app, shown, views, theme, [&about, &brief]);
        return;
    }
    let selected = app.selected_position(Pane::Usage, shown_rows.iter().map(|r| r.id()));
    let wide = area.width >= 120;
    let pod_width: u16 = if wide { 44 } else { 28 };
    let make_row = |i: usize| {
        let r = shown_rows[i];
        let busy = if r.is_idle { Role::Warn } else { Role::Text };
        let mut cells = vec![
            widgets::styled(widgets::fit_id(&r.pod, pod_width as usize), theme.style(Role::Accent)),
            widgets::styled(r.held.clone(), theme.style(Role::Text)),
            widgets::styled(r.now.clone(), theme.style(busy)),
            widgets::styled(r.mean.clone(), theme.style(busy)),
            widgets::styled(r.idle.clone(), theme.style(if r.is_idle { Role::Warn } else { Role::Dim })),
            widgets::styled(r.idle_gpu_hours.clone(), theme.style(if r.is_idle { Role::Warn } else { Role::Dim })),
        ];
        if wide {
            cells.push(widgets::styled(r.memory.clone(), theme.style(Role::Text)));
            cells.push(widgets::styled(r.node.clone(), theme.style(Role::Dim)));
            cells.push(widgets::styled(r.queue.clone(), theme.style(Role::Dim)));
            cells.push(widgets::styled(r.age.clone(), theme.style(Role::Dim)));
        }
        cells.push(widgets::styled(r.workload.clone(), theme.style(Role::Dim)));
        cells
    };
    let mut header = vec!["POD", "HELD", "NOW", "MEAN", "IDLE", "IDLE-GPU-H"];
    let mut widths = vec![
        Constraint::Length(pod_width),
        Constraint::Length(9),
        Constraint::Length(4),
        Constraint::Length(4),
        Constraint::Length(6),
        Constraint::Length(10),
    ];
    if wide {
        header.extend(["MEMORY", "NODE", "QUEUE", "AGE"]);
        widths.extend([Constraint::Length(7), Constraint::Length(16), Constraint::Length(12), Constraint::Length(6)]);
    }
    header.push("WORKLOAD");
    widths.push(Constraint::Min(8));
    let offset = app.offsets.get(&Pane::Usage).copied().unwrap_or(0);
    let offset = widgets::lazy_table(
        frame,
        table,
        block(title, true, theme),
        &header,
        &widths,
        shown_rows.len(),
        make_row,
        Some(selected),
        offset,
        theme,
    );
    shown.offsets.push((Pane::Usage, offset));
    shown.page = Some(usize::from(table.height.saturating_sub(3)));
}

/// The second table: the same pods by workload, idle GPU-hours first;
/// `enter` lists a workload's pods.
fn workloads(
    frame: &mut Frame,
    area: Rect,
    app: &App,
    shown: &mut Viewport,
    views: &Views,
    theme: &Theme,
    [about, brief]: [&str; 2],
) {
    let filter = app.filter(Pane::Usage);
    let sort = app.sort_title(Pane::Usage, Section::Second, false);
    let rows = rows::usage_workloads(views, filter, app.sorting(Pane::Usage, Section::Second));
    let count = if filter.is_empty() {
        format!("{}", rows.len())
    } else {
        format!("{} of {} · /{filter}", rows.len(), views.usage_workloads.len())
    };
    let title = widgets::title(
        area.width,
        &[
            format!(" Workloads ({count}){sort} · tab: pods · enter: its pods · {about} "),
            format!(" Workloads ({count}){sort} · {about} "),
            format!(" Workloads ({count}){sort} · {brief} "),
        ],
    );
    let selected = app.selected_position(Pane::Usage, rows.iter().map(|r| r.id()));
    // At 80 columns the name keeps its room (embed-1g and embed-2g must
    // read apart); the idle-for time waits for a wide terminal.
    let wide = area.width >= 120;
    let name_width: u16 = if wide { 56 } else { area.width.saturating_sub(2 + 38 + 5).max(16) };
    let make_row = |i: usize| {
        let r = rows[i];
        let idle = if r.any_idle { Role::Warn } else { Role::Dim };
        let mut cells = vec![
            widgets::styled(widgets::fit_id(&r.name, name_width as usize), theme.style(Role::Accent)),
            widgets::styled(r.idle_pods.clone(), theme.style(idle)),
            widgets::styled(r.gpus.clone(), theme.style(Role::Text)),
            widgets::styled(r.idle_gpus.clone(), theme.style(idle)),
            widgets::styled(r.mean.clone(), theme.style(Role::Text)),
        ];
        if wide {
            cells.push(widgets::styled(r.idle.clone(), theme.style(idle)));
        }
        cells.push(widgets::styled(r.idle_gpu_hours.clone(), theme.style(idle)));
        if wide {
            cells.push(widgets::styled(r.queue.clone(), theme.style(Role::Dim)));
        }
        cells
    };
    let mut header = vec!["WORKLOAD", "IDLE PODS", "GPUS", "IDLE GPUS", "MEAN"];
    let mut widths = vec![
        Constraint::Length(name_width),
        Constraint::Length(9),
        Constraint::Length(6),
        Constraint::Length(9),
        Constraint::Length(4),
    ];
    if wide {
        header.push("IDLE");
        widths.push(Constraint::Length(6));
    }
    header.push("IDLE-GPU-H");
    widths.push(Constraint::Length(10));
    if wide {
        header.push("QUEUE");
        widths.push(Constraint::Min(10));
    }
    let offset = app.offsets.get(&Pane::Usage).copied().unwrap_or(0);
    let offset = widgets::lazy_table(
        frame,
        area,
        block(title, true, theme),
        &header,
        &widths,
        rows.len(),
        make_row,
        Some(selected),
        offset,
        theme,
    );
    shown.offsets.push((Pane::Usage, offset));
    shown.page = Some(usize::from(area.height.saturating_sub(3)));
}
