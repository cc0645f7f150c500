//! Dialogs drawn over the pane: help, command palette, filter, action
//! confirmation (with the blast radius and the kubectl equivalent), node
//! and matrix-cell details, the MIG config picker.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Wrap};

use crate::app::dialog_keys::{DIALOG_BINDINGS, Dialog};
use crate::app::keys::BINDINGS;
use crate::app::{App, Confirm, Detail, LineKind, Overlay, Pane, Viewport, palette};
use crate::view_model::lessons::{self, Standing};
use crate::view_model::panes::Views;
use crate::view_model::style::Doc;
use crate::view_model::{details, docs, mig_picker};

use super::Context;
use super::theme::{Role, Theme};
use super::widgets::{self, block, scrolled_text};

fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let w = width.min(area.width);
    let h = height.min(area.height);
    Rect { x: area.x + (area.width - w) / 2, y: area.y + (area.height - h) / 2, width: w, height: h }
}

pub fn draw(
    frame: &mut Frame,
    area: Rect,
    app: &App,
    shown: &mut Viewport,
    views: &Views,
    theme: &Theme,
    ctx: &Context,
) {
    let matrix_cell = app.matrix_cell;
    let in_flight: Vec<String> = app.in_flight.iter().map(|f| f.label.clone()).collect();
    let pane = app.pane;
    let Some(overlay) = app.overlay.as_ref() else { return };
    match overlay {
        Overlay::Help { scroll } => shown.overlay_scroll = Some(help(frame, area, views, theme, *scroll)),
        Overlay::Palette(text) => {
            let rect = Rect {
                x: area.x,
                y: area.y + area.height.saturating_sub(3),
                width: area.width,
                height: 3.min(area.height),
            };
            let hints = palette_hints(app, views, text.lines().first().map_or("", String::as_str), theme);
            let hint_rect = Rect {
                x: area.x,
                y: rect.y.saturating_sub(hints.len() as u16 + 2),
                width: area.width.min(100),
                height: (hints.len() as u16 + 2).min(rect.y.saturating_sub(area.y)),
            };
            frame.render_widget(Clear, hint_rect);
            frame.render_widget(Paragraph::new(hints).block(block(" commands ", false, theme)), hint_rect);
            let mut text = (**text).clone();
            text.set_block(block(" : command (enter run · tab complete · esc cancel) ", true, theme));
            text.set_style(theme.style(Role::Text));
            frame.render_widget(Clear, rect);
            frame.render_widget(&text, rect);
        }
        Overlay::Filter(text) => {
            let rect = Rect {
                x: area.x,
                y: area.y + area.height.saturating_sub(3),
                width: area.width,
                height: 3.min(area.height),
            };
            let mut text = (**text).clone();
            text.set_block(block(format!(" / filter {} (enter keep · esc clear) ", pane.title()), true, theme));
            text.set_style(theme.style(Role::Text));
            frame.render_widget(Clear, rect);
            frame.render_widget(&text, rect);
        }
        Overlay::Confirm(c) => shown.overlay_scroll = Some(confirm(frame, area, c, theme, ctx)),
        Overlay::QuitWhileRunning => quit_while_running(frame, area, &in_flight, theme),
        Overlay::NodeDetail { node, scroll } => {
            shown.overlay_scroll =
                Some(node_detail(frame, area, node.as_str(), docs::node(views, node.clone()), *scroll, theme))
        }
        Overlay::CellDetail { scroll } => {
            let cell = docs::matrix_cell(&views.analysis.matrix, matrix_cell);
            shown.overlay_scroll = Some(cell_detail(frame, area, cell, *scroll, theme))
        }
        Overlay::Messages { scroll } => shown.overlay_scroll = Some(messages(frame, area, app, views, theme, *scroll)),
        Overlay::Detail { detail, scroll } => {
            let (title, doc) = match detail {
                Detail::Event(e) => (" event · esc close ", details::event(e)),
                Detail::Gang(id) => (
                    " gang · esc close ",
                    match views.analysis.gangs.iter().find(|g| crate::app::gang_id(&g.key) == *id) {
                        Some(g) => details::gang(g, &views.analysis.spot),
                        None => {
                            let mut gone = Doc::default();
                            gone.line(Role::Warn, format!("{id} is gone"));
                            gone
                        }
                    },
                ),
                Detail::Queue(q) => (" queue · esc close ", details::queue(q)),
                Detail::Usage(pod) => (" usage · esc close ", details::usage(views, pod)),
                Detail::Lesson => match &app.tutor {
                    Some(t) => {
                        let solved = t.solved_line();
                        let standing =
                            Standing { hints_shown: t.hints_shown, solved: solved.as_deref(), mystery: t.mystery() };
                        let title = if t.mystery() { " mystery · esc close " } else { " lesson · esc close " };
                        // As it was when it opened, once the cockpit has seen it.
                        let opened = t.opened.clone().unwrap_or_else(|| lessons::Opened::of(t.lesson, &views.analysis));
                        (title, lessons::doc(t.lesson, &opened, &standing))
                    }
                    None => (" lesson · esc close ", Doc::default()),
                },
            };
            shown.overlay_scroll = Some(reader(frame, area, doc, title, *scroll, theme));
        }
        Overlay::MigPicker { node, configs, selected } => {
            let rows = mig_picker::rows(&views.snap, node.clone(), configs);
            let name_width = rows.iter().map(|r| r.config.chars().count()).max().unwrap_or(0);
            let h = (rows.len() as u16 + 2).min(area.height);
            let rect = centered(area, 100, h);
            let lines: Vec<Line> = rows
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    let chosen = i == *selected;
                    let pick = |role| if chosen { theme.style(Role::Selection) } else { theme.style(role) };
                    let mut spans = vec![
                        Span::styled(format!(" {:<name_width$} ", r.config), pick(Role::Text)),
                        Span::styled(format!(" {} ", r.cuts), pick(Role::Dim)),
                    ];
                    if r.current {
                        spans.push(Span::styled(" ← the node's config now ", pick(Role::Dim)));
                    } else if let Some(serves) = &r.serves {
                        spans.push(Span::styled(format!(" ← {serves} "), pick(Role::Accent)));
                    }
                    Line::from(spans)
                })
                .collect();
            frame.render_widget(Clear, rect);
            let title = format!(" mig.config for {node} · slices per GPU (enter choose · esc cancel) ");
            let scroll = (*selected as u16).saturating_sub(h.saturating_sub(3));
            frame.render_widget(Paragraph::new(lines).scroll((scroll, 0)).block(block(title, true, theme)), rect);
        }
    }
}

/// How a shape reads: pods × what each asks.
const SHAPES: [(&str, &str); 9] = [
    ("4×8", "4 pods of 8 GPUs each (nvidia.com/gpu: a device plugin, or DRA where a class serves it)"),
    ("1×2g.20gb", "1 pod of one MIG slice of that profile"),
    ("1×2 DRA", "1 pod whose claims ask 2 GPUs through DRA (ResourceClaims)"),
    ("1×2 DRA MIG", "…2 MIG devices through DRA: partitions, free GPUs counted whole"),
    ("1×? DRA", "its claim or template is missing: what it asks is unknown"),
    ("1×DRA devices", "1 pod whose claims ask devices that are not NVIDIA GPUs"),
    ("1×1 example.com/gpu", "1 pod asking another vendor's extended resource"),
    ("1×cpu + 4×8", "a gang's pod sets: a launcher that asks no GPU, 4 workers"),
    (
        "canonical",
        "what-if shapes the fragmentation map always weighs: 1×1, 1×8, 2×8, 4×8 whole GPUs, however nodes offer them",
    ),
];

fn help(frame: &mut Frame, area: Rect, views: &Views, theme: &Theme, scroll: u16) -> u16 {
    let mut lines = Vec::new();
    if let Some(s) = &views.snap.scenario {
        lines.push(Line::styled(format!("scenario {}: {}", s.name, s.title), theme.style(Role::Header)));
        lines.push(Line::styled(s.story.clone(), theme.style(Role::Text)));
        if !s.signal.is_empty() {
            lines.push(Line::styled(format!("look for: {}", s.signal), theme.style(Role::Accent)));
        }
        lines.push(Line::raw(""));
    }
    lines.push(Line::styled("keys", theme.style(Role::Header)));
    for b in BINDINGS {
        let panes = match b.panes {
            None => String::new(),
            Some(p) if p.len() == Pane::ALL.len() => String::new(),
            Some(p) => format!("  [{}]", p.iter().map(|x| x.title()).collect::<Vec<_>>().join(", ")),
        };
        lines.push(Line::from(vec![
            Span::styled(format!("  {:<9} ", b.label), theme.style(Role::KeyHint)),
            Span::styled(b.help.to_string(), theme.style(Role::Text)),
            Span::styled(panes, theme.style(Role::Dim)),
        ]));
    }
    lines.push(Line::raw(""));
    lines.push(Line::styled("shapes (SHAPE columns, the fragmentation map)", theme.style(Role::Header)));
    for (shape, meaning) in SHAPES {
        lines.push(Line::from(vec![
            Span::styled(format!("  {shape:<20} "), theme.style(Role::Accent)),
            Span::styled(meaning, theme.style(Role::Text)),
        ]));
    }
    lines.push(Line::raw(""));
    lines.push(Line::styled("sort (shift + letter; again reverses)", theme.style(Role::Header)));
    for (table, columns) in crate::app::sort::all() {
        let letters: Vec<String> = columns.iter().map(|c| format!("{} {}", c.letter, c.label)).collect();
        lines.push(Line::from(vec![
            Span::styled(format!("  {table:<12} "), theme.style(Role::KeyHint)),
            Span::styled(letters.join(" · "), theme.style(Role::Text)),
        ]));
    }
    lines.push(Line::raw(""));
    lines.push(Line::styled("command palette (:)", theme.style(Role::Header)));
    for (c, d) in palette::COMMANDS {
        lines.extend(command_lines("  ", c, d, theme));
    }
    for dialog in Dialog::ALL {
        lines.push(Line::raw(""));
        lines.push(Line::styled(dialog.title(), theme.style(Role::Header)));
        for b in DIALOG_BINDINGS.iter().filter(|b| b.dialog == dialog) {
            lines.push(Line::from(vec![
                Span::styled(format!("  {:<11} ", b.label), theme.style(Role::KeyHint)),
                Span::styled(b.help.to_string(), theme.style(Role::Text)),
            ]));
        }
        // The line being typed edits as a shell's does (overlay_keys::edit).
        if matches!(dialog, Dialog::Palette | Dialog::Filter) {
            lines.push(Line::from(vec![
                Span::styled(format!("  {:<11} ", "ctrl-u"), theme.style(Role::KeyHint)),
                Span::styled("clear what is typed before the cursor", theme.style(Role::Text)),
            ]));
        }
    }
    let rect = centered(area, 100, area.height);
    frame.render_widget(Clear, rect);
    scrolled_text(frame, rect, lines, scroll, block(" Help · esc close · j/k scroll ", true, theme))
}

/// What stopping now leaves behind, per action, for `q` while actions run.
fn quit_while_running(frame: &mut Frame, area: Rect, running: &[String], theme: &Theme) {
    let mut lines =
        vec![Line::styled(format!("{} action(s) still running:", running.len()), theme.style(Role::Header))];
    lines.extend(running.iter().map(|l| Line::styled(format!("  {l}"), theme.style(Role::Text))));
    for line in [
        "Quitting cancels them: each stops at its next step, a defrag plan releases",
        "its reserved nodes, and the audit log records where each stopped (kgpu waits",
        "up to 30 s for that). A drain stopped half-way leaves the node cordoned with",
        "some pods still on it; a repartition, the node cordoned and mig.config set.",
    ] {
        lines.push(Line::styled(line, theme.style(Role::Dim)));
    }
    lines.push(Line::from(vec![
        Span::styled(" y ", theme.style(Role::Destructive)),
        Span::styled(" stop them and quit  ", theme.style(Role::Text)),
        Span::styled("n/esc", theme.style(Role::KeyHint)),
        Span::styled(" stay (X cancels one cleanly)", theme.style(Role::Text)),
    ]));
    let height = lines.len() as u16 + 2;
    let rect = centered(area, 84, height);
    frame.render_widget(Clear, rect);
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }).block(block(" quit? ", true, theme)), rect);
}

/// The confirmation; returns its scroll clamped to the last page.
fn confirm(frame: &mut Frame, area: Rect, c: &Confirm, theme: &Theme, ctx: &Context) -> u16 {
    let role = if c.action.is_disruptive() { Role::Destructive } else { Role::Warn };
    let mut lines = vec![Line::styled(c.action.question(), theme.style(role))];
    if ctx.production {
        lines
            .push(Line::styled(format!("context {} looks like PRODUCTION", ctx.source), theme.style(Role::Production)));
    }
    if let Some(typed) = &c.typed {
        lines.push(Line::from(vec![
            Span::styled(format!("type {} to run it: ", c.action.confirm_word()), theme.style(Role::Production)),
            Span::styled(format!("{typed}▏"), theme.style(Role::Text)),
        ]));
    }
    let mut keys = if c.typed.is_some() {
        vec![
            Span::styled(" NAME enter ", theme.style(Role::Destructive)),
            Span::styled(" run  ", theme.style(Role::Text)),
            Span::styled("tab", theme.style(Role::KeyHint)),
            Span::styled(" dry run  ", theme.style(Role::Text)),
        ]
    } else {
        vec![
            Span::styled(if c.action.is_disruptive() { " y " } else { " y/enter " }, theme.style(Role::Destructive)),
            Span::styled(" run  ", theme.style(Role::Text)),
            Span::styled("d", theme.style(Role::KeyHint)),
            Span::styled(" dry run  ", theme.style(Role::Text)),
        ]
    };
    if c.action.offers_gpu_only() && c.typed.is_none() {
        keys.push(Span::styled("g", theme.style(Role::KeyHint)));
        keys.push(Span::styled(if c.gpu_only { " all pods  " } else { " GPU pods only  " }, theme.style(Role::Text)));
        let forced = c.action.forces();
        keys.push(Span::styled("f", theme.style(Role::KeyHint)));
        keys.push(Span::styled(if forced { " unforce  " } else { " force  " }, theme.style(Role::Text)));
    }
    keys.push(Span::styled(if c.typed.is_some() { "esc" } else { "n/esc" }, theme.style(Role::KeyHint)));
    keys.push(Span::styled(" cancel", theme.style(Role::Text)));
    lines.push(Line::from(keys));
    // The question and the keys stay; the blast radius and the commands
    // below them scroll (a repartition's last steps are below the fold at 80×24).
    let head = lines;
    let width = 96.min(area.width);
    let mut lines = Vec::new();
    for (kind, text) in c.impact.lines(c.action.is_disruptive(), false) {
        let role = match kind {
            LineKind::Summary => Role::Text,
            LineKind::Pod => Role::Dim,
            LineKind::Gang | LineKind::Warning => Role::Warn,
            LineKind::ByHand => Role::Header,
            LineKind::Command => {
                for l in super::widgets::hanging("  $ ", &text, width.saturating_sub(2) as usize) {
                    lines.push(Line::styled(l, theme.style(Role::Accent)));
                }
                continue;
            }
        };
        lines.push(Line::styled(text, theme.style(role)));
    }
    let inner_width = width.saturating_sub(2);
    let head = Paragraph::new(head).wrap(Wrap { trim: false });
    let body = Paragraph::new(lines).wrap(Wrap { trim: false });
    let rows = |p: &Paragraph| u16::try_from(p.line_count(inner_width)).unwrap_or(u16::MAX);
    let (head_height, body_height) = (rows(&head), rows(&body));
    let h = (head_height + body_height + 2).min(area.height);
    let rect = centered(area, width, h);
    frame.render_widget(Clear, rect);
    let border_role = if ctx.production { Role::Production } else { Role::BorderFocused };
    let mut b = block(format!(" confirm {} ", c.action.verb()), true, theme).border_style(theme.style(border_role));
    let inner = b.inner(rect);
    let [head_area, body_area] =
        Layout::vertical([Constraint::Length(head_height.min(inner.height)), Constraint::Min(0)]).areas(inner);
    let scroll = c.scroll.min(body_height.saturating_sub(body_area.height));
    let below = body_height.saturating_sub(scroll + body_area.height);
    if below > 0 || scroll > 0 {
        let more = match (scroll > 0, below > 0) {
            (_, true) => format!(" ↓ {below} more line(s): j/PgDn "),
            _ => " ↑ k/PgUp: the top ".to_string(),
        };
        b = b.title_bottom(Line::styled(more, theme.style(Role::KeyHint)));
    }
    frame.render_widget(b, rect);
    frame.render_widget(head, head_area);
    frame.render_widget(body.scroll((scroll, 0)), body_area);
    scroll
}

fn node_detail(frame: &mut Frame, area: Rect, node: &str, detail: Doc, scroll: u16, theme: &Theme) -> u16 {
    let rect = centered(area, 110, area.height);
    let lines = widgets::doc(&detail, theme, rect.width.saturating_sub(2) as usize);
    frame.render_widget(Clear, rect);
    scrolled_text(frame, rect, lines, scroll, block(format!(" node {node} · esc close "), true, theme))
}

fn cell_detail(frame: &mut Frame, area: Rect, detail: Doc, scroll: u16, theme: &Theme) -> u16 {
    reader(frame, area, detail, " matrix cell · esc close ", scroll, theme)
}

/// A document over the pane, scrolled; returns the scroll clamped.
fn reader(frame: &mut Frame, area: Rect, doc: Doc, title: &str, scroll: u16, theme: &Theme) -> u16 {
    let [_, mid, _] = Layout::vertical([Constraint::Length(1), Constraint::Min(3), Constraint::Length(1)]).areas(area);
    let rect = centered(mid, 100, mid.height);
    let lines = widgets::doc(&doc, theme, rect.width.saturating_sub(2) as usize);
    frame.render_widget(Clear, rect);
    scrolled_text(frame, rect, lines, scroll, block(title.to_string(), true, theme))
}

/// `:messages`: every notice of the session, newest first, whole.
fn messages(frame: &mut Frame, area: Rect, app: &App, views: &Views, theme: &Theme, scroll: u16) -> u16 {
    let [_, mid, _] = Layout::vertical([Constraint::Length(1), Constraint::Min(3), Constraint::Length(1)]).areas(area);
    let rect = centered(mid, 100, mid.height);
    let now = views.analysis.now;
    let mut lines: Vec<Line> = app
        .messages
        .iter()
        .rev()
        .map(|m| {
            Line::from(vec![
                Span::styled(
                    format!("{:>5} ago  ", crate::view_model::age((now - m.at).max(0))),
                    theme.style(Role::Dim),
                ),
                Span::styled(m.text.clone(), theme.style(if m.error { Role::Error } else { Role::Text })),
            ])
        })
        .collect();
    if lines.is_empty() {
        lines.push(Line::styled("no messages yet", theme.style(Role::Dim)));
    }
    frame.render_widget(Clear, rect);
    let title = format!(" messages ({} of at most {}) · esc close ", app.messages.len(), crate::app::MESSAGES_KEPT);
    scrolled_text(frame, rect, lines, scroll, block(title, true, theme))
}

/// How wide a palette command may be to have its description beside it.
const COMMAND_COLUMN: usize = 24;

/// A palette command and what it does: side by side, or, for a long
/// command, the description on the line under it.
fn command_lines(indent: &str, command: &str, what: &str, theme: &Theme) -> Vec<Line<'static>> {
    let command = format!("{indent}:{command}");
    if command.chars().count() < COMMAND_COLUMN {
        return vec![Line::from(vec![
            Span::styled(format!("{command:<COMMAND_COLUMN$}"), theme.style(Role::KeyHint)),
            Span::styled(what.to_string(), theme.style(Role::Dim)),
        ])];
    }
    vec![
        Line::styled(command, theme.style(Role::KeyHint)),
        Line::styled(format!("{:COMMAND_COLUMN$}{what}", ""), theme.style(Role::Dim)),
    ]
}

/// What the palette suggests for `line` as it is typed: the commands whose
/// words start with it, then, once a command is typed, its arguments.
fn palette_hints(app: &App, views: &Views, line: &str, theme: &Theme) -> Vec<Line<'static>> {
    let typed = line.trim_start().trim_start_matches(':');
    if !typed.contains(' ') {
        let matching: Vec<Line> = palette::COMMANDS
            .iter()
            .filter(|(c, _)| {
                typed.is_empty() || c.split(|ch: char| !ch.is_alphanumeric()).any(|w| w.starts_with(typed))
            })
            .flat_map(|(c, d)| command_lines("", c, d, theme))
            .collect();
        if matching.is_empty() {
            return vec![Line::styled(format!("no command starts with '{typed}'"), theme.style(Role::Warn))];
        }
        return matching;
    }
    let completion = palette::complete(line, &app.vocabulary(line, views));
    if completion.choices.is_empty() {
        return vec![Line::styled("nothing to complete: type the argument", theme.style(Role::Dim))];
    }
    const SHOWN: usize = 12;
    let mut lines: Vec<Line> = completion
        .choices
        .iter()
        .take(SHOWN)
        .map(|c| Line::styled(format!(" {c}"), theme.style(Role::KeyHint)))
        .collect();
    if completion.choices.len() > SHOWN {
        lines.push(Line::styled(format!(" … {} more", completion.choices.len() - SHOWN), theme.style(Role::Dim)));
    }
    lines
}
