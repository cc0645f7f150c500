//! Keys while an overlay is open (help, palette, filter, confirmation,
//! details, MIG picker), and the palette's commands.

use super::*;

impl App {
    pub(super) fn on_overlay_key(&mut self, overlay: Overlay, key: KeyEvent, views: &Views) -> Vec<Effect> {
        match overlay {
            Overlay::Help { scroll } => {
                let close = matches!(key.code, KeyCode::Char('?'));
                self.overlay =
                    scroll_reader(key.code, scroll).filter(|_| !close).map(|scroll| Overlay::Help { scroll });
            }
            Overlay::NodeDetail { node, scroll } => {
                self.overlay = scroll_reader(key.code, scroll).map(|scroll| Overlay::NodeDetail { node, scroll });
            }
            Overlay::CellDetail { scroll } => {
                self.overlay = scroll_reader(key.code, scroll).map(|scroll| Overlay::CellDetail { scroll });
            }
            Overlay::Filter(mut area) => match key.code {
                KeyCode::Esc => {
                    self.filters.remove(&self.pane);
                }
                KeyCode::Enter => {}
                _ => {
                    area.input(key);
                    let text = area.lines().first().cloned().unwrap_or_default();
                    if text.is_empty() {
                        self.filters.remove(&self.pane);
                    } else {
                        self.filters.insert(self.pane, text);
                    }
                    self.overlay = Some(Overlay::Filter(area));
                }
            },
            Overlay::Palette(mut area) => match key.code {
                KeyCode::Esc => {}
                KeyCode::Enter => {
                    let line = area.lines().first().cloned().unwrap_or_default();
                    return self.run_palette(&line, views);
                }
                _ => {
                    area.input(key);
                    self.overlay = Some(Overlay::Palette(area));
                }
            },
            Overlay::MigPicker { node, configs, selected } => match key.code {
                KeyCode::Esc | KeyCode::Char('q') => {}
                KeyCode::Down | KeyCode::Char('j') => {
                    let selected = (selected + 1).min(configs.len().saturating_sub(1));
                    self.overlay = Some(Overlay::MigPicker { node, configs, selected });
                }
                KeyCode::Up | KeyCode::Char('k') => {
                    self.overlay = Some(Overlay::MigPicker { node, configs, selected: selected.saturating_sub(1) });
                }
                KeyCode::Enter => {
                    if let Some(config) = configs.get(selected) {
                        self.confirm(Action::RepartitionMig { node, config: config.clone() }, views);
                    }
                }
                _ => self.overlay = Some(Overlay::MigPicker { node, configs, selected }),
            },
            Overlay::QuitWhileRunning => match key.code {
                KeyCode::Char('y') | KeyCode::Char('Y') => {
                    self.quit = true;
                    return vec![Effect::Quit];
                }
                KeyCode::Char('n') | KeyCode::Char('N') | KeyCode::Esc => {}
                _ => self.overlay = Some(Overlay::QuitWhileRunning),
            },
            Overlay::Confirm(mut confirm) => match key.code {
                KeyCode::Char('y') | KeyCode::Char('Y') => return self.execute(confirm.action, false),
                // A reflexive enter must not evict anything.
                KeyCode::Enter if !confirm.action.is_disruptive() => return self.execute(confirm.action, false),
                KeyCode::Enter => {
                    self.notify(format!("enter does not confirm a {}: press y to run it", confirm.action.verb()), true);
                    self.overlay = Some(Overlay::Confirm(confirm));
                }
                KeyCode::Char('d') | KeyCode::Char('D') => return self.execute(confirm.action, true),
                KeyCode::Char('g') => {
                    if let Action::Drain { node, .. } = confirm.action {
                        let gpu_only = !confirm.gpu_only;
                        self.confirm(Action::Drain { node, gpu_only }, views);
                    } else {
                        self.overlay = Some(Overlay::Confirm(confirm));
                    }
                }
                KeyCode::Char('n') | KeyCode::Char('N') | KeyCode::Esc | KeyCode::Char('q') => {
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
            Ok(palette::PaletteCommand::Scenario(name)) => {
                if !self.demo {
                    self.notify(":scenario only works in `kgpu demo`", true);
                } else {
                    return vec![Effect::SwitchScenario(name)];
                }
            }
            Ok(palette::PaletteCommand::Theme(name)) => return vec![Effect::SetTheme(name)],
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
                        self.switch(Pane::Pending);
                        self.selected.insert(Pane::Pending, p.display_name());
                        self.drill = Some(p.display_name());
                        self.drill_scroll = 0;
                    }
                    None => self.notify(format!("{target} is not pending"), true),
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
            Err(e) => self.notify(e, true),
        }
        Vec::new()
    }
}

pub(super) fn single_line(prompt: &str, text: &str) -> TextArea<'static> {
    let mut area = TextArea::new(vec![text.to_string()]);
    area.move_cursor(tui_textarea::CursorMove::End);
    area.set_placeholder_text(if prompt == ":" {
        "fleet | pending | scenario NAME | theme NAME | plan VERSION | why NS/NAME | q"
    } else {
        "type to filter"
    });
    area
}

/// A key in a scrolling reader (help, node detail): the new scroll, or
/// `None` to close it. The renderer clamps the scroll to the last page.
fn scroll_reader(code: KeyCode, scroll: u16) -> Option<u16> {
    const PAGE: u16 = 10;
    Some(match code {
        KeyCode::Esc | KeyCode::Char('q') | KeyCode::Enter => return None,
        KeyCode::Down | KeyCode::Char('j') => scroll.saturating_add(1),
        KeyCode::Up | KeyCode::Char('k') => scroll.saturating_sub(1),
        KeyCode::PageDown | KeyCode::Char(' ') => scroll.saturating_add(PAGE),
        KeyCode::PageUp => scroll.saturating_sub(PAGE),
        KeyCode::Home | KeyCode::Char('g') => 0,
        KeyCode::End | KeyCode::Char('G') => u16::MAX,
        _ => scroll,
    })
}
