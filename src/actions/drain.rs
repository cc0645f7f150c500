//! Drain: cordon, then evict through the Eviction API (PDBs honoured,
//! refusals retried until the drain timeout). As `kubectl drain` (checked
//! against it on the lab), two kinds of pod stop it unless forced: pods
//! without a controller (an evicted one never comes back) and pods with
//! `emptyDir` data (the data go with the pod). Then it cordons the node and
//! evicts nothing, so the choice is made before any pod is disrupted.

use crate::analysis::index::Index;
use crate::model::{Pod, PodKey, Snapshot, Sym};

use super::backend::ActionError;
use super::exec::{Controllers, Evictions, Executor, next_snapshot};
use super::impact::{Impact, add_pods, drain_victims, eviction_command};

pub(super) fn question(node: Sym, gpu_only: bool, force: bool) -> String {
    format!(
        "Drain node {node}{}{}?",
        if gpu_only { " (GPU pods only)" } else { "" },
        if force { ", forcing pods without a controller or with emptyDir data" } else { "" }
    )
}

/// Why a drain that is not forced leaves `p` where it is, if it does.
fn kept_because(p: &Pod) -> Option<&'static str> {
    if p.owner.is_none() {
        Some("no controller: it would not come back")
    } else if p.local_data {
        Some("emptyDir data: it would be lost")
    } else {
        None
    }
}

/// The pods the drain evicts, and (unless `force`) those that stop it, with
/// why: while any stops it, it evicts none.
fn split<'a>(
    index: &Index<'a>,
    node: Sym,
    gpu_only: bool,
    force: bool,
) -> (Vec<&'a Pod>, Vec<(&'a Pod, &'static str)>) {
    let mut evict = Vec::new();
    let mut kept = Vec::new();
    for p in drain_victims(index, node, gpu_only) {
        match kept_because(p).filter(|_| !force) {
            Some(why) => kept.push((p, why)),
            None => evict.push(p),
        }
    }
    if !kept.is_empty() {
        evict.clear();
    }
    (evict, kept)
}

pub(super) fn impact(index: &Index<'_>, node: Sym, gpu_only: bool, force: bool, impact: &mut Impact) {
    let (victims, kept) = split(index, node.clone(), gpu_only, force);
    add_pods(index, &victims, impact);
    impact.kubectl.push(format!("kubectl cordon {node}"));
    if gpu_only {
        impact.kubectl.extend(victims.iter().map(|p| eviction_command(p)));
    } else {
        impact.kubectl.push(format!(
            "kubectl drain {node} --ignore-daemonsets --timeout=300s{}",
            if force { " --force --delete-emptydir-data" } else { "" }
        ));
    }
    if !kept.is_empty() {
        let names: Vec<String> = kept.iter().map(|(p, why)| format!("{} ({why})", p.name)).collect();
        impact.warnings.push(format!(
            "{} pod(s) stop the drain, as they stop kubectl drain: {}; it cordons the node and evicts nothing; f forces them out (--force)",
            kept.len(),
            names.join(", ")
        ));
    }
    let lost: Vec<String> =
        victims.iter().filter_map(|p| kept_because(p).map(|why| format!("{} ({why})", p.name))).collect();
    if !lost.is_empty() {
        impact.warnings.push(format!("forced: {} pod(s) lost: {}", lost.len(), lost.join(", ")));
    }
}

impl Executor {
    /// A drain cancelled half-way: the node stays cordoned (as `kubectl
    /// drain` leaves it), said with how many pods went and how to undo it:
    /// those it evicted (the watch may not show them gone yet) and those
    /// that left on their own.
    fn cancelled_drain(
        &self,
        node: Sym,
        victims: &[PodKey],
        evicted: &[PodKey],
        cordoned_here: bool,
        dry: bool,
    ) -> ActionError {
        let now = self.snapshot();
        let gone = victims
            .iter()
            .filter(|k| {
                evicted.contains(k) || now.pods.get(*k).is_none_or(|p| p.node.as_ref() != Some(&node) || p.terminating)
            })
            .count();
        let prefix = if dry { "dry run: would have " } else { "" };
        let cordon = match (cordoned_here, dry) {
            (true, true) => format!("node/{node} would stay cordoned"),
            (true, false) => format!("node/{node} left cordoned (undo: kubectl uncordon {node})"),
            (false, _) => format!("node/{node} was cordoned before the drain and stays so"),
        };
        ActionError::CancelledAfter(format!("{prefix}{gone} of {} pod(s) evicted or leaving; {cordon}", victims.len()))
    }

    pub(super) async fn drain(
        &self,
        snap: &Snapshot,
        node: Sym,
        gpu_only: bool,
        force: bool,
        dry: bool,
    ) -> Result<String, ActionError> {
        if !snap.nodes.contains_key(&node) {
            return Err(ActionError::NotFound(format!("node {node}")));
        }
        let index = Index::build(snap, snap.clock);
        let (victims, kept) = split(&index, node.clone(), gpu_only, force);
        let victims: Vec<PodKey> = victims.iter().map(|p| p.key()).collect();
        let kept: Vec<String> = kept.iter().map(|(p, why)| format!("{}/{} ({why})", p.namespace, p.name)).collect();
        let cordoned_here = !snap.nodes.get(&node).is_some_and(|n| n.unschedulable);
        if cordoned_here {
            self.backend.set_unschedulable(node.clone(), true, dry).await?;
        }
        if !kept.is_empty() {
            return Err(ActionError::Failed(format!(
                "drain {node}: {}, nothing evicted: {} pod(s) stop it, as they stop kubectl drain: {}; force evicts them, losing them (--force, or f)",
                if dry { "dry run: would be cordoned" } else { "cordoned" },
                kept.len(),
                kept.join(", ")
            )));
        }
        let mut done = Evictions::default();
        match self.evict_all(snap, &victims, dry, &format!("drain {node}"), &mut done).await {
            Err(ActionError::Cancelled) => {
                return Err(self.cancelled_drain(node, &victims, &done.evicted, cordoned_here, dry));
            }
            other => other?,
        }
        let (evicted, left) = (done.evicted.len(), done.blocked);
        let (drained, cordoned, pods) = if dry {
            ("dry run: would be drained", "dry run: would be cordoned", "would be evicted")
        } else {
            ("drained", "cordoned", "evicted")
        };
        let prefix = if dry { "dry run: " } else { "" };
        if left.is_empty() {
            // As kubectl drain: done when the pods are gone, not when the
            // evictions return; then where their replacements run.
            let after = if dry {
                String::new()
            } else {
                match self.pods_gone(snap, node.clone(), &victims).await {
                    Err(ActionError::Cancelled) => {
                        return Err(self.cancelled_drain(node, &victims, &done.evicted, cordoned_here, dry));
                    }
                    other => other?,
                }
            };
            Ok(format!(
                "{prefix}node/{node} {}: {}, {evicted} pod(s) {pods}{}{after}",
                drained.trim_start_matches(prefix),
                cordoned.trim_start_matches(prefix),
                if gpu_only { " (GPU pods only)" } else { "" }
            ))
        } else {
            Err(ActionError::Failed(format!(
                "drain {node}: {cordoned}, {evicted} of {} pod(s) {pods}; {}",
                victims.len(),
                left.join("; ")
            )))
        }
    }

    /// Waits until every evicted pod has left `node` (deleted, or replaced
    /// under its name by a pod with another uid), as `kubectl drain` waits,
    /// within the drain timeout; then names where the replacements their
    /// controllers made run: `; gone, replacements: a-x on gpu-04, b-y pending`.
    async fn pods_gone(&self, seen: &Snapshot, node: Sym, victims: &[PodKey]) -> Result<String, ActionError> {
        let deadline = tokio::time::Instant::now() + self.drain_timeout;
        let uid = |k: &PodKey| seen.pods.get(k).and_then(|p| p.uid);
        let controllers = Controllers::of(seen, victims);
        let mut snapshots = self.snapshots.clone();
        let mut said = usize::MAX;
        loop {
            self.check_cancel()?;
            let now = self.snapshot();
            let still: Vec<&PodKey> = victims
                .iter()
                .filter(|k| now.pods.get(*k).is_some_and(|p| p.node.as_ref() == Some(&node) && p.uid == uid(k)))
                .collect();
            if still.is_empty() {
                let mut replacements: Vec<String> = now
                    .pods
                    .values()
                    .filter(|p| seen.pods.get(&p.key()).is_none_or(|old| old.uid != p.uid))
                    .filter(|p| controllers.made(p))
                    .map(|p| match &p.node {
                        Some(n) => format!("{} on {n}", p.name),
                        None => format!("{} pending", p.name),
                    })
                    .collect();
                replacements.sort();
                return Ok(if replacements.is_empty() {
                    "; all gone, no replacement yet".to_string()
                } else {
                    format!("; all gone, replacements: {}", replacements.join(", "))
                });
            }
            if tokio::time::Instant::now() >= deadline {
                let names: Vec<String> = still.iter().map(|k| k.to_string()).collect();
                return Err(ActionError::Failed(format!(
                    "drain {node}: cordoned, evicted, but after {}s {} pod(s) are still on it (terminating?): {}",
                    self.drain_timeout.as_secs(),
                    still.len(),
                    names.join(", ")
                )));
            }
            if still.len() != said {
                said = still.len();
                self.say(format!("drain {node}: waiting for {said} pod(s) to leave"), false, false).await;
            }
            next_snapshot(&mut snapshots).await;
        }
    }
}
