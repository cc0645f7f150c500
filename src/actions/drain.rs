//! Drain: cordon, then evict through the Eviction API (PDBs honoured,
//! refusals retried until the drain timeout).

use crate::analysis::index::Index;
use crate::model::{PodKey, Snapshot, Sym};

use super::backend::ActionError;
use super::exec::Executor;
use super::impact::{Impact, add_pods, drain_victims, eviction_command};

pub(super) fn question(node: Sym, gpu_only: bool) -> String {
    format!("Drain node {node}{}?", if gpu_only { " (GPU pods only)" } else { "" })
}

pub(super) fn impact(index: &Index<'_>, node: Sym, gpu_only: bool, impact: &mut Impact) {
    let victims = drain_victims(index, node, gpu_only);
    add_pods(index, &victims, impact);
    impact.kubectl.push(format!("kubectl cordon {node}"));
    if gpu_only {
        impact.kubectl.extend(victims.iter().map(|p| eviction_command(p)));
    } else {
        impact.kubectl.push(format!("kubectl drain {node} --ignore-daemonsets --delete-emptydir-data --timeout=300s"));
    }
    let bare: Vec<String> = victims.iter().filter(|p| p.owner.is_none()).map(|p| p.name.to_string()).collect();
    if !bare.is_empty() {
        impact.warnings.push(format!(
            "{} pod(s) have no controller and will not come back: {}",
            bare.len(),
            bare.join(", ")
        ));
    }
}

impl Executor {
    pub(super) async fn drain(
        &self,
        snap: &Snapshot,
        node: Sym,
        gpu_only: bool,
        dry: bool,
    ) -> Result<String, ActionError> {
        if !snap.nodes.contains_key(&node) {
            return Err(ActionError::NotFound(format!("node {node}")));
        }
        let index = Index::build(snap, snap.clock);
        let victims: Vec<PodKey> = drain_victims(&index, node, gpu_only).iter().map(|p| p.key()).collect();
        if !snap.nodes.get(&node).is_some_and(|n| n.unschedulable) {
            self.backend.set_unschedulable(node, true, dry).await?;
        }
        let (evicted, blocked) = self.evict_all(&victims, dry, &format!("drain {node}")).await?;
        let prefix = if dry { "dry run: " } else { "" };
        if blocked.is_empty() {
            Ok(format!(
                "{prefix}node/{node} drained: cordoned, {evicted} pod(s) evicted{}",
                if gpu_only { " (GPU pods only)" } else { "" }
            ))
        } else {
            Err(ActionError::Failed(format!(
                "drain {node}: cordoned, {evicted} of {} pod(s) evicted; {}",
                victims.len(),
                blocked.join("; ")
            )))
        }
    }
}
