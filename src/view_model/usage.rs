//! The idle-holders view: one row per pod that holds reported GPUs, as the
//! Usage pane and `kgpu snapshot --pane utilization` print it.

use crate::analysis::Analysis;
use crate::analysis::usage::{Holder, Utilization, WorkloadUse, idle_below_pct, window_minutes};
use crate::model::time::age;
use crate::model::{Feed, FeedState, Snapshot};

#[derive(Clone, Debug, PartialEq)]
pub struct UsageRow {
    /// `namespace/name`: what the selection follows.
    pub pod: String,
    pub node: String,
    /// `1`, `2`, `1g.10gb`, `1/2 (shared)`.
    pub held: String,
    pub now: String,
    pub mean: String,
    pub memory: String,
    /// `3h20m`, `≥40m` (idle since kgpu first saw it), or `-` while busy.
    pub idle: String,
    pub idle_gpu_hours: String,
    pub workload: String,
    /// `Job ns/name` (or the pod for one without a controller): what a
    /// workload's `enter` filters the pods by, exactly.
    pub workload_key: String,
    pub queue: String,
    pub age: String,
    pub is_idle: bool,
    pub source: &'static str,
}

impl UsageRow {
    pub fn id(&self) -> String {
        self.pod.clone()
    }
}

pub fn pct(p: Option<f32>) -> String {
    p.map_or_else(|| "-".into(), |p| format!("{p:.0}%"))
}

pub fn gpus(g: f64) -> String {
    if (g - g.round()).abs() < 0.005 { format!("{}", g.round() as i64) } else { format!("{g:.2}") }
}

fn held(h: &Holder) -> String {
    let shared = h.devices.iter().map(|d| d.sharers).max().unwrap_or(1);
    let profiles: Vec<&str> = h.devices.iter().filter_map(|d| d.profile.as_ref().map(|p| p.as_str())).collect();
    let what = match profiles.as_slice() {
        [] => gpus(h.gpus),
        [one] if h.devices.len() == 1 => (*one).to_string(),
        [first, ..] => format!("{}×{first}", profiles.len()),
    };
    if shared > 1 { format!("{what} (1/{shared})") } else { what }
}

pub fn idle_for(h: &Holder) -> String {
    match h.idle_seconds {
        None => "-".into(),
        Some(s) if h.idle_at_least => format!("≥{}", age(s)),
        Some(s) => age(s),
    }
}

pub fn rows(a: &Analysis) -> Vec<UsageRow> {
    a.utilization
        .holders
        .iter()
        .map(|h| UsageRow {
            pod: h.pod.to_string(),
            node: h.node.to_string(),
            held: held(h),
            now: pct(h.recent_pct),
            mean: pct(h.mean_pct),
            memory: h.memory_used_mib.map_or_else(|| "-".into(), |m| format!("{:.1}G", m as f64 / 1024.0)),
            idle: idle_for(h),
            idle_gpu_hours: if h.is_idle() { format!("{:.1}", h.idle_gpu_hours) } else { "-".into() },
            workload: match (&h.workload, h.unknown_to_api) {
                (Some(w), _) => format!("{} {}", w.kind, w.name),
                (None, true) => "(pod not seen in the API)".into(),
                (None, false) => "-".into(),
            },
            workload_key: h
                .workload
                .as_ref()
                .map_or_else(|| h.pod.to_string(), |w| format!("{} {}/{}", w.kind, w.namespace, w.name)),
            queue: h.queue.as_ref().map_or_else(|| "-".into(), |q| q.to_string()),
            age: h.age_seconds.map_or_else(|| "-".into(), age),
            is_idle: h.is_idle(),
            source: h.source.as_str(),
        })
        .collect()
}

/// One line: how much is held, how much of it idle, from where.
pub fn summary(u: &Utilization) -> String {
    if !u.has_source() {
        return "no utilization source".into();
    }
    let idle_pods = u.holders.iter().filter(|h| h.is_idle()).count();
    format!(
        "{} of {} GPUs held are idle · {idle_pods} {} under {}% · {:.1} GPU-hours idle",
        gpus(u.gpus_idle),
        gpus(u.gpus_held),
        if idle_pods == 1 { "pod" } else { "pods" },
        idle_below_pct(),
        u.idle_gpu_hours,
    )
}

/// The rules and the sources in one line, for the pane's title.
pub fn rules(u: &Utilization) -> String {
    if !u.has_source() {
        return "no source".into();
    }
    format!("idle < {}% · mean over {} min · {}", idle_below_pct(), window_minutes(), sources(u))
}

/// The rules in fewer words, for a narrow title: `idle <5% over 10 min · nodes: agent 48, dcgm-exporter 8`.
pub fn rules_brief(u: &Utilization) -> String {
    if !u.has_source() {
        return "no source".into();
    }
    let nodes: Vec<String> = u.nodes_by_source.iter().map(|(s, n)| format!("{} {n}", s.as_str())).collect();
    format!("idle <{}% over {} min · nodes: {}", idle_below_pct(), window_minutes(), nodes.join(", "))
}

/// Where the numbers come from: `agent: 48 nodes, dcgm-exporter: 8 nodes`.
pub fn sources(u: &Utilization) -> String {
    let nodes: Vec<String> = u.nodes_by_source.iter().map(|(s, n)| format!("{}: {n} nodes", s.as_str())).collect();
    nodes.join(", ")
}

/// What a utilization feed says about itself, when it has nothing.
fn feed_state(snap: &Snapshot, feed: Feed) -> String {
    match snap.feed(feed).map(|f| &f.state) {
        None => "not read".into(),
        Some(FeedState::Syncing) => "asking…".into(),
        Some(FeedState::Live) => "answers, but reports no GPU use".into(),
        // Unavailable or reconnecting: said as the status bar says it.
        Some(state) => {
            let (word, why) = super::feeds::said(state);
            format!("{word}: {}", why.unwrap_or_default())
        }
    }
}

/// The first reporter that did not answer, and how many more.
fn unreadable(u: &Utilization) -> Option<String> {
    let (node, source, why) = u.unreadable.first()?;
    let more = if u.unreadable.len() > 1 { format!(" (and {} more)", u.unreadable.len() - 1) } else { String::new() };
    Some(format!("{} on {node} was not read{more}: {why}", source.as_str()))
}

/// What is not covered, and how to cover it.
pub fn notes(u: &Utilization, snap: &Snapshot) -> Vec<String> {
    let mut out = Vec::new();
    if !u.has_source() {
        out.push("No GPU utilization is read.".into());
        out.push(format!("  node agents: {}", feed_state(snap, Feed::Agents)));
        out.push(format!("  dcgm-exporter: {}", feed_state(snap, Feed::DcgmExporter)));
        out.extend(unreadable(u).map(|line| format!("  {line}")));
        out.push(String::new());
        out.push("Install either (the cockpit needs 'get pods/proxy' where they run):".into());
        out.push("  the kgpu agents: kubectl apply -f assets/agent/".into());
        out.push("  the GPU Operator's dcgm-exporter:".into());
        out.push("    helm upgrade gpu-operator nvidia/gpu-operator --reuse-values \\".into());
        out.push("      --set dcgmExporter.enabled=true".into());
        out.push(String::new());
        out.push("The rest of kgpu works without them.".into());
        return out;
    }
    out.extend(unreadable(u));
    if u.nodes_unreported > 0 {
        out.push(format!("{} GPU node(s) report no utilization (no agent or exporter there).", u.nodes_unreported));
    }
    if u.unattributed_busy > 0 {
        out.push(format!(
            "{} device(s) work or hold memory with no pod named: dcgm-exporter's pod mapping is off \
             (DCGM_EXPORTER_KUBERNETES=true) or a process outside Kubernetes uses them.",
            u.unattributed_busy
        ));
    }
    out.push(format!(
        "Idle: every device under {}% busy. NOW is the last reading, MEAN over the last {} min; \
         IDLE-GPU-H = GPUs held × idle time.",
        idle_below_pct(),
        window_minutes()
    ));
    out
}

pub fn workload_name(w: &WorkloadUse) -> String {
    match (&w.workload, &w.lone_pod) {
        (Some(w), _) => format!("{} {}/{}", w.kind, w.namespace, w.name),
        (None, Some(p)) => format!("Pod {p} (no controller)"),
        (None, None) => "(no controller)".into(),
    }
}

/// One workload's row in the Usage pane's second table.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadRow {
    pub name: String,
    /// `2/6`: idle pods of all its pods that hold reported GPUs.
    pub idle_pods: String,
    pub gpus: String,
    /// GPU equivalents its idle pods hold.
    pub idle_gpus: String,
    pub queue: String,
    pub mean: String,
    /// Set when every pod is idle: the shortest of their idle times.
    pub idle: String,
    pub idle_gpu_hours: String,
    pub any_idle: bool,
    /// What the pods table is filtered by to show its pods (`enter`).
    pub pods_filter: String,
}

impl WorkloadRow {
    pub fn id(&self) -> String {
        self.name.clone()
    }
}

pub fn workload_rows(a: &Analysis) -> Vec<WorkloadRow> {
    a.utilization
        .workloads
        .iter()
        .map(|w| WorkloadRow {
            name: workload_name(w),
            idle_pods: format!("{}/{}", w.idle_pods, w.pods),
            gpus: gpus(w.gpus),
            idle_gpus: if w.idle_pods > 0 { gpus(w.idle_gpus) } else { "-".into() },
            queue: w.queue.as_ref().map_or_else(|| "-".into(), |q| q.to_string()),
            mean: pct(w.mean_pct),
            idle: w.idle_seconds.map_or_else(|| "-".into(), age),
            idle_gpu_hours: if w.idle_pods > 0 { format!("{:.1}", w.idle_gpu_hours) } else { "-".into() },
            any_idle: w.idle_pods > 0,
            // Anchored on the pods' workload key, so `train` does not also
            // list `train-2`'s pods, nor another namespace's `train`.
            pods_filter: match (&w.workload, &w.lone_pod) {
                (Some(r), _) => format!("^{} {}/{}$", r.kind, r.namespace, r.name),
                (None, Some(p)) => format!("^{p}$"),
                (None, None) => String::new(),
            },
        })
        .collect()
}
