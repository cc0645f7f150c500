//! A pod the scheduler nominated to a node (`status.nominatedNodeName`): it
//! preempted pods there and waits for them to terminate, holding the room
//! against pods of equal or lower priority. Its verdict is that wait — with
//! the pods it waits for — not a plan to free GPUs by hand.

use std::sync::Arc;

use crate::model::{Pod, Sym};

use super::super::index::Index;
use super::{PendingItem, Step, ns_flag};

/// Preempted pods shown by name; the rest are counted.
const VICTIMS_NAMED: usize = 3;

/// Rewrites the fit step of a nominated pod that kgpu finds no room for.
pub(super) fn apply(index: &Index<'_>, pod: &Pod, item: &mut PendingItem) {
    let Some(node) = pod.nominated.clone() else { return };
    item.nominated_node = Some(node.clone());
    if item.blocking != Some(Step::Fit) {
        return;
    }
    let victims: Vec<&Pod> = index.pods_on(&node).iter().copied().filter(|p| p.terminating).collect();
    let Some(step) = item.steps.iter_mut().find(|s| s.step == Step::Fit) else { return };
    let was = step.summary.clone();
    let mut commands = vec![format!("kubectl get pods -A --field-selector spec.nodeName={node} -o wide")];
    if victims.is_empty() {
        step.summary = format!(
            "the scheduler nominated node {node} for it, but nothing is terminating there: the nomination is stale or another pod took the room; the scheduler retries"
        )
        .into();
        item.unblock = vec![format!(
            "nothing to do by hand yet: the scheduler preempts again or places it elsewhere; {}",
            if index.snap.nodes.contains_key(&node) { "watch its events" } else { "the node is gone" }
        )];
    } else {
        let named = victims
            .iter()
            .take(VICTIMS_NAMED)
            .map(|v| format!("{}/{}", v.namespace, v.name))
            .collect::<Vec<_>>()
            .join(", ");
        let more = victims.len().saturating_sub(VICTIMS_NAMED);
        let more = if more > 0 { format!(" and {more} more") } else { String::new() };
        step.summary = format!(
            "the scheduler preempted for it on {node} and waits for {} pod(s) to terminate: {named}{more}",
            victims.len()
        )
        .into();
        let first = victims[0];
        commands.push(format!(
            "kubectl get pod {} {} -o jsonpath='{{.metadata.deletionTimestamp}} {{.metadata.finalizers}} {{.spec.terminationGracePeriodSeconds}}'",
            ns_flag(&first.namespace),
            first.name
        ));
        item.unblock = vec![terminating_advice(&victims, node)];
    }
    let mut details = vec![format!("kgpu's count while the preempted pods still hold their GPUs: {was}")];
    details.extend(step.details.iter().cloned());
    step.details = Arc::from(details);
    commands.append(&mut step.commands);
    step.commands = commands;
    item.summary = format!("{}: {}", Step::Fit.title(), step.summary);
    // The scheduler already acts for it: no preemption price, no plan.
    item.hints.retain(|h| !h.starts_with("preemption: "));
}

/// What to do while the preempted pods terminate: nothing, unless one hangs.
fn terminating_advice(victims: &[&Pod], node: Sym) -> String {
    let v = victims[0];
    format!(
        "none by hand while they terminate: it is placed on {node} once they are gone; if one hangs in Terminating, see what holds it (finalizers, a long grace period, a kubelet that does not answer): kubectl describe pod {} {}",
        ns_flag(&v.namespace),
        v.name
    )
}
