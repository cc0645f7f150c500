//! Widgets: draw the view models with the theme's roles. `draw` reads the
//! app and returns what it showed (scroll offsets in range), so screen
//! tests render it into a `TestBackend`.

pub mod overlays;
pub mod panes;
pub mod theme;
pub mod widgets;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};
use unicode_width::UnicodeWidthStr;

use crate::app::{App, Pane, Viewport};
use crate::view_model::panes::Views;

pub use theme::{Role, Theme};

/// The smallest terminal kgpu draws in.
pub const MIN_WIDTH: u16 = 60;
pub const MIN_HEIGHT: u16 = 16;

/// What the title bar says about where the data comes from.
#[derive(Clone, Debug, Default)]
pub struct Context {
    /// `demo`, a kube context name, or a file path.
    pub source: String,
    /// Scenario title in the demo.
    pub subtitle: String,
    /// The context looks like production: the title bar and dialogs show it.
    pub production: bool,
}

/// Draws the cockpit; returns what it showed (scroll positions kept in
/// range), for the app to keep (`Msg::Viewport`).
pub fn draw(frame: &mut Frame, app: &App, views: &Views, theme: &Theme, ctx: &Context) -> Viewport {
    let mut shown = Viewport::default();
    let area = frame.area();
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        too_small(frame, area, theme);
        return shown;
    }
    draw_panes(frame, area, app, &mut shown, views, theme, ctx);
    scrub(frame);
    shown
}

/// The frame without a control, bidi or invisible character in any cell:
/// ratatui drops controls where it writes strings, but not where it lays
/// out wrapped lines, and an escape sequence, a right-to-left override or a
/// zero-width space from the cluster must not reach the terminal.
fn scrub(frame: &mut Frame) {
    for cell in frame.buffer_mut().content.iter_mut() {
        let unsafe_char = crate::view_model::style::unsafe_on_screen;
        if cell.symbol().chars().any(unsafe_char) {
            // A zero-width one rides on the character before it: dropped, so
            // the cell keeps its width; a cell of nothing else shows �.
            let kept: String = cell.symbol().chars().filter(|c| !unsafe_char(*c)).collect();
            cell.set_symbol(if kept.is_empty() { "\u{FFFD}" } else { &kept });
        }
    }
}

fn draw_panes(
    frame: &mut Frame,
    area: Rect,
    app: &App,
    shown: &mut Viewport,
    views: &Views,
    theme: &Theme,
    ctx: &Context,
) {
    let [title, main, status] =
        Layout::vertical([Constraint::Length(1), Constraint::Min(1), Constraint::Length(1)]).areas(area);
    title_bar(frame, title, app, theme, ctx);
    match app.pane {
        Pane::Fleet => panes::fleet::draw(frame, main, app, shown, views, theme),
        Pane::Pending => panes::pending::draw(frame, main, app, shown, views, theme),
        Pane::Gangs => panes::gangs::draw(frame, main, app, shown, views, theme),
        Pane::Mig => panes::mig::draw(frame, main, app, shown, views, theme),
        Pane::Drivers => panes::drivers::draw(frame, main, app, shown, views, theme),
        Pane::Events => panes::events::draw(frame, main, app, shown, views, theme),
        Pane::Usage => panes::usage::draw(frame, main, app, shown, views, theme),
    }
    status_bar(frame, status, app, views, theme);
    overlays::draw(frame, main, app, shown, views, theme, ctx);
}

fn too_small(frame: &mut Frame, area: Rect, theme: &Theme) {
    let text = vec![
        Line::styled("terminal too small", theme.style(Role::Error)),
        Line::styled(
            format!("kgpu needs {MIN_WIDTH}×{MIN_HEIGHT}, this is {}×{}", area.width, area.height),
            theme.style(Role::Text),
        ),
        Line::styled("enlarge the window, or press q to quit", theme.style(Role::Dim)),
    ];
    let y = area.height.saturating_sub(3) / 2;
    let rect = Rect { x: area.x, y: area.y + y, width: area.width, height: area.height.saturating_sub(y).min(3) };
    frame.render_widget(
        Paragraph::new(text).alignment(ratatui::layout::Alignment::Center).wrap(Wrap { trim: true }),
        rect,
    );
}

fn title_bar(frame: &mut Frame, area: Rect, app: &App, theme: &Theme, ctx: &Context) {
    let mut spans = vec![Span::styled(" kgpu ", theme.style(Role::TabActive))];
    let source_style = if ctx.production { theme.style(Role::Production) } else { theme.style(Role::Title) };
    spans.push(Span::styled(format!(" {} ", ctx.source), source_style));
    let wide = area.width >= 110;
    let tabs_with = |full_active: bool| -> Vec<Span> {
        Pane::ALL
            .iter()
            .flat_map(|p| {
                let full = wide || (full_active && *p == app.pane);
                let label = if full { p.title() } else { short_title(*p) };
                let style = if *p == app.pane { theme.style(Role::TabActive) } else { theme.style(Role::Tab) };
                [
                    Span::styled(format!(" {}", p.number()), style.patch(theme.style(Role::KeyHint))),
                    Span::styled(format!(" {label} "), style),
                ]
            })
            .collect()
    };
    let width = |spans: &[Span]| spans.iter().map(|s| s.width()).sum::<usize>();
    // Every tab shows, whole: the active one is named in full where there is room.
    let mut tabs = tabs_with(true);
    if width(&spans) + width(&tabs) > area.width as usize {
        tabs = tabs_with(false);
    }
    let tabs_width = width(&tabs);
    if width(&spans) + tabs_width > area.width as usize
        && let Some(source) = spans.last_mut()
    {
        let room = (area.width as usize).saturating_sub(tabs_width + 6 + 2).max(4);
        *source = Span::styled(format!(" {} ", widgets::fit(&ctx.source, room)), source.style);
    }
    let used: usize = width(&spans);
    let room = (area.width as usize).saturating_sub(used + tabs_width + 1);
    // Whole, or cut with an ellipsis where enough of it shows (a server URL
    // cut silently reads as another URL; "A …" of a title says nothing).
    let shows = room > 2 && (ctx.subtitle.width() <= room - 2 || room - 2 >= 16);
    if shows && !ctx.subtitle.is_empty() {
        let sub = widgets::fit(&ctx.subtitle, room - 2);
        spans.push(Span::styled(format!(" {sub}"), theme.style(Role::Dim)));
        let pad = room.saturating_sub(sub.width() + 1);
        spans.push(Span::raw(" ".repeat(pad)));
    } else {
        spans.push(Span::raw(" ".repeat(room)));
    }
    spans.extend(tabs);
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn short_title(p: Pane) -> &'static str {
    match p {
        Pane::Fleet => "Fleet",
        Pane::Pending => "Pend",
        Pane::Gangs => "Gangs",
        Pane::Mig => "MIG",
        Pane::Drivers => "Drv",
        Pane::Events => "Evt",
        Pane::Usage => "Use",
    }
}

fn status_bar(frame: &mut Frame, area: Rect, app: &App, views: &Views, theme: &Theme) {
    let t = &views.analysis.totals;
    let mut spans = Vec::new();
    // The notice first: it answers the key just pressed, and at 80 columns
    // anything after the totals is cut.
    if let Some(n) = &app.notice {
        // A message longer than the line is cut where it says so; the
        // whole of it is in :messages.
        let room = (area.width as usize).saturating_sub(2);
        let text = if n.text.width() > room {
            crate::ui::widgets::fit(&n.text, room.saturating_sub(14)) + " (:messages)"
        } else {
            n.text.clone()
        };
        let dismiss = if n.sticky { "esc " } else { "" };
        spans.push(Span::styled(format!(" {text} "), theme.style(if n.error { Role::Error } else { Role::Accent })));
        spans.push(Span::styled(format!("{dismiss}│"), theme.style(Role::Dim)));
    }
    spans.push(Span::styled(
        format!(" {} GPU · {} used · {} free · {} pending ", t.gpus, t.allocated, t.free, views.analysis.pending.len()),
        theme.style(Role::Text),
    ));
    // What runs, and for how long: a long step (a drain's evictions, the
    // mig-manager's minute) is not a frozen screen.
    if let Some(first) = app.in_flight.iter().min_by_key(|f| f.started) {
        let more = app.in_flight.len() - 1;
        let more = if more > 0 { format!(" +{more}") } else { String::new() };
        let elapsed = crate::view_model::age(app.wall.saturating_sub(first.started));
        spans.push(Span::styled(format!("│ ⟳ {} {elapsed}{more} ", first.action.verb()), theme.style(Role::Warn)));
    }
    let (feeds, role) = crate::view_model::feeds::summary(&views.snap, views.analysis.now);
    spans.push(Span::styled(format!("│ {feeds} "), theme.style(role)));
    if app.read_only {
        spans.push(Span::styled("│ read-only ", theme.style(Role::Warn)));
    }
    if let Some(t) = &app.tutor {
        let kind = if t.mystery() { "mystery" } else { "lesson" };
        if t.solved.is_some() {
            spans.push(Span::styled(format!("│ {kind} solved :lesson "), theme.style(Role::Ok)));
        } else {
            spans.push(Span::styled(format!("│ {kind} :hint :answer "), theme.style(Role::Accent)));
        }
    }
    let filter = app.filter(app.pane);
    if !filter.is_empty() {
        spans.push(Span::styled(format!("│ /{filter} "), theme.style(Role::Accent)));
    }
    if app.notice.is_none() {
        let used: usize = spans.iter().map(|s| s.width()).sum();
        let mut hints = Vec::new();
        let all = app.key_hints(views);
        let hint_width = |key: &str, what: &str| key.chars().count() + what.chars().count() + 2;
        // The help key is the way to every other: its room is kept first (a
        // newcomer at 80 columns saw the pane's keys and no `? help`).
        let help = all
            .iter()
            .find(|(key, _)| *key == "?")
            .map(|(k, w)| hint_width(k, w))
            .filter(|w| used + 2 + w <= area.width as usize);
        let mut width = used + 2 + help.unwrap_or(0);
        for (key, what) in all {
            let w = if key == "?" && help.is_some() { 0 } else { hint_width(key, what) };
            // A hint too long for what is left gives way to shorter ones after it.
            if width + w > area.width as usize {
                continue;
            }
            width += w;
            hints.push(Span::styled(key.to_string(), theme.style(Role::KeyHint)));
            hints.push(Span::styled(format!(" {what} "), theme.style(Role::Dim)));
        }
        spans.push(Span::raw("│ "));
        spans.extend(hints);
    }
    frame.render_widget(Paragraph::new(Line::from(fit_spans(spans, usize::from(area.width)))), area);
}

/// `spans` cut to `width` columns, the last kept one ending in `…` when
/// something was cut (a status bar cut at 80 columns said `1 pendin`).
fn fit_spans(spans: Vec<Span<'static>>, width: usize) -> Vec<Span<'static>> {
    if spans.iter().map(|s| s.content.width()).sum::<usize>() <= width {
        return spans;
    }
    let mut out = Vec::new();
    let mut used = 0;
    for span in spans {
        let w = span.content.width();
        if used + w < width {
            used += w;
            out.push(span);
            continue;
        }
        let text = widgets::fit(&span.content, width.saturating_sub(used));
        out.push(Span::styled(text, span.style));
        break;
    }
    out
}
