//! Fleet pane: the fragmentation map (one cell per GPU, MIG GPUs as their
//! slices), node rows, and a side panel with the selected pending shape's
//! numbers and the defragmentation plan. Large fleets aggregate into pools.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

use crate::app::{App, Pane, Section, Viewport, rows};
use crate::ui::theme::{Role, Theme};
use crate::ui::widgets::{self, block, fit};
use crate::view_model::docs;
use crate::view_model::panes::{Cell as GpuCell, NodeRow, Views};

pub fn glyph(cell: GpuCell) -> (&'static str, Role) {
    match cell {
        GpuCell::Used => ("■", Role::GpuUsed),
        GpuCell::Free => ("□", Role::GpuFree),
        GpuCell::Stranded => ("▣", Role::GpuStranded),
        GpuCell::Unadvertised => ("?", Role::GpuUnadvertised),
        GpuCell::Unhealthy => ("✗", Role::GpuUnhealthy),
        GpuCell::Xid => ("!", Role::Warn),
        GpuCell::Unavailable => ("·", Role::GpuUnavailable),
        GpuCell::MigUsed => ("▪", Role::MigUsed),
        GpuCell::MigFree => ("▫", Role::MigFree),
        GpuCell::Gap => (" ", Role::Text),
    }
}

fn map_line(row: &NodeRow, width: usize, theme: &Theme) -> Line<'static> {
    // More cells than room: the last one says so (it was drawn past the
    // column, where the table cut it off).
    let cut = row.cells.len() > width;
    let shown = if cut { width.saturating_sub(1) } else { row.cells.len() };
    let mut spans: Vec<Span> = row.cells[..shown]
        .iter()
        .map(|c| {
            let (g, role) = glyph(*c);
            Span::styled(g, theme.style(role))
        })
        .collect();
    if cut {
        spans.push(Span::styled("…", theme.style(Role::Dim)));
    }
    Line::from(spans)
}

/// The glyphs and what they mean, in short words where `width` is too
/// narrow for the long ones (80 columns).
pub fn legend(theme: &Theme, width: u16) -> Line<'static> {
    let items = [
        (GpuCell::Used, "used", "used"),
        (GpuCell::Free, "free", "free"),
        (GpuCell::Stranded, "stranded", "strand"),
        (GpuCell::Unadvertised, "unadvertised", "unadv"),
        (GpuCell::Unhealthy, "unhealthy", "unhlth"),
        (GpuCell::Xid, "recent Xid", "Xid"),
        (GpuCell::Unavailable, "unavailable", "unavail"),
        (GpuCell::MigUsed, "MIG used", "MIG used"),
        (GpuCell::MigFree, "MIG free", "MIG free"),
    ];
    let long_width: usize = 1 + items.iter().map(|(_, long, _)| long.chars().count() + 4).sum::<usize>();
    let short = long_width > usize::from(width);
    let mut spans = vec![Span::raw(" ")];
    for (c, long, brief) in items {
        let (g, role) = glyph(c);
        spans.push(Span::styled(g, theme.style(role)));
        let text = if short { format!(" {brief} ") } else { format!(" {long}  ") };
        spans.push(Span::styled(text, theme.style(Role::Dim)));
    }
    Line::from(spans)
}

pub fn draw(frame: &mut Frame, area: Rect, app: &App, shown: &mut Viewport, views: &Views, theme: &Theme) {
    let t = &views.analysis.totals;
    let f = &views.analysis.fragmentation;
    // At 80 columns the long words would push the score off the line.
    let narrow = area.width < 100;
    let word = |long: &'static str, short: &'static str| if narrow { short } else { long };
    let mut summary = Vec::new();
    // Numbers from a feed that is reconnecting are as of then: said first,
    // where the eye starts (the status bar can be cut at 80 columns).
    if let Some(old) = crate::view_model::feeds::stale_for(&views.snap, views.analysis.now) {
        summary.push(Span::styled(format!(" as of {} ago ·", crate::view_model::age(old)), theme.style(Role::Error)));
    }
    summary.extend([
        Span::styled(format!(" {} GPUs", t.gpus), theme.style(Role::Text)),
        Span::styled(format!(" · {} used", t.allocated), theme.style(Role::GpuUsed)),
    ]);
    // In use and serving nothing: pods placed that do not start.
    let stuck = views.analysis.held_not_started();
    if stuck > 0 {
        summary.push(Span::styled(format!(" ({stuck} {})", word("not started", "stuck")), theme.style(Role::Warn)));
    }
    summary.extend([
        Span::styled(format!(" · {} free", t.free), theme.style(Role::GpuFree)),
        Span::styled(
            format!(" ({} {})", t.stranded, word("stranded", "str.")),
            theme.style(if t.stranded > 0 { Role::GpuStranded } else { Role::Dim }),
        ),
        Span::styled(format!(" · {} {}", t.unavailable, word("unavailable", "unavail.")), theme.style(Role::Dim)),
    ]);
    if t.unadvertised > 0 || !narrow {
        summary.push(Span::styled(
            format!(" · {} {}", t.unadvertised, word("unadvertised", "unadv.")),
            theme.style(if t.unadvertised > 0 { Role::GpuUnadvertised } else { Role::Dim }),
        ));
    }
    if t.unhealthy > 0 {
        summary.push(Span::styled(
            format!(" · {} {}", t.unhealthy, word("unhealthy", "unhlth.")),
            theme.style(Role::Error),
        ));
    }
    if t.replicas.0 > 0 {
        summary.push(Span::styled(
            format!(" · {}/{} {}", t.replicas.1, t.replicas.0, word("replicas used", "repl.")),
            theme.style(Role::Dim),
        ));
    }
    summary
        .push(Span::styled(format!(" · {} {:.2}", word("fragmentation", "frag"), f.score), theme.style(Role::Accent)));
    let summary = Line::from(summary);
    let [top, body, legend_area] =
        Layout::vertical([Constraint::Length(1), Constraint::Min(4), Constraint::Length(1)]).areas(area);
    frame.render_widget(Paragraph::new(summary), top);
    frame.render_widget(Paragraph::new(legend(theme, legend_area.width)), legend_area);

    let wide = body.width >= 110;
    let (list_area, panel_area) = if wide {
        // The panel as wide as its text, between 46 columns and a third of the screen.
        let need = docs::fragmentation_panel(&views.analysis.fragmentation, app.shape, true).width() + 2;
        let panel_w = need.clamp(46, usize::from(body.width / 3).max(46)) as u16;
        let [l, r] = Layout::horizontal([Constraint::Min(60), Constraint::Length(panel_w)]).areas(body);
        (l, Some(r))
    } else if body.height >= 18 {
        let [l, r] = Layout::vertical([Constraint::Min(8), Constraint::Length(8)]).areas(body);
        (l, Some(r))
    } else {
        (body, None)
    };
    if app.aggregated(views) {
        draw_pools(frame, list_area, app, shown, views, theme);
    } else {
        draw_nodes(frame, list_area, app, shown, views, theme);
    }
    if let Some(p) = panel_area {
        draw_panel(frame, p, app, views, theme, wide);
    }
}

fn draw_nodes(frame: &mut Frame, area: Rect, app: &App, shown: &mut Viewport, views: &Views, theme: &Theme) {
    let rows = rows::nodes(views, app.filter(Pane::Fleet), app.sorting(Pane::Fleet, Section::First));
    let selected = app.selected_position(Pane::Fleet, rows.iter().map(|r| r.name.as_str()));
    let here = if app.filter(Pane::Fleet).is_empty() { "nodes" } else { app.filter(Pane::Fleet) };
    // The nodes' natural order is by name, and the title says so.
    let sort = Some(app.sort_title(Pane::Fleet, Section::First, false))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| " · sort: name".into());
    let title = match app.breadcrumb(here) {
        Some(path) => format!(" {path} ({}){sort} · esc: back ", rows.len()),
        None => format!(" Nodes ({}){sort} ", rows.len()),
    };
    // A filter that matches nothing keeps the table's header (below).
    if views.nodes.is_empty() {
        widgets::empty(frame, area, block(title, true, theme), "no nodes (yet)", theme);
        return;
    }
    let inner_width = area.width.saturating_sub(2) as usize;
    let name_w = rows.iter().map(|r| r.name.as_str().len()).max().unwrap_or(8).clamp(6, 18);
    let cells_w = rows.iter().map(|r| r.cells.len()).max().unwrap_or(8).clamp(4, 64);
    let fixed = name_w + 1 + 6 + 1;
    let rest = inner_width.saturating_sub(fixed);
    let map_w = cells_w.min(rest.saturating_sub(12)).max(4);
    let rest = rest.saturating_sub(map_w + 1);
    let show_product = rest >= 40;
    let show_driver = rest >= 28;
    // How each node gives its GPUs, where some node gives them through DRA.
    let show_via = rest >= 48 && rows.iter().any(|r| r.dra.is_some());
    let issues_w = rest.saturating_sub(
        if show_product { 16 } else { 0 } + if show_driver { 11 } else { 0 } + if show_via { 7 } else { 0 },
    );
    let pending_badge = |r: &NodeRow| app.in_flight.iter().any(|f| f.action.nodes().contains(&r.name));
    let make_row = |i: usize| {
        let r = &rows[i];
        let status_role = if !r.ready {
            Role::Error
        } else if r.cordoned {
            Role::Warn
        } else {
            Role::Text
        };
        let mut cells = vec![
            widgets::styled(widgets::fit_id(r.name.as_str(), name_w), theme.style(status_role)),
            widgets::TableCell::from(map_line(r, map_w, theme)),
            widgets::styled(r.used_text(), theme.style(Role::Text)),
        ];
        if show_product {
            cells.push(widgets::styled(fit(&r.product, 15), theme.style(Role::Dim)));
        }
        if show_driver {
            cells.push(widgets::styled(fit(&r.driver, 10), theme.style(Role::Dim)));
        }
        if show_via {
            cells.push(widgets::styled(r.via.to_string(), theme.style(Role::Dim)));
        }
        // The codes the snapshot and JSON use where they fit; short words where not.
        let long: Vec<&str> = r.issues.iter().map(|i| i.as_str()).collect();
        let mut issues: Vec<String> = if long.join(",").chars().count() + 9 <= issues_w {
            long.iter().map(|c| c.to_string()).collect()
        } else {
            r.issues.iter().map(|i| rows::issue_short(*i).to_string()).collect()
        };
        if pending_badge(r) {
            issues.insert(0, "⟳pending".into());
        }
        let role = if r.issues.iter().any(|i| i.is_fault()) { Role::Error } else { Role::Warn };
        cells.push(widgets::styled(fit(&issues.join(","), issues_w), theme.style(role)));
        cells
    };
    let mut header = vec!["NODE", "GPUS", "USED"];
    let mut widths = vec![Constraint::Length(name_w as u16), Constraint::Length(map_w as u16), Constraint::Length(6)];
    if show_product {
        header.push("PRODUCT");
        widths.push(Constraint::Length(15));
    }
    if show_driver {
        header.push("DRIVER");
        widths.push(Constraint::Length(10));
    }
    if show_via {
        header.push("VIA");
        widths.push(Constraint::Length(6));
    }
    header.push("ISSUES");
    widths.push(Constraint::Min(4));
    let offset = app.offsets.get(&Pane::Fleet).copied().unwrap_or(0);
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
    shown.offsets.push((Pane::Fleet, offset));
    shown.page = Some(usize::from(area.height.saturating_sub(3)));
}

const SPARK: [&str; 8] = ["▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"];

fn draw_pools(frame: &mut Frame, area: Rect, app: &App, shown: &mut Viewport, views: &Views, theme: &Theme) {
    let pools = rows::pools(views, app.filter(Pane::Fleet), app.sorting(Pane::Fleet, Section::First));
    let ids: Vec<String> = pools.iter().map(|p| p.name.clone()).collect();
    let selected = app.selected_index(Pane::Fleet, &ids);
    // What is shown: under a filter, the nodes of the pools it keeps.
    let nodes: usize = pools.iter().map(|p| p.nodes).sum();
    let title = format!(
        " Pools ({nodes} nodes in {} pool{}){} · enter: list its nodes ",
        pools.len(),
        if pools.len() == 1 { "" } else { "s" },
        app.sort_title(Pane::Fleet, Section::First, true)
    );
    let rows: Vec<Vec<widgets::TableCell>> = pools
        .iter()
        .map(|p| {
            let max = p.free_histogram.iter().copied().max().unwrap_or(0).max(1);
            let spark: String = p
                .free_histogram
                .iter()
                .map(|&n| if n == 0 { " " } else { SPARK[((n as usize * 7) / max as usize).min(7)] })
                .collect();
            let issues = p.issues.iter().map(|(k, v)| format!("{v} {k}")).collect::<Vec<_>>().join(", ");
            vec![
                widgets::styled(fit(&p.name, 16), theme.style(Role::Text)),
                widgets::styled(p.nodes.to_string(), theme.style(Role::Text)),
                widgets::styled(format!("{}/{}", p.used, p.gpus), theme.style(Role::GpuUsed)),
                widgets::styled(p.free.to_string(), theme.style(Role::GpuFree)),
                widgets::styled(
                    p.stranded.to_string(),
                    theme.style(if p.stranded > 0 { Role::GpuStranded } else { Role::Dim }),
                ),
                widgets::styled(format!("[{spark}]"), theme.style(Role::Accent)),
                widgets::styled(issues, theme.style(Role::Warn)),
            ]
        })
        .collect();
    let widths = [
        Constraint::Length(16),
        Constraint::Length(6),
        Constraint::Length(11),
        Constraint::Length(6),
        Constraint::Length(8),
        Constraint::Length(11),
        Constraint::Min(6),
    ];
    let offset = app.offsets.get(&Pane::Fleet).copied().unwrap_or(0);
    let offset = widgets::table(
        frame,
        area,
        block(title, true, theme),
        &["POOL", "NODES", "USED/GPUS", "FREE", "STRANDED", "FREE/NODE", "ISSUES"],
        &widths,
        rows,
        Some(selected),
        offset,
        theme,
    );
    shown.offsets.push((Pane::Fleet, offset));
    shown.page = Some(usize::from(area.height.saturating_sub(3)));
}

fn draw_panel(frame: &mut Frame, area: Rect, app: &App, views: &Views, theme: &Theme, tall: bool) {
    let panel = docs::fragmentation_panel(&views.analysis.fragmentation, app.shape, tall);
    if panel.lines.is_empty() {
        return;
    }
    let lines = widgets::doc(&panel, theme, area.width.saturating_sub(2) as usize);
    let text = Paragraph::new(lines).wrap(Wrap { trim: false });
    let mut frame_block = block(" Fragmentation ", false, theme);
    // Not scrollable: say that it is cut, and where it is whole.
    let rows = text.line_count(area.width.saturating_sub(2));
    let hidden = rows.saturating_sub(usize::from(area.height.saturating_sub(2)));
    if hidden > 0 {
        frame_block = frame_block.title_bottom(Line::styled(
            format!(" ↓ {hidden} more line(s) (kgpu snapshot --pane fragmentation) "),
            theme.style(Role::Dim),
        ));
    }
    frame.render_widget(text.block(frame_block), area);
}
