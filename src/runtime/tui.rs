//! The interactive cockpit: the UI loop on the main thread, the model task,
//! the source task, and the effect runner, connected by channels (values,
//! not locks). Redraws only when something changed.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use crossterm::event::{Event, EventStream, KeyEventKind};
use futures::StreamExt;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::actions::audit::AuditLog;
use crate::actions::exec::{Backend, Executor};
use crate::analysis::{Thresholds, waves};
use crate::app::{App, Effect, Msg};
use crate::config::Paths;
use crate::model::{Cluster, DriverVersion, ModelEvent, Snapshot, SourceInfo, SourceKind};
use crate::sources::sim::{driver, scenarios};
use crate::ui::{self, Context, Theme};
use crate::view_model::panes::Views;

use super::UsageError;
use super::terminal::Guard;

/// The model task: applies batches, publishes at most every 50 ms.
pub fn spawn_model(
    source: SourceInfo,
    mut rx: mpsc::Receiver<Vec<ModelEvent>>,
) -> (watch::Receiver<Arc<Snapshot>>, JoinHandle<()>) {
    let mut cluster = Cluster::new(source);
    let (tx, out) = watch::channel(Arc::new(cluster.snapshot()));
    let task = tokio::spawn(async move {
        let mut published = cluster.generation();
        while let Some(batch) = rx.recv().await {
            cluster.apply_all(batch);
            while let Ok(more) = rx.try_recv() {
                cluster.apply_all(more);
            }
            if cluster.generation() != published {
                published = cluster.generation();
                if tx.send(Arc::new(cluster.snapshot())).is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    });
    (out, task)
}

/// A running source with its model.
struct Session {
    tasks: Vec<JoinHandle<()>>,
    snapshots: watch::Receiver<Arc<Snapshot>>,
    executor: Executor,
    context: Context,
}

impl Drop for Session {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn start_demo(
    scenario: &str,
    seed: u64,
    reports: mpsc::Sender<Msg>,
    paths: &Paths,
) -> Result<Session, scenarios::UnknownScenario> {
    let sim = scenarios::build(scenario, seed)?;
    let title = sim.scenario().title.clone();
    let (events_tx, events_rx) = mpsc::channel(1024);
    let (snapshots, model_task) =
        spawn_model(SourceInfo { kind: SourceKind::Demo, name: scenario.to_string() }, events_rx);
    let (handle, sim_task) = driver::spawn(sim, events_tx, Duration::from_secs(1));
    let executor = Executor {
        backend: Backend::Sim(handle),
        snapshots: snapshots.clone(),
        reports,
        audit: paths.audit_log().map(|path| AuditLog { path }),
        context: format!("demo:{scenario}"),
        user: std::env::var("USER").unwrap_or_else(|_| "demo".into()),
        mig_timeout: Duration::from_secs(180),
    };
    Ok(Session {
        tasks: vec![model_task, sim_task],
        snapshots,
        executor,
        context: Context { source: format!("demo:{scenario}"), subtitle: title, production: false },
    })
}

pub struct CockpitOptions {
    pub scenario: String,
    pub seed: u64,
    pub theme: Option<String>,
    pub read_only: bool,
    pub log_level: String,
}

pub async fn run_demo(opts: CockpitOptions) -> anyhow::Result<()> {
    if !std::io::stdout().is_terminal() {
        return Err(UsageError(
            "stdout is not a terminal: the cockpit needs one; for scripts use `kgpu snapshot --demo`".into(),
        )
        .into());
    }
    scenarios::find(&opts.scenario)?;
    let paths = Paths::from_env();
    let log_note = super::logging::init(paths.log_file().as_deref(), &opts.log_level);
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let theme_name = opts.theme.clone().unwrap_or_else(|| ui::theme::DEFAULT.to_string());
    let (mut theme, warnings) = Theme::load(&theme_name, paths.config_dir(), no_color);
    tracing::info!("kgpu demo starting: scenario {} seed {}", opts.scenario, opts.seed);

    let (msg_tx, mut msg_rx) = mpsc::channel::<Msg>(64);
    let mut session = start_demo(&opts.scenario, opts.seed, msg_tx.clone(), &paths)?;
    let mut app = App::new(opts.read_only, &theme.name, true);
    if let Some(w) = warnings.first() {
        app.update(Msg::Notice { text: w.clone(), error: true }, &empty_views());
    } else if let Err(e) = &log_note {
        app.update(Msg::Notice { text: e.clone(), error: false }, &empty_views());
    }
    let thresholds = Thresholds::default();
    let mut wave_target: Option<DriverVersion> = None;
    let build = |snap: Arc<Snapshot>, target: &Option<DriverVersion>| {
        let now = snap.clock;
        Views::build(snap, now, &thresholds, target.as_ref().map(|t| (t, waves::Policy::default())))
    };
    let mut views = build(session.snapshots.borrow().clone(), &wave_target);

    let mut guard = Guard::enter()?;
    let mut input = EventStream::new();
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut sighup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
    let mut dirty = true;
    loop {
        if dirty {
            guard.terminal.draw(|f| ui::draw(f, &mut app, &views, &theme, &session.context))?;
            dirty = false;
        }
        let mut effects = Vec::new();
        tokio::select! {
            event = input.next() => match event {
                Some(Ok(Event::Key(key))) if key.kind != KeyEventKind::Release => {
                    effects = app.update(Msg::Key(key), &views);
                    dirty = true;
                }
                Some(Ok(Event::Resize(..))) => dirty = true,
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(anyhow::anyhow!("reading the terminal: {e}")),
                None => break,
            },
            changed = session.snapshots.changed() => {
                if changed.is_err() {
                    app.update(Msg::Notice { text: "the source stopped".into(), error: true }, &views);
                    // Wait for input only: nothing more will arrive.
                    std::future::pending::<()>().await;
                }
                let snap = session.snapshots.borrow_and_update().clone();
                views = build(snap, &wave_target);
                dirty = true;
            },
            Some(msg) = msg_rx.recv() => {
                effects = app.update(msg, &views);
                dirty = true;
            },
            _ = sigterm.recv() => break,
            _ = sighup.recv() => break,
        }
        for effect in effects {
            match effect {
                Effect::Quit => app.quit = true,
                Effect::Execute(request) => {
                    let executor = session.executor.clone();
                    tracing::info!("action {:?}", request);
                    tokio::spawn(async move { executor.run(request).await });
                }
                Effect::SwitchScenario(name) => match start_demo(&name, opts.seed, msg_tx.clone(), &paths) {
                    Ok(s) => {
                        session = s;
                        app = App::new(opts.read_only, &theme.name, true);
                        views = build(session.snapshots.borrow().clone(), &wave_target);
                    }
                    Err(e) => {
                        app.update(Msg::Notice { text: e.to_string(), error: true }, &views);
                    }
                },
                Effect::SetTheme(name) => {
                    let (t, warnings) = Theme::load(&name, paths.config_dir(), no_color);
                    theme = t;
                    app.theme_name = theme.name.clone();
                    let text = warnings.first().cloned().unwrap_or_else(|| format!("theme {}", theme.name));
                    app.update(Msg::Notice { text, error: !warnings.is_empty() }, &views);
                }
                Effect::PlanWaves(target) => {
                    match target.as_deref().map(|t| DriverVersion::parse(t).ok_or(t)) {
                        Some(Err(bad)) => {
                            app.update(
                                Msg::Notice {
                                    text: format!("'{bad}' is not a driver version like 570.124.06"),
                                    error: true,
                                },
                                &views,
                            );
                        }
                        Some(Ok(v)) => wave_target = Some(v),
                        None => wave_target = None,
                    }
                    views = build(session.snapshots.borrow().clone(), &wave_target);
                }
            }
            dirty = true;
        }
        if app.quit {
            break;
        }
    }
    drop(guard);
    tracing::info!("kgpu demo stopped");
    Ok(())
}

fn empty_views() -> Views {
    let snap = Arc::new(Snapshot::empty(SourceInfo { kind: SourceKind::Demo, name: String::new() }));
    Views::build(snap, 0, &Thresholds::default(), None)
}
