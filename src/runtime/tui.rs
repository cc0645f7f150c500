//! The interactive cockpit: the UI loop on the main thread, the model task,
//! the source tasks, and the effect runner, connected by channels (values,
//! not locks). Redraws only when something changed.

use std::collections::{BTreeSet, VecDeque};
use std::io::IsTerminal;
use std::sync::Arc;

use crossterm::event::{Event, EventStream, KeyEventKind};
use futures::StreamExt;
use tokio::sync::{mpsc, watch};

use crate::actions::Progress;
use crate::analysis::{Thresholds, waves};
use crate::app::{App, Effect, Msg};
use crate::config::Paths;
use crate::model::audit::AuditEntry;
use crate::model::{DriverVersion, Snapshot, Timestamp};
use crate::ui::{self, Theme};
use crate::view_model::panes::{Views, audit_rows};

use super::UsageError;
use super::source::{self, Run, Session, Shared, Source};
use super::terminal::Guard;

pub struct CockpitOptions {
    pub source: Source,
    pub theme: Option<String>,
    pub read_only: bool,
    pub log_level: String,
}

fn build_views(snap: Arc<Snapshot>, now: Timestamp, thresholds: &Thresholds, target: &Option<DriverVersion>) -> Views {
    Views::build(snap, now, thresholds, target.as_ref().map(|t| (t, waves::Policy::default())))
}

/// Analyses `snap` on the blocking pool and sends the views back, tagged.
fn spawn_build(
    snap: Arc<Snapshot>,
    now: Timestamp,
    thresholds: &Thresholds,
    target: &Option<DriverVersion>,
    generation: u64,
    tx: &mpsc::Sender<(u64, Views)>,
) {
    let (thresholds, target, tx) = (thresholds.clone(), target.clone(), tx.clone());
    tokio::task::spawn_blocking(move || {
        let views = build_views(snap, now, &thresholds, &target);
        // The receiver is gone only when the cockpit is closing.
        let _ = tx.blocking_send((generation, views));
    });
}

/// The demo on another scenario, with the same seed.
async fn start_scenario(name: &str, seed: Option<u64>, shared: &Shared) -> anyhow::Result<Session> {
    let from = Source::Demo { scenario: name.to_string(), seed: seed.unwrap_or(1), advance: 0 };
    source::start(&from, Run::Live(shared)).await
}

/// Audit entries the Events pane shows.
const AUDIT_ROWS: usize = 50;

/// The session's own entries of the audit log (its context only), newest first.
fn audit_entries(session: &Session) -> Vec<AuditEntry> {
    session
        .executor
        .as_ref()
        .and_then(|e| e.audit.as_ref().map(|log| log.tail(AUDIT_ROWS, &e.context)))
        .unwrap_or_default()
}

fn show_audit(views: &mut Views, audit: &[AuditEntry]) {
    views.set_audit(&audit_rows(audit, crate::clock::wall_clock()));
}

pub async fn run(opts: CockpitOptions) -> anyhow::Result<()> {
    if !std::io::stdout().is_terminal() {
        return Err(UsageError(
            "stdout is not a terminal: the cockpit needs one; for scripts use `kgpu snapshot`".into(),
        )
        .into());
    }
    let paths = Paths::from_env();
    let log_note = super::logging::init(paths.log_file().as_deref(), &opts.log_level);
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let theme_name = opts.theme.clone().unwrap_or_else(|| ui::theme::DEFAULT.to_string());
    let (mut theme, warnings) = Theme::load(&theme_name, paths.config_dir(), no_color);
    let (progress_tx, mut progress_rx) = mpsc::channel::<Progress>(64);
    let (cancel_tx, cancel_rx) = watch::channel(BTreeSet::new());
    let shared = Shared { reports: progress_tx, cancel: cancel_rx, paths: paths.clone() };
    // Problems with the source are reported before the terminal goes raw.
    let demo_seed = match &opts.source {
        Source::Demo { seed, .. } => Some(*seed),
        _ => None,
    };
    let mut session = source::start(&opts.source, Run::Live(&shared)).await?;
    tracing::info!("kgpu cockpit starting on {}", session.context.source);
    let thresholds = Thresholds::default();
    let mut wave_target: Option<DriverVersion> = None;
    let build = |session: &Session, snap: Arc<Snapshot>, target: &Option<DriverVersion>| {
        let now = session.now(&snap);
        build_views(snap, now, &thresholds, target)
    };
    let mut views = build(&session, session.snapshots.borrow().clone(), &wave_target);
    let mut audit = audit_entries(&session);
    show_audit(&mut views, &audit);
    // A new app per source; what it should say first reaches it as a message.
    let new_app = |session: &Session, theme: &Theme, views: &Views| {
        let mut app = App::new(opts.read_only || session.read_only_reason.is_some(), &theme.name, demo_seed.is_some());
        if let Some(why) = &session.read_only_reason {
            app.update(Msg::Notice { text: format!("read-only: {why}"), error: false }, views);
        }
        app
    };
    let mut app = new_app(&session, &theme, &views);
    if let Some(w) = warnings.first() {
        app.update(Msg::ThemeLoaded { name: theme.name.clone(), warning: Some(w.clone()) }, &views);
    } else if let Err(e) = &log_note {
        app.update(Msg::Notice { text: e.clone(), error: false }, &views);
    }
    // Model changes are analysed off the input loop, so keys stay responsive
    // on a big fleet; only the newest snapshot is analysed, and a result
    // from before a scenario switch or a new wave target is dropped.
    let (built_tx, mut built_rx) = mpsc::channel::<(u64, Views)>(1);
    let mut generation = 0u64;
    let mut building = false;
    let mut stale = false;

    let mut guard = Guard::enter()?;
    let mut input = EventStream::new();
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut sighup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
    let mut dirty = true;
    let mut source_gone = false;
    loop {
        if dirty {
            guard.terminal.draw(|f| ui::draw(f, &mut app, &views, &theme, &session.context))?;
            dirty = false;
        }
        // Effects of nested updates join the queue: none is dropped.
        let mut effects = VecDeque::new();
        tokio::select! {
            event = input.next() => match event {
                Some(Ok(Event::Key(key))) if key.kind != KeyEventKind::Release => {
                    effects.extend(app.update(Msg::Key(key), &views));
                    dirty = true;
                }
                Some(Ok(Event::Resize(..))) => dirty = true,
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(anyhow::anyhow!("reading the terminal: {e}")),
                None => break,
            },
            changed = session.snapshots.changed(), if !source_gone => {
                if changed.is_err() {
                    // Files never change; a live source that stops says so.
                    source_gone = true;
                    if session.read_only_reason.is_none() {
                        effects.extend(app.update(Msg::SourceStopped, &views));
                        dirty = true;
                    }
                } else if building {
                    stale = true;
                } else {
                    let snap = session.snapshots.borrow_and_update().clone();
                    spawn_build(snap.clone(), session.now(&snap), &thresholds, &wave_target, generation, &built_tx);
                    building = true;
                }
            },
            Some((built_for, built)) = built_rx.recv() => {
                building = false;
                if built_for == generation {
                    // Freeing a big fleet's analysis takes milliseconds: not on the input loop.
                    let old = std::mem::replace(&mut views, built);
                    tokio::task::spawn_blocking(move || drop(old));
                    show_audit(&mut views, &audit);
                    dirty = true;
                }
                if stale {
                    stale = false;
                    let snap = session.snapshots.borrow_and_update().clone();
                    spawn_build(snap.clone(), session.now(&snap), &thresholds, &wave_target, generation, &built_tx);
                    building = true;
                }
            },
            Some(progress) = progress_rx.recv() => {
                // A finished action has written its audit line: show it.
                if progress.done {
                    audit = audit_entries(&session);
                    show_audit(&mut views, &audit);
                }
                effects.extend(app.update(Msg::Action(progress), &views));
                dirty = true;
            },
            _ = sigterm.recv() => break,
            _ = sighup.recv() => break,
        }
        while let Some(effect) = effects.pop_front() {
            match effect {
                Effect::Quit => {}
                Effect::Execute { id, request } => match &session.executor {
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
                    cancel_tx.send_modify(|cancelled| {
                        cancelled.insert(id);
                    });
                }
                Effect::SwitchScenario(name) => match (demo_seed, start_scenario(&name, demo_seed, &shared).await) {
                    (Some(_), Ok(s)) => {
                        session = s;
                        generation += 1;
                        let snap = session.snapshots.borrow_and_update().clone();
                        views = build(&session, snap, &wave_target);
                        app = new_app(&session, &theme, &views);
                        audit = audit_entries(&session);
                        show_audit(&mut views, &audit);
                    }
                    (Some(_), Err(e)) => {
                        effects.extend(app.update(Msg::Notice { text: e.to_string(), error: true }, &views));
                    }
                    (None, _) => {}
                },
                Effect::SetTheme(name) => {
                    let (t, warnings) = Theme::load(&name, paths.config_dir(), no_color);
                    theme = t;
                    let loaded = Msg::ThemeLoaded { name: theme.name.clone(), warning: warnings.first().cloned() };
                    effects.extend(app.update(loaded, &views));
                }
                Effect::PlanWaves(target) => {
                    wave_target = target;
                    generation += 1;
                    views = build(&session, session.snapshots.borrow().clone(), &wave_target);
                    show_audit(&mut views, &audit);
                }
            }
            dirty = true;
        }
        if app.quit {
            break;
        }
    }
    drop(guard);
    tracing::info!("kgpu cockpit stopped");
    Ok(())
}
