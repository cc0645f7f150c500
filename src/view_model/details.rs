//! What `enter` opens beyond the pending chain: a node's conditions, what
//! its pods hold against what it offers, its recent events and its agent's
//! GPUs; an event in full; a gang's members and nodes; a queue's quota.

use crate::analysis::gangs::GangSummary;
use crate::analysis::queues::QueueRow;
use crate::model::time::age;
use crate::model::{AgentStatus, EventType, GpuHealth, MigMode, Node, Resources, Sym, quantity};

use super::panes::{EventRow, Views};
use super::style::{Doc, Role};

/// How many of a node's events the detail shows, newest first.
const NODE_EVENTS: usize = 10;

/// Ready, and every problem condition the node reports.
pub fn node_conditions(doc: &mut Doc, n: &Node) {
    let ready = match n.readiness {
        crate::model::Readiness::Ready => "Ready=True",
        crate::model::Readiness::NotReady => "Ready=False",
        crate::model::Readiness::Unknown => "Ready=Unknown",
    };
    let mut parts = vec![ready.to_string()];
    parts.extend(n.problems.iter().map(|c| format!("{}={} ({})", c.kind, c.status, c.reason)));
    let role = if n.is_ready() && n.problems.is_empty() { Role::Ok } else { Role::Error };
    doc.line(role, format!("conditions: {}", parts.join(", ")));
}

/// Requests of the pods bound there (not finished) against allocatable,
/// resource by resource, as `kubectl describe node` sums them.
/// `through_dra`: the node publishes GPUs as ResourceSlices (then a
/// `nvidia.com/gpu` of 0 of 0 says nothing and is left out).
pub fn node_allocation(doc: &mut Doc, views: &Views, n: &Node, through_dra: bool) {
    let mut used = Resources::default();
    let mut extended: std::collections::HashMap<Sym, u64> = std::collections::HashMap::new();
    for p in views.snap.pods.values().filter(|p| p.node.as_ref() == Some(&n.name) && p.holds_resources()) {
        used.cpu_milli += p.requests.cpu_milli;
        used.memory += p.requests.memory;
        used.pods += 1;
        used.gpu += p.requests.gpu;
        for (name, v) in p.requests.extended.iter() {
            *extended.entry(name.clone()).or_default() += v;
        }
    }
    let row = |name: &str, used: u64, of: u64| {
        let pct = used.saturating_mul(100).checked_div(of).unwrap_or(0);
        format!("  {name:<16} {:>10} of {:>10}  {pct:>3}%", quantity::format(name, used), quantity::format(name, of))
    };
    doc.line(Role::Header, "allocated (requests) of allocatable:");
    let a = &n.allocatable;
    doc.line(Role::Text, row("cpu", used.cpu_milli, a.cpu_milli));
    doc.line(Role::Text, row("memory", used.memory, a.memory));
    doc.line(Role::Text, row("pods", used.pods, a.pods));
    if !(through_dra && a.gpu == 0 && used.gpu == 0) {
        doc.line(Role::Text, row("nvidia.com/gpu", used.gpu, a.gpu));
    }
    for (name, of) in a.extended.iter() {
        doc.line(Role::Text, row(name.as_str(), extended.get(name).copied().unwrap_or(0), *of));
    }
}

/// The newest events about the node or a pod bound there.
pub fn node_events(doc: &mut Doc, views: &Views, node: Sym) {
    let pods: std::collections::HashSet<(&str, &str)> = views
        .snap
        .pods
        .values()
        .filter(|p| p.node.as_ref() == Some(&node))
        .map(|p| (p.namespace.as_str(), &*p.name))
        .collect();
    let mut events: Vec<_> = views
        .snap
        .events
        .values()
        .filter(|e| match e.object_kind.as_str() {
            "Node" => &*e.object_name == node.as_str(),
            "Pod" => pods.contains(&(e.namespace.as_str(), &*e.object_name)),
            _ => false,
        })
        .collect();
    events.sort_by_key(|e| std::cmp::Reverse(e.last));
    doc.line(Role::Header, format!("recent events ({}):", events.len()));
    if events.is_empty() {
        doc.line(Role::Dim, "  none");
    }
    let now = views.analysis.now;
    for e in events.iter().take(NODE_EVENTS) {
        let role = if e.kind == EventType::Warning { Role::Warn } else { Role::Dim };
        doc.line(
            role,
            format!(
                "  {:>5}  {}  {}/{}: {}",
                age((now - e.last).max(0)),
                e.reason,
                e.object_kind,
                e.object_name,
                e.message
            ),
        );
    }
}

/// What the node's agent reports, GPU by GPU.
pub fn node_agent(doc: &mut Doc, views: &Views, node: Sym) {
    let Some(d) = views.snap.devices.get(&node) else {
        doc.line(Role::Dim, "agent: none reporting for this node (kgpu agent, or --agents off)");
        return;
    };
    match &d.status {
        AgentStatus::Reporting => doc.line(
            Role::Header,
            format!(
                "agent: {} GPU(s), driver {}, CUDA {}",
                d.gpus.len(),
                d.driver.as_ref().map_or("?".into(), |v| v.to_string()),
                d.cuda_driver.as_ref().map_or("?".into(), |v| v.to_string())
            ),
        ),
        AgentStatus::Unavailable(why) => doc.line(Role::Warn, format!("agent: unavailable: {why}")),
    };
    let now = views.analysis.now;
    for g in d.gpus.iter() {
        let health = match &g.health {
            GpuHealth::Healthy => "healthy".to_string(),
            GpuHealth::Unhealthy(why) => format!("UNHEALTHY: {why}"),
        };
        let mig = match g.mig_mode {
            MigMode::Enabled => format!(", MIG {} instance(s)", g.instances.len()),
            _ => String::new(),
        };
        let xids: Vec<String> =
            g.xids.iter().map(|x| format!("Xid {} {} ago", x.code, age((now - x.at).max(0)))).collect();
        let role =
            if matches!(g.health, GpuHealth::Unhealthy(_)) || !xids.is_empty() { Role::Error } else { Role::Text };
        doc.line(
            role,
            format!(
                "  GPU {} {} {} MiB{}{}, {health}{}",
                g.index,
                g.product,
                g.memory_mib,
                mig,
                g.utilization.map_or(String::new(), |u| format!(", {u}% busy")),
                if xids.is_empty() { String::new() } else { format!("; {}", xids.join(", ")) }
            ),
        );
    }
}

/// One event, whole: what the Events row cuts.
pub fn event(e: &EventRow) -> Doc {
    let mut doc = Doc::default();
    doc.line(
        if e.warning { Role::Warn } else { Role::Header },
        format!("{} {}", if e.warning { "Warning" } else { "Normal" }, e.reason),
    );
    doc.line(Role::Text, format!("object: {}", e.object));
    doc.line(
        Role::Dim,
        format!("last seen {} ago{}", e.age, if e.count > 1 { format!(", {} times", e.count) } else { String::new() }),
    );
    if !e.source.is_empty() {
        doc.line(Role::Dim, format!("from: {}", e.source));
    }
    doc.line(Role::Text, "");
    for line in e.message.lines() {
        doc.line(Role::Text, line.to_string());
    }
    doc
}

/// A gang that is not pending (running, placed, finished): its members'
/// placement and where it holds GPUs.
pub fn gang(g: &GangSummary, spot: &crate::analysis::spot::Spot) -> Doc {
    let mut doc = Doc::default();
    doc.line(Role::Header, format!("{} {} — {}", g.key.kind.kind_name(), g.display_name(), g.state.as_str()));
    doc.line(
        Role::Text,
        format!(
            "members: {} placed, {} running of {} required; {} GPU(s) each, {} in all",
            g.placed, g.running, g.required, g.gpus_per_pod, g.gpus_total
        ),
    );
    if let Some(q) = g.queue.clone() {
        doc.line(Role::Text, format!("queue: {q}"));
    }
    doc.line(Role::Dim, format!("age: {}", age(g.age)));
    if g.gpus_held_idle > 0 {
        doc.line(Role::Warn, format!("{} GPU(s) held by members waiting for the rest", g.gpus_held_idle));
    }
    if let Some(note) = g.topology_note() {
        doc.line(Role::Warn, note);
    }
    if let Some(note) = g.quota_note() {
        doc.line(Role::Warn, note);
    }
    for other in &g.deadlocked_with {
        doc.line(Role::Error, format!("deadlocked with {other}"));
    }
    if let Some(job) = spot.job(&g.key) {
        doc.line(Role::Header, "on spot nodes:");
        doc.line(Role::Text, format!("  {}", spot.rate_explained()));
        let role = if job.lost_fraction.is_none_or(|f| f > crate::analysis::spot::TARGET_LOSS) {
            Role::Warn
        } else {
            Role::Ok
        };
        doc.line(role, format!("  {}", job.explain(spot.rate_per_node_hour)));
        if let Some(t) = job.interval_for_target {
            doc.line(Role::Text, format!("  checkpointing every {} keeps the loss at 10%", age(t)));
        }
    }
    doc.line(Role::Header, "nodes:");
    if g.nodes.is_empty() {
        doc.line(Role::Dim, "  none yet");
    }
    for (node, gpus) in &g.nodes {
        doc.line(Role::Text, format!("  {node}  {gpus} GPU(s)"));
    }
    let kind = match g.key.kind {
        crate::model::GangKind::KueueWorkload => "workload",
        crate::model::GangKind::VolcanoPodGroup => "podgroup",
    };
    doc.command("  $ ", format!("kubectl get {kind} -n {} {} -o yaml", g.key.namespace, g.key.name));
    doc
}

/// A queue's quota and use.
pub fn queue(q: &QueueRow) -> Doc {
    let mut doc = Doc::default();
    let scope = q.namespace.as_ref().map_or(String::new(), |n| format!("{n}/"));
    doc.line(
        Role::Header,
        format!("{} {scope}{}{}", q.kind.kind_name(), q.name, if q.active { "" } else { " (inactive)" }),
    );
    if let Some(c) = q.cohort.clone() {
        doc.line(Role::Text, format!("cohort: {c}"));
    }
    if let Some(f) = q.flavor.clone() {
        doc.line(Role::Text, format!("flavor: {f}"));
    }
    doc.line(
        Role::Text,
        format!(
            "{}: {} used of {} nominal, {} borrowed{}",
            q.resource,
            q.amount(q.used),
            q.amount(q.nominal),
            q.amount(q.borrowed),
            q.borrowing_limit.map_or(String::new(), |l| format!(" (borrowing limit {})", q.amount(l)))
        ),
    );
    doc.line(Role::Text, format!("workloads: {} admitted, {} pending", q.admitted, q.pending));
    if q.inadmissible > 0 {
        doc.line(
            Role::Warn,
            format!(
                "{} more inadmissible (not in Kueue's pending count): Kueue will not admit them as they are — the Pending pane says why",
                q.inadmissible
            ),
        );
    }
    doc
}

/// A pod's GPU utilization: each device it holds, how busy, since when
/// idle, and the command that shows the same from inside the pod.
pub fn usage(views: &Views, pod: &str) -> Doc {
    let mut doc = Doc::default();
    let Some(h) = views.analysis.utilization.holders.iter().find(|h| h.pod.to_string() == pod) else {
        doc.line(Role::Warn, format!("{pod} holds no reported GPU any more"));
        return doc;
    };
    let state = match h.idle_seconds {
        Some(_) => {
            format!("idle for {} (under {}% busy)", super::usage::idle_for(h), crate::analysis::usage::idle_below_pct())
        }
        None => "working".into(),
    };
    doc.line(if h.is_idle() { Role::Warn } else { Role::Header }, format!("{pod} — {state}"));
    doc.line(
        Role::Text,
        format!(
            "holds {} GPU{} on {}; now {}, mean {} over the last {} min",
            super::usage::gpus(h.gpus),
            if h.gpus == 1.0 { "" } else { "s" },
            h.node,
            super::usage::pct(h.recent_pct),
            super::usage::pct(h.mean_pct),
            crate::analysis::usage::window_minutes(),
        ),
    );
    if h.devices.iter().any(|d| d.profile.is_some()) {
        doc.line(Role::Dim, "(a MIG slice counts its compute slices out of the GPU's 7: a 1g is 1/7)");
    }
    let memory = h.memory_used_mib.map_or_else(|| "not reported".into(), |m| format!("{:.1} GiB", m as f64 / 1024.0));
    doc.line(Role::Text, format!("GPU memory used: {memory}"));
    if h.is_idle() {
        doc.line(Role::Text, format!("{:.1} GPU-hours held idle", h.idle_gpu_hours));
    }
    if h.idle_at_least {
        doc.line(Role::Dim, "idle since kgpu first saw it: at least that long");
    }
    let workload = h.workload.as_ref().map_or_else(|| "none (no controller)".into(), |w| w.to_string());
    doc.line(Role::Text, format!("workload: {workload}"));
    // A member of a gang that is not all placed waits for the rest: the
    // reason it is idle, from the Gangs view.
    if let Some(g) = h.gang.as_ref().and_then(|k| views.analysis.gangs.iter().find(|g| &g.key == k)) {
        let mut line =
            format!("gang {}: {}, {} of {} members placed", g.display_name(), g.state.as_str(), g.placed, g.required);
        if !g.deadlocked_with.is_empty() {
            line.push_str(&format!(", deadlocked with {}", g.deadlocked_with.join(", ")));
        }
        let waiting = g.placed < g.required;
        doc.line(if waiting { Role::Warn } else { Role::Text }, line);
        if waiting {
            doc.line(Role::Dim, "its members hold their GPUs and wait for the rest: see Gangs (3)");
        }
    }
    if let Some(q) = h.queue.clone() {
        doc.line(Role::Text, format!("queue: {q}"));
    }
    if let Some(a) = h.age_seconds {
        doc.line(Role::Dim, format!("pod age: {}", age(a)));
    }
    if h.unknown_to_api {
        doc.line(Role::Warn, "the pod is not among the pods kgpu reads (another namespace, or gone)");
    }
    doc.line(Role::Text, "");
    doc.line(Role::Header, "devices");
    for d in &h.devices {
        let what = d.profile.as_ref().map_or_else(|| "whole".to_string(), |p| format!("MIG {p} slice"));
        let shared = if d.sharers > 1 { format!(", shared by {} pods", d.sharers) } else { String::new() };
        doc.line(Role::Text, format!("  GPU {} {}: {what}{shared}", d.index, d.gpu));
    }
    doc.line(Role::Dim, format!("from: {}", h.source.as_str()));
    doc.line(Role::Text, "");
    doc.line(Role::Header, "see it from inside the pod");
    doc.line(Role::Accent, format!("kubectl exec -n {} {} -- nvidia-smi", h.pod.namespace, h.pod.name));
    if h.source == crate::model::UsageSource::Agent && h.devices.iter().any(|d| d.profile.is_some()) {
        doc.line(Role::Dim, "(nvidia-smi shows no utilization for a MIG device; dcgm-exporter measures it)");
    }
    doc
}
