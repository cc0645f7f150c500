//! Drivers pane: the driver × CUDA compatibility matrix (enter: the pods
//! and nodes of a cell), the upgrade-wave board (stuck nodes first) and,
//! after `:plan VERSION`, the planned waves.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::app::{App, Pane, Section, Viewport, rows};
use crate::ui::theme::{Role, Theme};
use crate::ui::widgets::{self, block, fit};
use crate::view_model::panes::Views;
use crate::view_model::{age, docs};

pub fn draw(frame: &mut Frame, area: Rect, app: &App, shown: &mut Viewport, views: &Views, theme: &Theme) {
    let m = &views.analysis.matrix;
    let matrix_h = (m.drivers.len() as u16 + 4).min(area.height / 2).max(5);
    let has_waves = views.waves.is_some();
    let constraints = if has_waves {
        vec![Constraint::Length(matrix_h), Constraint::Percentage(40), Constraint::Min(4)]
    } else {
        vec![Constraint::Length(matrix_h), Constraint::Min(4)]
    };
    let parts = Layout::vertical(constraints).split(area);
    let focus = app.section(Pane::Drivers);
    draw_matrix(frame, parts[0], app, views, theme, focus == Section::First);
    draw_board(frame, parts[1], app, shown, views, theme, focus == Section::Second);
    if has_waves && parts.len() > 2 {
        draw_waves(frame, parts[2], app, views, theme, focus == Section::Third);
    }
}

fn draw_matrix(frame: &mut Frame, area: Rect, app: &App, views: &Views, theme: &Theme, focused: bool) {
    let m = &views.analysis.matrix;
    let title = format!(" Driver × CUDA ({} GPU pods without a CUDA need) · enter: cell details ", m.unknown_need);
    if m.drivers.is_empty() || m.needs.is_empty() {
        let text =
            if m.drivers.is_empty() { "no GPU nodes" } else { "no GPU workload declares or implies a CUDA version" };
        widgets::empty(frame, area, block(title, focused, theme), text, theme);
        return;
    }
    let (sel_r, sel_c) = (app.matrix_cell.0.min(m.drivers.len() - 1), app.matrix_cell.1.min(m.needs.len() - 1));
    // Wide enough for every column's header ("12.6 (guessed)·1"), within reason.
    let col_w = m
        .needs
        .iter()
        .map(|(cuda, pods)| unicode_width::UnicodeWidthStr::width(format!("{cuda}·{}", pods.count).as_str()))
        .max()
        .unwrap_or(0)
        .clamp(13, 18);
    let inner_w = area.width.saturating_sub(2) as usize;
    let max_cols = ((inner_w.saturating_sub(18)) / (col_w + 1)).max(1);
    let first_col = sel_c.saturating_sub(max_cols - 1);
    let needs: Vec<_> = m.needs.iter().enumerate().skip(first_col).take(max_cols).collect();
    let mut lines = Vec::new();
    let mut header = vec![Span::styled(format!("{:<18}", "DRIVER (nodes)"), theme.style(Role::Header))];
    for (_, (cuda, pods)) in &needs {
        header.push(Span::styled(
            format!("{:>col_w$} ", fit(&format!("{cuda}·{}", pods.count), col_w)),
            theme.style(Role::Header),
        ));
    }
    lines.push(Line::from(header));
    for (r, (driver, nodes)) in m.drivers.iter().enumerate() {
        let mut spans = vec![Span::styled(
            format!("{:<18}", fit(&format!("{driver} ({})", nodes.len()), 17)),
            theme.style(Role::Text),
        )];
        for (c, (cuda, _)) in &needs {
            let cell = m.cell(driver, cuda);
            let (text, role) = cell.map_or(("", Role::Dim), |x| docs::compat_cell(x.verdict));
            let placed = cell.map_or(0, |x| x.placed.count);
            let label = if placed > 0 { format!("{text}·{placed}") } else { text.to_string() };
            let mut style = theme.style(role);
            if focused && r == sel_r && *c == sel_c {
                style = style.patch(theme.style(Role::Selection));
            }
            spans.push(Span::styled(format!("{label:>col_w$}"), style));
            spans.push(Span::raw(" "));
        }
        lines.push(Line::from(spans));
    }
    if let Some(cell) = m.drivers.get(sel_r).and_then(|(d, _)| m.needs.get(sel_c).and_then(|(c, _)| m.cell(d, c))) {
        lines.push(Line::styled(fit(&cell.reason, inner_w), theme.style(Role::Dim)));
    }
    frame.render_widget(Paragraph::new(lines).block(block(title, focused, theme)), area);
}

fn draw_board(
    frame: &mut Frame,
    area: Rect,
    app: &App,
    shown: &mut Viewport,
    views: &Views,
    theme: &Theme,
    focused: bool,
) {
    let rows_ = rows::upgrades(views, app.filter(Pane::Drivers), app.sorting(Pane::Drivers, Section::Second));
    let labelled = rows_.iter().filter(|u| u.state.is_some()).count();
    let stuck = rows_.iter().filter(|u| u.stuck).count();
    let sort = app.sort_title(Pane::Drivers, Section::Second, false);
    let title = widgets::title(
        area.width,
        &[
            format!(" Upgrade waves: {labelled} node(s) with a state, {stuck} stuck{sort} · {} ", target_note(views)),
            // The Waves box below says where the target comes from.
            format!(" Upgrade waves: {labelled} with a state, {stuck} stuck{sort} · {} ", target_brief(views)),
        ],
    );
    if views.analysis.upgrades.is_empty() {
        widgets::empty(frame, area, block(title, focused, theme), "no GPU nodes", theme);
        return;
    }
    let selected = focused.then(|| app.selected_position(Pane::Drivers, rows_.iter().map(|u| u.node.as_str())));
    let make_row = |i: usize| {
        let u = rows_[i];
        let role = if u.stuck || u.failed() {
            Role::Error
        } else if u.done_off_target {
            Role::Warn
        } else if u.state.as_ref().is_some_and(|s| s.as_str() == "upgrade-done") {
            Role::Ok
        } else if u.state.is_some() {
            Role::Warn
        } else {
            Role::Dim
        };
        vec![
            widgets::styled(widgets::fit_id(u.node.as_str(), 16), theme.style(Role::Text)),
            // No upgrade label (the operator's upgrade controller has not
            // labelled it, as on a node without the GPU Operator): not "unknown".
            widgets::styled(if u.state.is_some() { u.state_str() } else { "no upgrade label" }, theme.style(role)),
            widgets::styled(
                match (&u.state, u.seconds_in_state) {
                    (None, _) => "-".into(),
                    (Some(_), t) => t.map_or("unknown".into(), age),
                },
                theme.style(Role::Dim),
            ),
            widgets::styled(
                docs::upgrade_mark(u),
                theme.style(if u.stuck || u.done_off_target { role } else { Role::Dim }),
            ),
            widgets::styled(u.driver.as_ref().map_or_else(|| "-".into(), |d| d.to_string()), theme.style(Role::Dim)),
        ]
    };
    let widths = [
        Constraint::Length(16),
        Constraint::Length(26),
        Constraint::Length(7),
        Constraint::Length(10),
        Constraint::Min(10),
    ];
    let offset = if focused { app.offsets.get(&Pane::Drivers).copied().unwrap_or(0) } else { 0 };
    let offset = widgets::lazy_table(
        frame,
        area,
        block(title, focused, theme),
        &["NODE", "STATE", "FOR", "", "DRIVER"],
        &widths,
        rows_.len(),
        make_row,
        selected,
        offset,
        theme,
    );
    if focused {
        shown.offsets.push((Pane::Drivers, offset));
        shown.page = Some(usize::from(area.height.saturating_sub(3)));
    }
}

/// The driver the board plans to and what says so, for its title.
fn target_note(views: &Views) -> String {
    match (&views.waves, &views.waves_from, &views.target_problem) {
        (Some(plan), Some(object), _) => format!("target {} from {object}", plan.target),
        (Some(plan), None, _) => format!("target {} from :plan", plan.target),
        (None, _, Some(problem)) => format!("no single target: {problem}"),
        (None, _, None) => "no target · :plan VERSION".to_string(),
    }
}

/// The target alone, for a narrow title.
fn target_brief(views: &Views) -> String {
    match &views.waves {
        Some(plan) => format!("target {}", plan.target),
        None => target_note(views),
    }
}

fn draw_waves(frame: &mut Frame, area: Rect, app: &App, views: &Views, theme: &Theme, focused: bool) {
    let Some(plan) = &views.waves else { return };
    let from = match &views.waves_from {
        Some(object) => format!("from {object}"),
        None => ":plan off".to_string(),
    };
    // Fullest first; the bounds and their source are also on the box's last row.
    let candidates = match (&plan.halted, &plan.stalled) {
        (Some(halt), _) => vec![
            format!(
                " Waves to {} · HALTED: {} failed · {} ",
                plan.target,
                halt.failed_names(),
                halt.rollback_to.as_ref().map_or_else(|| from.clone(), |v| format!("rollback: {v}"))
            ),
            format!(" Waves to {} · HALTED: {} failed ", plan.target, halt.failed_names()),
        ],
        (None, Some(_)) => vec![
            format!(" Waves to {} · STALLED: cordoned/NotReady nodes use up maxUnavailable · {from} ", plan.target),
            format!(" Waves to {} · STALLED: cordoned/NotReady nodes use up maxUnavailable ", plan.target),
            format!(" Waves to {} · STALLED: maxUnavailable used up ", plan.target),
        ],
        (None, None) => vec![
            format!(" Waves to {} ({}) · {from} ", plan.target, docs::wave_bound(plan)),
            format!(" Waves to {} ({}) ", plan.target, docs::wave_bound(plan)),
            format!(" Waves to {} (≤{} node(s) each) · {from} ", plan.target, plan.wave_size),
            format!(" Waves to {} (≤{} node(s) each) ", plan.target, plan.wave_size),
        ],
    };
    let title = widgets::title(area.width, &candidates);
    let ids: Vec<String> = plan.waves.iter().map(|w| w.index.to_string()).collect();
    let selected = focused.then(|| app.selected_index(Pane::Drivers, &ids));
    let rows: Vec<Vec<widgets::TableCell>> = plan
        .waves
        .iter()
        .map(|w| {
            let label = if w.canary { "canary".to_string() } else { format!("wave {}", w.index) };
            let breaks = if w.breaks.is_empty() { "-".to_string() } else { format!("{} pod(s) break", w.breaks.len()) };
            vec![
                widgets::styled(label, theme.style(if w.canary { Role::Accent } else { Role::Text })),
                widgets::styled(
                    w.nodes.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(" "),
                    theme.style(Role::Text),
                ),
                widgets::styled(
                    if w.gangs.is_empty() { String::new() } else { format!("keeps {}", w.gangs.join(", ")) },
                    theme.style(Role::Dim),
                ),
                widgets::styled(breaks, theme.style(if w.breaks.is_empty() { Role::Ok } else { Role::Error })),
            ]
        })
        .collect();
    let widths = [Constraint::Length(8), Constraint::Percentage(45), Constraint::Percentage(30), Constraint::Min(10)];
    // Scrolled from the top each frame, just far enough to show the selected wave.
    widgets::table(
        frame,
        area,
        block(title, focused, theme),
        &["WAVE", "NODES", "GANGS", "BREAKS"],
        &widths,
        rows,
        selected,
        0,
        theme,
    );
    // The bounds and what sets them, on the last inner row when the waves leave it free.
    if area.height as usize > plan.waves.len() + 4 {
        let note = Rect { x: area.x + 2, y: area.y + area.height - 2, width: area.width.saturating_sub(4), height: 1 };
        let text = fit(&format!("bounds: {}", docs::wave_bounds_source(plan)), note.width as usize);
        frame.render_widget(Paragraph::new(Line::styled(text, theme.style(Role::Dim))), note);
    }
    // No wave is not a filter's doing: every node is on the target or left out.
    if plan.waves.is_empty() && area.height > 3 {
        let note = Rect { x: area.x + 2, y: area.y + 2, width: area.width.saturating_sub(4), height: 1 };
        let text = format!("no node to plan: {} left out ({})", plan.excluded.len(), docs::left_out_counts(plan));
        frame.render_widget(Paragraph::new(Line::styled(text, theme.style(Role::Dim))), note);
    }
}
