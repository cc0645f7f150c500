//! The cockpit's state machine: `App::update(Msg) -> Vec<Effect>`. No I/O,
//! no `.await`, no clock: keys, new data and action results come in as
//! messages; quitting, switching scenario or running an action go out as
//! effects for the runtime to carry out.

mod actions;
pub mod dialog_keys;
pub mod filter;
pub mod keys;
mod navigate;
mod notice;
mod overlay_keys;
pub mod palette;
pub mod rows;
pub mod sort;
mod tutor;

use std::collections::HashMap;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use tui_textarea::TextArea;

use crate::actions::impact::Impact;
/// The blast radius's lines, for the ui to draw (it sees actions only through the app).
pub use crate::actions::impact::LineKind;
use crate::actions::{Action, ActionId, ActionRequest, Progress};
use crate::analysis::index::Index;
use crate::model::{GangKey, GangKind, Sym};
use crate::view_model::lessons::Sighting;
use crate::view_model::panes::Views;

use navigate::gang_id_of_item;
pub use navigate::{Place, gang_id};
pub use notice::{MESSAGES_KEPT, Message, Notice};
pub use tutor::{Mode as TutorMode, Tutor};

use keys::Command;
use overlay_keys::single_line;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pane {
    Fleet,
    Pending,
    Gangs,
    Mig,
    Drivers,
    Events,
    Usage,
}

impl Pane {
    pub const ALL: [Pane; 7] =
        [Pane::Fleet, Pane::Pending, Pane::Gangs, Pane::Mig, Pane::Drivers, Pane::Events, Pane::Usage];

    pub fn title(self) -> &'static str {
        match self {
            Pane::Fleet => "Fleet",
            Pane::Pending => "Pending",
            Pane::Gangs => "Gangs & Queues",
            Pane::Mig => "MIG",
            Pane::Drivers => "Drivers",
            Pane::Events => "Events",
            Pane::Usage => "Usage",
        }
    }

    pub fn number(self) -> usize {
        Pane::ALL.iter().position(|p| *p == self).unwrap_or(0) + 1
    }
}

/// Which part of a two-part pane has the keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Section {
    #[default]
    First,
    Second,
    Third,
}

/// A previewed action waiting for the user's yes.
#[derive(Clone, Debug, PartialEq)]
pub struct Confirm {
    pub action: Action,
    pub impact: Impact,
    /// Drain only: evict GPU pods only.
    pub gpu_only: bool,
    /// On a production context, a disruptive action runs only once its
    /// target's name is typed (`Action::confirm_word`): this is what is typed so far.
    pub typed: Option<String>,
    /// How far its blast radius and commands are scrolled (at 80×24 a
    /// repartition's last steps are below the fold).
    pub scroll: u16,
}

#[derive(Debug)]
pub enum Overlay {
    Help {
        scroll: u16,
    },
    Palette(Box<TextArea<'static>>),
    Filter(Box<TextArea<'static>>),
    Confirm(Box<Confirm>),
    NodeDetail {
        node: Sym,
        scroll: u16,
    },
    CellDetail {
        scroll: u16,
    },
    /// `:messages`: every notice of this session, newest first.
    Messages {
        scroll: u16,
    },
    /// An event in full, a running gang, a queue (enter on its row).
    Detail {
        detail: Detail,
        scroll: u16,
    },
    MigPicker {
        node: Sym,
        configs: Vec<String>,
        selected: usize,
    },
    /// `q` while actions run: quit anyway?
    QuitWhileRunning,
}

impl Overlay {
    /// A reader's scroll (help, details, `:messages`): the one thing its
    /// keys move and the frame clamps. `None` for the other overlays.
    /// The dialog whose keys this overlay takes.
    fn dialog(&self) -> Option<dialog_keys::Dialog> {
        use dialog_keys::Dialog;
        Some(match self {
            Overlay::Help { .. }
            | Overlay::NodeDetail { .. }
            | Overlay::CellDetail { .. }
            | Overlay::Messages { .. }
            | Overlay::Detail { .. } => Dialog::Reader,
            Overlay::Confirm(c) if c.typed.is_some() => Dialog::ProductionConfirm,
            Overlay::Confirm(_) => Dialog::Confirm,
            Overlay::MigPicker { .. } => Dialog::MigPicker,
            Overlay::QuitWhileRunning => Dialog::QuitWhileRunning,
            Overlay::Palette(_) => Dialog::Palette,
            Overlay::Filter(_) => Dialog::Filter,
        })
    }

    fn reader_scroll(&mut self) -> Option<&mut u16> {
        match self {
            Overlay::Help { scroll }
            | Overlay::NodeDetail { scroll, .. }
            | Overlay::CellDetail { scroll }
            | Overlay::Messages { scroll }
            | Overlay::Detail { scroll, .. } => Some(scroll),
            _ => None,
        }
    }
}

/// The source a palette command asks for, relative to the current one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceSwitch {
    Scenario(String),
    Context(String),
    /// `None`: every namespace.
    Namespace(Option<String>),
}

/// Something the runtime must do.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    Quit,
    Execute {
        id: ActionId,
        request: ActionRequest,
    },
    /// Start another source and, once it runs, show it instead.
    SwitchSource(SourceSwitch),
    SetTheme(String),
    /// Plan upgrade waves to this driver (`None`: stop planning).
    PlanWaves(Option<crate::model::DriverVersion>),
    /// Stop this running action at its next step.
    Cancel(ActionId),
    /// Put this text on the terminal's clipboard (OSC 52).
    Copy(String),
}

#[derive(Debug)]
pub enum Msg {
    Key(KeyEvent),
    /// An action finished (or made progress): a line for the status bar.
    Action(Progress),
    /// A one-line notice (source problems, a scenario that would not start).
    Notice {
        text: String,
        error: bool,
    },
    /// The runtime loaded a theme (`warning`: why it fell back).
    ThemeLoaded {
        name: String,
        warning: Option<String>,
    },
    /// A live source ended (its watchers stopped).
    SourceStopped,
    /// What the last frame showed: scroll positions as the renderer kept them in range.
    Viewport(Viewport),
    /// The time on the wall (seconds since the epoch), for timing a lesson.
    WallClock(crate::model::Timestamp),
}

/// What only the renderer knows (how tall each table and text is), as it
/// showed them: the app keeps its scroll positions from it, so drawing
/// never writes the app.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Viewport {
    /// The first row shown of each table drawn with the focus.
    pub offsets: Vec<(Pane, usize)>,
    /// The drilldown's scroll, clamped to its last page.
    pub drill_scroll: Option<u16>,
    /// How many rows the focused table shows: a page for PgUp/PgDn.
    pub page: Option<usize>,
    /// The open reader's (help, node or cell detail) scroll, clamped.
    pub overlay_scroll: Option<u16>,
}

/// An action started and not reported done yet.
#[derive(Clone, Debug, PartialEq)]
pub struct InFlight {
    pub id: ActionId,
    pub action: Action,
    /// `dry run: would drain node/gpu-03`, for people.
    pub label: String,
    /// A dry run changes nothing: it solves no lesson.
    pub dry_run: bool,
    /// When it started (wall clock): long steps show how long they run.
    pub started: crate::model::Timestamp,
}

/// What a detail reader shows: an event as it was when opened; a gang
/// (by id) and a queue as they are now.
#[derive(Clone, Debug, PartialEq)]
pub enum Detail {
    Event(Box<crate::view_model::panes::EventRow>),
    Gang(String),
    Queue(Box<crate::analysis::queues::QueueRow>),
    /// A pod's GPU utilization, by its `namespace/name`.
    Usage(String),
    /// The lesson or mystery running: question, hints, answer once solved.
    Lesson,
}

pub struct App {
    pub pane: Pane,
    pub overlay: Option<Overlay>,
    pub filters: HashMap<Pane, String>,
    pub selected: HashMap<Pane, String>,
    /// First visible row per pane (the widgets keep the selection in view).
    pub offsets: HashMap<Pane, usize>,
    pub section: HashMap<Pane, Section>,
    /// How each table is sorted (shift+letter); absent: its natural order.
    pub sorts: HashMap<(Pane, Section), sort::Sort>,
    /// Per-pool map instead of per node; `None`: decide by fleet size.
    pub aggregate: Option<bool>,
    pub shape: usize,
    /// The pending item whose chain is open.
    pub drill: Option<String>,
    pub drill_scroll: u16,
    pub matrix_cell: (usize, usize),
    pub read_only: bool,
    /// Why actions are off when not `--read-only` (offline files, a snapshot).
    pub read_only_why: Option<String>,
    /// Actions started and not reported done yet.
    pub in_flight: Vec<InFlight>,
    /// The context looks like production: disruptive actions need their target typed.
    pub production: bool,
    next_action: ActionId,
    pub notice: Option<Notice>,
    pub theme_name: String,
    pub demo: bool,
    /// Where `esc` returns to: pushed by the jumps that leave a view (enter
    /// on a gang opens its pending chain, enter on a pool lists its nodes,
    /// `:why`), cleared by moving to a pane directly.
    pub back: Vec<Place>,
    /// Rows of the focused table on screen (what PgUp/PgDn move).
    page: usize,
    /// Every notice of the session, oldest first (at most [`MESSAGES_KEPT`]).
    pub messages: std::collections::VecDeque<Message>,
    /// The views' time at the last update: when a notice was given.
    clock: crate::model::Timestamp,
    /// What the runtime knows for the palette to complete: the kube
    /// contexts, the demo's scenarios.
    pub known: palette::Vocabulary,
    /// A lesson or mystery in progress (`kgpu demo --lesson`, `--mystery`).
    pub tutor: Option<Tutor>,
    /// The wall clock as the runtime last said (`Msg::WallClock`): what a
    /// lesson is timed by.
    pub wall: crate::model::Timestamp,
    pub quit: bool,
}

/// Above this many nodes the fleet map shows pools instead of nodes.
pub const AGGREGATE_ABOVE: usize = 500;

impl App {
    pub fn new(read_only: bool, theme_name: &str, demo: bool) -> App {
        App {
            pane: Pane::Fleet,
            overlay: None,
            filters: HashMap::new(),
            selected: HashMap::new(),
            offsets: HashMap::new(),
            section: HashMap::new(),
            sorts: HashMap::new(),
            aggregate: None,
            shape: 0,
            drill: None,
            drill_scroll: 0,
            matrix_cell: (0, 0),
            read_only,
            read_only_why: None,
            in_flight: Vec::new(),
            production: false,
            next_action: 0,
            notice: None,
            theme_name: theme_name.to_string(),
            demo,
            known: palette::Vocabulary::default(),
            back: Vec::new(),
            messages: std::collections::VecDeque::new(),
            page: 10,
            clock: 0,
            tutor: None,
            wall: 0,
            quit: false,
        }
    }

    /// On a production-looking context, disruptive actions need their target typed.
    pub fn with_production(mut self, production: bool) -> App {
        self.production = production;
        self
    }

    /// How the table of `pane`'s `section` is sorted, if it was asked.
    pub fn sorting(&self, pane: Pane, section: Section) -> Option<sort::Sort> {
        self.sorts.get(&(pane, section)).copied()
    }

    /// What a table's title says of its sort: ` · sort: free GPUs`, or
    /// nothing in its natural order.
    pub fn sort_title(&self, pane: Pane, section: Section, pools: bool) -> String {
        self.sorting(pane, section)
            .map_or(String::new(), |s| format!(" · sort: {}", s.label(sort::columns(pane, section, pools))))
    }

    /// The sortable columns of the table that has the keys.
    pub fn sort_columns(&self, views: &Views) -> &'static [sort::Column] {
        sort::columns(self.pane, self.section(self.pane), self.pane == Pane::Fleet && self.aggregated(views))
    }

    /// Shift+`letter`: sort the focused table by that column, or reverse it.
    fn sort_by(&mut self, letter: char, views: &Views) {
        let columns = self.sort_columns(views);
        let key = (self.pane, self.section(self.pane));
        let sort = sort::Sort::pressed(self.sorts.get(&key).copied(), letter);
        self.sorts.insert(key, sort);
        self.say_briefly(format!("sorted by {}", sort.label(columns)), false);
    }

    pub fn filter(&self, pane: Pane) -> &str {
        self.filters.get(&pane).map_or("", |s| s.as_str())
    }

    pub fn section(&self, pane: Pane) -> Section {
        self.section.get(&pane).copied().unwrap_or_default()
    }

    pub fn aggregated(&self, views: &Views) -> bool {
        self.aggregate.unwrap_or(views.nodes.len() > AGGREGATE_ABOVE)
    }

    /// Row ids of what the current pane (and section) lists, in order.
    pub fn row_ids(&self, pane: Pane, views: &Views) -> Vec<String> {
        let f = self.filter(pane);
        match (pane, self.section(pane)) {
            (Pane::Fleet, _) if self.aggregated(views) => {
                rows::pools(views, f, self.sorting(pane, Section::First)).iter().map(|p| p.name.clone()).collect()
            }
            (Pane::Fleet, _) => {
                rows::nodes(views, f, self.sorting(pane, Section::First)).iter().map(|r| r.id()).collect()
            }
            (Pane::Pending, _) => {
                rows::pending(views, f, self.sorting(pane, Section::First)).iter().map(|p| p.display_name()).collect()
            }
            (Pane::Gangs, Section::First) => {
                rows::gangs(views, f, self.sorting(pane, Section::First)).iter().map(|g| gang_id(&g.key)).collect()
            }
            (Pane::Gangs, _) => rows::queues(views, f, self.sorting(pane, Section::Second))
                .iter()
                .enumerate()
                .map(|(i, q)| format!("{i}:{}", q.name))
                .collect(),
            (Pane::Mig, _) => rows::mig(views, f, self.sorting(pane, Section::First)).iter().map(|m| m.id()).collect(),
            (Pane::Drivers, Section::Second) => rows::upgrades(views, f, self.sorting(pane, Section::Second))
                .iter()
                .map(|u| u.node.to_string())
                .collect(),
            (Pane::Drivers, Section::Third) => {
                views.waves.as_ref().map(|w| w.waves.iter().map(|x| x.index.to_string()).collect()).unwrap_or_default()
            }
            (Pane::Drivers, Section::First) => Vec::new(),
            (Pane::Events, _) => (0..rows::events(views, f, None).len()).map(|i| i.to_string()).collect(),
            (Pane::Usage, Section::Second) => {
                rows::usage_workloads(views, f, self.sorting(pane, Section::Second)).iter().map(|w| w.id()).collect()
            }
            (Pane::Usage, _) => {
                rows::usage(views, f, self.sorting(pane, Section::First)).iter().map(|u| u.id()).collect()
            }
        }
    }

    /// Index of the selected row in `ids` (the first row if the selected
    /// one is gone: selection follows ids, not positions).
    pub fn selected_index(&self, pane: Pane, ids: &[String]) -> usize {
        self.selected_position(pane, ids)
    }

    /// Where the selected row is among `ids` (0 when it is gone), without
    /// allocating the ids.
    pub fn selected_position<S: AsRef<str>>(&self, pane: Pane, ids: impl IntoIterator<Item = S>) -> usize {
        self.selected.get(&pane).and_then(|s| ids.into_iter().position(|i| i.as_ref() == s)).unwrap_or(0)
    }

    pub fn selected_id(&self, pane: Pane, views: &Views) -> Option<String> {
        let ids = self.row_ids(pane, views);
        ids.get(self.selected_index(pane, &ids)).cloned()
    }

    /// The status bar's key hints for the current pane: `R requeue` only
    /// where the selection (or the opened why view) is a gang to requeue.
    pub fn key_hints(&self, views: &Views) -> Vec<(&'static str, &'static str)> {
        // An open dialog's own keys, not the pane's under it: its answer
        // and its way out first.
        if let Some(dialog) = self.overlay.as_ref().and_then(Overlay::dialog) {
            use dialog_keys::DialogCommand as C;
            let rank = |c: C| match c {
                C::Yes | C::Choose => 0,
                C::Close => 1,
                C::DryRun => 2,
                _ => 3,
            };
            let mut bindings: Vec<_> = dialog_keys::DIALOG_BINDINGS.iter().filter(|b| b.dialog == dialog).collect();
            bindings.sort_by_key(|b| rank(b.command));
            return bindings.into_iter().map(|b| (b.label, b.help)).collect();
        }
        let mut hints = keys::hints(self.pane);
        if self.pane == Pane::Pending && self.requeue_target(views).is_none() {
            hints.retain(|&(_, what)| what != "requeue");
        }
        hints
    }

    fn move_selection(&mut self, views: &Views, delta: isize) {
        let ids = self.row_ids(self.pane, views);
        if ids.is_empty() {
            return;
        }
        let current = self.selected_index(self.pane, &ids) as isize;
        let next = (current + delta).clamp(0, ids.len() as isize - 1) as usize;
        self.selected.insert(self.pane, ids[next].clone());
    }

    pub fn update(&mut self, msg: Msg, views: &Views) -> Vec<Effect> {
        self.clock = views.analysis.now;
        let effects = self.handle(msg, views);
        self.observe(views);
        effects
    }

    fn handle(&mut self, msg: Msg, views: &Views) -> Vec<Effect> {
        match msg {
            Msg::Key(key) => self.on_key(key, views),
            Msg::Action(Progress { id, text, error, done }) => {
                let mut solved = None;
                if done {
                    let finished = self.in_flight.iter().find(|f| f.id == id && !f.dry_run && !error);
                    let sighting = finished.map(|f| Sighting::Action {
                        kind: f.action.verb(),
                        target: f.action.targets().first().cloned().unwrap_or_default(),
                    });
                    if let (Some(sighting), Some(tutor)) = (sighting, self.tutor.as_mut()) {
                        solved = tutor.see(sighting, &views.analysis, self.wall);
                    }
                    self.in_flight.retain(|f| f.id != id);
                }
                self.notify(text, error);
                if let Some(solved) = solved {
                    self.notify(solved, false);
                }
                Vec::new()
            }
            Msg::Notice { text, error } => {
                self.notify(text, error);
                Vec::new()
            }
            Msg::ThemeLoaded { name, warning } => {
                let (text, error) = match warning {
                    Some(w) => (w, true),
                    None => (format!("theme {name}"), false),
                };
                self.theme_name = name;
                // A theme that fell back is worth a look, not a block on the status line.
                self.show(Notice { text, error, sticky: false });
                Vec::new()
            }
            Msg::SourceStopped => {
                self.notify("the source stopped", true);
                Vec::new()
            }
            Msg::WallClock(now) => {
                self.wall = now;
                Vec::new()
            }
            Msg::Viewport(shown) => {
                self.offsets.extend(shown.offsets);
                if let Some(page) = shown.page {
                    self.page = page.max(1);
                }
                if let Some(s) = shown.drill_scroll {
                    self.drill_scroll = s;
                }
                if let (Some(s), Some(scroll)) =
                    (shown.overlay_scroll, self.overlay.as_mut().and_then(Overlay::reader_scroll))
                {
                    *scroll = s;
                }
                // A confirmation scrolls too, but reads its own keys.
                if let (Some(s), Some(Overlay::Confirm(confirm))) = (shown.overlay_scroll, self.overlay.as_mut()) {
                    confirm.scroll = s;
                }
                Vec::new()
            }
        }
    }

    fn on_key(&mut self, key: KeyEvent, views: &Views) -> Vec<Effect> {
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            self.quit = true;
            return vec![Effect::Quit];
        }
        if self.notice.as_ref().is_some_and(|n| !n.sticky) {
            self.notice = None;
        }
        if let Some(overlay) = self.overlay.take() {
            return self.on_overlay_key(overlay, key, views);
        }
        let Some(command) = keys::command_for(key, self.pane) else {
            // Shift and a column's letter sorts by it (keys bound above win).
            if let KeyCode::Char(c) = key.code
                && self.sort_columns(views).iter().any(|col| col.letter == c)
            {
                self.sort_by(c, views);
            }
            return Vec::new();
        };
        self.on_command(command, views)
    }

    fn on_command(&mut self, command: Command, views: &Views) -> Vec<Effect> {
        let page = 10;
        match command {
            Command::Quit if !self.in_flight.is_empty() => self.overlay = Some(Overlay::QuitWhileRunning),
            Command::Quit => {
                self.quit = true;
                return vec![Effect::Quit];
            }
            Command::Pane(p) => self.go(p),
            Command::NextPane => self.go(Pane::ALL[self.pane.number() % Pane::ALL.len()]),
            Command::PrevPane => self.go(Pane::ALL[(self.pane.number() + Pane::ALL.len() - 2) % Pane::ALL.len()]),
            Command::Up | Command::Down | Command::PageUp | Command::PageDown | Command::Top | Command::Bottom
                if self.drill.is_some() && self.pane == Pane::Pending =>
            {
                self.drill_scroll = match command {
                    Command::Up => self.drill_scroll.saturating_sub(1),
                    Command::Down => self.drill_scroll.saturating_add(1),
                    Command::PageUp => self.drill_scroll.saturating_sub(page as u16),
                    Command::PageDown => self.drill_scroll.saturating_add(page as u16),
                    Command::Top => 0,
                    _ => u16::MAX / 2,
                };
            }
            Command::Up | Command::Down | Command::Left | Command::Right
                if self.pane == Pane::Drivers && self.section(Pane::Drivers) == Section::First =>
            {
                let (rows, cols) = (views.analysis.matrix.drivers.len(), views.analysis.matrix.needs.len());
                let (r, c) = self.matrix_cell;
                self.matrix_cell = match command {
                    Command::Up => (r.saturating_sub(1), c),
                    Command::Down => ((r + 1).min(rows.saturating_sub(1)), c),
                    Command::Left => (r, c.saturating_sub(1)),
                    _ => (r, (c + 1).min(cols.saturating_sub(1))),
                };
            }
            Command::Up => self.move_selection(views, -1),
            Command::Down => self.move_selection(views, 1),
            Command::PageUp => self.move_selection(views, -(self.page as isize)),
            Command::PageDown => self.move_selection(views, self.page as isize),
            Command::Top => self.move_selection(views, isize::MIN / 2),
            Command::Bottom => self.move_selection(views, isize::MAX / 2),
            Command::Left | Command::Right => {}
            Command::Enter => self.enter(views),
            // An error on the status line is dismissed first.
            Command::Back if self.notice.as_ref().is_some_and(|n| n.sticky) => self.notice = None,
            Command::Back => {
                let closed_drill = self.drill.take().is_some();
                if let Some(place) = self.back.pop() {
                    self.return_to(place);
                } else if !closed_drill && self.filters.remove(&self.pane).is_none() {
                    self.notice = None;
                }
            }
            Command::Help => self.overlay = Some(Overlay::Help { scroll: 0 }),
            Command::Palette => self.overlay = Some(Overlay::Palette(Box::new(single_line(":", "")))),
            Command::Filter => {
                let current = self.filter(self.pane).to_string();
                self.overlay = Some(Overlay::Filter(Box::new(single_line("/", &current))));
            }
            Command::Focus => {
                let next = match (self.pane, self.section(self.pane)) {
                    (Pane::Drivers, Section::First) => Section::Second,
                    (Pane::Drivers, Section::Second) if views.waves.is_some() => Section::Third,
                    (_, Section::First) => Section::Second,
                    _ => Section::First,
                };
                self.section.insert(self.pane, next);
            }
            // `s` on the Fleet: name → free GPUs → problems first.
            Command::Sort => {
                let next = match self.sorting(Pane::Fleet, Section::First).map(|s| s.letter) {
                    None | Some('N') => 'F',
                    Some('F') => 'P',
                    _ => 'N',
                };
                self.sort_by(next, views);
            }
            Command::Aggregate => {
                let now = self.aggregated(views);
                self.aggregate = Some(!now);
            }
            Command::NextShape => self.shape = self.shape.saturating_add(1),
            Command::PrevShape => self.shape = self.shape.saturating_sub(1),
            Command::Cordon | Command::Uncordon | Command::Drain | Command::Repartition => {
                return self.node_action(command, views);
            }
            Command::Requeue => return self.requeue(views),
            Command::Copy => return self.copy_commands(views),
            Command::RunPlan => return self.run_plan(views),
            Command::Cancel => return self.cancel(),
        }
        Vec::new()
    }
}
