//! The text blocks the cockpit shows beside or over a table: the pending
//! item's isolation chain, a node's and a matrix cell's details, the
//! fragmentation panel. Built here from the analysis, drawn as they are by
//! the ui, and read by tests without a terminal.

use crate::analysis::compat::{self, Matrix, Sample};
use crate::analysis::fragmentation::{Fragmentation, PlanStatus, ShapeSource};
use crate::analysis::gangs::GangState;
use crate::analysis::pending::{PendingItem, Step, Verdict};
use crate::model::Sym;
use crate::model::time::age;

use super::panes::Views;
use super::style::{Doc, Role};

/// The role of the step that blocks a pending item (none: nothing blocks).
pub fn blocking_role(step: Option<Step>) -> Role {
    match step {
        Some(Step::Quota | Step::AdmissionCheck | Step::Scheduler) => Role::Warn,
        Some(Step::Gang | Step::DevicePlugin | Step::Start) => Role::Error,
        Some(Step::Fit | Step::Claims | Step::Volumes) => Role::Pending,
        None => Role::Ok,
    }
}

/// Whether `R` (requeue) acts on this pending item: a Workload or a
/// PodGroup, not a lone pod.
pub fn offers_requeue(item: &PendingItem) -> bool {
    item.kind != crate::analysis::pending::PendingKind::Pod
}

/// A driver × CUDA cell as the matrix shows it.
pub fn compat_cell(v: compat::Verdict) -> (&'static str, Role) {
    match v {
        compat::Verdict::Ok => ("ok", Role::Ok),
        compat::Verdict::MinorCompat => ("minor", Role::Warn),
        compat::Verdict::ForwardCompat => ("fwd", Role::Accent),
        compat::Verdict::Incompatible => ("✗ no", Role::Error),
        compat::Verdict::Unknown => ("?", Role::Dim),
    }
}

/// A gang's state; a deadlock outranks it.
/// The mark beside a node's upgrade state, in every view: stuck, labelled
/// done on another driver than the operator's target, or held back.
pub fn upgrade_mark(u: &crate::analysis::waves::UpgradeRow) -> &'static str {
    if u.stuck {
        "STUCK"
    } else if u.done_off_target {
        "OLD DRIVER"
    } else if u.skip {
        "skip"
    } else {
        ""
    }
}

/// A wave plan's size promise, and each wave that breaks it to keep a
/// running gang whole: `≤2 node(s) each; wave 3: 4 nodes for gang ml/pretrain`.
pub fn wave_bound(plan: &crate::analysis::waves::WavePlan) -> String {
    let mut out = format!("≤{} node(s) each", plan.wave_size);
    for w in plan.waves.iter().filter(|w| w.nodes.len() as u32 > plan.wave_size) {
        let why = if w.gangs.is_empty() { String::new() } else { format!(" to keep {} whole", w.gangs.join(", ")) };
        out.push_str(&format!("; wave {}: {} nodes{why}", w.index, w.nodes.len()));
    }
    out
}

/// Why a wave plan's nodes were left out, counted: `11 skip label, 1 upgrade failed`.
pub fn left_out_counts(plan: &crate::analysis::waves::WavePlan) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for (_, why) in &plan.excluded {
        let label = if why.starts_with("already on") {
            "on the target"
        } else if why.contains("upgrade.skip") {
            "skip label"
        } else if why.starts_with("NotReady") {
            "NotReady"
        } else if why.starts_with("upgrade-failed") {
            "upgrade failed"
        } else {
            "upgrading"
        };
        match counts.iter_mut().find(|(l, _)| *l == label) {
            Some((_, n)) => *n += 1,
            None => counts.push((label, 1)),
        }
    }
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    counts.iter().map(|(l, n)| format!("{n} {l}")).collect::<Vec<_>>().join(", ")
}

/// Where a wave plan's bounds come from, in words: `maxParallelUpgrades 1,
/// maxUnavailable 25% from ClusterPolicy gpu-cluster-policy (drain off)`.
pub fn wave_bounds_source(plan: &crate::analysis::waves::WavePlan) -> String {
    use crate::analysis::waves::Bounds;
    let values =
        format!("maxParallelUpgrades {}, maxUnavailable {}", plan.policy.max_parallel, plan.policy.max_unavailable);
    match &plan.bounds {
        Bounds::Chosen => format!("{values} (chosen)"),
        Bounds::Defaults => format!("{values} (the GPU Operator's defaults: no upgradePolicy found)"),
        Bounds::Operator { object, auto_upgrade, drain } => format!(
            "{values} from {object}'s upgradePolicy (drain {}){}",
            if *drain { "on" } else { "off: GPU pods deleted, others stay" },
            if *auto_upgrade {
                ""
            } else {
                "; autoUpgrade is false: the operator upgrades no node by itself, these waves are for doing it by hand"
            }
        ),
    }
}

pub fn gang_role(state: GangState, deadlocked: bool) -> Role {
    if deadlocked {
        return Role::Error;
    }
    match state {
        GangState::PartiallyPlaced => Role::Warn,
        GangState::Queued | GangState::Admitted | GangState::Placed => Role::Pending,
        GangState::Inactive | GangState::Finished => Role::Dim,
        GangState::Running => Role::Ok,
    }
}

/// The isolation chain of one pending item: each step with its verdict,
/// evidence and kubectl commands, the scheduler's own word, hints, and
/// what would unblock it.
pub fn why(item: &PendingItem) -> Doc {
    let mut doc = Doc::default();
    doc.pieces(vec![
        (Role::Header, format!("{} {}", item.kind.as_str(), item.display_name())),
        (Role::Dim, format!("  pending {} · shape {}", age(item.age), item.shape)),
        (Role::Dim, item.queue.as_ref().map_or(String::new(), |q| format!(" · queue {q}"))),
    ]);
    doc.pieces(vec![
        (Role::Dim, "blocked at: ".into()),
        (blocking_role(item.blocking), item.blocking_str().to_string()),
        (Role::Text, format!(" — {}", item.summary)),
    ]);
    doc.blank();
    for (i, s) in item.steps.iter().enumerate() {
        let (mark, role) = match s.verdict {
            // A refusal nobody has confirmed: neither a block nor a pass.
            Verdict::Block if s.said_by == Some(crate::analysis::pending::VerdictSource::Undecided) => {
                ("?", Role::Warn)
            }
            Verdict::Pass => ("✓", Role::Ok),
            Verdict::Block => ("✗", Role::Error),
            Verdict::Warn => ("!", Role::Warn),
            Verdict::NotApplicable => ("–", Role::Dim),
        };
        doc.pieces(vec![
            (role, format!("{} {mark} ", i + 1)),
            (Role::Header, format!("{}: ", s.step.title())),
            (Role::Text, s.summary.to_string()),
        ]);
        for d in s.details.iter() {
            doc.line(Role::Text, format!("      {d}"));
        }
        for c in &s.commands {
            doc.command("      $ ", c.clone());
        }
    }
    if let Some(m) = &item.scheduler_message {
        doc.blank().line(Role::Header, "scheduler said:").line(Role::Text, format!("  {m}"));
        match (item.agrees_with_scheduler, item.scheduler_recognised) {
            // A PreFilter's refusal has no per-node verdicts: its step agrees.
            (Some(true), _) if item.blocking == Some(Step::Volumes) => {
                doc.line(Role::Ok, "  kgpu's volumes step agrees");
            }
            (Some(true), _) => {
                doc.line(Role::Ok, "  kgpu's per-node verdicts agree");
            }
            (Some(false), _) => {
                doc.line(Role::Warn, format!("  kgpu disagrees: {}", item.disagreement.clone().unwrap_or_default()));
            }
            (None, Some(false)) => {
                doc.line(Role::Warn, "  (not a message kgpu recognises: shown raw)");
            }
            _ => {}
        }
    }
    if !item.hints.is_empty() {
        doc.blank().line(Role::Header, "hints:");
        for h in &item.hints {
            doc.line(Role::Warn, format!("  • {h}"));
        }
    }
    if !item.unblock.is_empty() {
        doc.blank().line(Role::Header, "what would unblock it:");
        for u in &item.unblock {
            doc.line(Role::Ok, format!("  → {u}"));
        }
    }
    doc
}

/// A node in full: state, GPU counts (as the fleet row counts them),
/// issues, taints, its pods and its GPU labels.
/// What an expert does about a node's recent XIDs, per code, from NVIDIA's
/// Xid catalog's immediate action: get the work off the GPU first (cordon,
/// drain), then reset it; a double-bit ECC error that recurs, or a memory
/// remap that failed, is a hardware replacement (RMA).
fn xid_advice(node: Sym, cordoned: bool, xids: &[(u32, u32)]) -> Vec<String> {
    let mut codes: Vec<u32> = xids.iter().map(|&(_, code)| code).collect();
    codes.sort();
    codes.dedup();
    let first_steps = if cordoned {
        format!("drain its GPU pods (kubectl drain {node} --ignore-daemonsets)")
    } else {
        format!(
            "cordon {node} so no new pod lands on the GPU, drain its GPU pods (kubectl drain {node} --ignore-daemonsets)"
        )
    };
    codes
        .into_iter()
        .filter_map(|code| {
            let gpus: Vec<String> =
                xids.iter().filter(|(_, c)| *c == code).map(|(gpu, _)| gpu.to_string()).collect();
            let gpus = gpus.join(",");
            let info = crate::reference::xid::lookup(code)?;
            let action = info.immediate_action.as_str();
            let then = if code == 48 || action.contains("XID_48") {
                format!(
                    "then reset GPU {gpus} (nvidia-smi -r -i {gpus} once idle, or reboot) and read its remapped rows (nvidia-smi -q -d ROW_REMAPPER -i {gpus}): a failed remap, or the error again, means RMA"
                )
            } else if action.contains("RESET_GPU") {
                format!(
                    "then reset GPU {gpus} (nvidia-smi -r -i {gpus} once idle, or reboot); if it returns, contact NVIDIA support (RMA)"
                )
            } else if action.contains("RESTART_APP") {
                "then restart the workload that hit it: NVIDIA's catalog calls it an application error".to_string()
            } else if action.contains("CONTACT_SUPPORT") {
                "then contact NVIDIA support with an nvidia-bug-report.sh log".to_string()
            } else {
                format!("then follow NVIDIA's Xid catalog for {} ({action})", info.mnemonic)
            };
            Some(format!("→ Xid {code} ({}) on GPU {gpus}: {first_steps}, {then}", info.description))
        })
        .collect()
}

/// What an expert does about a node that refuses every GPU pod it is
/// sent: stop the scheduler sending more, read why its device plugin
/// refuses (its own pod's log, when kgpu sees it), restart that pod or the
/// node, and take the node back once a GPU pod runs there.
fn black_hole_advice(views: &Views, node: Sym, cordoned: bool) -> String {
    let stop = if cordoned {
        "it is cordoned: no new pod lands there".to_string()
    } else {
        format!("cordon {node} (kubectl cordon {node}) so the scheduler stops sending it GPU pods")
    };
    let plugin = views.snap.pods.values().find(|p| {
        p.node.as_ref() == Some(&node)
            && p.operand.as_ref().is_some_and(|o| o.layer == crate::model::OperandLayer::DevicePlugin)
    });
    let read = match plugin {
        Some(p) => format!("read its device plugin's log (kubectl logs -n {} {})", p.namespace, p.name),
        None => format!(
            "read its device plugin's log (kubectl get pods -A -l app=nvidia-device-plugin-daemonset --field-selector spec.nodeName={node}, then kubectl logs)"
        ),
    };
    // Cordoned, no pod lands there to show it mended: uncordon, then watch.
    format!(
        "→ black hole: {stop}; {read}, restart that pod or the node, then uncordon it and watch that the next GPU pod sent there starts"
    )
}

pub fn node(views: &Views, node: Sym) -> Doc {
    let mut doc = Doc::default();
    let row = views.nodes.iter().find(|r| r.name == node);
    let (Some(n), Some(r)) = (views.snap.nodes.get(&node), row) else {
        doc.line(Role::Warn, format!("node {node} is gone"));
        return doc;
    };
    doc.line(
        Role::Header,
        format!(
            "{}  {}  {}  driver {}  pool {}",
            n.name,
            if n.is_ready() { "Ready" } else { "NotReady" },
            if n.unschedulable { "cordoned" } else { "schedulable" },
            r.driver,
            r.pool
        ),
    );
    doc.line(
        Role::Text,
        format!(
            "GPUs: {} in hardware, {}, {} used, {}{}",
            r.hardware.map_or("?".into(), |h| h.to_string()),
            // A DRA node advertises no nvidia.com/gpu: its slices publish them.
            if r.dra.is_some() && n.allocatable.gpu == 0 {
                format!("{} published through DRA (no nvidia.com/gpu advertised)", r.allocatable)
            } else {
                format!("{} allocatable", r.allocatable)
            },
            r.used,
            // As the header counts them: idle GPUs on a node that takes no
            // work (cordoned, NotReady, a black hole) are not free.
            if r.buckets.unavailable > 0 && r.buckets.free == 0 {
                format!(
                    "{} unavailable (idle on a node that cannot take work: cordoned, NotReady or a black hole)",
                    r.buckets.unavailable
                )
            } else {
                format!("{} free ({} stranded)", r.free, r.stranded)
            },
            if r.mig.is_empty() { String::new() } else { format!("; MIG {}", r.mig) }
        ),
    );
    if let Some(d) = r.dra {
        doc.line(
            Role::Text,
            format!(
                "through DRA: {} GPU(s) published in ResourceSlices, {} allocated to claims, {} tainted (kubectl get resourceslices --field-selector spec.nodeName={})",
                d.published, d.allocated, d.tainted, n.name
            ),
        );
    }
    for d in &r.issue_details {
        doc.line(Role::Error, format!("! {d}"));
    }
    if let Some(summary) = views.analysis.nodes.iter().find(|s| s.name == node) {
        for line in xid_advice(node.clone(), summary.cordoned, &summary.recent_xids) {
            doc.line(Role::Warn, line);
        }
        if summary.has(crate::analysis::fleet::IssueCode::BlackHole) {
            doc.line(Role::Warn, black_hole_advice(views, node.clone(), summary.cordoned));
        }
    }
    super::details::node_conditions(&mut doc, n);
    if !n.taints.is_empty() {
        let taints: Vec<String> =
            n.taints.iter().map(|t| format!("{}={}:{}", t.key, t.value, t.effect.as_str())).collect();
        doc.line(Role::Text, format!("taints: {}", taints.join(", ")));
    }
    super::details::node_allocation(&mut doc, views, n, r.dra.is_some());
    super::details::node_agent(&mut doc, views, node.clone());
    super::details::node_events(&mut doc, views, node.clone());
    doc.line(Role::Header, "pods:");
    let now = views.analysis.now;
    let mut pods: Vec<_> = views.snap.pods.values().filter(|p| p.node.as_ref() == Some(&node)).collect();
    pods.sort_by(|a, b| a.phase.cmp(&b.phase).then(a.name.cmp(&b.name)));
    // Only where the node publishes GPUs through DRA: its pods' claims
    // hold GPUs their requests do not name (the Usage pane counts them).
    let dra = r.dra.is_some().then(|| crate::analysis::dra::DraIndex::build(&views.snap));
    for p in pods.iter().take(40) {
        let held = dra.as_ref().map(|d| d.held_by(p)).unwrap_or_default();
        let shared = if held.shared { ", a claim shared with other pods" } else { "" };
        let through_dra = match (held.gpus, held.slices) {
            (0, 0) => String::new(),
            (g, 0) => format!(" ({g} through DRA claims{shared})"),
            (0, m) => format!(" MIG×{m} (through DRA claims{shared})"),
            (g, m) => format!(" MIG×{m} ({g} GPU(s) and the MIG devices through DRA claims{shared})"),
        };
        doc.line(
            Role::Text,
            format!(
                "  {}/{}  {}{}  gpu {}{}{through_dra}  {}",
                p.namespace,
                p.name,
                p.phase.as_str(),
                p.reason.as_ref().map_or(String::new(), |r| format!(" ({r})")),
                p.requests.gpu + held.gpus,
                p.requests.mig().map(|(k, v)| format!(" {k}×{v}")).collect::<String>(),
                age(now - p.transitioned)
            ),
        );
    }
    if pods.len() > 40 {
        doc.line(Role::Dim, format!("  … and {} more", pods.len() - 40));
    }
    if pods.is_empty() {
        doc.line(Role::Dim, "  none");
    }
    doc.line(Role::Header, "GPU labels:");
    let mut labels = n.labels.iter().filter(|(k, _)| k.as_str().starts_with("nvidia.com/")).peekable();
    if labels.peek().is_none() {
        // NVIDIA's DRA driver runs without GPU Feature Discovery: its slices say what the GPUs are.
        let why = if r.dra.is_some() {
            " (no GPU Feature Discovery labels; its ResourceSlices describe the GPUs)"
        } else {
            ""
        };
        doc.line(Role::Dim, format!("  none{why}"));
    }
    for (k, v) in labels {
        doc.line(Role::Dim, format!("  {k}={v}"));
    }
    doc
}

fn sample(doc: &mut Doc, sample: &Sample, role: Role) {
    for p in &sample.first {
        doc.line(role, format!("  {p}"));
    }
    if sample.count > sample.first.len() {
        doc.line(Role::Dim, format!("  … and {} more", sample.count - sample.first.len()));
    }
}

/// One driver × CUDA cell: its verdict and reason, its nodes, the pods
/// placed there and every workload that needs that CUDA.
pub fn matrix_cell(m: &Matrix, cell: (usize, usize)) -> Doc {
    let mut doc = Doc::default();
    let found = m.drivers.get(cell.0).and_then(|(d, _)| m.needs.get(cell.1).and_then(|(c, _)| m.cell(d, c)));
    let Some(c) = found else {
        doc.line(Role::Dim, "no cell selected");
        return doc;
    };
    doc.line(Role::Header, format!("driver {} × CUDA {}: {}", c.driver, c.cuda, c.verdict.as_str()));
    doc.line(Role::Text, c.reason.clone());
    doc.line(Role::Header, format!("nodes ({}):", c.nodes.len()));
    doc.line(Role::Dim, format!("  {}", c.nodes.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(" ")));
    doc.line(Role::Header, format!("placed there ({}):", c.placed.count));
    sample(&mut doc, &c.placed, Role::Text);
    doc.line(Role::Header, format!("all workloads needing CUDA {} ({}):", c.cuda, c.workloads.count));
    sample(&mut doc, &c.workloads, Role::Dim);
    doc
}

/// The Fleet pane's side panel: the selected pending shape (`shape`, taken
/// modulo the shapes) against the free capacity, and the defragmentation
/// plan when it is this shape's; `tall` lists the plan's moves.
pub fn fragmentation_panel(f: &Fragmentation, shape: usize, tall: bool) -> Doc {
    let mut doc = Doc::default();
    let shapes = &f.shapes;
    if shapes.is_empty() {
        return doc;
    }
    let i = shape % shapes.len();
    let s = &shapes[i];
    let from = match &s.demand.source {
        ShapeSource::Canonical => "canonical".to_string(),
        _ => s.demand.name(),
    };
    doc.pieces(vec![
        (Role::Header, format!("{} ", s.demand.label())),
        (Role::Dim, format!("[{}/{}] ", i + 1, shapes.len())),
        (Role::Text, from),
    ]);
    doc.pieces(vec![
        (Role::Dim, "fits now: ".into()),
        (if s.fits_now { Role::Ok } else { Role::Error }, if s.fits_now { "yes" } else { "no" }.into()),
        (Role::Text, format!("   largest gang now: {}", s.largest_gang)),
    ]);
    doc.pieces(vec![
        (Role::GpuFree, format!("usable free {}", s.usable_free)),
        // Free GPUs this shape cannot use where it may run: the header's
        // stranded counts those no pending shape can use.
        (Role::GpuStranded, format!("   stranded for it {}", s.stranded_free)),
    ]);
    doc.line(Role::Dim, format!("{} of {} free GPUs on whole free nodes", f.free_on_whole_nodes, f.free_total));
    let p = &f.plan;
    // The plan is for one target; under another shape, say whose it is
    // rather than show it as this shape's.
    let for_this_shape = p.target.as_deref() == Some(s.demand.name().as_str());
    // Two keys, not a checkbox (a newcomer read `[ ]` as one).
    let other_shapes = vec![
        (Role::KeyHint, "[".to_string()),
        (Role::Dim, " or ".to_string()),
        (Role::KeyHint, "]".to_string()),
        (Role::Dim, " other shapes".to_string()),
    ];
    match &p.status {
        PlanStatus::Found | PlanStatus::Impossible(_) if !for_this_shape => {
            doc.pieces(vec![
                (Role::Header, "plan: ".into()),
                (
                    Role::Dim,
                    format!(
                        "made for {} ({}), not this shape",
                        p.target.as_deref().unwrap_or("another shape"),
                        p.target_shape.as_deref().unwrap_or("?")
                    ),
                ),
            ]);
            doc.pieces(other_shapes);
        }
        PlanStatus::NotNeeded => {
            doc.line(if f.unplanned_claims > 0 { Role::Warn } else { Role::Ok }, f.not_needed_text());
        }
        PlanStatus::Impossible(why) => {
            doc.line(Role::Error, "plan: none").line(Role::Dim, why.clone());
        }
        PlanStatus::Found => {
            let freed: Vec<String> = p.nodes_freed.iter().map(|n| n.to_string()).collect();
            doc.pieces(vec![
                (Role::Header, "plan: ".into()),
                (Role::Text, format!("{}, {:.1} GPU-h, frees {}", p.steps_summary(), p.gpu_hours, freed.join(" "))),
            ]);
            if tall {
                doc.line(Role::Dim, format!("for {}", p.target.clone().unwrap_or_default()));
                for step in &p.steps {
                    doc.line(
                        Role::Text,
                        format!(
                            " {} → {}  {} ({} GPU, {:.1} GPU-h{})",
                            step.from_node,
                            step.to_node.as_ref().map_or("✗ evict, work lost".to_string(), |n| n.to_string()),
                            step.pod,
                            step.gpus,
                            step.gpu_hours_disrupted,
                            step.idle_seconds.map_or(String::new(), |i| format!(", idle {}", super::age(i)))
                        ),
                    );
                }
            }
            let mut keys = vec![(Role::KeyHint, "x".to_string()), (Role::Dim, " run the plan   ".to_string())];
            keys.extend(other_shapes);
            doc.pieces(keys);
        }
    }
    doc
}
