//! MIG pane: the MIG-capable nodes with their mig.config and its state, and
//! for the selected node each GPU's 8 memory slices with the instances
//! placed on them (used or free).

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::app::{App, Pane, Section, Viewport, rows};
use crate::ui::theme::{Role, Theme};
use crate::ui::widgets::{self, block, fit};
use crate::view_model::panes::{MigGpuRow, MigNodeRow, MigSource, Views};

/// One GPU as 8 memory slices, 3 columns each: `[1g.10gb|1g|2g   |3g         ]`.
pub fn slice_bar(gpu: &MigGpuRow, theme: &Theme) -> Line<'static> {
    const W: usize = 3;
    let mut spans = vec![Span::styled(format!("GPU{:<2}", gpu.index), theme.style(Role::Dim))];
    if !gpu.enabled {
        spans.push(Span::styled(
            format!("[{:^width$}]", "whole GPU (MIG off)", width = 8 * W - 1),
            theme.style(Role::GpuUsed),
        ));
        return Line::from(spans);
    }
    if gpu.held_whole {
        spans.push(Span::styled(
            format!("[{:^width$}]", "held whole (a claim)", width = 8 * W - 1),
            theme.style(Role::GpuUsed),
        ));
        return Line::from(spans);
    }
    spans.push(Span::styled("[", theme.style(Role::Dim)));
    let mut slot = 0u8;
    let mut instances = gpu.instances.clone();
    instances.sort_by_key(|i| i.1);
    for (profile, start, size, used) in instances {
        // Placements are checked at the edge; a bad one is skipped here, never drawn past the bar.
        if size == 0 || start < slot || start.saturating_add(size) > 8 {
            continue;
        }
        if start > slot {
            spans.push(Span::styled(" ".repeat((start - slot) as usize * W), theme.style(Role::Dim)));
        }
        let width = size as usize * W - 1;
        let label = fit(profile.as_str().split('.').next().unwrap_or(""), width);
        let role = if used { Role::MigUsed } else { Role::MigFree };
        let style =
            if used { theme.style(role).add_modifier(ratatui::style::Modifier::REVERSED) } else { theme.style(role) };
        spans.push(Span::styled(format!("{label:^width$}"), style));
        slot = start + size;
        if slot < 8 {
            spans.push(Span::styled("|", theme.style(Role::Dim)));
        }
    }
    if slot < 8 {
        spans.push(Span::styled(" ".repeat((8 - slot) as usize * W - 1), theme.style(Role::Dim)));
    }
    spans.push(Span::styled("]", theme.style(Role::Dim)));
    if !gpu.healthy {
        spans.push(Span::styled(" unhealthy", theme.style(Role::GpuUnhealthy)));
    }
    Line::from(spans)
}

pub fn draw(frame: &mut Frame, area: Rect, app: &App, shown: &mut Viewport, views: &Views, theme: &Theme) {
    let nodes = rows::mig(views, app.filter(Pane::Mig), app.sorting(Pane::Mig, Section::First));
    let capable_off = views
        .snap
        .nodes
        .values()
        .filter(|n| n.gpu.mig_capable == Some(true) && !views.mig.iter().any(|m| m.node == n.name))
        .count();
    // `m` acts on a row here; with none, the Fleet pane is where it works.
    let m = if nodes.is_empty() { "m in Fleet repartitions" } else { "m repartition" };
    let title = format!(
        " MIG nodes ({}){} · {capable_off} MIG-capable with MIG off · {m} ",
        nodes.len(),
        app.sort_title(Pane::Mig, Section::First, false)
    );
    if views.mig.is_empty() {
        let text = if capable_off > 0 {
            "no node uses MIG; select a node in the Fleet pane and press m to repartition"
        } else {
            "no MIG-capable nodes"
        };
        widgets::empty(frame, area, block(title, true, theme), text, theme);
        return;
    }
    let (list_area, detail_area) = if area.width >= 110 {
        let [l, r] = Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(area);
        (l, r)
    } else {
        let list_h = (nodes.len() as u16 + 3).min(area.height / 2).max(5);
        let [l, r] = Layout::vertical([Constraint::Length(list_h), Constraint::Min(3)]).areas(area);
        (l, r)
    };
    let ids: Vec<String> = nodes.iter().map(|n| n.id()).collect();
    let selected = app.selected_index(Pane::Mig, &ids);
    // Borders, the three columns before it and their gaps.
    let summary_width = usize::from(list_area.width).saturating_sub(2 + 16 + 14 + 10 + 3).max(10);
    let rows: Vec<Vec<widgets::TableCell>> = nodes
        .iter()
        .map(|n| {
            let state_role = match n.state.as_str() {
                "success" => Role::Ok,
                "failed" => Role::Error,
                "pending" | "rebooting" => Role::Warn,
                _ => Role::Dim,
            };
            vec![
                widgets::styled(fit(n.node.as_str(), 16), theme.style(Role::Text)),
                widgets::styled(fit(&n.config, 14), theme.style(Role::Accent)),
                widgets::styled(
                    if n.paused { format!("{} ⏸", n.state) } else { n.state.clone() },
                    theme.style(state_role),
                ),
                widgets::styled(whole_items(&n.summary, summary_width), theme.style(Role::Dim)),
            ]
        })
        .collect();
    let widths = [Constraint::Length(16), Constraint::Length(14), Constraint::Length(10), Constraint::Min(10)];
    let offset = app.offsets.get(&Pane::Mig).copied().unwrap_or(0);
    let offset = widgets::table(
        frame,
        list_area,
        block(title, true, theme),
        &["NODE", "MIG.CONFIG", "STATE", "SLICES USED/ALLOC"],
        &widths,
        rows,
        Some(selected),
        offset,
        theme,
    );
    shown.offsets.push((Pane::Mig, offset));
    shown.page = Some(usize::from(area.height.saturating_sub(3)));
    if let Some(node) = nodes.get(selected) {
        detail(frame, detail_area, node, theme);
    }
}

fn detail(frame: &mut Frame, area: Rect, node: &MigNodeRow, theme: &Theme) {
    let mut lines = vec![Line::from(vec![
        Span::styled(node.node.to_string(), theme.style(Role::Header)),
        Span::styled(
            match node.source {
                MigSource::DevicePlugin => format!("  {}  mig.config={} ({})", node.product, node.config, node.state),
                MigSource::Dra => format!("  {}  MIG devices published through DRA", node.product),
                MigSource::DraDynamic => {
                    format!("  {}  through DRA: a partition is made when a claim gets it", node.product)
                }
            },
            theme.style(Role::Dim),
        ),
    ])];
    if node.paused {
        lines.push(Line::styled(
            "GPU operands paused-for-mig-change: the device plugin advertises nothing until mig-manager finishes",
            theme.style(Role::Warn),
        ));
    }
    if node.gpus.is_empty() {
        lines.push(Line::styled("no per-GPU data (no agent reporting for this node)", theme.style(Role::Dim)));
    }
    for g in &node.gpus {
        lines.push(slice_bar(g, theme));
    }
    lines.extend(node.notes.iter().map(|n| Line::styled(n.clone(), theme.style(Role::Dim))));
    lines.push(Line::from(vec![
        Span::styled("▮▮", theme.style(Role::MigUsed).add_modifier(ratatui::style::Modifier::REVERSED)),
        Span::styled(" used  ", theme.style(Role::Dim)),
        Span::styled("1g", theme.style(Role::MigFree)),
        Span::styled(" free   slices are memory slices 0-7 (placement start:size)", theme.style(Role::Dim)),
    ]));
    let text = Paragraph::new(lines).wrap(ratatui::widgets::Wrap { trim: false });
    frame.render_widget(text.block(block(" GPUs and slices ", false, theme)), area);
}

/// `1g.10gb 3/16  2g.20gb 8/8  3g.40gb 1/8` cut at a whole profile, with how
/// many more there are (`+1`), rather than mid-count (`3g.40gb` with no `1/8`).
fn whole_items(summary: &str, width: usize) -> String {
    if summary.chars().count() <= width {
        return summary.to_string();
    }
    let items: Vec<&str> = summary.split("  ").collect();
    let mut out = String::new();
    for (i, item) in items.iter().enumerate() {
        let more = format!(" +{}", items.len() - i);
        let next = if out.is_empty() { item.to_string() } else { format!("{out}  {item}") };
        let rest_after = if i + 1 < items.len() { format!(" +{}", items.len() - i - 1).chars().count() } else { 0 };
        if next.chars().count() + rest_after > width {
            return if out.is_empty() { fit(summary, width) } else { format!("{out}{more}") };
        }
        out = next;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::whole_items;

    #[test]
    fn a_slice_summary_is_cut_at_a_whole_profile() {
        let s = "1g.10gb 3/16  2g.20gb 8/8  3g.40gb 1/8";
        assert_eq!(whole_items(s, 40), s);
        assert_eq!(whole_items(s, 30), "1g.10gb 3/16  2g.20gb 8/8 +1");
        assert_eq!(whole_items(s, 20), "1g.10gb 3/16 +2");
    }
}
