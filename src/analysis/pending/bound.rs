//! Pods the scheduler bound to a node that cannot start them: the node went
//! NotReady, or was deleted, after the binding. `kubectl get pods` still says
//! Pending, the scheduler has nothing more to say (it placed the pod), so the
//! blocking step is on the node's side.

use crate::model::{Node, Pod, PodPhase, Readiness, Sym, keys};

use super::super::index::Index;
use super::{PendingItem, Step, StepReport, Verdict, ns_flag};

/// Why a bound pod cannot start on its node, if kgpu can tell.
enum NodeTrouble<'a> {
    Gone,
    NotReady(&'a Node),
}

/// Every Pending pod bound to a NotReady or missing node, oldest first.
pub(super) fn items(index: &Index<'_>) -> Vec<PendingItem> {
    let waiting = |p: &&&Pod| p.phase == PodPhase::Pending && !p.terminating && !p.mirror;
    let mut out: Vec<PendingItem> = Vec::new();
    for node in index.nodes().filter(|n| n.readiness != Readiness::Ready) {
        for pod in index.pods_on(node.name).iter().filter(waiting) {
            out.push(item(index, pod, node.name, &NodeTrouble::NotReady(node)));
        }
    }
    for (node, pods) in index.stray_pods() {
        for pod in pods.iter().filter(waiting) {
            out.push(item(index, pod, node, &NodeTrouble::Gone));
        }
    }
    out
}

fn item(index: &Index<'_>, pod: &Pod, node: Sym, trouble: &NodeTrouble<'_>) -> PendingItem {
    let report = |step, verdict, summary: String, details: Vec<String>, commands: Vec<String>| StepReport {
        step,
        verdict,
        summary: summary.into(),
        details: details.into(),
        commands,
        said_by: None,
    };
    let gang = index.gang_of(&pod.key());
    let recreated = if pod.owner.is_some() {
        "its controller then creates a replacement, which the scheduler places elsewhere"
    } else {
        "it has no controller, so nothing recreates it: create it again"
    };
    let (summary, details, unblock) = match trouble {
        NodeTrouble::Gone => (
            format!("bound to {node}, which is no longer in the cluster: nothing will ever start it"),
            vec![format!("the pod garbage collector deletes pods bound to deleted nodes; {recreated}")],
            vec![format!("delete the pod ({recreated})")],
        ),
        NodeTrouble::NotReady(n) => {
            let taint = [keys::TAINT_UNREACHABLE, keys::TAINT_NOT_READY]
                .into_iter()
                .find(|k| n.taints.iter().any(|t| t.key.as_str() == *k))
                .unwrap_or(keys::TAINT_UNREACHABLE);
            let state = match n.readiness {
                Readiness::Unknown => "its kubelet stopped posting status (Ready=Unknown)",
                _ => "its kubelet reports it NotReady",
            };
            (
                format!("bound to {node}, which is NotReady: {state}, so nothing starts the pod there"),
                vec![
                    format!(
                        "the node lifecycle controller evicts it once its toleration for {taint}:NoExecute runs out (300 s unless the pod sets tolerationSeconds); {recreated}"
                    ),
                    format!("until then it holds {} GPU(s) of {node} in the scheduler's books", pod.requests.gpu),
                ],
                vec![format!("bring {node}'s kubelet back, or delete the pod ({recreated})")],
            )
        }
    };
    let steps = vec![
        match pod.queue {
            Some(q) => report(Step::Quota, Verdict::Pass, format!("admitted through {q}"), vec![], vec![]),
            None => {
                report(Step::Quota, Verdict::NotApplicable, "not queued by Kueue or Volcano".into(), vec![], vec![])
            }
        },
        match gang {
            Some(g) => report(
                Step::Gang,
                Verdict::Warn,
                format!("member of {}/{}: the gang cannot run until this pod starts", g.namespace, g.name),
                vec![],
                vec![],
            ),
            None => report(Step::Gang, Verdict::NotApplicable, "not part of a gang".into(), vec![], vec![]),
        },
        report(
            Step::Fit,
            Verdict::Pass,
            format!("the scheduler bound it to {node}"),
            vec![],
            vec![format!("kubectl get pod {} {} -o wide", ns_flag(pod.namespace), pod.name)],
        ),
        report(
            Step::DevicePlugin,
            Verdict::Block,
            summary.clone(),
            details,
            vec![format!("kubectl describe node {node}")],
        ),
    ];
    PendingItem {
        blocking: Some(Step::DevicePlugin),
        summary: format!("{}: {summary}", Step::DevicePlugin.title()),
        steps,
        unblock,
        ..PendingItem::of_pod(pod, index.now)
    }
}
