//! Actions from the command line, for runbooks and scripts:
//! `kgpu cordon|uncordon|drain|requeue|repartition|defrag`. The same
//! executor, guards, blast radius and audit log as the cockpit's; the exit
//! code says whether the goal was reached.

use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::process::ExitCode;

use tokio::sync::{mpsc, watch};

use crate::actions::choose::{self, NoAction};
use crate::actions::impact::{Impact, LineKind};
use crate::actions::{Action, ActionRequest, Progress};
use crate::analysis::index::Index;
use crate::analysis::leftovers;
use crate::analysis::{self, Analysis, Thresholds};
use crate::cli::{ActOptions, SourceArgs, UiArgs};
use crate::config::Paths;
use crate::model::audit::AuditEntry;
use crate::model::{GangKey, Snapshot, Sym};

use super::source::{self, Run, Shared, Source};
use super::{UsageError, outln};

/// What the command line asked for, before it is checked against the cluster.
#[derive(Clone, Debug)]
pub enum Wanted {
    Cordon(String),
    Uncordon(String),
    Drain {
        node: String,
        gpu_only: bool,
        force: bool,
    },
    Requeue(String),
    Repartition {
        node: String,
        config: String,
    },
    Defrag(Option<String>),
    /// Nodes to release (none: whatever abandoned actions left).
    Release(Vec<String>),
}

/// Exit code when the action was not confirmed (no --yes, no terminal).
const NOT_CONFIRMED: u8 = 2;

pub fn run(wanted: Wanted, opts: &ActOptions, source: &SourceArgs, ui: &UiArgs) -> anyhow::Result<ExitCode> {
    if ui.read_only {
        return Err(UsageError("--read-only: actions are disabled".into()).into());
    }
    if !source.file.is_empty() {
        return Err(UsageError("--file: offline dumps have nothing to act on".into()).into());
    }
    let paths = Paths::from_env();
    if let Err(e) = super::logging::init(paths.log_file().as_deref(), &ui.log_level) {
        tracing::debug!("{e}");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let code = runtime.block_on(act(wanted, opts, source, paths))?;
    match super::output_lost() {
        Some(why) => {
            super::say(&format!("kgpu: the report could not be written ({why}); the audit log has what was done"));
            Ok(ExitCode::FAILURE)
        }
        None => Ok(code),
    }
}

async fn act(wanted: Wanted, opts: &ActOptions, source: &SourceArgs, paths: Paths) -> anyhow::Result<ExitCode> {
    let (reports_tx, mut reports) = mpsc::channel::<Progress>(64);
    let (cancel_tx, cancel_rx) = watch::channel(BTreeSet::new());
    let shared = Shared { reports: reports_tx, cancel: cancel_rx, paths };
    // `--file` was refused above: a demo or a cluster.
    let from = Source::from_args(&opts.from, 0, source);
    let mut session = source::start(&from, Run::Live(&shared)).await?;
    let snap = session.synced().await;
    let now = session.now(&snap);
    let thresholds = Thresholds::default();
    let analysis = analysis::analyze(&snap, now, &thresholds);
    let abandoned = session
        .executor
        .as_ref()
        .and_then(|e| e.audit.as_ref().map(|log| log.abandoned(&e.context)))
        .unwrap_or_default();
    if !abandoned.is_empty() && !matches!(wanted, Wanted::Release(_)) {
        outln!(
            "note: {} action(s) of a kgpu that ended without finishing are open in the audit log; `kgpu release` lists what they left and releases it",
            abandoned.len()
        );
    }
    let action = match resolve(&wanted, &snap, &analysis, &thresholds, &abandoned)? {
        Resolved::Act(action) => action,
        Resolved::Done(why) => {
            outln!("{why}");
            return Ok(ExitCode::SUCCESS);
        }
        Resolved::Cannot(why) => {
            outln!("{why}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let impact = action.impact(&Index::build(&snap, now));
    outln!("{}", describe(&action, &impact, &session.context.source, opts.dry_run));
    // On a production-looking context a disruptive action asks for its target's name, as the cockpit does.
    let word = (session.context.production && action.is_disruptive()).then(|| action.confirm_word());
    if !opts.dry_run && !opts.yes && !confirmed(word.as_deref())? {
        match &word {
            Some(w) if std::io::stdin().is_terminal() => outln!("not run: the name typed was not {w}"),
            _ => outln!("not run: confirm with --yes (or try --dry-run)"),
        }
        return Ok(ExitCode::from(NOT_CONFIRMED));
    }
    let Some(mut executor) = session.executor.clone() else {
        return Err(UsageError("this source is read-only".into()).into());
    };
    executor.id = 1;
    let request = ActionRequest { action, dry_run: opts.dry_run };
    // From here on a signal (ctrl-c, SIGTERM, an SSH session's SIGHUP)
    // cancels at the next step: what the action holds is released and what
    // it did and left is said, on the terminal and in the audit log.
    let mut signals = super::signals::StopSignals::new()?;
    let running = tokio::spawn(async move { executor.run(request).await });
    let mut reached = false;
    let mut stopped_by: Option<(&str, i32)> = None;
    loop {
        tokio::select! {
            msg = reports.recv() => match msg {
                Some(Progress { text, error, done, .. }) => {
                    outln!("{}{text}", if done { "" } else { "  " });
                    if done {
                        reached = !error;
                        break;
                    }
                }
                None => break,
            },
            (name, number) = signals.recv() => {
                if stopped_by.is_none() {
                    outln!("  {name}: cancelling at the next step; what the action holds is released first…");
                    tracing::warn!("{name}: the command-line action is cancelled");
                    stopped_by = Some((name, number));
                } else {
                    outln!("  {name}: still cancelling; kgpu ends once the step in progress is undone");
                }
                cancel_tx.send_modify(|c| {
                    c.insert(1);
                });
            }
        }
    }
    let _ = running.await;
    Ok(match stopped_by {
        // As a shell reports a process a signal ended: 128 + its number.
        Some((name, number)) if !reached => {
            outln!("stopped by {name}: the audit log has what was done and left");
            ExitCode::from(u8::try_from(128 + number).unwrap_or(1))
        }
        _ if reached => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    })
}

enum Resolved {
    Act(Action),
    /// Nothing to do: the goal already holds.
    Done(String),
    /// The goal cannot be reached this way.
    Cannot(String),
}

fn split_target(target: &str) -> Result<(&str, &str), UsageError> {
    target.split_once('/').ok_or_else(|| UsageError(format!("'{target}' is not NAMESPACE/NAME")))
}

fn node(snap: &Snapshot, name: &str) -> Result<Sym, UsageError> {
    let sym = Sym::new(name);
    if snap.nodes.contains_key(&sym) {
        return Ok(sym);
    }
    let some: Vec<&str> = snap.nodes.keys().take(8).map(|n| n.as_str()).collect();
    Err(UsageError(format!("node {name} not found; nodes: {}", some.join(" "))))
}

fn resolve(
    wanted: &Wanted,
    snap: &Snapshot,
    analysis: &Analysis,
    thresholds: &Thresholds,
    abandoned: &[AuditEntry],
) -> anyhow::Result<Resolved> {
    let action = match wanted {
        Wanted::Release(names) => return release(names, snap, abandoned),
        Wanted::Cordon(n) => Action::Cordon { node: node(snap, n)? },
        Wanted::Uncordon(n) => Action::Uncordon { node: node(snap, n)? },
        Wanted::Drain { node: n, gpu_only, force } => {
            Action::Drain { node: node(snap, n)?, gpu_only: *gpu_only, force: *force }
        }
        Wanted::Repartition { node: n, config } => {
            choose::repartition(snap, node(snap, n)?, config).map_err(|no| UsageError(no.words().to_string()))?
        }
        Wanted::Requeue(target) => {
            let (namespace, name) = split_target(target)?;
            let gang: Option<&GangKey> =
                snap.gangs.keys().find(|k| k.namespace.as_str() == namespace && &*k.name == name);
            match gang {
                Some(gang) => Action::Requeue { gang: gang.clone() },
                None => {
                    return Err(UsageError(format!("no Kueue Workload or Volcano PodGroup {namespace}/{name}")).into());
                }
            }
        }
        Wanted::Defrag(target) => {
            let plan = match target {
                None => analysis.fragmentation.plan.clone(),
                Some(target) => {
                    let (namespace, name) = split_target(target)?;
                    match analysis::defrag_plan_for(snap, analysis, thresholds, namespace, name) {
                        Some(plan) => plan,
                        None => {
                            let pending: Vec<String> =
                                analysis.pending.iter().take(10).map(|p| p.display_name()).collect();
                            return Err(UsageError(format!(
                                "{namespace}/{name} is not pending GPU work; pending now: {}",
                                if pending.is_empty() { "nothing".into() } else { pending.join(", ") }
                            ))
                            .into());
                        }
                    }
                }
            };
            match choose::plan(&plan) {
                Ok(action) => action,
                Err(NoAction::AlreadyThere(all_fit)) => {
                    // Room is there; whatever else holds the target is what to fix.
                    let held = target.as_deref().and_then(|t| {
                        let (namespace, name) = t.split_once('/')?;
                        let item = analysis::pending::find(&analysis.pending, namespace, name)?;
                        item.blocking.filter(|s| *s != analysis::pending::Step::Fit).map(|_| item)
                    });
                    return Ok(match (held, target) {
                        (Some(item), _) => Resolved::Cannot(format!(
                            "no plan: {} has room but is held at {}: {}",
                            item.display_name(),
                            item.blocking_str(),
                            item.summary
                        )),
                        (None, Some(t)) => Resolved::Done(format!("no plan needed: {t} fits now")),
                        (None, None) => Resolved::Done(all_fit),
                    });
                }
                Err(NoAction::Cannot(why)) => return Ok(Resolved::Cannot(why)),
            }
        }
    };
    Ok(Resolved::Act(action))
}

/// `kgpu release [NODE…]`: the named nodes' reservations (and the abandoned
/// actions that held only those), or everything abandoned actions left.
fn release(names: &[String], snap: &Snapshot, abandoned: &[AuditEntry]) -> anyhow::Result<Resolved> {
    let left = leftovers::find(abandoned, snap);
    if names.is_empty() {
        return Ok(match choose::release_leftovers(&left) {
            Ok(action) => Resolved::Act(action),
            Err(no) => Resolved::Done(no.words().to_string()),
        });
    }
    let nodes = names.iter().map(|n| node(snap, n)).collect::<Result<Vec<Sym>, _>>()?;
    let bare: Vec<&str> = nodes
        .iter()
        .filter(|n| !left.unaccounted.iter().any(|(u, _)| u == *n) && !left.reserved().contains(n))
        .map(|n| n.as_str())
        .collect();
    if !bare.is_empty() {
        return Err(UsageError(format!("no kgpu reservation on {}", bare.join(" "))).into());
    }
    let abandoned = left
        .abandoned
        .iter()
        .filter(|a| !a.reserved.is_empty() && a.reserved.iter().all(|r| nodes.contains(r)))
        .map(|a| a.start.clone())
        .collect();
    Ok(Resolved::Act(Action::Release { nodes, abandoned }))
}

/// The blast radius, as the cockpit's confirmation shows it (`Impact::lines`).
/// A dry run says "would" on every line: nothing it prints has happened.
fn describe(action: &Action, impact: &Impact, context: &str, dry_run: bool) -> String {
    let mut out = format!(
        "{}{} {} on {context}\n",
        if dry_run { "dry run: would " } else { "" },
        action.verb(),
        action.targets().join(" ")
    );
    for (kind, text) in impact.lines(action.is_disruptive(), dry_run) {
        let prompt = if kind == LineKind::Command { "  $ " } else { "" };
        out.push_str(&format!("{prompt}{text}\n"));
    }
    out.trim_end().to_string()
}

/// Asks on the terminal; without one there is nobody to ask.
/// Asks on the terminal: `y`, or (`word`) the target's name typed out.
fn confirmed(word: Option<&str>) -> anyhow::Result<bool> {
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        return Ok(false);
    }
    match word {
        Some(w) => super::emit(&format!("this context looks like PRODUCTION: type {w} to run it: "))?,
        None => super::emit("run it? [y/N] ")?,
    }
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer)?;
    Ok(match word {
        Some(w) => answer.trim() == w,
        None => matches!(answer.trim(), "y" | "Y" | "yes"),
    })
}
