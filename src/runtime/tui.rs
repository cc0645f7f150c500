//! The interactive cockpit: the UI loop on the main thread, the model task,
//! the source tasks, and the effect runner, connected by channels (values,
//! not locks). Redraws only when something changed.

use std::collections::{BTreeSet, VecDeque};
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Instant;

use crossterm::event::{Event, EventStream, KeyEventKind};
use futures::{Stream, StreamExt};
use ratatui::Terminal;
use ratatui::backend::Backend;
use tokio::sync::{mpsc, watch};

use crate::actions::{ActionId, Progress};
use crate::analysis::{Analyzer, Thresholds};
use crate::app::{App, Effect, Msg, Tutor, TutorMode, Viewport};
use crate::config::Paths;
use crate::model::audit::AuditEntry;
use crate::model::{DriverVersion, FeedState, Snapshot, Timestamp};
use crate::ui::{self, Theme};
use crate::view_model::lessons::Lesson;
use crate::view_model::panes::{Views, audit_rows};

use super::UsageError;
use super::memory;
use super::pacing::Pacing;
use super::source::{self, Run, Session, Shared, Source};
use super::terminal::Guard;

pub struct CockpitOptions {
    pub source: Source,
    /// A lesson or mystery to run on it.
    pub tutor: Option<(&'static Lesson, TutorMode)>,
    pub theme: Option<String>,
    pub read_only: bool,
    pub log_level: String,
}

/// The analyzer of the cockpit's snapshots: one analysis runs at a time
/// (off the input loop, or on it at a switch), each from what the last kept.
type SharedAnalyzer = Arc<std::sync::Mutex<Analyzer>>;

fn build_views(
    analyzer: &SharedAnalyzer,
    snap: Arc<Snapshot>,
    now: Timestamp,
    thresholds: &Thresholds,
    target: &Option<DriverVersion>,
) -> Views {
    // A build that panicked left the ledger half-updated: start it over.
    let mut analyzer = analyzer.lock().unwrap_or_else(|poisoned| {
        let mut analyzer = poisoned.into_inner();
        *analyzer = Analyzer::new();
        analyzer
    });
    let started = Instant::now();
    let generation = snap.content_generation();
    let views = Views::build_with(&mut analyzer, snap, now, thresholds, target.as_ref().map(|t| (t, None)));
    tracing::debug!(
        "analysed content {generation} in {:.0} ms ({} pods redone in the ledger)",
        started.elapsed().as_secs_f64() * 1e3,
        analyzer.pods_redone()
    );
    views
}

/// Analyses `snap` on the blocking pool and sends the views back, tagged.
/// Views built off the input loop, and what they cost.
struct Built {
    /// The cockpit's generation (scenario, wave target) they were built for.
    generation: u64,
    /// The snapshot's content generation.
    content: u64,
    started: Instant,
    finished: Instant,
    views: Views,
}

fn spawn_build(
    analyzer: &SharedAnalyzer,
    snap: Arc<Snapshot>,
    now: Timestamp,
    thresholds: &Thresholds,
    target: &Option<DriverVersion>,
    generation: u64,
    tx: &mpsc::Sender<Built>,
) {
    let (analyzer, thresholds, target, tx) = (analyzer.clone(), thresholds.clone(), target.clone(), tx.clone());
    tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let content = snap.content_generation();
        let views = build_views(&analyzer, snap, now, &thresholds, &target);
        let built = Built { generation, content, started, finished: Instant::now(), views };
        // The receiver is gone only when the cockpit is closing.
        let _ = tx.blocking_send(built);
        memory::on_idle();
    });
}

/// Whether some feed is still on its first list.
fn feeds_listing(snap: &Snapshot) -> bool {
    snap.feeds.values().any(|f| f.state == FeedState::Syncing)
}

/// Runs a no-op on the runtime's workers, so that a parked one wakes, and
/// answers `memory`'s ask as it parks again instead of at its next event.
fn wake_workers() {
    for _ in 0..4 {
        tokio::spawn(tokio::task::yield_now());
    }
}

/// Audit entries the Events pane shows.
const AUDIT_ROWS: usize = 50;

/// What the audit log says in the session's context: its newest entries,
/// and the actions a kgpu that ended without finishing left open.
#[derive(Default)]
struct Audit {
    newest: Vec<AuditEntry>,
    abandoned: Vec<AuditEntry>,
}

fn audit_entries(session: &Session) -> Audit {
    let Some((log, context)) = session.executor.as_ref().and_then(|e| e.audit.as_ref().map(|log| (log, &e.context)))
    else {
        return Audit::default();
    };
    // A demo's simulated cluster is new each run: earlier runs' actions (a
    // command-line dry run, a killed cockpit) are not about this one.
    if context.starts_with("demo:") {
        let newest = log.tail(AUDIT_ROWS, context).into_iter().filter(crate::actions::audit::written_here).collect();
        return Audit { newest, abandoned: Vec::new() };
    }
    Audit { newest: log.tail(AUDIT_ROWS, context), abandoned: log.abandoned(context) }
}

fn show_audit(views: &mut Views, audit: &Audit) {
    views.set_audit(&audit_rows(&audit.newest, crate::clock::wall_clock()));
    views.abandoned = audit.abandoned.clone();
}

/// Said once a session starts: actions an earlier kgpu left open.
fn abandoned_notice(audit: &Audit) -> Option<Msg> {
    let first = audit.abandoned.first()?;
    Some(Msg::Notice {
        // Short enough for an 80-column status line: the way out comes first.
        text: format!(
            "a kgpu that died left {} action(s) open ({} at {}): :release",
            audit.abandoned.len(),
            first.action,
            first.time.get(11..16).unwrap_or(&first.time)
        ),
        error: true,
    })
}

/// `--theme NAME` names a built-in theme or a file in the themes folder: a
/// typo is a usage error, as an unknown scenario is (not a silent default).
fn known_theme(name: &str, paths: &Paths) -> Result<(), UsageError> {
    let builtin = ui::theme::BUILTIN.iter().any(|(n, _)| *n == name);
    let file = paths.themes_dir().map(|d| d.join(format!("{name}.toml")));
    if builtin || file.as_ref().is_some_and(|f| f.is_file()) {
        return Ok(());
    }
    let names: Vec<&str> = ui::theme::BUILTIN.iter().map(|(n, _)| *n).collect();
    let folder = file.and_then(|f| f.parent().map(|d| d.display().to_string())).unwrap_or_else(|| "(none)".into());
    Err(UsageError(format!("unknown theme '{name}'; valid themes: {} (or a NAME.toml in {folder})", names.join(", "))))
}

/// Runs the cockpit until it quits; how it ended (a lesson's or mystery's
/// report, the actions it stopped) is returned for the terminal once the
/// screen is restored.
pub async fn run(opts: CockpitOptions) -> anyhow::Result<Ending> {
    let paths = Paths::from_env();
    if let Some(name) = &opts.theme {
        known_theme(name, &paths)?;
    }
    if !std::io::stdout().is_terminal() {
        return Err(UsageError(
            "stdout is not a terminal: the cockpit needs one; for scripts use `kgpu snapshot`".into(),
        )
        .into());
    }
    let log_note = super::logging::init(paths.log_file().as_deref(), &opts.log_level);
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let theme_name = opts.theme.clone().unwrap_or_else(|| ui::theme::DEFAULT.to_string());
    // Problems with the source are reported before the terminal goes raw.
    let mut cockpit = Cockpit::start(&opts.source, paths, &theme_name, no_color, opts.read_only).await?;
    cockpit.tutor = opts.tutor;
    if cockpit.first_notice.is_none() {
        cockpit.first_notice = log_note.err().map(|text| Msg::Notice { text, error: false });
    }
    tracing::info!("kgpu cockpit starting on {}", cockpit.session.context.source);
    let mut guard = Guard::enter()?;
    let result = drive(&mut *guard.terminal, EventStream::new(), cockpit).await;
    drop(guard);
    tracing::info!("kgpu cockpit stopped");
    result
}

/// A started cockpit: its source, the channels its actions report and are
/// cancelled on, its theme. [`drive`] runs it on any terminal.
pub struct Cockpit {
    pub session: Session,
    shared: Shared,
    progress: mpsc::Receiver<Progress>,
    cancel: watch::Sender<BTreeSet<ActionId>>,
    theme: Theme,
    /// What the analyses count as a fault, for every view of this cockpit.
    thresholds: Thresholds,
    paths: Paths,
    no_color: bool,
    read_only: bool,
    demo_seed: Option<u64>,
    /// Where the session's data come from (what `:ctx`, `:ns`, `:scenario` change).
    from: Source,
    /// What the status line says first (a theme that fell back, a log that did not open).
    pub first_notice: Option<Msg>,
    analyzer: SharedAnalyzer,
    /// The lesson or mystery each new app runs.
    pub tutor: Option<(&'static Lesson, TutorMode)>,
}

impl Cockpit {
    pub async fn start(
        from: &Source,
        paths: Paths,
        theme_name: &str,
        no_color: bool,
        read_only: bool,
    ) -> anyhow::Result<Cockpit> {
        let (theme, warnings) = Theme::load(theme_name, paths.config_dir(), no_color);
        let (progress_tx, progress) = mpsc::channel::<Progress>(64);
        let (cancel, cancel_rx) = watch::channel(BTreeSet::new());
        let shared = Shared { reports: progress_tx, cancel: cancel_rx, paths: paths.clone() };
        let mut session = source::start(from, Run::Live(&shared)).await?;
        if read_only {
            // Enforced where actions run, not only where keys propose them.
            session.executor = None;
        }
        let demo_seed = match from {
            Source::Demo { seed, .. } => Some(*seed),
            _ => None,
        };
        let first_notice = warnings
            .first()
            .map(|w| Msg::ThemeLoaded { name: theme.name.clone(), warning: Some(w.clone()) })
            .or_else(|| {
                (!session.warnings.is_empty()).then(|| Msg::Notice { text: session.warnings.join("; "), error: false })
            });
        Ok(Cockpit {
            session,
            shared,
            progress,
            cancel,
            theme,
            thresholds: Thresholds::default(),
            paths,
            no_color,
            read_only,
            demo_seed,
            from: from.clone(),
            first_notice,
            analyzer: SharedAnalyzer::default(),
            tutor: None,
        })
    }

    /// A new app for the current source; what it should say first reaches it as a message.
    fn new_app(&self, views: &Views) -> App {
        let read_only = self.read_only || self.session.read_only_reason.is_some();
        let mut app = App::new(read_only, &self.theme.name, self.demo_seed.is_some())
            .with_production(self.session.context.production);
        app.known = self.from.vocabulary();
        // Before any update: a lesson's clock starts at the first.
        app.wall = crate::clock::wall_clock();
        app.tutor = self.tutor.map(|(lesson, mode)| Tutor::new(lesson, mode));
        app.read_only_why = self.session.read_only_reason.clone();
        if let Some(why) = &self.session.read_only_reason {
            app.update(Msg::Notice { text: format!("read-only: {why}"), error: false }, views);
        }
        app
    }

    fn views(&self, snap: Arc<Snapshot>, target: &Option<DriverVersion>) -> Views {
        let now = self.session.now(&snap);
        build_views(&self.analyzer, snap, now, &self.thresholds, target)
    }
}

/// One terminal event: keys go to the app; a resize only redraws.
fn on_input(app: &mut App, views: &Views, event: Event, effects: &mut VecDeque<Effect>) -> bool {
    match event {
        Event::Key(key) if key.kind != KeyEventKind::Release => {
            effects.extend(app.update(Msg::Key(key), views));
            true
        }
        Event::Resize(..) => true,
        _ => false,
    }
}

/// The cockpit's loop on `terminal`, reading `input`, until the app quits,
/// the input ends or the process is told to stop. Draws only when
/// something changed, and only after every key already typed is handled.
pub async fn drive<B, S>(terminal: &mut Terminal<B>, mut input: S, mut cockpit: Cockpit) -> anyhow::Result<Ending>
where
    B: Backend,
    S: Stream<Item = std::io::Result<Event>> + Unpin,
{
    let mut wave_target: Option<DriverVersion> = None;
    let mut views = cockpit.views(cockpit.session.snapshots.borrow().clone(), &wave_target);
    let mut audit = audit_entries(&cockpit.session);
    show_audit(&mut views, &audit);
    let mut app = cockpit.new_app(&views);
    if let Some(msg) = cockpit.first_notice.take() {
        app.update(msg, &views);
    }
    if let Some(msg) = abandoned_notice(&audit) {
        app.update(msg, &views);
    }
    if app.tutor.is_some() {
        // The question first.
        app.overlay = Some(crate::app::Overlay::Detail { detail: crate::app::Detail::Lesson, scroll: 0 });
    }
    // Model changes are analysed off the input loop, so keys stay responsive
    // on a big fleet; only the newest snapshot is analysed, paced by what
    // the last analysis cost (runtime::pacing), and a result from before a
    // scenario switch or a new wave target is dropped.
    let (built_tx, mut built_rx) = mpsc::channel::<Built>(1);
    let mut generation = 0u64;
    let mut building = false;
    // A snapshot newer than the one last analysed is waiting.
    let mut wanted = false;
    let mut pacing = Pacing::new(Instant::now(), views.snap.content_generation());
    let mut stop = super::signals::StopSignals::new()?;
    let mut stopped_by = None;
    let mut input_ended = false;
    let mut dirty = true;
    let mut last_frame = Instant::now() - FRAME;
    let mut source_gone = false;
    // Some feed is still on its first list (see `memory`).
    let mut listing = feeds_listing(&views.snap);
    loop {
        // Effects of nested updates join the queue: none is dropped.
        let mut effects = VecDeque::new();
        // The app's wall clock as the second turns: a lesson's clock, when an
        // action starts, and its elapsed time in the status bar (a long step
        // is not a frozen screen), redrawn while one runs.
        let now = crate::clock::wall_clock();
        if now != app.wall {
            dirty |= !app.in_flight.is_empty();
            effects.extend(app.update(Msg::WallClock(now), &views));
        }
        // At most one frame per FRAME: a paste that arrives in many small
        // reads (each character a key) draws a few times, not once per read.
        let frame_due = last_frame + FRAME;
        if dirty && Instant::now() >= frame_due {
            let mut shown = Viewport::default();
            terminal.draw(|f| shown = ui::draw(f, &app, &views, &cockpit.theme, &cockpit.session.context))?;
            effects.extend(app.update(Msg::Viewport(shown), &views));
            dirty = false;
            last_frame = Instant::now();
        }
        let session = &mut cockpit.session;
        let analyse_at = pacing.ready_at(session.snapshots.borrow().content_generation());
        tokio::select! {
            // A frame put off by the pacing above.
            () = tokio::time::sleep_until(frame_due.into()), if dirty => {},
            event = input.next() => {
                let mut next = event;
                // Everything already typed is handled before the next frame.
                loop {
                    match next {
                        Some(Ok(event)) => dirty |= on_input(&mut app, &views, event, &mut effects),
                        Some(Err(e)) => return Err(anyhow::anyhow!("reading the terminal: {e}")),
                        // The terminal is gone: leave as on a quit, stopping running actions first.
                        None => {
                            input_ended = true;
                            break;
                        }
                    }
                    // Polled with this task's own waker: a stream that keeps
                    // the first waker it is given while pending (crossterm's
                    // does) must not keep a no-op one, or a key waits for
                    // the next tick to be noticed.
                    match futures::poll!(input.next()) {
                        std::task::Poll::Ready(more) => next = more,
                        std::task::Poll::Pending => break,
                    }
                }
            },
            changed = session.snapshots.changed(), if !source_gone => {
                if changed.is_err() {
                    // Files never change; a live source that stops says so.
                    source_gone = true;
                    if session.read_only_reason.is_none() {
                        effects.extend(app.update(Msg::SourceStopped, &views));
                        dirty = true;
                    }
                } else {
                    session.snapshots.borrow_and_update();
                    wanted = true;
                }
            },
            () = tokio::time::sleep_until(analyse_at.into()), if wanted && !building => {
                wanted = false;
                let snap = session.snapshots.borrow_and_update().clone();
                spawn_build(&cockpit.analyzer, snap.clone(), session.now(&snap), &cockpit.thresholds, &wave_target, generation, &built_tx);
                building = true;
            },
            Some(built) = built_rx.recv() => {
                building = false;
                pacing.analysed(built.started, built.finished, built.content);
                if built.generation == generation {
                    let was_listing = listing;
                    listing = feeds_listing(&built.views.snap);
                    if was_listing && !listing {
                        // The first list is in: what decoding it freed goes back.
                        memory::release_everywhere();
                        wake_workers();
                    }
                    // Freeing a big fleet's analysis takes milliseconds: not on the input loop.
                    let old = std::mem::replace(&mut views, built.views);
                    tokio::task::spawn_blocking(move || {
                        drop(old);
                        memory::on_idle();
                    });
                    show_audit(&mut views, &audit);
                    dirty = true;
                }
            },
            Some(progress) = cockpit.progress.recv() => {
                // A finished action has written its audit line: show it.
                if progress.done {
                    audit = audit_entries(session);
                    show_audit(&mut views, &audit);
                }
                effects.extend(app.update(Msg::Action(progress), &views));
                dirty = true;
            },
            (signal, number) = stop.recv() => {
                tracing::info!("{signal}: the cockpit stops and restores the terminal");
                stopped_by = Some((signal, number));
                break;
            }
        }
        while let Some(effect) = effects.pop_front() {
            match effect {
                Effect::Quit => {}
                Effect::Execute { id, request } => match &cockpit.session.executor {
                    Some(executor) => {
                        let mut executor = executor.clone();
                        executor.id = id;
                        tokio::spawn(async move { executor.run(request).await });
                    }
                    None => {
                        let refused = Progress { id, text: "this source is read-only".into(), error: true, done: true };
                        effects.extend(app.update(Msg::Action(refused), &views));
                    }
                },
                Effect::Cancel(id) => {
                    cockpit.cancel.send_modify(|cancelled| {
                        cancelled.insert(id);
                    });
                }
                Effect::SwitchSource(switch) => {
                    let from = match cockpit.from.switched(&switch) {
                        Ok(from) => from,
                        Err(why) => {
                            effects.extend(app.update(Msg::Notice { text: why, error: true }, &views));
                            continue;
                        }
                    };
                    // The old session's feeds stop when it is dropped; if the
                    // new one does not start, the old one stays.
                    match source::start(&from, Run::Live(&cockpit.shared)).await {
                        Ok(mut s) => {
                            if cockpit.read_only {
                                s.executor = None;
                            }
                            cockpit.session = s;
                            cockpit.from = from;
                            generation += 1;
                            let snap = cockpit.session.snapshots.borrow_and_update().clone();
                            pacing = Pacing::new(Instant::now(), snap.content_generation());
                            views = cockpit.views(snap, &wave_target);
                            listing = feeds_listing(&views.snap);
                            audit = audit_entries(&cockpit.session);
                            show_audit(&mut views, &audit);
                            let pane = app.pane;
                            let tutor = app.tutor.take();
                            app = cockpit.new_app(&views);
                            app.pane = pane;
                            // A lesson's progress survives :ctx and :ns.
                            app.tutor = tutor;
                            let now = format!(
                                "now on {} {}",
                                cockpit.session.context.source, cockpit.session.context.subtitle
                            );
                            effects.extend(app.update(Msg::Notice { text: now, error: false }, &views));
                            if let Some(msg) = abandoned_notice(&audit) {
                                effects.extend(app.update(msg, &views));
                            }
                        }
                        Err(e) => {
                            effects.extend(app.update(Msg::Notice { text: e.to_string(), error: true }, &views));
                        }
                    }
                }
                Effect::SetTheme(name) => {
                    let (theme, warnings) = Theme::load(&name, cockpit.paths.config_dir(), cockpit.no_color);
                    cockpit.theme = theme;
                    let loaded =
                        Msg::ThemeLoaded { name: cockpit.theme.name.clone(), warning: warnings.first().cloned() };
                    effects.extend(app.update(loaded, &views));
                }
                Effect::Copy(text) => {
                    // Through the terminal the cockpit draws on (stdout), so it
                    // reaches the clipboard over SSH too.
                    let copy = crossterm::clipboard::CopyToClipboard::to_clipboard_from(text);
                    if let Err(e) = crossterm::execute!(std::io::stdout(), copy) {
                        let failed = Msg::Notice { text: format!("could not copy: {e}"), error: true };
                        effects.extend(app.update(failed, &views));
                    }
                }
                Effect::PlanWaves(target) => {
                    wave_target = target;
                    generation += 1;
                    views = cockpit.views(cockpit.session.snapshots.borrow().clone(), &wave_target);
                    show_audit(&mut views, &audit);
                }
            }
            dirty = true;
        }
        if app.quit || input_ended {
            break;
        }
    }
    let (stopped, unfinished) = stop_running_actions(terminal, &mut app, &views, &mut cockpit).await?;
    Ok(Ending {
        report: app.tutor.as_ref().map(|t| t.report(crate::clock::wall_clock())),
        signal: stopped_by,
        stopped,
        unfinished,
    })
}

/// How the cockpit ended, for the terminal once its screen is restored.
#[derive(Debug, Default)]
pub struct Ending {
    /// A lesson's or mystery's report.
    pub report: Option<String>,
    /// The signal that stopped it (name and number), if one did.
    pub signal: Option<(&'static str, i32)>,
    /// Each action stopped on the way out: its label and its last word
    /// (what it did, what it left, the undo).
    pub stopped: Vec<String>,
    /// Actions still stopping when the grace ran out.
    pub unfinished: Vec<String>,
}

impl Ending {
    /// What leaving did to running work, for the terminal: nothing when no
    /// action ran. The audit log has the same, line by line.
    pub fn words(&self, audit: Option<&std::path::Path>) -> Vec<String> {
        if self.stopped.is_empty() && self.unfinished.is_empty() {
            return Vec::new();
        }
        let why = match self.signal {
            Some((name, _)) => format!("{name} stopped the cockpit"),
            None => "the cockpit was left".to_string(),
        };
        let mut lines = vec![format!(
            "kgpu: {why} while {} action(s) ran; each was cancelled at its next step:",
            self.stopped.len() + self.unfinished.len()
        )];
        lines.extend(self.stopped.iter().map(|s| format!("  {s}")));
        lines.extend(self.unfinished.iter().map(|u| {
            format!(
                "  {u}: still stopping after {}s; `kgpu release` finds and releases what it left",
                STOP_GRACE.as_secs()
            )
        }));
        if let Some(path) = audit {
            lines.push(format!("  (the audit log has each: {})", path.display()));
        }
        lines
    }

    /// As a shell reports a process a signal ended (128 + its number) when
    /// the signal cancelled work; 1 when an action was still stopping.
    pub fn exit_code(&self) -> std::process::ExitCode {
        let cancelled = !self.stopped.is_empty() || !self.unfinished.is_empty();
        match self.signal {
            Some((_, number)) if cancelled => std::process::ExitCode::from(u8::try_from(128 + number).unwrap_or(1)),
            _ if !self.unfinished.is_empty() => std::process::ExitCode::FAILURE,
            _ => std::process::ExitCode::SUCCESS,
        }
    }
}

/// The shortest time between two frames (30 a second).
const FRAME: std::time::Duration = std::time::Duration::from_millis(33);

/// How long leaving waits for running actions to stop at their next step.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(30);

/// Leaving (a quit, a signal, the input ending) while actions run: each is
/// cancelled, so it stops at its next step, releases what it holds (a plan's
/// reserved nodes) and writes its end to the audit log; the cockpit says
/// so and waits for them, at most `STOP_GRACE`. Never a silent exit mid-action.
/// Returns each stopped action's label and last word, and the labels of
/// those still stopping when the grace ran out.
async fn stop_running_actions<B: Backend>(
    terminal: &mut Terminal<B>,
    app: &mut App,
    views: &Views,
    cockpit: &mut Cockpit,
) -> anyhow::Result<(Vec<String>, Vec<String>)> {
    let running: Vec<ActionId> = app.in_flight.iter().map(|f| f.id).collect();
    let mut stopped = Vec::new();
    if running.is_empty() {
        return Ok((stopped, Vec::new()));
    }
    tracing::info!("leaving with {} action(s) running: cancelling them", running.len());
    cockpit.cancel.send_modify(|cancelled| cancelled.extend(running.iter().copied()));
    let deadline = tokio::time::Instant::now() + STOP_GRACE;
    while !app.in_flight.is_empty() {
        let text = format!("stopping {} action(s) at their next step, then leaving…", app.in_flight.len());
        app.update(Msg::Notice { text, error: false }, views);
        terminal.draw(|f| {
            ui::draw(f, app, views, &cockpit.theme, &cockpit.session.context);
        })?;
        match tokio::time::timeout_at(deadline, cockpit.progress.recv()).await {
            Ok(Some(progress)) => {
                if progress.done
                    && let Some(flight) = app.in_flight.iter().find(|f| f.id == progress.id)
                {
                    stopped.push(format!("{}\n    {}", flight.label, progress.text));
                }
                app.update(Msg::Action(progress), views);
            }
            Ok(None) => break,
            Err(_) => {
                let left: Vec<String> = app.in_flight.iter().map(|f| f.label.clone()).collect();
                tracing::warn!("left with actions still stopping: {}", left.join("; "));
                break;
            }
        }
    }
    Ok((stopped, app.in_flight.iter().map(|f| f.label.clone()).collect()))
}
