//! One-shot loads of a whole snapshot, for `kgpu snapshot` and `kgpu why`:
//! the demo cluster, kubectl dumps, or a live cluster (watched until every
//! feed has listed once, or said why it cannot).

use std::path::PathBuf;
use std::time::Duration;

use crate::cli::SourceArgs;
use crate::model::{Cluster, FeedState, Snapshot, SourceInfo, SourceKind, Timestamp};
use crate::sources::file;
use crate::sources::kube::{client, watch};
use crate::sources::sim::scenarios;

use super::UsageError;

/// Where the data come from.
#[derive(Clone, Debug)]
pub enum Spec {
    Demo { scenario: String, seed: u64, advance: u64 },
    File(Vec<PathBuf>),
    Kube { target: client::Target, scope: watch::Scope },
}

impl Spec {
    /// `--demo`/`--scenario` → demo; `--file` → files; otherwise the kube context.
    pub fn from_args(from: &crate::cli::DemoChoice, advance: u64, source: &SourceArgs) -> Spec {
        if let Some(scenario) = from.scenario() {
            Spec::Demo { scenario: scenario.to_string(), seed: from.seed, advance }
        } else if !source.file.is_empty() {
            Spec::File(source.file.clone())
        } else {
            Spec::Kube {
                target: client::Target { kubeconfig: source.kubeconfig.clone(), context: source.context.clone() },
                scope: source.scope(),
            }
        }
    }
}

/// The demo cluster after `advance` seconds of simulated time.
pub fn demo(scenario: &str, seed: u64, advance: u64) -> Result<(Snapshot, Timestamp), scenarios::UnknownScenario> {
    let mut sim = scenarios::build(scenario, seed)?;
    let mut cluster = Cluster::new(SourceInfo { kind: SourceKind::Demo, name: scenario.to_string() });
    cluster.apply_all(sim.initial_events());
    let mut left = advance as i64;
    while left > 0 {
        let dt = left.min(5);
        cluster.apply_all(sim.step(dt));
        left -= dt;
    }
    Ok((cluster.snapshot(), sim.now))
}

/// kubectl dumps; "now" is the newest time in them (ages as at capture).
pub fn files(paths: &[PathBuf]) -> anyhow::Result<(Snapshot, Timestamp, file::Stats)> {
    let (events, newest, stats) = file::load(paths).map_err(|e| UsageError(e.to_string()))?;
    let mut cluster = Cluster::new(SourceInfo { kind: SourceKind::File, name: String::new() });
    cluster.apply_all(events);
    let now = if newest > 0 { newest } else { crate::clock::wall_clock() };
    Ok((cluster.snapshot(), now, stats))
}

/// How long a one-shot waits for every feed's first list.
pub const SYNC_TIMEOUT: Duration = Duration::from_secs(60);

/// A live cluster, once every feed has listed (or is unavailable).
/// Waits until every feed has listed (or is known unavailable), at most
/// `SYNC_TIMEOUT`: a verdict on half a cluster would be wrong.
pub async fn wait_synced(snapshots: &mut tokio::sync::watch::Receiver<std::sync::Arc<Snapshot>>, scope: &watch::Scope) {
    let deadline = tokio::time::Instant::now() + SYNC_TIMEOUT;
    // The agents' first round too, when they are read at all.
    let agents =
        (scope.agents.transport != crate::sources::agents::Transport::Off).then_some(crate::model::Feed::Agents);
    let synced = |s: &Snapshot| {
        watch::FEEDS
            .iter()
            .chain(agents.iter())
            .all(|f| matches!(s.feed(*f).map(|x| &x.state), Some(FeedState::Live | FeedState::Unavailable(_))))
    };
    loop {
        if synced(&snapshots.borrow_and_update()) {
            break;
        }
        if tokio::time::timeout_at(deadline, snapshots.changed()).await.is_err() {
            tracing::warn!("not every feed listed within {}s", SYNC_TIMEOUT.as_secs());
            break;
        }
    }
}

pub async fn kube(target: &client::Target, scope: &watch::Scope) -> anyhow::Result<(Snapshot, Timestamp)> {
    let (client, info) = client::connect(target).await.map_err(|e| UsageError(e.to_string()))?;
    let (tx, rx) = tokio::sync::mpsc::channel(1024);
    let source = SourceInfo { kind: SourceKind::Kube, name: info.context.clone() };
    let (mut snapshots, model) = super::tui::spawn_model(source, rx);
    let tasks = watch::spawn_all(client, scope.clone(), tx);
    wait_synced(&mut snapshots, scope).await;
    let snap = (**snapshots.borrow()).clone();
    for t in tasks {
        t.abort();
    }
    model.abort();
    Ok((snap, crate::clock::wall_clock()))
}

/// Any source, blocking.
pub fn once(spec: &Spec) -> anyhow::Result<(Snapshot, Timestamp)> {
    match spec {
        Spec::Demo { scenario, seed, advance } => Ok(demo(scenario, *seed, *advance)?),
        Spec::File(paths) => files(paths).map(|(s, t, _)| (s, t)),
        Spec::Kube { target, scope } => {
            let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
            runtime.block_on(kube(target, scope))
        }
    }
}
