//! Small building blocks shared by the panes.

use ratatui::Frame;
use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, Wrap};
use unicode_width::UnicodeWidthStr;

use super::theme::{Role, Theme};
use crate::view_model::style::{Doc, DocLine};

pub fn block<'a>(title: impl Into<Line<'a>>, focused: bool, theme: &Theme) -> Block<'a> {
    Block::default()
        .borders(Borders::ALL)
        .border_style(theme.border(focused))
        .title(title.into().style(theme.style(Role::Title)))
}

/// Wrapped `lines` in `block`, scrolled by `scroll`, clamped so the last
/// page (counted after wrapping) is as far as it goes; returns the scroll shown.
pub fn scrolled_text(frame: &mut Frame, area: Rect, lines: Vec<Line<'_>>, scroll: u16, block: Block<'_>) -> u16 {
    let inner = block.inner(area);
    let text = Paragraph::new(lines).wrap(Wrap { trim: false });
    let rows = u16::try_from(text.line_count(inner.width)).unwrap_or(u16::MAX);
    let scroll = scroll.min(rows.saturating_sub(inner.height));
    // What the bottom edge hides, and how to reach it (a cut-off why view
    // looked finished to a newcomer).
    let below = rows.saturating_sub(scroll.saturating_add(inner.height));
    let block = if below > 0 { block.title_bottom(more_below(below)) } else { block };
    frame.render_widget(text.scroll((scroll, 0)).block(block), area);
    scroll
}

/// The bottom-edge mark of a view with `below` rows further down.
pub fn more_below(below: u16) -> Line<'static> {
    Line::from(format!(" ↓ {below} more line(s): j/PgDn "))
}

/// A view model's text block as lines in `width` columns (commands hang
/// under themselves).
pub fn doc(doc: &Doc, theme: &Theme, width: usize) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    for l in &doc.lines {
        match l {
            // An indented detail wider than the pane: its continuation
            // lines keep the indent (at column 0 they read as a new item).
            DocLine::Pieces(pieces) => match &pieces[..] {
                [(role, text)] if text.starts_with(' ') && width > 0 && text.width() > width => {
                    let body = text.trim_start();
                    let lead = &text[..text.len() - body.len()];
                    for l in wrap_under(lead, body, width, lead.width()) {
                        lines.push(Line::styled(l, theme.style(*role)));
                    }
                }
                _ => lines.push(Line::from(
                    pieces
                        .iter()
                        .map(|(role, text)| Span::styled(text.clone(), theme.style(*role)))
                        .collect::<Vec<_>>(),
                )),
            },
            DocLine::Command { prefix, text } => {
                for l in hanging(prefix, text, width) {
                    lines.push(Line::styled(l, theme.style(Role::Accent)));
                }
            }
        }
    }
    lines
}

/// A shell command laid out in `width` columns: `prefix` on the first
/// line, its continuation lines indented under the command (a wrapped
/// command that restarts at column 0 reads as a second command). Breaks
/// at a space when there is one late enough in the line, else mid-word.
pub fn hanging(prefix: &str, command: &str, width: usize) -> Vec<String> {
    wrap_under(prefix, command, width, prefix.width() + 2)
}

/// `text` after `first` in `width` columns, its continuation lines
/// indented by `indent`; breaks at a space late enough in the line, else
/// mid-word.
pub fn wrap_under(first: &str, text: &str, width: usize, indent: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest: Vec<char> = text.chars().collect();
    let mut lead = first.to_string();
    loop {
        let room = width.saturating_sub(lead.width()).max(8);
        if rest.len() <= room {
            out.push(format!("{lead}{}", rest.iter().collect::<String>()));
            return out;
        }
        let cut = (room / 2..room).rev().find(|&i| rest[i] == ' ').map_or(room, |i| i + 1);
        let head: String = rest.drain(..cut).collect();
        out.push(format!("{lead}{}", head.trim_end()));
        lead = " ".repeat(indent);
    }
}

/// A border title for a box `width` columns wide: the first of
/// `candidates` (fullest first) that fits between the corners, else the
/// last one cut with `…` — never a title run into the corner.
pub fn title(width: u16, candidates: &[String]) -> String {
    let room = usize::from(width).saturating_sub(2);
    if let Some(t) = candidates.iter().find(|t| t.width() <= room) {
        return t.clone();
    }
    candidates.last().map_or_else(String::new, |t| format!("{} ", fit(t, room.saturating_sub(1))))
}

/// Cuts `s` to `width` columns, with `…` when cut.
pub fn fit(s: &str, width: usize) -> String {
    if s.width() <= width {
        return s.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut out = String::new();
    for c in s.chars() {
        if out.width() + c.to_string().width() + 1 > width {
            break;
        }
        out.push(c);
    }
    out.push('…');
    out
}

/// A name cut to `width` in the middle: its start and its end stay
/// (`team-b/job-moe…ion-b5cf4`), so names that share a long prefix (pods of
/// one Deployment, queues of one team) still look different.
pub fn fit_id(s: &str, width: usize) -> String {
    if s.width() <= width {
        return s.to_string();
    }
    if width < 7 {
        return fit(s, width);
    }
    let tail_w = (width - 1) / 2;
    let head_w = width - 1 - tail_w;
    let mut head = String::new();
    for c in s.chars() {
        if head.width() + c.to_string().width() > head_w {
            break;
        }
        head.push(c);
    }
    let mut tail: Vec<char> = Vec::new();
    let mut w = 0;
    for c in s.chars().rev() {
        let cw = c.to_string().width();
        if w + cw > tail_w {
            break;
        }
        w += cw;
        tail.push(c);
    }
    tail.reverse();
    format!("{head}…{}", tail.into_iter().collect::<String>())
}

/// A horizontal bar: `used` of `total` in `width` cells.
pub fn bar(used: u64, total: u64, width: usize, theme: &Theme) -> Vec<Span<'static>> {
    if width == 0 {
        return Vec::new();
    }
    let filled = if total == 0 { 0 } else { ((used.min(total) as f64 / total as f64) * width as f64).round() as usize };
    let over = used > total;
    vec![
        Span::styled("█".repeat(filled), theme.style(if over { Role::Warn } else { Role::BarUsed })),
        Span::styled("░".repeat(width - filled), theme.style(Role::BarFree)),
    ]
}

/// Keeps `selected` inside the visible window of `height` rows, moving the
/// window as little as possible.
pub fn scroll_into_view(offset: usize, selected: usize, height: usize, len: usize) -> usize {
    if height == 0 || len == 0 {
        return 0;
    }
    let max_offset = len.saturating_sub(height);
    let mut o = offset.min(max_offset);
    if selected < o {
        o = selected;
    } else if selected >= o + height {
        o = selected + 1 - height;
    }
    o
}

/// A scrolling table with one selected row; returns the new offset.
#[allow(clippy::too_many_arguments)]
pub fn table(
    frame: &mut Frame,
    area: Rect,
    block: Block<'_>,
    header: &[&str],
    widths: &[Constraint],
    mut rows: Vec<Vec<TableCell>>,
    selected: Option<usize>,
    offset: usize,
    theme: &Theme,
) -> usize {
    let len = rows.len();
    lazy_table(frame, area, block, header, widths, len, |i| std::mem::take(&mut rows[i]), selected, offset, theme)
}

/// [`table`] for long lists: only the visible rows are built (`row(i)`,
/// `i < len`), so a frame costs the same for 50 rows or 10,000.
#[allow(clippy::too_many_arguments)]
pub fn lazy_table(
    frame: &mut Frame,
    area: Rect,
    block: Block<'_>,
    header: &[&str],
    widths: &[Constraint],
    len: usize,
    mut row: impl FnMut(usize) -> Vec<TableCell>,
    selected: Option<usize>,
    offset: usize,
    theme: &Theme,
) -> usize {
    let inner_height = area.height.saturating_sub(3) as usize; // borders + header
    let offset = scroll_into_view(offset, selected.unwrap_or(0), inner_height, len);
    // The columns as the table lays them out (no selection symbol: the
    // selection is painted over the row), so a text too wide for its column
    // is cut with `…`, not mid-word without a sign.
    let columns: Vec<u16> = Layout::horizontal(widths.to_vec())
        .flex(Flex::Start)
        .spacing(1)
        .split(Rect { x: 0, y: 0, width: area.width.saturating_sub(2), height: 1 })
        .iter()
        .map(|r| r.width)
        .collect();
    let visible: Vec<Row> = (offset..len.min(offset + inner_height))
        .map(|i| {
            let cells = row(i).into_iter().enumerate().map(|(c, cell)| cell.fitted(columns.get(c).copied()));
            let cells = Row::new(cells);
            if Some(i) == selected { cells.style(theme.style(Role::Selection)) } else { cells }
        })
        .collect();
    let header = Row::new(header.iter().map(|h| Cell::from(h.to_string()))).style(theme.style(Role::Header));
    let mut block = block;
    if len > inner_height && inner_height > 0 {
        block = block.title_bottom(
            Line::styled(
                format!(" {}-{} of {len} ", offset + 1, (offset + inner_height).min(len)),
                theme.style(Role::Dim),
            )
            .right_aligned(),
        );
    }
    let table = Table::new(visible, widths.to_vec()).header(header).block(block).column_spacing(1);
    frame.render_widget(table, area);
    // The selection's colours over every cell of its row: a cell's own
    // foreground (white text) on the selection's background (white in
    // high-contrast) would be unreadable.
    if len == 0 && inner_height > 0 {
        // Only a filter empties a table the pane draws: the header stays.
        let note = Rect { x: area.x + 2, y: area.y + 2, width: area.width.saturating_sub(4), height: 1 };
        frame.render_widget(
            Paragraph::new(Line::styled("no match for the filter (esc clears it)", theme.style(Role::Warn))),
            note,
        );
    }
    if let Some(i) = selected.filter(|i| *i < len && (offset..offset + inner_height).contains(i)) {
        let y = area.y + 2 + (i - offset) as u16;
        let row = Rect { x: area.x + 1, y, width: area.width.saturating_sub(2), height: 1 };
        frame.buffer_mut().set_style(row.intersection(area), theme.style(Role::Selection));
    }
    offset
}

/// An empty pane's message, centred (wrapped to the pane's width).
pub fn empty(frame: &mut Frame, area: Rect, block: Block<'_>, text: &str, theme: &Theme) {
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if inner.height == 0 || inner.width == 0 {
        return;
    }
    let lines = (text.width() as u16).div_ceil(inner.width.saturating_sub(2).max(1)).max(1).min(inner.height);
    let y = inner.y + (inner.height - lines) / 2;
    let rect = Rect { x: inner.x + 1, y, width: inner.width.saturating_sub(2), height: inner.y + inner.height - y };
    frame.render_widget(
        Paragraph::new(Line::styled(text.to_string(), theme.style(Role::Dim)))
            .alignment(ratatui::layout::Alignment::Center)
            .wrap(Wrap { trim: true }),
        rect,
    );
}

/// A table cell: a styled text, cut with `…` to its column, or a line the
/// pane drew to the column's width itself (a bar, a GPU map).
pub enum TableCell {
    Text(String, Style),
    Drawn(Line<'static>),
}

impl TableCell {
    fn fitted(self, width: Option<u16>) -> Cell<'static> {
        match self {
            TableCell::Text(text, style) => {
                let text = match width {
                    Some(w) if text.width() > usize::from(w) => fit(&text, usize::from(w)),
                    _ => text,
                };
                Cell::from(Span::styled(text, style))
            }
            TableCell::Drawn(line) => Cell::from(line),
        }
    }
}

impl From<Line<'static>> for TableCell {
    fn from(line: Line<'static>) -> TableCell {
        TableCell::Drawn(line)
    }
}

pub fn styled(text: impl Into<String>, style: Style) -> TableCell {
    TableCell::Text(text.into(), style)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_wider_than_its_column_ends_in_an_ellipsis() {
        let theme = Theme::builtin("dark");
        let mut terminal = ratatui::Terminal::new(ratatui::backend::TestBackend::new(30, 4)).unwrap();
        terminal
            .draw(|f| {
                let rows = vec![vec![
                    styled("gpu-01", Style::default()),
                    styled("0/12 nodes can take it: 4 insufficient-gpu", Style::default()),
                ]];
                let widths = [Constraint::Length(6), Constraint::Min(5)];
                table(
                    f,
                    f.area(),
                    Block::default().borders(Borders::ALL),
                    &["N", "WHY"],
                    &widths,
                    rows,
                    None,
                    0,
                    &theme,
                );
            })
            .unwrap();
        let row: String = (0..30).map(|x| terminal.backend().buffer()[(x, 2)].symbol().to_string()).collect();
        assert_eq!(row, "│gpu-01 0/12 nodes can take …│");
    }

    #[test]
    fn long_commands_hang_under_themselves() {
        let lines =
            hanging("  $ ", "kubectl taint node gpu-03 kgpu.dev/defrag=research.job-llm-sft-295a1:NoSchedule", 40);
        assert_eq!(lines[0], "  $ kubectl taint node gpu-03");
        assert!(lines[1..].iter().all(|l| l.starts_with("      ") && l.width() <= 40), "{lines:?}");
        // Nothing lost: the same characters, spaces aside.
        let kept: String = lines.concat().replace("$", "").chars().filter(|c| !c.is_whitespace()).collect();
        assert_eq!(kept, "kubectltaintnodegpu-03kgpu.dev/defrag=research.job-llm-sft-295a1:NoSchedule");
        assert_eq!(hanging("$ ", "short", 40), ["$ short"]);
    }

    #[test]
    fn fitting_and_scrolling() {
        assert_eq!(fit("abcdef", 4), "abc…");
        assert_eq!(fit("abc", 4), "abc");
        assert_eq!(fit("abc", 0), "");
        assert_eq!(scroll_into_view(0, 12, 10, 50), 3);
        assert_eq!(scroll_into_view(3, 5, 10, 50), 3, "still visible: no jump");
        assert_eq!(scroll_into_view(8, 2, 10, 50), 2);
        assert_eq!(scroll_into_view(45, 15, 10, 20), 10, "clamped to the end");
    }
}
