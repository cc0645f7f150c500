//! Pods the scheduler bound to a node that cannot start them: the node went
//! NotReady, or was deleted, after the binding; or, on a Ready node, the
//! GPU pod's containers do not start (its image, the NVIDIA container
//! runtime's CUDA requirement, a crash loop). `kubectl get pods` still says
//! Pending (or Running, for a crash loop), the scheduler has nothing more to
//! say (it placed the pod), so the blocking step is on the node's side.

use crate::model::{Node, Pod, PodPhase, Readiness, Sym, keys};

use super::super::index::Index;
use super::compute_domain::{self, DomainWait};
use super::{PendingItem, Step, StepReport, Verdict, ns_flag};

/// Why a bound pod cannot start on its node, if kgpu can tell.
enum NodeTrouble<'a> {
    Gone,
    NotReady(&'a Node),
    /// Its node is Ready; a container waits with this reason (the kubelet's
    /// `state.waiting.reason`, or the pod's own `status.reason`).
    Start(&'a Node, Sym),
    /// The node's kubelet refused it at admission (the pod Failed with this
    /// reason), and no pod of its controller runs: `refused` GPU pods of
    /// the same controller were refused there in the black-hole window.
    Refused(&'a Node, Sym, usize),
    /// Its channel claim waits for the node to be Ready in its ComputeDomain.
    Domain(DomainWait<'a>),
}

/// Why a kubelet fails a pod at admission: its device manager could not
/// allocate (a device plugin that fails every Allocate), or a resource it
/// no longer has (`OutOfnvidia.com/gpu`, `OutOfcpu`…).
fn refused_at_admission(reason: &str) -> bool {
    reason == "UnexpectedAdmissionError" || reason.starts_with("OutOf")
}

/// The window a refusal counts in: the black-hole check's.
const REFUSALS_WINDOW: i64 = 3600;

/// Waiting reasons that are a container starting, not failing to.
const STARTING: [&str; 2] = ["ContainerCreating", "PodInitializing"];

/// Every Pending pod bound to a NotReady or missing node, oldest first.
pub(super) fn items(index: &Index<'_>) -> Vec<PendingItem> {
    let waiting = |p: &&&Pod| p.phase == PodPhase::Pending && !p.terminating && !p.mirror;
    let mut out: Vec<PendingItem> = Vec::new();
    for node in index.nodes().filter(|n| n.readiness != Readiness::Ready) {
        for pod in index.pods_on(&node.name).iter().filter(waiting) {
            out.push(item(index, pod, node.name.clone(), &NodeTrouble::NotReady(node)));
        }
    }
    for (node, pods) in index.stray_pods() {
        for pod in pods.iter().filter(waiting) {
            out.push(item(index, pod, node.clone(), &NodeTrouble::Gone));
        }
    }
    // GPU pods placed on a Ready node whose containers do not start: GPU
    // demand that is not served, though the scheduler is done with it.
    for node in index.nodes().filter(|n| n.readiness == Readiness::Ready) {
        for pod in index.pods_on(&node.name) {
            let not_started = matches!(pod.phase, PodPhase::Pending | PodPhase::Running)
                && !pod.terminating
                && !pod.mirror
                && pod.wants_gpu();
            if let Some(reason) = pod.reason.clone().filter(|r| not_started && !STARTING.contains(&r.as_str())) {
                out.push(item(index, pod, node.name.clone(), &NodeTrouble::Start(node, reason)));
            }
        }
    }
    out.extend(refused(index));
    // A container that fails otherwise is the start step's (above).
    let starting = |p: &Pod| p.reason.as_ref().is_none_or(|r| STARTING.contains(&r.as_str()));
    for wait in compute_domain::waits(index).into_iter().filter(|w| starting(w.pod)) {
        let node = wait.node.name.clone();
        out.push(item(index, wait.pod, node, &NodeTrouble::Domain(wait)));
    }
    out
}

/// GPU pods a Ready node's kubelet refused at admission, the newest of each
/// controller (or each bare pod) that has nothing running: GPU demand the
/// cluster keeps failing to serve. A ReplicaSet replaces each refused pod
/// at once, and the scheduler sends the new one back while the node looks
/// the emptiest: the black hole.
fn refused(index: &Index<'_>) -> Vec<PendingItem> {
    use std::collections::BTreeMap;
    // (namespace, owner kind, owner name, or the pod's own name) → (newest, node, count).
    let mut newest: BTreeMap<(Sym, Sym, String), (&Pod, &Node, usize)> = BTreeMap::new();
    for node in index.nodes().filter(|n| n.readiness == Readiness::Ready) {
        for pod in index.failed_on(&node.name).iter().copied() {
            let refused = pod.reason.as_ref().is_some_and(|r| refused_at_admission(r.as_str()));
            if !refused || !pod.wants_gpu() || index.now - pod.transitioned > REFUSALS_WINDOW {
                continue;
            }
            let key = match &pod.owner {
                Some(o) => (pod.namespace.clone(), o.kind.clone(), o.name.to_string()),
                None => (pod.namespace.clone(), Sym::new("Pod"), pod.name.to_string()),
            };
            let slot = newest.entry(key).or_insert((pod, node, 0));
            slot.2 += 1;
            if (pod.transitioned, &pod.name) > (slot.0.transitioned, &slot.0.name) {
                (slot.0, slot.1) = (pod, node);
            }
        }
    }
    if newest.is_empty() {
        return Vec::new();
    }
    // Served after all: a pod of the same controller runs, or waits to be
    // placed (then the ordinary chain speaks for it). One walk for all.
    let running = index.nodes().flat_map(|n| index.pods_on(&n.name).iter()).filter(|p| p.phase == PodPhase::Running);
    let served: std::collections::HashSet<(Sym, Sym, String)> = index
        .pending_pods()
        .iter()
        .chain(running)
        .filter_map(|p| p.owner.as_ref().map(|o| (p.namespace.clone(), o.kind.clone(), o.name.to_string())))
        .collect();
    newest
        .into_iter()
        .filter(|(key, _)| key.1.as_str() == "Pod" || !served.contains(key))
        .filter_map(|(_, (pod, node, count))| {
            let reason = pod.reason.clone()?;
            Some(item(index, pod, node.name.clone(), &NodeTrouble::Refused(node, reason, count)))
        })
        .collect()
}

/// The node affinity that keeps a pod needing `condition` (`cuda>=12.8`) on
/// drivers that provide it, from CUDA's Table 3, where kgpu knows the version.
fn affinity_for(condition: &str) -> String {
    let needed = condition
        .strip_prefix("cuda>=")
        .and_then(crate::model::CudaVersion::parse)
        .and_then(|cuda| crate::reference::cuda::tables().native_min_driver(cuda));
    match needed {
        Some(row) => format!(
            "a required node affinity `{} Gt {}` ({} needs driver {} or newer)",
            keys::DRIVER_MAJOR,
            row.min_driver.major.saturating_sub(1),
            row.release,
            row.min_driver
        ),
        None => format!("a required node affinity on {} for a new enough branch", keys::DRIVER_MAJOR),
    }
}

/// What a container that does not start says, in words, with what would
/// unblock it: (summary, details, unblock).
fn start_trouble(pod: &Pod, node: &Node, reason: Sym) -> (String, Vec<String>, Vec<String>) {
    let message = pod.message.as_deref().unwrap_or("").trim();
    // One line: the runtime's error carries the hook's stderr on a second one.
    let said = if message.is_empty() { String::new() } else { format!(": {}", message.replace('\n', " ")) };
    let recreate = if pod.owner.is_some() {
        "then delete the pod so that its controller creates it again"
    } else {
        "then create it again (it has no controller)"
    };
    // The NVIDIA container runtime's hook checks the image's NVIDIA_REQUIRE_CUDA.
    let cuda =
        message.split("unsatisfied condition: ").nth(1).map(|rest| rest.split(',').next().unwrap_or(rest).trim());
    if let Some(condition) = cuda.filter(|_| message.contains("nvidia-container-cli")) {
        let driver =
            node.gpu.driver.as_ref().map_or_else(|| "an unknown driver".to_string(), |d| format!("driver {d}"));
        return (
            format!(
                "the NVIDIA container runtime refuses to start it on {}: the image needs {condition} and {} runs {driver}",
                node.name, node.name
            ),
            vec![
                format!("the kubelet says {reason}{said}"),
                "the image's NVIDIA_REQUIRE_CUDA is checked when the container starts, after the scheduler placed it: the scheduler does not know a node's driver".into(),
            ],
            vec![format!(
                "keep it on nodes whose driver provides {condition}: {}, or finish the driver upgrade of {} (Drivers pane); {recreate}",
                affinity_for(condition),
                node.name
            )],
        );
    }
    let (summary, unblock) = match reason.as_str() {
        "ErrImagePull" | "ImagePullBackOff" | "InvalidImageName" | "ErrImageNeverPull" => (
            format!("its image cannot be pulled on {} ({reason})", node.name),
            format!("fix the image name or tag, or its pull secret (imagePullSecrets); {recreate}"),
        ),
        "CrashLoopBackOff" => (
            format!(
                "its container keeps exiting on {} (CrashLoopBackOff): it holds its GPUs and does no work",
                node.name
            ),
            format!(
                "read why it exits (kubectl logs --previous); if {} reports Xid errors (Fleet pane), the GPU may be the cause: cordon and drain it",
                node.name
            ),
        ),
        "CreateContainerConfigError" => (
            format!("its container cannot be configured on {} (CreateContainerConfigError)", node.name),
            format!("create the Secret or ConfigMap it names, or fix the reference; {recreate}"),
        ),
        _ => (
            format!("its container does not start on {} ({reason})", node.name),
            format!("read the kubelet's events for the pod; {recreate}"),
        ),
    };
    (summary, vec![format!("the kubelet says {reason}{said}")], vec![unblock])
}

/// A refusal at admission in words, with what would unblock it.
fn refusal(index: &Index<'_>, pod: &Pod, node: &Node, reason: Sym, count: usize) -> (String, Vec<String>, Vec<String>) {
    let message = pod.message.as_deref().unwrap_or("").trim().replace('\n', " ");
    let said = if message.is_empty() { String::new() } else { format!(": {message}") };
    let again = match &pod.owner {
        Some(o) => format!(
            "{count} pod(s) of {} {} refused there in the last hour; each is replaced, and the scheduler sends the new one back while {} looks the emptiest",
            o.kind, o.name, node.name
        ),
        None => "it has no controller: nothing creates it again".to_string(),
    };
    let black_hole = index.is_black_hole(node);
    let summary = format!(
        "{}'s kubelet refused it at admission ({reason}){}",
        node.name,
        if black_hole { ": the node is a black hole, its device plugin fails every allocation" } else { "" }
    );
    let stop = if node.unschedulable {
        format!("{} is cordoned: the next replacement lands elsewhere", node.name)
    } else {
        format!("cordon {} (kubectl cordon {}) so the next replacement lands elsewhere", node.name, node.name)
    };
    let unblock = vec![format!(
        "{stop}; then read why its device plugin refuses (its pod's log), restart it or the node, then uncordon it and watch that the next GPU pod sent there starts"
    )];
    (summary, vec![format!("the kubelet says {reason}{said}"), again], unblock)
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
    let mut domain_commands = Vec::new();
    let (summary, details, unblock) = match trouble {
        NodeTrouble::Domain(wait) => {
            let (summary, details, unblock, commands) = compute_domain::words(wait);
            domain_commands = commands;
            (summary, details, unblock)
        }
        NodeTrouble::Start(n, reason) => start_trouble(pod, n, reason.clone()),
        NodeTrouble::Refused(n, reason, count) => refusal(index, pod, n, reason.clone(), *count),
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
    let mut steps = vec![
        match pod.queue.clone() {
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
            vec![format!("kubectl get pod {} {} -o wide", ns_flag(&pod.namespace), pod.name)],
        ),
    ];
    let ns = ns_flag(&pod.namespace);
    let blocking = match trouble {
        NodeTrouble::Refused(..) => {
            steps.push(report(
                Step::DevicePlugin,
                Verdict::Block,
                summary.clone(),
                details,
                vec![
                    format!("kubectl get events {ns} --field-selector involvedObject.name={},type=Warning", pod.name),
                    format!("kubectl get pods -A --field-selector spec.nodeName={node},status.phase=Failed"),
                ],
            ));
            Step::DevicePlugin
        }
        NodeTrouble::Domain(wait) => {
            // In the chain's order: the claims come before the fit.
            let at = steps.iter().position(|s| s.step == Step::Fit).unwrap_or(steps.len());
            steps.insert(
                at,
                report(
                    Step::Claims,
                    Verdict::Pass,
                    format!("its claims are allocated on {node}"),
                    vec![],
                    vec![format!("kubectl get resourceclaim {ns} {}", wait.claim.name)],
                ),
            );
            steps.push(report(Step::Start, Verdict::Block, summary.clone(), details, domain_commands));
            Step::Start
        }
        NodeTrouble::Start(..) => {
            steps.push(report(
                Step::DevicePlugin,
                Verdict::Pass,
                format!("{node} is Ready and took the pod"),
                vec![],
                vec![],
            ));
            let mut commands = vec![
                format!("kubectl describe pod {ns} {}", pod.name),
                format!("kubectl get events {ns} --field-selector involvedObject.name={},type=Warning", pod.name),
            ];
            if pod.reason.as_ref().is_some_and(|r| r.as_str() == "CrashLoopBackOff") {
                commands.push(format!("kubectl logs {ns} {} --previous", pod.name));
            }
            steps.push(report(Step::Start, Verdict::Block, summary.clone(), details, commands));
            Step::Start
        }
        _ => {
            steps.push(report(
                Step::DevicePlugin,
                Verdict::Block,
                summary.clone(),
                details,
                vec![format!("kubectl describe node {node}")],
            ));
            Step::DevicePlugin
        }
    };
    PendingItem {
        blocking: Some(blocking),
        summary: format!("{}: {summary}", blocking.title()),
        steps,
        unblock,
        ..PendingItem::of_pod(pod, index.now)
    }
}
