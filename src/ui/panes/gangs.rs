//! Gangs & Queues pane: gangs (placed/required, GPUs held idle, state,
//! deadlocks, splits) over queues (quota bars per flavor and resource,
//! borrowing, pending/admitted). `tab` moves between the two.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::Line;

use crate::app::{App, Pane, Section, Viewport, rows};
use crate::ui::theme::{Role, Theme};
use crate::ui::widgets::{self, block, fit};
use crate::view_model::feeds;
use crate::view_model::panes::Views;
use crate::view_model::rows as view_rows;

pub fn draw(frame: &mut Frame, area: Rect, app: &App, shown: &mut Viewport, views: &Views, theme: &Theme) {
    let [top, bottom] = Layout::vertical([Constraint::Percentage(55), Constraint::Percentage(45)]).areas(area);
    let focus = app.section(Pane::Gangs);
    draw_gangs(frame, top, app, shown, views, theme, focus == Section::First);
    draw_queues(frame, bottom, app, shown, views, theme, focus != Section::First);
}

fn draw_gangs(
    frame: &mut Frame,
    area: Rect,
    app: &App,
    shown: &mut Viewport,
    views: &Views,
    theme: &Theme,
    focused: bool,
) {
    let gangs = rows::gangs(views, app.filter(Pane::Gangs), app.sorting(Pane::Gangs, Section::First));
    let title = format!(
        " Gangs ({}){} · enter: why pending or details · R requeue ",
        gangs.len(),
        app.sort_title(Pane::Gangs, Section::First, false)
    );
    if views.analysis.gangs.is_empty() {
        let text = feeds::gangs_note(&views.snap).unwrap_or_else(|| "no Kueue Workloads or Volcano PodGroups".into());
        widgets::empty(frame, area, block(title, focused, theme), &text, theme);
        return;
    }
    let ids: Vec<String> = gangs.iter().map(|g| crate::app::gang_id(&g.key)).collect();
    let selected = focused.then(|| app.selected_index(Pane::Gangs, &ids));
    let wide = area.width >= 120;
    // The name takes what the other columns leave (they need 45 at 80
    // columns), up to the longest name.
    let longest = gangs.iter().map(|g| g.display_name().chars().count()).max().unwrap_or(12);
    let name_w = if wide {
        longest.clamp(12, 60)
    } else {
        longest.clamp(12, usize::from(area.width.saturating_sub(2)).saturating_sub(45).max(12))
    };
    let rows: Vec<Vec<widgets::TableCell>> = gangs
        .iter()
        .map(|g| {
            let r = view_rows::gang_row(g);
            let mut cells = vec![
                widgets::styled(if wide { r.kind.0 } else { r.kind.1 }, theme.style(Role::Dim)),
                widgets::styled(widgets::fit_id(&r.name, name_w), theme.style(Role::Text)),
                widgets::styled(r.placed, theme.style(Role::Text)),
                widgets::styled(r.idle.0, theme.style(r.idle.1)),
                widgets::styled(r.state.0, theme.style(r.state.1)),
                widgets::styled(r.age, theme.style(Role::Dim)),
            ];
            if wide {
                cells.push(widgets::styled(r.queue, theme.style(Role::Dim)));
            }
            cells.push(widgets::styled(r.notes, theme.style(Role::Error)));
            cells
        })
        .collect();
    let mut header = vec!["KIND", "NAME", "PLACED", "IDLE", "STATE", "AGE"];
    let mut widths = vec![
        Constraint::Length(if wide { 8 } else { 2 }),
        Constraint::Length(name_w as u16),
        Constraint::Length(6),
        Constraint::Length(4),
        Constraint::Length(16),
        Constraint::Length(5),
    ];
    if wide {
        header.push("QUEUE");
        widths.push(Constraint::Length(12));
    }
    header.push("NOTES");
    widths.push(Constraint::Min(6));
    let offset = app.offsets.get(&Pane::Gangs).copied().unwrap_or(0);
    let offset =
        widgets::table(frame, area, block(title, focused, theme), &header, &widths, rows, selected, offset, theme);
    if focused {
        shown.offsets.push((Pane::Gangs, offset));
        shown.page = Some(usize::from(area.height.saturating_sub(3)));
    }
}

fn draw_queues(
    frame: &mut Frame,
    area: Rect,
    app: &App,
    shown: &mut Viewport,
    views: &Views,
    theme: &Theme,
    focused: bool,
) {
    let queues = rows::queues(views, app.filter(Pane::Gangs), app.sorting(Pane::Gangs, Section::Second));
    let title = format!(" Queues · quota per flavor{} ", app.sort_title(Pane::Gangs, Section::Second, false));
    if views.analysis.queues.is_empty() {
        let text = feeds::queues_note(&views.snap)
            .unwrap_or_else(|| "no Kueue ClusterQueues/LocalQueues or Volcano Queues".into());
        widgets::empty(frame, area, block(title, focused, theme), &text, theme);
        return;
    }
    let ids: Vec<String> = queues.iter().enumerate().map(|(i, q)| format!("{i}:{}", q.name)).collect();
    let selected = if focused {
        Some(app.selected.get(&Pane::Gangs).and_then(|s| ids.iter().position(|i| i == s)).unwrap_or(0))
    } else {
        None
    };
    let bar_w = if area.width >= 120 { 24 } else { 12 };
    let rows: Vec<Vec<widgets::TableCell>> = queues
        .iter()
        .map(|q| {
            let fmt = |v: u64| q.amount(v);
            let name = match q.namespace.clone() {
                Some(ns) => format!("{ns}/{}", q.name),
                None => q.name.to_string(),
            };
            let bar =
                if q.nominal > 0 { Line::from(widgets::bar(q.used, q.nominal, bar_w, theme)) } else { Line::raw("") };
            let kind = if area.width >= 110 { q.kind.kind_name() } else { q.kind.abbreviation() };
            vec![
                widgets::styled(kind, theme.style(Role::Dim)),
                widgets::styled(
                    widgets::fit_id(&name, if area.width >= 110 { 22 } else { 20 }),
                    theme.style(if q.active { Role::Text } else { Role::Error }),
                ),
                widgets::styled(q.cohort.as_ref().map_or("-".into(), |c| c.to_string()), theme.style(Role::Dim)),
                widgets::styled(q.flavor.as_ref().map_or("-".into(), |f| f.to_string()), theme.style(Role::Accent)),
                widgets::styled(
                    if area.width >= 110 {
                        fit(q.resource.as_str(), 14)
                    } else {
                        // nvidia.com/gpu → gpu: the vendor prefix is what a narrow column can lose.
                        fit(q.resource.as_str().rsplit('/').next().unwrap_or_default(), 8)
                    },
                    theme.style(Role::Text),
                ),
                widgets::TableCell::from(bar),
                widgets::styled(
                    if q.nominal > 0 { format!("{}/{}", fmt(q.used), fmt(q.nominal)) } else { String::new() },
                    theme.style(Role::Text),
                ),
                // What it borrows now, and (wide) its limit: ∞ when none is set.
                widgets::styled(
                    if q.cohort.is_none() {
                        // Only a ClusterQueue in a cohort borrows.
                        "-".to_string()
                    } else if area.width >= 110 {
                        format!("{}/{}", fmt(q.borrowed), q.borrowing_limit.map_or("∞".into(), fmt))
                    } else {
                        fmt(q.borrowed)
                    },
                    theme.style(if q.borrowed > 0 { Role::Warn } else { Role::Dim }),
                ),
                widgets::styled(
                    q.pending_cell(),
                    theme.style(if q.pending + q.inadmissible > 0 { Role::Pending } else { Role::Dim }),
                ),
                widgets::styled(q.admitted.to_string(), theme.style(Role::Dim)),
            ]
        })
        .collect();
    let mut header =
        vec!["KIND", "NAME", "COHORT", "FLAVOR", "RESOURCE", "QUOTA", "USED/NOM", "BORROWED", "PEND", "ADM"];
    let mut rows = rows;
    let widths: Vec<Constraint> = if area.width >= 110 {
        header[7] = "BORROW/LIM";
        [12, 22, 9, 8, 14, bar_w as u16, 13, 10, 4, 4].into_iter().map(Constraint::Length).collect()
    } else {
        // Narrow: no bar, and every column keeps its numbers whole (a cut
        // "9600Gi/2" reads as another quota).
        header.remove(5);
        for r in &mut rows {
            r.remove(5);
        }
        header[6] = "BORROW";
        [2, 20, 8, 6, 8, 13, 6, 4, 3].into_iter().map(Constraint::Length).collect()
    };
    let key = Pane::Gangs;
    let offset = if focused { app.offsets.get(&key).copied().unwrap_or(0) } else { 0 };
    let offset =
        widgets::table(frame, area, block(title, focused, theme), &header, &widths, rows, selected, offset, theme);
    if focused {
        shown.offsets.push((key, offset));
        shown.page = Some(usize::from(area.height.saturating_sub(3)));
    }
}
