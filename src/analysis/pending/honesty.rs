//! Where kgpu's model ends. kgpu never says "nothing blocks it" while the
//! component that decides says otherwise — unless it can name the change
//! since that verdict that explains the difference (a node that came, a
//! pod that finished). Otherwise the headline is the component's reason,
//! as the `scheduler` step, with whose word it is, what kgpu does not
//! model of it, and the kubectl that checks it.

use std::sync::Arc;

use crate::model::{Pod, Sym, Timestamp};

use super::super::index::Index;
use super::super::scheduler_msg::{self, Said};
use super::fit_step::FitResult;
use super::{Memo, PendingItem, Step, StepReport, Verdict, VerdictSource, ns_flag};
use crate::reference::scheduler as vocabulary;

/// A pod that finished on a node: room freed at that time.
#[derive(Clone, Debug)]
pub(super) struct Finished {
    at: Timestamp,
    node: Sym,
    pod: Arc<str>,
}

/// Finished pods bound to a node, newest first.
fn finished(index: &Index<'_>) -> Vec<Finished> {
    let mut out: Vec<Finished> = index
        .snap
        .pods
        .values()
        .filter(|p| p.phase.is_terminal())
        .filter_map(|p| Some(Finished { at: p.transitioned, node: p.node.clone()?, pod: p.name.clone() }))
        .collect();
    out.sort_by_key(|f| std::cmp::Reverse(f.at));
    out
}

/// What changed since the scheduler's verdict at `said_at` that explains
/// why kgpu now finds room, if kgpu can name it.
fn change_since<'a>(
    index: &Index<'a>,
    memo: &mut Memo<'a>,
    said_at: Option<Timestamp>,
    then_nodes: Option<u32>,
    fit: &FitResult,
) -> Option<String> {
    if let Some(then) = then_nodes
        && then != fit.total_nodes
    {
        return Some(format!("its last attempt saw {then} node(s), kgpu sees {} now", fit.total_nodes));
    }
    let at = said_at?;
    // The newest node, found once: asked for every pending pod.
    let newest = *memo.newest_node.get_or_insert_with(|| index.nodes().max_by_key(|n| n.created));
    if let Some(node) = newest.filter(|n| n.created > at) {
        return Some(format!("node {} joined after its last attempt", node.name));
    }
    let finished = memo.finished.get_or_insert_with(|| finished(index));
    finished
        .first()
        .filter(|f| f.at > at)
        .map(|f| format!("pod {} finished on {} after its last attempt, freeing what it held", f.pod, f.node))
}

/// Applies the honesty rule to an item kgpu found nothing in the way of.
pub(super) fn defer_to_the_cluster<'a>(
    index: &Index<'a>,
    memo: &mut Memo<'a>,
    item: &mut PendingItem,
    pod: Option<&Pod>,
    fit: &FitResult,
) {
    if item.blocking.is_some() {
        return;
    }
    let Some(pod) = pod else { return };
    let describe = format!("kubectl describe pod {} {}", ns_flag(&pod.namespace), pod.name);
    let events = format!(
        "kubectl get events {} --field-selector involvedObject.name={},reason=FailedScheduling",
        ns_flag(&pod.namespace),
        pod.name
    );
    // Another scheduler places it: kgpu models kube-scheduler's filters only.
    if let Some(name) = pod.scheduler.as_ref().filter(|s| s.as_str() != "default-scheduler") {
        let said = item.scheduler_message.clone();
        let source = if name.as_str() == "volcano" { VerdictSource::Volcano } else { VerdictSource::Scheduler };
        let summary = match &said {
            Some(m) => format!("scheduled by '{name}' (spec.schedulerName), not kube-scheduler; it says: {m}"),
            None => format!(
                "scheduled by '{name}' (spec.schedulerName), not kube-scheduler: kgpu does not model it, and it has said nothing about this pod — is '{name}' running?"
            ),
        };
        let details = vec![
            format!(
                "kgpu's model of kube-scheduler's filters finds room, but '{name}' decides where this pod goes (KAI, Volcano, a custom scheduler): its own rules are not evaluated by kgpu"
            ),
            format!(
                "unblock: check that '{name}' runs and what it logs; or drop spec.schedulerName to use default-scheduler"
            ),
        ];
        block(
            item,
            summary,
            details,
            vec![events, describe, "kubectl get pods -A -o wide | grep -i scheduler".into()],
            source,
        );
        return;
    }
    let Some(message) = item.scheduler_message.clone() else { return };
    let said_at = memo.scheduler_said_at(index.snap, pod);
    match scheduler_msg::read(&message) {
        Said::Scheduler(parsed) if !parsed.reasons.is_empty() => {
            if let Some(change) = change_since(index, memo, said_at, parsed.total_nodes, fit) {
                item.summary = format!(
                    "nothing blocks it now: the scheduler said \"{}\", but {change}; it should place it on its next attempt",
                    message.trim()
                );
                return;
            }
            let mut details: Vec<String> = parsed
                .reasons
                .iter()
                .map(|(reason, count)| match (vocabulary::lookup(reason), evaluated(reason, pod, fit)) {
                    (Some(r), true) => format!("{count} × {reason} — {} ({}), modelled by kgpu", r.meaning, r.plugin),
                    (Some(r), false) if modelled(reason) && !from_default_constraints(reason, pod) => format!(
                        "{count} × {reason} — {} ({}): {}: not evaluated by kgpu",
                        r.meaning,
                        r.plugin,
                        fit.inter_pod_unreadable.as_deref().unwrap_or("not evaluated for this pod")
                    ),
                    (Some(r), false) if modelled(reason) => format!(
                        "{count} × {reason} — {} ({}): the pod has no DoNotSchedule spread constraint, so the scheduler's profile adds one (defaultConstraints in its KubeSchedulerConfiguration), which kgpu cannot see: not evaluated by kgpu",
                        r.meaning, r.plugin
                    ),
                    (Some(r), false) => format!(
                        "{count} × {reason} — {} ({}, Kubernetes {}): not evaluated by kgpu",
                        r.meaning, r.plugin, r.versions
                    ),
                    (None, _) => format!("{count} × {reason} — a reason kgpu does not know: not evaluated"),
                })
                .collect();
            details.push(
                "kgpu's own model (resources, taints, selectors and affinity, cordons, readiness) finds room: the scheduler weighs what kgpu does not, or the cluster changed in a way kgpu cannot name".into(),
            );
            let commands: Vec<String> = std::iter::once(events)
                .chain(std::iter::once(describe))
                .chain(
                    parsed
                        .reasons
                        .iter()
                        .filter(|(r, _)| !evaluated(r, pod, fit))
                        .filter_map(|(r, _)| vocabulary::lookup(r))
                        .flat_map(|r| r.check.split("; "))
                        .map(|c| c.replace("NS", pod.namespace.as_str()).replace("POD", &pod.name)),
                )
                .collect();
            let summary = format!("the scheduler says: {}", message.trim());
            block(item, summary, details, dedup(commands), VerdictSource::Scheduler);
        }
        // 1.26+: a PreFilter rejection is the whole message, once, without a count.
        Said::Unrecognised if let Some(r) = prefilter(&message) => {
            let summary = format!("the scheduler says: {}", message.trim());
            let details = vec![format!(
                "{} — {} ({}, Kubernetes {}): a whole-pod check before any node, not evaluated by kgpu",
                r.text, r.meaning, r.plugin, r.versions
            )];
            let checks = r.check.split("; ").map(|c| c.replace("NS", pod.namespace.as_str()).replace("POD", &pod.name));
            let commands = dedup(std::iter::once(events).chain(std::iter::once(describe)).chain(checks).collect());
            block(item, summary, details, commands, VerdictSource::Scheduler);
        }
        Said::Unrecognised => {
            let summary = format!("the scheduler says (in words kgpu does not parse): {}", message.trim());
            let details =
                vec!["not evaluated by kgpu: its model finds room, the scheduler's message says otherwise".into()];
            block(item, summary, details, vec![events, describe], VerdictSource::Scheduler);
        }
        Said::Gang(_) => {
            let summary = format!("Volcano says: {}", message.trim());
            let details = vec!["not evaluated by kgpu: its model finds room for the gang, Volcano does not".into()];
            block(item, summary, details, vec![events, describe], VerdictSource::Volcano);
        }
        // "0/N nodes are available" with no reason, or Kueue's word (its step).
        Said::Scheduler(_) | Said::Quota(_) => {}
    }
}

/// Whether kgpu's fit model evaluates this scheduler reason.
fn modelled(reason: &str) -> bool {
    scheduler_msg::reason_code(reason).is_some()
}

/// [`modelled`], for this pod: a spread reason for a pod with no hard
/// spread constraint of its own comes from the scheduler's configuration;
/// nor is an inter-pod reason evaluated where kgpu cannot read the
/// namespaces its rules select (`fit.inter_pod_unreadable`).
fn evaluated(reason: &str, pod: &Pod, fit: &FitResult) -> bool {
    modelled(reason)
        && !from_default_constraints(reason, pod)
        && !(inter_pod(reason) && fit.inter_pod_unreadable.is_some())
}

fn spread(reason: &str) -> bool {
    scheduler_msg::reason_code(reason).is_some_and(|c| c.starts_with("topology-spread"))
}

fn inter_pod(reason: &str) -> bool {
    spread(reason)
        || scheduler_msg::reason_code(reason)
            .is_some_and(|c| matches!(c.as_str(), "pod-affinity" | "pod-anti-affinity" | "existing-anti-affinity"))
}

/// A spread reason for a pod without a DoNotSchedule constraint of its own.
fn from_default_constraints(reason: &str, pod: &Pod) -> bool {
    spread(reason) && pod.rules.as_ref().is_none_or(|r| r.spread.is_empty())
}

/// The PreFilter reason a message carries alone (`0/4 nodes are available:
/// pod has unbound immediate PersistentVolumeClaims. preemption: …`).
fn prefilter(message: &str) -> Option<&'static vocabulary::Reason> {
    vocabulary::lookup(scheduler_msg::whole_pod_reason(message)?)
        .filter(|r| r.scope == "prefilter" || r.scope == "whole-pod")
}

fn dedup(mut commands: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    commands.retain(|c| seen.insert(c.clone()));
    commands
}

/// The deciding component's word becomes the blocking step and the headline.
fn block(item: &mut PendingItem, summary: String, details: Vec<String>, commands: Vec<String>, by: VerdictSource) {
    let step = StepReport {
        step: Step::Scheduler,
        verdict: Verdict::Block,
        summary: summary.clone().into(),
        details: details.into(),
        commands,
        said_by: Some(by),
    };
    item.blocking = Some(Step::Scheduler);
    item.verdict_source = by;
    item.summary = format!("{}: {summary}", Step::Scheduler.title());
    item.steps.push(step);
    if item.unblock.is_empty() {
        item.unblock.push(match by {
            VerdictSource::Scheduler if item.scheduler_message.is_some() => {
                "what the scheduler names (kgpu does not model it): see its message and the commands above".into()
            }
            _ => "see the scheduler's own word above; kgpu cannot tell what would unblock it".into(),
        });
    }
}
