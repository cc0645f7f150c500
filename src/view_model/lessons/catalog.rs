//! One lesson per demo scenario. Questions and answers read the analysis,
//! never the scenario's script: the numbers are the cluster's own, and a
//! lesson whose signal is gone says so instead of inventing it.

use crate::analysis::Analysis;
use crate::analysis::compat::Verdict;
use crate::analysis::fleet::{IssueCode, NodeSummary};
use crate::analysis::gangs::GangSummary;
use crate::analysis::pending::{PendingItem, Step};

use crate::model::time::age;

use super::answers::{self, GONE};
use super::{Cause, Evidence, Lesson};

fn blocked_at(a: &Analysis, step: Step) -> Option<&PendingItem> {
    a.pending.iter().find(|p| p.blocking == Some(step))
}

fn flagged(a: &Analysis, code: IssueCode) -> Option<&NodeSummary> {
    a.nodes.iter().find(|n| n.issues.iter().any(|i| i.code == code))
}

fn issue_detail(n: &NodeSummary, code: IssueCode) -> String {
    n.issues.iter().find(|i| i.code == code).map(|i| i.detail.clone()).unwrap_or_default()
}

fn item_line(p: &PendingItem) -> String {
    let gpus = if p.gpus > 0 { format!(", {} GPUs", p.gpus) } else { String::new() };
    format!("{} ({}{gpus}) has been Pending {}", p.display_name(), p.shape, age(p.age))
}

/// `its 2 pods need 8 free GPUs each, on one node`.
fn per_pod(p: &PendingItem) -> String {
    match p.shape.split_once('×') {
        Some((pods, each)) => format!("its {pods} pod(s) need {each} free GPU(s) each, on one node"),
        None => format!("it needs {}", p.shape),
    }
}

fn with_hint<'a>(p: &'a PendingItem, code: &str) -> Option<&'a String> {
    p.hints.iter().find(|h| h.starts_with(code))
}

pub static LESSONS: &[Lesson] = &[
    Lesson {
        scenario: "default",
        causes: &[Cause::IdleHolders],
        hints: &[
            "Pending work is not the only waste: look at GPUs that are held.",
            "The Usage pane (7) ranks pods by GPU-hours held idle.",
            "tab in the Usage pane groups them by workload: which one would you reclaim first?",
        ],
        evidence: &[Evidence::Pane("Usage")],
        question: |a| {
            format!(
                "{} GPUs are in use and {} pods wait. Which of the GPUs in use do no work, who holds them, and what do they cost?",
                a.totals.allocated,
                a.pending.len()
            )
        },
        answer: |a| {
            let u = &a.utilization;
            let idle: Vec<_> = u.holders.iter().filter(|h| h.is_idle()).collect();
            if idle.is_empty() {
                return vec![GONE.into()];
            }
            let mut lines = vec![format!(
                "{} pods hold {:.2} GPUs under {}% busy: {:.1} GPU-hours held idle so far.",
                idle.len(),
                u.gpus_idle,
                crate::analysis::usage::idle_below_pct(),
                u.idle_gpu_hours
            )];
            for h in idle.iter().take(4) {
                lines.push(format!(
                    "  {} holds {} GPU(s), idle {} = {:.1} GPU-hours",
                    h.pod,
                    crate::view_model::usage::gpus(h.gpus),
                    h.idle_seconds.map_or_else(|| "-".into(), crate::model::time::age),
                    h.idle_gpu_hours
                ));
            }
            lines.push("Reclaim them (stop the notebooks, scale the idle replicas down) or move them to MIG slices; an idle holder is also the cheapest pod for the defrag plan to move.".into());
            lines
        },
    },
    Lesson {
        scenario: "fragmented",
        causes: &[Cause::Fragmentation],
        hints: &[
            "Count the free GPUs per node, not in total.",
            "The pending chain's per-node fit step says how many of the gang's pods fit anywhere.",
            "The Fleet pane's plan says which pods to move to free whole nodes.",
        ],
        evidence: &[Evidence::Chain(Step::Fit), Evidence::Action("run-defrag-plan")],
        question: |a| match blocked_at(a, Step::Fit) {
            Some(p) => {
                format!("{}; {} GPUs are free. Why does it wait, and what do you do?", item_line(p), a.totals.free)
            }
            None => format!("{} GPUs are free. Can the next 2×8 job start?", a.totals.free),
        },
        answer: |a| {
            let f = &a.fragmentation;
            let Some(p) = blocked_at(a, Step::Fit) else { return vec![GONE.into()] };
            let mut lines = vec![
                format!(
                    "{} GPUs are free, but {} of them on whole free nodes; {} are stranded (on nodes no pending shape fits).",
                    f.free_total, f.free_on_whole_nodes, f.stranded_total
                ),
                format!("{}: {}; {}.", p.display_name(), per_pod(p), p.summary),
            ];
            let plan = &f.plan;
            if !plan.steps.is_empty() {
                lines.push(format!(
                    "The plan: {} ({:.1} GPU-hours of work lost: busy time since checkpoint + restart) frees {}; then the gang fits (Fleet pane, `x`; kgpu defrag).",
                    plan.steps_summary(),
                    plan.gpu_hours,
                    plan.nodes_freed.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", ")
                ));
            }
            lines
        },
    },
    Lesson {
        scenario: "plugin-crash",
        causes: &[Cause::DevicePlugin],
        hints: &[
            "Compare what the hardware has with what Kubernetes may allocate, node by node.",
            "The Fleet pane flags a node whose device plugin advertises fewer GPUs than it has.",
            "kubectl get node NODE -o jsonpath='{.status.allocatable}' against its nvidia.com/gpu.count label.",
        ],
        evidence: &[Evidence::Chain(Step::DevicePlugin), Evidence::Node(IssueCode::DevicePluginNotAdvertising)],
        question: |a| match blocked_at(a, Step::DevicePlugin).or_else(|| a.pending.first()) {
            Some(p) => format!(
                "{}. Every node is Ready; the nodes report {} GPUs, {} of them in use. Why can it not start?",
                item_line(p),
                a.totals.gpus,
                a.totals.allocated
            ),
            None => "Every node is Ready. Is every GPU usable?".into(),
        },
        answer: |a| {
            let Some(n) = flagged(a, IssueCode::DevicePluginNotAdvertising) else { return vec![GONE.into()] };
            vec![
                format!("{}: {}.", n.name, issue_detail(n, IssueCode::DevicePluginNotAdvertising)),
                format!(
                    "The scheduler counts allocatable, not hardware: {} of the cluster's {} GPUs cannot be given to any pod, so the gang's last member never fits.",
                    a.totals.unadvertised, a.totals.gpus
                ),
                format!(
                    "Restart the device plugin on {0}: kubectl -n gpu-operator delete pod -l app=nvidia-device-plugin-daemonset --field-selector spec.nodeName={0}",
                    n.name
                ),
            ]
        },
    },
    Lesson {
        scenario: "gang-deadlock",
        causes: &[Cause::GangDeadlock],
        hints: &[
            "Look at how many members of each gang are placed.",
            "Gangs & Queues (3): a partly placed gang holds GPUs it cannot use.",
            "Add up what each holds and what each still needs: can either ever finish?",
        ],
        evidence: &[Evidence::Chain(Step::Gang), Evidence::Action("requeue")],
        question: |a| {
            format!(
                "{} GPUs in the cluster, {} in use, and no training job makes progress. Why, and what do you do?",
                a.totals.gpus, a.totals.allocated
            )
        },
        answer: |a| {
            let stuck: Vec<&GangSummary> = a.gangs.iter().filter(|g| !g.deadlocked_with.is_empty()).collect();
            if stuck.is_empty() {
                return vec![GONE.into()];
            }
            let mut lines: Vec<String> = stuck
                .iter()
                .map(|g| {
                    format!(
                        "{}: {}/{} placed, holding {} GPUs idle, needs {} more; deadlocked with {}.",
                        g.display_name(),
                        g.placed,
                        g.required,
                        g.gpus_held_idle,
                        u64::from(g.required.saturating_sub(g.placed)) * g.gpus_per_pod,
                        g.deadlocked_with.join(", ")
                    )
                })
                .collect();
            let held: u64 = stuck.iter().map(|g| g.gpus_held_idle).sum();
            lines.push(format!(
                "{held} GPUs are held by gangs that can never complete: requeue one (Gangs pane, `R`) so the other finishes, and turn on gang admission (Kueue waitForPodsReady, or Volcano minMember)."
            ));
            lines
        },
    },
    Lesson {
        scenario: "quota-starvation",
        causes: &[Cause::Quota],
        hints: &[
            "Free GPUs are not the only thing a Kueue workload needs.",
            "The pending chain's first step is the queue and its quota.",
            "Gangs & Queues, tab: the ClusterQueue's nominal quota, usage and borrowing limit.",
        ],
        evidence: &[Evidence::Chain(Step::Quota)],
        question: |a| match blocked_at(a, Step::Quota) {
            Some(p) => format!("{}; {} GPUs sit free. Why does it not start?", item_line(p), a.totals.free),
            None => format!("{} GPUs sit free. Can every team use them?", a.totals.free),
        },
        answer: |a| {
            let Some(p) = blocked_at(a, Step::Quota) else { return vec![GONE.into()] };
            let mut lines = vec![format!("{}: {}.", p.display_name(), p.summary)];
            // The ClusterQueue the quota step names.
            let named = |name: &str| {
                let said = format!("ClusterQueue {name}");
                p.summary.match_indices(&said).any(|(i, _)| {
                    !p.summary[i + said.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '-' || c == '.')
                })
            };
            for q in a.queues.iter().filter(|q| q.resource.as_str() == "nvidia.com/gpu" && named(q.name.as_str())) {
                // Kueue: no borrowingLimit means the cohort may lend all it has unused.
                let left = match q.borrowing_limit {
                    Some(limit) => {
                        format!("borrowing limit {limit}: {} left", (q.nominal + limit).saturating_sub(q.used))
                    }
                    None => format!("no borrowing limit: {} left before borrowing", q.nominal.saturating_sub(q.used)),
                };
                lines.push(format!(
                    "ClusterQueue {}: nominal {}, used {}, {left} for the job's {} GPUs.",
                    q.name, q.nominal, q.used, p.gpus
                ));
            }
            lines.push(format!(
                "{} GPUs free elsewhere do not help: raise the quota, allow borrowing from the cohort, or wait for the team's running work to finish.",
                a.totals.free
            ));
            lines.extend(p.unblock.iter().map(|u| format!("unblock: {u}")));
            lines
        },
    },
    Lesson {
        scenario: "taint-mismatch",
        causes: &[Cause::Taint, Cause::NodeSelector],
        hints: &[
            "Two pods, two different mistakes in their specs.",
            "The per-node fit step lists why each node refuses each pod.",
            "A nodeSelector matches labels; it does not request anything.",
        ],
        evidence: &[Evidence::Chain(Step::Fit)],
        question: |a| {
            format!(
                "{} pods are Pending on a cluster with {} free GPUs. What is wrong with them?",
                a.pending.len(),
                a.totals.free
            )
        },
        answer: |a| {
            let mut lines = Vec::new();
            for p in &a.pending {
                let reasons: Vec<String> = p.node_reasons.iter().map(|(r, n)| format!("{r} on {n} node(s)")).collect();
                lines.push(format!("{} ({}): {}.", p.display_name(), p.shape, reasons.join(", ")));
                for code in ["missing-toleration", "gpu-count-in-node-selector"] {
                    if let Some(h) = with_hint(p, code) {
                        lines.push(format!("  {h}"));
                    }
                }
            }
            if lines.is_empty() {
                return vec![GONE.into()];
            }
            lines
        },
    },
    Lesson {
        scenario: "mig-mismatch",
        causes: &[Cause::MigProfile],
        hints: &[
            "A MIG slice is its own resource: nvidia.com/mig-<profile>.",
            "The MIG pane (4) lists which profiles each node offers and a reconfiguration in flight.",
            "A node stuck in mig.config.state=pending does not offer its new profile yet.",
        ],
        // Its story names the fix: repartitioning a node to the profile.
        evidence: &[
            Evidence::Chain(Step::Fit),
            Evidence::Node(IssueCode::MigConfigPending),
            Evidence::Action("repartition-mig"),
        ],
        question: |a| match a.pending.first() {
            Some(p) => format!("{}. The inference pool has free slices. Why does it wait?", item_line(p)),
            None => "The inference pool has free slices. Can every service get one?".into(),
        },
        answer: |a| {
            let mut lines: Vec<String> = a
                .totals
                .mig_slices
                .iter()
                .map(|(profile, (allocatable, allocated))| {
                    format!(
                        "{profile}: {allocatable} offered, {allocated} in use, {} free",
                        allocatable.saturating_sub(*allocated)
                    )
                })
                .collect();
            if let Some(p) = a.pending.first() {
                lines.insert(0, format!("{} needs {}; the slices offered:", p.display_name(), p.shape));
                if let Some(h) = with_hint(p, "mig-profile-not-offered") {
                    lines.push(h.clone());
                }
            }
            if let Some(n) = flagged(a, IssueCode::MigConfigPending) {
                lines.push(format!("{}: {}.", n.name, issue_detail(n, IssueCode::MigConfigPending)));
            }
            lines
        },
    },
    Lesson {
        scenario: "driver-skew",
        causes: &[Cause::DriverCompat],
        hints: &[
            "Which CUDA version does each workload need, and which driver does its node run?",
            "The Drivers pane (5) crosses driver versions with CUDA needs.",
            "A CUDA 12.8 build needs a driver of the 570 branch or later.",
        ],
        evidence: &[Evidence::Pane("Drivers")],
        question: |a| {
            format!(
                "The fleet is half-way through a driver rollout ({} nodes on the upgrade board). Some new pods crash at start. Why, and what do you do first?",
                a.upgrades.len()
            )
        },
        answer: |a| {
            let mut lines: Vec<String> = a
                .matrix
                .cells
                .iter()
                .filter(|c| c.verdict == Verdict::Incompatible && c.placed.count > 0)
                .map(|c| {
                    format!(
                        "CUDA {} on driver {}: {} pod(s) placed there cannot start ({}).",
                        c.cuda, c.driver, c.placed.count, c.reason
                    )
                })
                .collect();
            if lines.is_empty() {
                return vec![GONE.into()];
            }
            for u in a.upgrades.iter().filter(|u| u.stuck) {
                lines.push(format!(
                    "{} is stuck in {} for {}.",
                    u.node,
                    u.state_str(),
                    u.seconds_in_state.map_or_else(|| "-".into(), crate::model::time::age)
                ));
            }
            lines.push("Keep CUDA 12.8 pods off the old driver (a nodeSelector on the driver label, or finish the wave), and unstick the wave's node before going on.".into());
            lines
        },
    },
    Lesson {
        scenario: "black-hole",
        causes: &[Cause::BlackHole],
        hints: &[
            "A node can be Ready and still run nothing.",
            "Events (6): the same admission error, again and again, on one node.",
            "The emptiest node is where the scheduler sends each new pod.",
        ],
        evidence: &[Evidence::Node(IssueCode::BlackHole), Evidence::Action("cordon")],
        question: |a| {
            format!(
                "Every node is Ready and {} GPUs are free, yet GPU pods keep failing and being replaced. Where do they go, and what do you do?",
                a.totals.free
            )
        },
        answer: |a| {
            let Some(n) = flagged(a, IssueCode::BlackHole) else { return vec![GONE.into()] };
            vec![
                format!("{}: {}.", n.name, issue_detail(n, IssueCode::BlackHole)),
                format!(
                    "It advertises {} GPUs, so the scheduler keeps choosing it; its {} GPUs are counted unavailable, not free.",
                    n.gpu_allocatable, n.buckets.unavailable
                ),
                format!(
                    "Cordon {} (Fleet pane, `c`) so new pods land elsewhere, then repair its device plugin.",
                    n.name
                ),
            ]
        },
    },
    Lesson {
        scenario: "topology-split",
        causes: &[Cause::Topology],
        hints: &[
            "Where did each member of the tensor-parallel server land?",
            "Gangs & Queues (3), enter on the gang: the nodes it spans.",
            "Tensor parallelism wants one NVLink domain: was there a node with room for all of it?",
        ],
        evidence: &[Evidence::SplitGang],
        question: |_| {
            "A tensor-parallel inference server runs, but much slower than it did on the bench. What is wrong with its placement?"
                .into()
        },
        answer: |a| {
            let Some(g) = a.gangs.iter().find(|g| g.topology_split) else { return vec![GONE.into()] };
            let spread: Vec<String> = g.nodes.iter().map(|(n, gpus)| format!("{gpus} GPUs on {n}")).collect();
            vec![
                format!("{} ({}×{} GPUs) is spread: {}.", g.display_name(), g.required, g.gpus_per_pod, spread.join(", ")),
                g.topology_note().unwrap_or_default(),
                "Its all-reduce crosses the network instead of NVLink: requeue it with a required podAffinity or a topology-aware scheduler (Kueue TAS, Volcano network topology) so it lands on one node.".into(),
            ]
        },
    },
    Lesson {
        scenario: "idle-holders",
        causes: &[Cause::IdleHolders],
        hints: &[
            "Allocated is not the same as used.",
            "The Usage pane (7) ranks the pods by GPU-hours held idle.",
            "Look for a node where every holder is idle: reclaiming them frees it whole.",
        ],
        evidence: &[Evidence::Pane("Usage")],
        question: answers::idle_holders_question,
        answer: answers::idle_holders_answer,
    },
    Lesson {
        scenario: "driver-canary",
        causes: &[Cause::DriverRollout],
        hints: &[
            "The upgrade board (Drivers pane, 5) lists every node's upgrade state.",
            "A failed canary means the target is bad on this hardware until you know why.",
            "What did the other nodes run before? That is what a rollback sets back.",
        ],
        evidence: &[Evidence::Pane("Drivers"), Evidence::Node(IssueCode::UpgradeFailed)],
        question: answers::driver_canary_question,
        answer: answers::driver_canary_answer,
    },
    Lesson {
        scenario: "fair-share",
        causes: &[Cause::FairShare],
        hints: &[
            "Compare each ClusterQueue's use with its nominal quota (Queues, pane 3).",
            "Quota left idle in a cohort is lent: who borrowed it?",
            "Kueue takes lent quota back only when the queue that lent it may reclaim it.",
        ],
        evidence: &[Evidence::Chain(Step::Quota)],
        question: answers::fair_share_question,
        answer: answers::fair_share_answer,
    },
    Lesson {
        scenario: "preemption-cost",
        causes: &[Cause::Preemption],
        hints: &[
            "Who would the scheduler evict, and how much work have they done since their last checkpoint?",
            "The pending chain's hints price the preemption (Pending pane, enter).",
            "A gang member's eviction restarts the whole gang.",
        ],
        evidence: &[Evidence::Chain(Step::Fit)],
        question: answers::preemption_question,
        answer: answers::preemption_answer,
    },
    Lesson {
        scenario: "spot-breakeven",
        causes: &[Cause::Spot],
        hints: &[
            "How often are the spot nodes replaced? Look at their ages.",
            "A gang restarts when any of its nodes is preempted: multiply by its nodes.",
            "The gang's detail (Gangs pane 3, enter) works out what it loses per hour.",
        ],
        evidence: &[Evidence::SpotGang],
        question: answers::spot_question,
        answer: answers::spot_answer,
    },
    Lesson {
        scenario: "mig-vs-timeslicing",
        causes: &[Cause::TimeSlicing],
        hints: &[
            "Compare what a pod gets on a MIG slice and on a time-sliced replica: memory, compute, faults.",
            "The Fleet pane flags a time-sliced node whose GPUs' memory is nearly full.",
            "How much GPU memory does each service's pod use, and which slice holds that?",
        ],
        evidence: &[Evidence::Node(IssueCode::SharedMemoryFull)],
        question: answers::sharing_question,
        answer: answers::sharing_answer,
    },
    Lesson {
        scenario: "dra-claims",
        causes: &[Cause::Dra],
        hints: &[
            "Some nodes advertise no nvidia.com/gpu, yet the header counts their GPUs: where do they come from?",
            "The pending pod asks through a ResourceClaim: open its chain (Pending pane 2, enter).",
            "Compare the claim's selector with what the ResourceSlices publish (kubectl get resourceslices -o yaml).",
        ],
        evidence: &[Evidence::Chain(Step::Claims)],
        question: answers::dra_question,
        answer: answers::dra_answer,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_lesson_has_hints_a_cause_and_evidence() {
        for l in LESSONS {
            assert!(l.hints.len() >= 3, "{}", l.scenario);
            assert!(!l.causes.is_empty() && !l.evidence.is_empty(), "{}", l.scenario);
        }
    }
}
