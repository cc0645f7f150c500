//! Questions and answers of the lessons whose arithmetic takes more than a
//! line or two: the catalog names them, this works them out.

use std::collections::BTreeMap;

use crate::analysis::Analysis;
use crate::analysis::waves;
use crate::model::Sym;
use crate::model::time::age;

/// What an answer says when its scenario's signal has left the cluster.
pub(super) const GONE: &str =
    "The signal this lesson is about is not on the cluster now (it was fixed, or the scenario moved on).";

/// Per node: the GPUs its idle holders hold.
fn idle_gpus_by_node(a: &Analysis) -> BTreeMap<Sym, f64> {
    let mut out: BTreeMap<Sym, f64> = BTreeMap::new();
    for h in a.utilization.holders.iter().filter(|h| h.is_idle()) {
        *out.entry(h.node.clone()).or_default() += h.gpus;
    }
    out
}

/// Nodes that reclaiming their idle holders would leave empty: (node, GPUs).
fn freed_by_reclaim(a: &Analysis) -> Vec<(Sym, u64)> {
    let idle = idle_gpus_by_node(a);
    a.nodes
        .iter()
        .filter(|n| n.gpu_allocated > 0 && !n.cordoned)
        .filter_map(|n| {
            let held_idle = idle.get(&n.name).copied().unwrap_or(0.0);
            (held_idle + 0.01 >= n.gpu_allocated as f64).then_some((n.name.clone(), n.gpu_allocatable))
        })
        .collect()
}

pub fn idle_holders_question(a: &Analysis) -> String {
    let waiting = a
        .pending
        .first()
        .map_or_else(String::new, |p| format!("{} ({}) has been Pending {}; ", p.display_name(), p.shape, age(p.age)));
    format!(
        "{waiting}{} of {} GPUs are allocated, so the cluster looks full. Is it? What would you reclaim first, and what does it free?",
        a.totals.allocated, a.totals.gpus
    )
}

pub fn idle_holders_answer(a: &Analysis) -> Vec<String> {
    let u = &a.utilization;
    let idle: Vec<_> = u.holders.iter().filter(|h| h.is_idle()).collect();
    if idle.is_empty() {
        return vec![GONE.into()];
    }
    let mut lines = vec![format!(
        "Not full: {} pods hold {:.0} GPUs under {}% busy, {:.1} GPU-hours held idle so far (Usage pane, 7).",
        idle.len(),
        u.gpus_idle,
        crate::analysis::usage::idle_below_pct(),
        u.idle_gpu_hours
    )];
    for (node, gpus) in idle_gpus_by_node(a) {
        let holders: Vec<String> = idle.iter().filter(|h| h.node == node).map(|h| h.pod.name.to_string()).collect();
        lines.push(format!("  {node}: {gpus:.0} GPU(s) idle, held by {}", holders.join(", ")));
    }
    let freed = freed_by_reclaim(a);
    match (freed.first(), a.pending.first()) {
        (Some((node, gpus)), Some(p)) => lines.push(format!(
            "Every holder on {node} is idle: reclaiming them frees all {gpus} of its GPUs, and {} ({}) fits there.",
            p.display_name(),
            p.shape
        )),
        (Some((node, gpus)), None) => {
            lines.push(format!("Every holder on {node} is idle: reclaiming them frees all {gpus} of its GPUs."))
        }
        _ => lines.push(
            "No node holds only idle pods: reclaiming frees scattered GPUs (the defrag plan moves the rest).".into(),
        ),
    }
    lines.push("Reclaim the biggest idle-GPU-hours first (tab groups them by workload): scale the debug Deployment to 0, cull notebooks idle for hours (JupyterHub's idle culler), and give notebooks MIG slices instead of whole GPUs.".into());
    lines
}

pub fn driver_canary_question(a: &Analysis) -> String {
    let target = waves::halt(&a.upgrades, None)
        .and_then(|h| h.failed.first().and_then(|(_, d)| d.clone()))
        .map_or_else(|| "a new driver".to_string(), |d| d.to_string());
    format!(
        "The GPU Operator is rolling {target} out to {} GPU nodes, canary first. Should the next wave start? If not, what do you do?",
        a.upgrades.len()
    )
}

pub fn driver_canary_answer(a: &Analysis) -> Vec<String> {
    let Some(halt) = waves::halt(&a.upgrades, None) else { return vec![GONE.into()] };
    let mut lines = Vec::new();
    for (node, driver) in &halt.failed {
        let row = a.upgrades.iter().find(|r| r.node == *node);
        lines.push(format!(
            "{node} is in upgrade-failed for {} (driver now {}): the canary failed.",
            row.and_then(|r| r.seconds_in_state).map_or_else(|| "-".into(), age),
            driver.as_ref().map_or_else(|| "unknown".into(), |d| d.to_string())
        ));
    }
    let held = a.upgrades.iter().filter(|r| r.skip).count();
    lines.push(format!(
        "No: the operator would go on while maxUnavailable allows ({held} node(s) are held back by nvidia.com/gpu-driver-upgrade.skip=true); keep them held. A canary exists to stop the wave."
    ));
    lines.push(format!(
        "Find why: kubectl get events --field-selector involvedObject.name={} | grep GPUDriverUpgrade, and the logs of the driver pod and nvidia-operator-validator on the node.",
        halt.failed.first().map_or_else(String::new, |(n, _)| n.to_string())
    ));
    if let Some(v) = &halt.rollback_to {
        lines.push(format!(
            "Rollback: set the ClusterPolicy back to the driver the other {} node(s) run: kubectl patch clusterpolicy gpu-cluster-policy --type merge -p '{{\"spec\":{{\"driver\":{{\"version\":\"{v}\"}}}}}}', then kubectl label node {} nvidia.com/gpu-driver-upgrade-state=upgrade-required --overwrite so the operator reinstalls {v} there and uncordons it when validated.",
            halt.nodes_on_rollback,
            halt.failed_names()
        ));
    }
    lines
}

/// The first pending item blocked at quota whose queue is under its nominal
/// quota while others in its cohort borrow.
fn starved_by_borrowers(a: &Analysis) -> Option<&crate::analysis::pending::PendingItem> {
    a.pending.iter().find(|p| {
        p.blocking == Some(crate::analysis::pending::Step::Quota)
            && p.steps.iter().any(|s| s.details.iter().any(|d| d.starts_with("it fits within")))
    })
}

pub fn fair_share_question(a: &Analysis) -> String {
    match starved_by_borrowers(a) {
        Some(p) => format!(
            "{}: its team has unused nominal quota, yet it has been Pending {}. Who has the GPUs, is that fair, and what makes Kueue give them back?",
            p.display_name(),
            age(p.age)
        ),
        None => "Three teams share a cohort. Is the quota shared fairly?".into(),
    }
}

pub fn fair_share_answer(a: &Analysis) -> Vec<String> {
    let Some(p) = starved_by_borrowers(a) else { return vec![GONE.into()] };
    let mut lines = vec![format!("{} waits at the quota step: {}.", p.display_name(), p.summary)];
    let gpu_rows =
        a.queues.iter().filter(|q| q.fair_share.is_some() && crate::model::keys::is_gpu_resource(q.resource.as_str()));
    for q in gpu_rows {
        lines.push(format!(
            "  ClusterQueue {}: {} of {} nominal GPUs in use, borrowing {}, fair share {}",
            q.name,
            q.used,
            q.nominal,
            q.borrowed,
            q.fair_share.map_or_else(|| "-".into(), |s| if s == u64::MAX { "infinite".into() } else { s.to_string() })
        ));
    }
    let details: Vec<&String> = p.steps.iter().flat_map(|s| s.details.iter()).collect();
    if let Some(share) = details.iter().find(|d| d.starts_with("fair share")) {
        lines.push(format!("By hand: {share}."));
    }
    if let Some(policy) = details.iter().find(|d| d.starts_with("it fits within")) {
        lines.push(format!("Why it stays so: {policy}."));
    }
    lines.push("Over-submitting let one team borrow the quota others left idle and keep it for as long as its jobs run. Reclaim (reclaimWithinCohort: Any), fair sharing with weights (Kueue's fairSharing), or a borrowingLimit on the hoarder make borrowing safe to allow.".into());
    lines
}

fn priced_preemption(
    a: &Analysis,
) -> Option<(&crate::analysis::pending::PendingItem, &crate::analysis::preemption::Preemption)> {
    a.pending.iter().find_map(|p| p.preemption.as_deref().map(|c| (p, c)))
}

pub fn preemption_question(a: &Analysis) -> String {
    match priced_preemption(a) {
        Some((p, _)) => format!(
            "{} (priority {}) has been Pending {} on a full cluster. A manager says: \"just let it preempt, eviction is free\". Is it? What would it cost, and where?",
            p.display_name(),
            p.priority,
            age(p.age)
        ),
        None => "A high-priority job waits on a full cluster. What would preempting for it cost?".into(),
    }
}

pub fn preemption_answer(a: &Analysis) -> Vec<String> {
    let Some((p, c)) = priced_preemption(a) else { return vec![GONE.into()] };
    let mut lines = vec![format!("{}: {}.", p.display_name(), c.summary())];
    lines.extend(c.arithmetic().into_iter().map(|l| format!("  {l}")));
    if c.policy_never {
        lines.push("It waits because its PriorityClass says preemptionPolicy: Never (the scheduler: \"not eligible due to preemptionPolicy=Never\").".into());
    }
    lines.push("kube-scheduler picks the node by victims' priority, their count, then the latest-started victims: it never weighs work lost since a checkpoint.".into());
    if let Some((node, hours)) = c.cheapest.clone() {
        lines.push(format!(
            "On {node} it would lose {hours:.1} GPU-hours instead: checkpoint before preempting, or place it there yourself (a nodeSelector or cordon the others briefly), and write checkpoints often enough that eviction is cheap."
        ));
    }
    lines
}

pub fn spot_question(a: &Analysis) -> String {
    match a.spot.jobs.iter().find(|j| j.gang.is_some()) {
        Some(j) => format!(
            "{} runs on {} spot nodes. Spot is a fraction of the on-demand price: is it a good deal for this job? At what discount does it break even, and what would change the answer?",
            j.name, j.spot_nodes
        ),
        None => "Some GPU nodes are spot. Which jobs should run there?".into(),
    }
}

pub fn spot_answer(a: &Analysis) -> Vec<String> {
    let s = &a.spot;
    if s.jobs.is_empty() {
        return vec![GONE.into()];
    }
    if s.rate_per_node_hour == 0.0 {
        // Spot nodes just created (a lab applied this second) or none replaced
        // in a day: the job is on spot, its price is not known yet.
        return vec![format!(
            "{} runs on spot nodes, but no preemption rate can be estimated yet: {}. Price it once the nodes have been observed for a while.",
            s.jobs[0].name,
            s.rate_explained()
        )];
    }
    let mut lines = vec![format!("Preemption rate: {}.", s.rate_explained())];
    lines.push("Each preemption loses half a checkpoint interval on average plus the restart, and a gang loses it when any of its nodes goes:".into());
    for j in &s.jobs {
        lines.push(format!("  {}: {}", j.name, j.explain(s.rate_per_node_hour)));
    }
    if let Some(j) = s.jobs.iter().find(|j| j.lost_fraction.is_some_and(|f| f > crate::analysis::spot::TARGET_LOSS)) {
        let fix = j.interval_for_target.map_or_else(
            || "no checkpoint interval gets it under 10%: keep it on demand".to_string(),
            |t| format!("checkpointing every {} brings it to 10%", age(t)),
        );
        lines.push(format!(
            "{} pays only above its break-even discount; {fix}, or run it on demand and keep spot for single-node, often-checkpointed work.",
            j.name
        ));
    }
    lines
}

/// GB in a MIG profile's name (`2g.20gb` → 20).
fn profile_gb(profile: &str) -> Option<u64> {
    profile.split('.').nth(1)?.trim_end_matches("gb").parse().ok()
}

pub fn sharing_question(a: &Analysis) -> String {
    let ts = a.nodes.iter().filter(|n| n.replicas.is_some()).count();
    let mig = a.nodes.iter().filter(|n| !n.mig.is_empty()).count();
    format!(
        "{mig} node(s) share GPUs with MIG, {ts} by time-slicing. The rerank team says its latency is erratic and asks for MIG too. What does each isolate, what does each waste, and where does each service fit?"
    )
}

pub fn sharing_answer(a: &Analysis) -> Vec<String> {
    use crate::analysis::fleet::IssueCode;
    let Some(ts) = a.nodes.iter().find(|n| n.issues.iter().any(|i| i.code == IssueCode::SharedMemoryFull)) else {
        return vec![GONE.into()];
    };
    let mut lines = Vec::new();
    if let Some(r) = ts.replicas {
        lines.push(format!(
            "Time-slicing on {}: {} replicas per GPU, {} of {} allocated. The pods take turns on the whole GPU (each gets about 1/{} when all are busy: latency follows the neighbours) and share its memory with no limit; an Xid or an OOM hits them all.",
            ts.name, r.per_gpu, r.allocated, r.advertised, r.per_gpu
        ));
    }
    lines.push(format!("  {}: {}", ts.name, issue_detail_of(ts, IssueCode::SharedMemoryFull)));
    for n in a.nodes.iter().filter(|n| !n.mig.is_empty()) {
        for m in &n.mig {
            lines.push(format!(
                "MIG on {}: {} of {} {} slices in use. Each slice has its own memory and compute (isolated, steady latency); {} slice(s) hold nothing, and only a pod that fits {} can use them.",
                n.name,
                m.allocated,
                m.allocatable,
                m.profile,
                m.allocatable.saturating_sub(m.allocated),
                m.profile
            ));
        }
    }
    // Where each service fits: its pods' GPU memory against the slice sizes.
    let mut by_workload: BTreeMap<String, u64> = BTreeMap::new();
    for h in &a.utilization.holders {
        let name = h.workload.as_ref().map_or_else(|| h.pod.to_string(), |w| w.name.to_string());
        let mib = h.memory_used_mib.unwrap_or(0) / h.devices.first().map_or(1, |d| d.sharers.max(1) as u64);
        let e = by_workload.entry(name).or_default();
        *e = (*e).max(mib);
    }
    // The profiles of the MIG nodes' GPUs, smallest memory first, then least compute.
    let product = a.nodes.iter().find(|n| !n.mig.is_empty()).and_then(|n| n.product.clone());
    let mut profiles: Vec<(u64, u8, String)> = product
        .and_then(|p| crate::reference::mig::geometry_for_product(p.as_str()))
        .map(|g| g.plain_profiles().filter_map(|p| Some((profile_gb(&p.name)?, p.compute, p.name.clone()))).collect())
        .unwrap_or_default();
    profiles.sort();
    for (workload, mib) in by_workload {
        let gb = mib.div_ceil(1024);
        let fits = profiles.iter().find(|(cap, _, _)| *cap >= gb).map_or("a whole GPU", |(_, _, name)| name.as_str());
        lines.push(format!("  {workload}: about {gb} GB per pod: the smallest MIG slice that holds it is {fits}."));
    }
    lines.push("So: give each service the smallest slice that holds it (isolated memory, steady latency), or fewer replicas per time-sliced GPU with a memory cap in the app; time-slicing suits small, bursty, trusted work, MIG steady latency and hard isolation, at the price of slices no pod fits.".into());
    lines
}

fn issue_detail_of(n: &crate::analysis::fleet::NodeSummary, code: crate::analysis::fleet::IssueCode) -> String {
    n.issues.iter().find(|i| i.code == code).map(|i| i.detail.clone()).unwrap_or_default()
}

pub fn dra_question(a: &Analysis) -> String {
    let dra: u64 = a.nodes.iter().filter_map(|n| n.dra).map(|d| d.published).sum();
    format!(
        "{} GPUs are free, {dra} of the fleet's {} are published through DRA, and a new service has waited for one GPU since it was deployed. Why, and what do you change?",
        a.totals.free, a.totals.gpus
    )
}

pub fn dra_answer(a: &Analysis) -> Vec<String> {
    use crate::analysis::pending::Step;
    let Some(item) = a.pending.iter().find(|p| p.blocking == Some(Step::Claims)) else {
        return vec![GONE.into()];
    };
    let mut lines = vec![format!("{}: {}", item.display_name(), item.summary)];
    if let Some(step) = item.steps.iter().find(|s| s.step == Step::Claims) {
        lines.extend(step.details.iter().map(|d| format!("  {d}")));
    }
    let products: std::collections::BTreeSet<String> =
        a.nodes.iter().filter(|n| n.dra.is_some()).filter_map(|n| n.product.as_ref().map(|p| p.to_string())).collect();
    lines.push(format!(
        "The DRA nodes publish {}; the claim's selector asks for something no ResourceSlice has, so the scheduler's DynamicResources plugin says 'cannot allocate all claims' on every node. Fix the ResourceClaimTemplate's selector (or add nodes that publish that product); free GPUs elsewhere do not help.",
        if products.is_empty() { "no GPUs".to_string() } else { products.into_iter().collect::<Vec<_>>().join(", ") }
    ));
    lines
}
