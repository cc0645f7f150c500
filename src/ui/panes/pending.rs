//! Pending pane: every pending pod, Workload and PodGroup with the first
//! step that blocks it; `enter` opens the isolation chain with its evidence
//! and kubectl commands.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};

use crate::analysis::age;
use crate::analysis::pending::{PendingItem, Step, Verdict};
use crate::app::{App, Pane, rows};
use crate::ui::theme::{Role, Theme};
use crate::ui::widgets::{self, block, fit, scrolled_text};
use crate::view_model::panes::Views;

fn step_role(step: Option<Step>) -> Role {
    match step {
        Some(Step::Quota | Step::AdmissionCheck) => Role::Warn,
        Some(Step::Gang) => Role::Error,
        Some(Step::Fit) => Role::Pending,
        Some(Step::DevicePlugin) => Role::Error,
        None => Role::Ok,
    }
}

pub fn draw(frame: &mut Frame, area: Rect, app: &mut App, views: &Views, theme: &Theme) {
    if let Some(id) = app.drill.clone() {
        match views.analysis.pending.iter().find(|p| p.display_name() == id) {
            Some(item) => return drill(frame, area, app, item, theme),
            None => {
                let text = format!("{id} is no longer pending (scheduled, admitted or deleted); esc goes back");
                widgets::empty(frame, area, block(" Why pending ", true, theme), &text, theme);
                return;
            }
        }
    }
    let items = rows::pending(views, app.filter(Pane::Pending));
    let selected = app.selected_position(Pane::Pending, items.iter().map(|p| p.display_name()));
    let raw = items.iter().filter(|p| p.scheduler_recognised == Some(false)).count();
    let title = if raw > 0 {
        format!(" Pending ({}) · enter: why · {raw} scheduler message(s) not recognised ", items.len())
    } else {
        format!(" Pending ({}) · enter: why ", items.len())
    };
    if items.is_empty() {
        let text =
            if views.analysis.pending.is_empty() { "nothing is pending" } else { "nothing pending matches the filter" };
        widgets::empty(frame, area, block(title, true, theme), text, theme);
        return;
    }
    let wide = area.width >= 120;
    let name_w = if wide { 40 } else { 24 };
    let make_row = |i: usize| {
        let p = &items[i];
        let mut cells = vec![widgets::styled(p.blocking_str(), theme.style(step_role(p.blocking)))];
        if wide {
            cells.push(widgets::styled(p.kind.as_str(), theme.style(Role::Dim)));
        }
        cells.push(widgets::styled(fit(&p.display_name(), name_w), theme.style(Role::Text)));
        if wide {
            cells.push(widgets::styled(age(p.age), theme.style(Role::Dim)));
        }
        cells.push(widgets::styled(fit(&p.shape, 9), theme.style(Role::Accent)));
        if wide {
            cells.push(widgets::styled(p.queue.map_or("-".into(), |q| q.to_string()), theme.style(Role::Dim)));
        }
        let why = p.summary.split_once(": ").map_or(p.summary.as_str(), |(_, w)| w);
        cells.push(widgets::styled(why.to_string(), theme.style(Role::Text)));
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
    app.offsets.insert(Pane::Pending, offset);
}

/// The chain as lines (used by the drilldown and by tests).
pub fn chain_lines(item: &PendingItem, theme: &Theme, width: usize) -> Vec<Line<'static>> {
    let mut lines = vec![
        Line::from(vec![
            Span::styled(format!("{} {}", item.kind.as_str(), item.display_name()), theme.style(Role::Header)),
            Span::styled(format!("  pending {} · shape {}", age(item.age), item.shape), theme.style(Role::Dim)),
            Span::styled(item.queue.map_or(String::new(), |q| format!(" · queue {q}")), theme.style(Role::Dim)),
        ]),
        Line::from(vec![
            Span::styled("blocked at: ", theme.style(Role::Dim)),
            Span::styled(item.blocking_str().to_string(), theme.style(step_role(item.blocking))),
            Span::styled(format!(" — {}", item.summary), theme.style(Role::Text)),
        ]),
        Line::raw(""),
    ];
    for (i, s) in item.steps.iter().enumerate() {
        let (mark, role) = match s.verdict {
            Verdict::Pass => ("✓", Role::Ok),
            Verdict::Block => ("✗", Role::Error),
            Verdict::Warn => ("!", Role::Warn),
            Verdict::NotApplicable => ("–", Role::Dim),
        };
        lines.push(Line::from(vec![
            Span::styled(format!("{} {mark} ", i + 1), theme.style(role)),
            Span::styled(format!("{}: ", s.step.title()), theme.style(Role::Header)),
            Span::styled(s.summary.to_string(), theme.style(Role::Text)),
        ]));
        for d in s.details.iter() {
            lines.push(Line::styled(format!("      {d}"), theme.style(Role::Text)));
        }
        for c in &s.commands {
            for l in widgets::hanging("      $ ", c, width) {
                lines.push(Line::styled(l, theme.style(Role::Accent)));
            }
        }
    }
    if let Some(m) = &item.scheduler_message {
        lines.push(Line::raw(""));
        lines.push(Line::styled("scheduler said:", theme.style(Role::Header)));
        lines.push(Line::styled(format!("  {m}"), theme.style(Role::Text)));
        match (item.agrees_with_scheduler, item.scheduler_recognised) {
            (Some(true), _) => lines.push(Line::styled("  kgpu's per-node verdicts agree", theme.style(Role::Ok))),
            (Some(false), _) => lines.push(Line::styled(
                format!("  kgpu disagrees: {}", item.disagreement.clone().unwrap_or_default()),
                theme.style(Role::Warn),
            )),
            (None, Some(false)) => {
                lines.push(Line::styled("  (not a message kgpu recognises: shown raw)", theme.style(Role::Warn)))
            }
            _ => {}
        }
    }
    if !item.hints.is_empty() {
        lines.push(Line::raw(""));
        lines.push(Line::styled("hints:", theme.style(Role::Header)));
        for h in &item.hints {
            lines.push(Line::styled(format!("  • {h}"), theme.style(Role::Warn)));
        }
    }
    if !item.unblock.is_empty() {
        lines.push(Line::raw(""));
        lines.push(Line::styled("what would unblock it:", theme.style(Role::Header)));
        for u in &item.unblock {
            lines.push(Line::styled(format!("  → {u}"), theme.style(Role::Ok)));
        }
    }
    lines
}

fn drill(frame: &mut Frame, area: Rect, app: &mut App, item: &PendingItem, theme: &Theme) {
    let lines = chain_lines(item, theme, area.width.saturating_sub(2) as usize);
    let title = format!(" Why pending: {} · esc back · R requeue ", item.display_name());
    scrolled_text(frame, area, lines, &mut app.drill_scroll, block(title, true, theme));
}
