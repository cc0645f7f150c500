//! Keys while an overlay is open (help, palette, filter, confirmation,
//! details, MIG picker), and the palette's commands.

use super::dialog_keys::{Dialog, DialogCommand, dialog_command};
use super::*;

impl App {
    pub(super) fn on_overlay_key(&mut self, overlay: Overlay, key: KeyEvent, views: &Views) -> Vec<Effect> {
        let command = |dialog| dialog_command(dialog, key.code);
        let mut overlay = overlay;
        // `:` from something being read: the palette, as from a pane (the
        // reader closes, as any key it does not use closes it).
        if key.code == KeyCode::Char(':') && overlay.reader_scroll().is_some() {
            return self.on_key(key, views);
        }
        if let Some(scroll) = overlay.reader_scroll() {
            // Every reader scrolls alike; closing drops it.
            if let Some(next) = scroll_reader(command(Dialog::Reader), *scroll) {
                *scroll = next;
                self.overlay = Some(overlay);
            }
            return Vec::new();
        }
        match overlay {
            // Handled above.
            Overlay::Help { .. }
            | Overlay::NodeDetail { .. }
            | Overlay::CellDetail { .. }
            | Overlay::Detail { .. }
            | Overlay::Messages { .. } => {}
            Overlay::Filter(mut area) => match command(Dialog::Filter) {
                Some(DialogCommand::Close) => {
                    self.filters.remove(&self.pane);
                }
                Some(_) => {}
                None => {
                    if !edit(&mut area, key) {
                        self.overlay = Some(Overlay::Filter(area));
                        return Vec::new();
                    }
                    let text = area.lines().first().cloned().unwrap_or_default();
                    self.explain_filter(&text);
                    if text.is_empty() {
                        self.filters.remove(&self.pane);
                    } else {
                        self.filters.insert(self.pane, text);
                    }
                    self.overlay = Some(Overlay::Filter(area));
                }
            },
            Overlay::Palette(mut area) => match command(Dialog::Palette) {
                Some(DialogCommand::Choose) => {
                    let line = area.lines().first().cloned().unwrap_or_default();
                    return self.run_palette(&line, views);
                }
                Some(DialogCommand::Complete) => {
                    let line = area.lines().first().cloned().unwrap_or_default();
                    let completion = palette::complete(&line, &self.vocabulary(&line, views));
                    self.overlay = Some(Overlay::Palette(Box::new(single_line(":", &completion.line))));
                }
                Some(_) => {}
                None => {
                    edit(&mut area, key);
                    self.overlay = Some(Overlay::Palette(area));
                }
            },
            Overlay::MigPicker { node, configs, selected } => match command(Dialog::MigPicker) {
                Some(DialogCommand::Close) => {}
                Some(DialogCommand::Down) => {
                    let selected = (selected + 1).min(configs.len().saturating_sub(1));
                    self.overlay = Some(Overlay::MigPicker { node, configs, selected });
                }
                Some(DialogCommand::Up) => {
                    self.overlay = Some(Overlay::MigPicker { node, configs, selected: selected.saturating_sub(1) });
                }
                Some(DialogCommand::Top) => self.overlay = Some(Overlay::MigPicker { node, configs, selected: 0 }),
                Some(DialogCommand::Bottom) => {
                    let selected = configs.len().saturating_sub(1);
                    self.overlay = Some(Overlay::MigPicker { node, configs, selected });
                }
                Some(DialogCommand::Choose) => {
                    if let Some(config) = configs.get(selected) {
                        self.confirm(Action::RepartitionMig { node, config: config.clone() }, views);
                    }
                }
                _ => self.overlay = Some(Overlay::MigPicker { node, configs, selected }),
            },
            Overlay::QuitWhileRunning => match command(Dialog::QuitWhileRunning) {
                Some(DialogCommand::Yes) => {
                    self.quit = true;
                    return vec![Effect::Quit];
                }
                Some(DialogCommand::Close) => {}
                _ => self.overlay = Some(Overlay::QuitWhileRunning),
            },
            Overlay::Confirm(confirm) if confirm.typed.is_some() => {
                return self.on_typed_confirm_key(confirm, key);
            }
            Overlay::Confirm(mut confirm) => match command(Dialog::Confirm) {
                Some(DialogCommand::Yes) => return self.execute(confirm.action, false),
                Some(
                    c @ (DialogCommand::Down
                    | DialogCommand::Up
                    | DialogCommand::PageDown
                    | DialogCommand::PageUp
                    | DialogCommand::Top
                    | DialogCommand::Bottom),
                ) => {
                    confirm.scroll = scroll_reader(Some(c), confirm.scroll).unwrap_or(0);
                    self.overlay = Some(Overlay::Confirm(confirm));
                }
                Some(DialogCommand::YesIfHarmless) if !confirm.action.is_disruptive() => {
                    return self.execute(confirm.action, false);
                }
                Some(DialogCommand::YesIfHarmless) => {
                    self.notify(format!("enter does not confirm a {}: press y to run it", confirm.action.verb()), true);
                    self.overlay = Some(Overlay::Confirm(confirm));
                }
                Some(DialogCommand::DryRun) => return self.execute(confirm.action, true),
                Some(DialogCommand::ToggleGpuOnly) => {
                    if let Action::Drain { node, gpu_only, force } = confirm.action {
                        self.confirm(Action::Drain { node, gpu_only: !gpu_only, force }, views);
                    } else {
                        self.overlay = Some(Overlay::Confirm(confirm));
                    }
                }
                Some(DialogCommand::ToggleForce) => {
                    if let Action::Drain { node, gpu_only, force } = confirm.action {
                        self.confirm(Action::Drain { node, gpu_only, force: !force }, views);
                    } else {
                        self.overlay = Some(Overlay::Confirm(confirm));
                    }
                }
                Some(DialogCommand::Close) => {
                    self.notify(format!("{} cancelled", confirm.action.verb()), false);
                }
                _ => {
                    confirm.gpu_only = matches!(confirm.action, Action::Drain { gpu_only: true, .. });
                    self.overlay = Some(Overlay::Confirm(confirm));
                }
            },
        }
        Vec::new()
    }

    /// A disruptive action on a production context: its target's name is
    /// typed; enter runs it only when the name matches, tab dry-runs it.
    fn on_typed_confirm_key(&mut self, mut confirm: Box<Confirm>, key: KeyEvent) -> Vec<Effect> {
        let word = confirm.action.confirm_word();
        let typed = confirm.typed.get_or_insert_with(String::new);
        match dialog_command(Dialog::ProductionConfirm, key.code) {
            Some(DialogCommand::Close) => {
                self.notify(format!("{} cancelled", confirm.action.verb()), false);
                return Vec::new();
            }
            Some(DialogCommand::DryRun) => return self.execute(confirm.action, true),
            Some(DialogCommand::Choose) if *typed == word => return self.execute(confirm.action, false),
            Some(DialogCommand::Choose) => {
                self.notify(format!("type {word} exactly to run the {}", confirm.action.verb()), true);
            }
            Some(c @ (DialogCommand::Down | DialogCommand::Up | DialogCommand::PageDown | DialogCommand::PageUp)) => {
                confirm.scroll = scroll_reader(Some(c), confirm.scroll).unwrap_or(0);
            }
            _ => match key.code {
                KeyCode::Backspace => {
                    typed.pop();
                }
                KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::CONTROL) && typed.len() < 253 => {
                    typed.push(c);
                }
                _ => {}
            },
        }
        self.overlay = Some(Overlay::Confirm(confirm));
        Vec::new()
    }

    /// What Tab can complete after `line`: what the runtime found (contexts,
    /// scenarios), and from the data, namespaces (only for `:ns`, which needs
    /// a pass over the pods) and pending items (only for `:why`).
    pub fn vocabulary(&self, line: &str, views: &Views) -> palette::Vocabulary {
        let word = line.trim_start().trim_start_matches(':').split(' ').next().unwrap_or("").to_string();
        let namespaces = if matches!(word.as_str(), "ns" | "namespace") {
            let set: std::collections::BTreeSet<&str> = views.snap.pods.keys().map(|k| k.namespace.as_str()).collect();
            set.into_iter().map(str::to_string).collect()
        } else {
            Vec::new()
        };
        palette::Vocabulary {
            contexts: self.known.contexts.clone(),
            namespaces,
            scenarios: self.known.scenarios.clone(),
            pending: if word == "why" {
                views.analysis.pending.iter().map(|p| p.display_name()).collect()
            } else {
                Vec::new()
            },
        }
    }

    /// `:ctx` and `:ns` on a live cluster: the runtime restarts the feeds.
    /// Not while an action runs: it would go on against the old context,
    /// out of sight.
    fn switch_source(&mut self, switch: SourceSwitch, views: &Views) -> Vec<Effect> {
        if views.snap.source.kind != crate::model::SourceKind::Kube {
            let here = if views.snap.source.kind == crate::model::SourceKind::Demo {
                "the demo has one simulated cluster; :scenario NAME switches what it shows"
            } else {
                "files have no context or namespace to switch to"
            };
            self.notify(format!(":ctx and :ns switch a live cluster's scope: {here}"), true);
            return Vec::new();
        }
        if !self.in_flight.is_empty() {
            self.notify(
                format!(
                    "{} action(s) still running here: wait for them or cancel them (X) first",
                    self.in_flight.len()
                ),
                true,
            );
            return Vec::new();
        }
        vec![Effect::SwitchSource(switch)]
    }

    /// What the status line says about a filter as it is typed: a regex
    /// taken as text, a label selector on a pane whose rows have no labels.
    fn explain_filter(&mut self, text: &str) {
        // Said while typing, so gone with the next key rather than sticky.
        let filter = super::filter::Filter::parse(text);
        let said = if let Some(note) = filter.note() {
            note.to_string()
        } else if filter.is_label_selector()
            && matches!(self.pane, Pane::Pending | Pane::Gangs | Pane::Events | Pane::Usage)
        {
            "label selectors match nodes: use them in Fleet, MIG or Drivers".to_string()
        } else {
            return;
        };
        self.say_briefly(said, true);
    }

    pub(super) fn run_palette(&mut self, line: &str, views: &Views) -> Vec<Effect> {
        match palette::parse(line) {
            Ok(palette::PaletteCommand::Pane(p)) => self.switch(p),
            Ok(palette::PaletteCommand::Queues) => {
                self.switch(Pane::Gangs);
                self.section.insert(Pane::Gangs, Section::Second);
            }
            Ok(palette::PaletteCommand::Quit) => {
                self.quit = true;
                return vec![Effect::Quit];
            }
            Ok(palette::PaletteCommand::Scenario(_)) if self.tutor.is_some() => {
                self.notify("a lesson runs on this scenario: quit, then start another (kgpu lesson list)", true);
            }
            Ok(palette::PaletteCommand::Scenario(name)) => {
                if !self.demo {
                    self.notify(":scenario only works in `kgpu demo`", true);
                } else {
                    return vec![Effect::SwitchSource(SourceSwitch::Scenario(name))];
                }
            }
            Ok(palette::PaletteCommand::Context(name)) => {
                return self.switch_source(SourceSwitch::Context(name), views);
            }
            Ok(palette::PaletteCommand::Namespace(ns)) => {
                return self.switch_source(SourceSwitch::Namespace(ns), views);
            }
            Ok(palette::PaletteCommand::Theme(name)) => return vec![Effect::SetTheme(name)],
            Ok(palette::PaletteCommand::Release) => return self.release(views),
            Ok(palette::PaletteCommand::Plan(target)) => {
                self.switch(Pane::Drivers);
                if target.is_some() {
                    self.section.insert(Pane::Drivers, Section::Third);
                }
                return vec![Effect::PlanWaves(target)];
            }
            Ok(palette::PaletteCommand::Why(target)) => {
                match views.analysis.pending.iter().find(|p| p.display_name() == target) {
                    Some(p) => {
                        if self.pane != Pane::Pending {
                            self.remember(views);
                        }
                        self.switch(Pane::Pending);
                        self.selected.insert(Pane::Pending, p.display_name());
                        self.drill = Some(p.display_name());
                        self.drill_scroll = 0;
                    }
                    None => {
                        // As the command line says it: a typo reads the same as a placed pod.
                        let exists = target.split_once('/').is_some_and(|(ns, name)| {
                            views.snap.pods.values().any(|p| p.namespace.as_str() == ns && &*p.name == name)
                                || views.snap.gangs.values().any(|g| g.namespace.as_str() == ns && &*g.name == name)
                        });
                        let what = if exists { "is not pending" } else { "does not exist (namespace/name)" };
                        self.notify(format!("{target} {what}"), true)
                    }
                }
            }
            Ok(palette::PaletteCommand::Filter(text)) => {
                if text.is_empty() {
                    self.filters.remove(&self.pane);
                } else {
                    self.filters.insert(self.pane, text);
                }
            }
            Ok(palette::PaletteCommand::Help) => self.overlay = Some(Overlay::Help { scroll: 0 }),
            Ok(palette::PaletteCommand::Messages) => self.overlay = Some(Overlay::Messages { scroll: 0 }),
            Ok(
                palette::PaletteCommand::Lesson | palette::PaletteCommand::Hint | palette::PaletteCommand::Answer(_),
            ) if self.tutor.is_none() => {
                self.notify("no lesson runs: start one with kgpu demo --lesson NAME (kgpu lesson list)", true);
            }
            Ok(palette::PaletteCommand::Lesson) => {
                self.overlay = Some(Overlay::Detail { detail: Detail::Lesson, scroll: 0 });
            }
            Ok(palette::PaletteCommand::Hint) => {
                if let Some(tutor) = self.tutor.as_mut() {
                    let hint = tutor.hint();
                    self.notify(hint, false);
                }
            }
            Ok(palette::PaletteCommand::Answer(text)) => {
                if let Some(tutor) = self.tutor.as_mut() {
                    match tutor.answer(&text, self.wall) {
                        Ok(said) => self.notify(said, false),
                        Err(why) => self.notify(why, true),
                    }
                }
            }
            Err(e) => self.notify(e, true),
        }
        Vec::new()
    }
}

pub(super) fn single_line(prompt: &str, text: &str) -> TextArea<'static> {
    let mut area = TextArea::new(vec![text.to_string()]);
    area.move_cursor(tui_textarea::CursorMove::End);
    area.set_placeholder_text(if prompt == ":" {
        "a command; tab completes (fleet, pending, ctx NAME, ns NAME, theme NAME, plan VERSION, why NS/NAME, q)"
    } else {
        "type to filter"
    });
    area
}

/// A reader's (help, node detail) new scroll after `command`, or `None`
/// to close it. The renderer clamps the scroll to the last page.
fn scroll_reader(command: Option<DialogCommand>, scroll: u16) -> Option<u16> {
    const PAGE: u16 = 10;
    Some(match command {
        Some(DialogCommand::Close) => return None,
        Some(DialogCommand::Down) => scroll.saturating_add(1),
        Some(DialogCommand::Up) => scroll.saturating_sub(1),
        Some(DialogCommand::PageDown) => scroll.saturating_add(PAGE),
        Some(DialogCommand::PageUp) => scroll.saturating_sub(PAGE),
        Some(DialogCommand::Top) => 0,
        Some(DialogCommand::Bottom) => u16::MAX,
        _ => scroll,
    })
}

/// A key as the text field reads it. (tui-textarea converts from the
/// crossterm its ratatui uses; kgpu reads keys with a newer one, see Cargo.toml.)
/// One key into a one-line field. Ctrl-U clears to the start of the line,
/// as in a shell (the field's own binding would undo).
/// The longest filter or command line kept: a paste of 64 KB (no bracketed
/// paste: each character is a key) must cost a key press per character,
/// not a scan of an ever longer line.
pub const MAX_INPUT: usize = 512;

/// Applies `key` to the line; false when the line is full and it was a
/// character (nothing changed).
fn edit(area: &mut TextArea<'static>, key: KeyEvent) -> bool {
    let typing = matches!(key.code, KeyCode::Char(_)) && !key.modifiers.contains(KeyModifiers::CONTROL);
    if typing && area.lines().first().is_some_and(|l| l.len() >= MAX_INPUT) {
        return false;
    }
    if key.code == KeyCode::Char('u') && key.modifiers.contains(KeyModifiers::CONTROL) {
        area.delete_line_by_head();
    } else {
        area.input(text_input(key));
    }
    true
}

fn text_input(key: KeyEvent) -> tui_textarea::Input {
    use tui_textarea::Key;
    let k = match key.code {
        KeyCode::Char(c) => Key::Char(c),
        KeyCode::F(n) => Key::F(n),
        KeyCode::Backspace => Key::Backspace,
        KeyCode::Enter => Key::Enter,
        KeyCode::Left => Key::Left,
        KeyCode::Right => Key::Right,
        KeyCode::Up => Key::Up,
        KeyCode::Down => Key::Down,
        KeyCode::Tab => Key::Tab,
        KeyCode::Delete => Key::Delete,
        KeyCode::Home => Key::Home,
        KeyCode::End => Key::End,
        KeyCode::PageUp => Key::PageUp,
        KeyCode::PageDown => Key::PageDown,
        KeyCode::Esc => Key::Esc,
        _ => Key::Null,
    };
    tui_textarea::Input {
        key: k,
        ctrl: key.modifiers.contains(KeyModifiers::CONTROL),
        alt: key.modifiers.contains(KeyModifiers::ALT),
        shift: key.modifiers.contains(KeyModifiers::SHIFT),
    }
}
