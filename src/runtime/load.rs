//! One-shot loads of a whole snapshot, for `kgpu snapshot` and `kgpu why`:
//! a [`Source`] started once ([`Run::Once`]), read when every feed has
//! listed (or said why it cannot).

use crate::model::{Snapshot, Timestamp};
use crate::sources::kube::{client, watch};

use super::source::{self, Run, Source};

/// The demo cluster after `advance` seconds of simulated time.
pub fn demo(scenario: &str, seed: u64, advance: u64) -> anyhow::Result<(Snapshot, Timestamp)> {
    source::demo_snapshot(scenario, seed, advance, false)
}

/// The demo cluster as a mystery with this seed shows it: the scenario's
/// name and story hidden, its namespaces and nodes renamed.
pub fn mystery(scenario: &str, seed: u64) -> anyhow::Result<(Snapshot, Timestamp)> {
    source::demo_snapshot(scenario, seed, 0, true)
}

/// A live cluster, once every feed has listed (or is unavailable).
pub async fn kube(target: &client::Target, scope: &watch::Scope) -> anyhow::Result<(Snapshot, Timestamp)> {
    loaded(&Source::Kube { target: target.clone(), scope: Box::new(scope.clone()) }).await
}

async fn loaded(from: &Source) -> anyhow::Result<(Snapshot, Timestamp)> {
    let mut session = source::start(from, Run::Once).await?;
    for w in &session.warnings {
        super::say(&format!("kgpu: {w}"));
    }
    let snap = session.synced().await;
    let now = session.now(&snap);
    for line in crate::view_model::feeds::health(&snap, now).iter().filter_map(|h| h.skipped_line()) {
        super::say(&format!("kgpu: {line}"));
    }
    Ok(((*snap).clone(), now))
}

/// Any source, blocking.
pub fn once(from: &Source) -> anyhow::Result<(Snapshot, Timestamp)> {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(loaded(from))
}
