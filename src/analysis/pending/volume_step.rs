//! The volumes step: a pod's PersistentVolumeClaims exist, are bound or
//! can bind (the volume filters' PreFilters, `analysis::volumes`), and the
//! advice when only its volumes keep it off nodes with room.

use std::sync::Arc;

use crate::model::{Node, Pod};

use super::super::fit::{self, NodeReason};
use super::super::fragmentation::PodVolumes;
use super::super::index::Index;
use super::super::volumes::{self, Refusal, VolumeCheck};
use super::{Step, StepReport, Verdict, ns_flag};
use crate::model::storage::AccessModes;

/// What one claim is, once the PreFilters passed it.
fn claim_state(index: &Index<'_>, namespace: crate::model::Sym, name: &Arc<str>) -> String {
    let Some(c) = volumes::claim(index, namespace, name) else { return format!("{name}: not found") };
    let mut text = match &c.volume {
        Some(v) => format!("{name}: bound to PersistentVolume {v}"),
        None => format!(
            "{name}: binds where the pod lands (class {}, WaitForFirstConsumer)",
            c.class.as_ref().map_or("?", |k| k.as_str())
        ),
    };
    if c.access_modes.has(AccessModes::READ_WRITE_ONCE_POD) {
        text.push_str(", ReadWriteOncePod");
    }
    text
}

/// The step's report: a Block where a PreFilter refuses the pod (`refusal`,
/// from the fit step), else what each claim is; not evaluated where the
/// claims could not be read (`unreadable`, why).
pub(super) fn report(
    index: &Index<'_>,
    pod: &Pod,
    volumes: &PodVolumes,
    refusal: Option<&Refusal>,
    unreadable: Option<&str>,
) -> StepReport {
    let ns = ns_flag(&pod.namespace);
    let claims: Vec<&str> = volumes.claims.iter().map(|c| c.claim.as_ref()).collect();
    let mut commands = vec![format!("kubectl get pvc {ns} {}", claims.join(" "))];
    if let Some(why) = unreadable {
        return StepReport {
            step: Step::Volumes,
            verdict: Verdict::NotApplicable,
            summary: format!("not evaluated: {why}").into(),
            details: vec![format!(
                "its claim(s) {}: the scheduler's volume filters are not evaluated by kgpu without them",
                claims.join(", ")
            )]
            .into(),
            commands,
            said_by: None,
        };
    }
    let Some(refusal) = refusal else {
        let details: Vec<String> =
            volumes.claims.iter().map(|c| claim_state(index, pod.namespace.clone(), &c.claim)).collect();
        return StepReport {
            step: Step::Volumes,
            verdict: Verdict::Pass,
            summary: format!(
                "its {} claim(s) exist and are bound or wait for their first consumer: which nodes can mount them is the fit step's",
                claims.len()
            )
            .into(),
            details: details.into(),
            commands,
            said_by: None,
        };
    };
    let said = refusal.scheduler_text(pod.namespace.clone(), &pod.name);
    let mut details =
        vec![format!("the scheduler's {} PreFilter says \"{said}\": it tries no node until then", refusal.plugin())];
    let (summary, unblock) = match refusal {
        Refusal::ClaimMissing(c) => (
            format!("PersistentVolumeClaim {c} does not exist"),
            format!("create PersistentVolumeClaim {c} in {} (or fix the pod's claimName)", pod.namespace),
        ),
        Refusal::EphemeralNotCreated(c) => (
            format!("its ephemeral volume's claim {c} is not created yet"),
            "check kube-controller-manager's ephemeral-volume controller: it makes the claim".into(),
        ),
        Refusal::EphemeralNotOwned(c) => (
            format!("claim {c} has its ephemeral volume's name but belongs to another pod"),
            format!("delete the stale claim {c}: the controller then makes the pod's own"),
        ),
        Refusal::ClaimLost { claim, volume } => (
            format!("claim {claim} is Lost: its PersistentVolume {volume} was deleted"),
            format!("restore PersistentVolume {volume}, or recreate claim {claim} (its data went with the volume)"),
        ),
        Refusal::ClaimDeleting(c) => (
            format!("claim {c} is being deleted (its pvc-protection finalizer waits for the pods using it)"),
            format!("recreate claim {c} once it is gone, or change the pod to another claim"),
        ),
        Refusal::UnboundImmediate(list) => {
            let list = list.join(", ");
            commands.push(format!("kubectl describe pvc {ns} {}", list.replace(", ", " ")));
            (
                format!("claim(s) {list} bind at once (Immediate) and are not bound"),
                format!(
                    "see claim(s) {list}'s events: no PersistentVolume matches, or the class's provisioner has not made one"
                ),
            )
        }
        Refusal::VolumeMissing { claim, volume } => (
            format!("claim {claim} is bound to PersistentVolume {volume}, which does not exist"),
            format!("restore PersistentVolume {volume}, or recreate claim {claim}"),
        ),
    };
    if let Refusal::ClaimLost { volume, .. } | Refusal::VolumeMissing { volume, .. } = refusal {
        commands.push(format!("kubectl get pv {volume}"));
    }
    details.push(format!("unblock: {unblock}"));
    StepReport {
        step: Step::Volumes,
        verdict: Verdict::Block,
        summary: summary.into(),
        details: details.into(),
        commands,
        said_by: None,
    }
}

/// Advice where only the pod's volumes keep it off nodes that would take
/// it otherwise (`nodes`: each with its first volume reason).
pub(super) fn advice(index: &Index<'_>, check: &VolumeCheck<'_>, nodes: &[(&Node, NodeReason)]) -> Vec<String> {
    let mut out = Vec::new();
    let count = |r: NodeReason| nodes.iter().filter(|(_, x)| *x == r).count();
    if let Some((claim, holder)) = check.in_use.first() {
        out.push(format!(
            "claim {claim} is ReadWriteOncePod and pod {holder} uses it: one pod at a time — let {holder} finish or delete it"
        ));
    }
    let affinity = count(NodeReason::VolumeNodeAffinity);
    if affinity > 0 {
        for (claim, volume) in check.bound.iter().filter_map(|(c, v)| Some((c, (*v)?))) {
            if volume.node_affinity.is_empty() {
                continue;
            }
            let usable = super::claim_step::names(
                index.nodes().filter(|n| fit::affinity_matches(&volume.node_affinity, n)).map(|n| n.name.to_string()),
            );
            let usable = if usable.is_empty() { "none of today's nodes".to_string() } else { usable };
            out.push(format!(
                "claim {}'s PersistentVolume {} is usable only on nodes its nodeAffinity selects ({usable}), which have no room; {affinity} node(s) with room cannot mount it — free room there, or move the data",
                claim.name, volume.name
            ));
            break;
        }
    }
    let unbindable = count(NodeReason::VolumeUnbindable);
    if unbindable > 0 {
        out.push(format!(
            "its WaitForFirstConsumer claim(s) find no Available PersistentVolume usable from {unbindable} node(s) with room, and their class cannot provision there: create a matching PersistentVolume, or use a class with a provisioner"
        ));
    }
    let zone = count(NodeReason::VolumeZone);
    if zone > 0 {
        for (key, values, volume) in check.zones() {
            out.push(format!(
                "its PersistentVolume {volume} is in {key}={}: the {zone} node(s) with room are elsewhere — free room there",
                values.join(" or ")
            ));
        }
    }
    let gone = count(NodeReason::VolumeMissing);
    if gone > 0 {
        out.push("a bound claim's PersistentVolume does not exist: restore it or recreate the claim".into());
    }
    out
}

/// The scheduler's message against a volume PreFilter's refusal: a
/// PreFilter's reason is the whole message, once, without a node count.
pub(super) fn cross_check(item: &mut super::PendingItem, pod: &Pod, refusal: &Refusal) {
    let Some(message) = item.scheduler_message.as_deref() else { return };
    let ours = refusal.scheduler_text(pod.namespace.clone(), &pod.name);
    let theirs = crate::analysis::scheduler_msg::whole_pod_reason(message);
    // 1.19-1.25 counted a PreFilter's reason once per node.
    let counted = crate::analysis::scheduler_msg::parse(message).reasons;
    let counted_alone = matches!(&counted[..], [(reason, _)] if *reason == ours);
    item.scheduler_recognised = Some(theirs.is_some() || !counted.is_empty());
    if theirs == Some(ours.as_str()) || counted_alone {
        item.agrees_with_scheduler = Some(true);
        item.disagreement = None;
    } else {
        item.agrees_with_scheduler = Some(false);
        item.disagreement = Some(format!(
            "scheduler (last attempt): {message}; kgpu (now): {ours} — the claims changed since, or kgpu misreads them"
        ));
    }
}
