//! The blast radius of an action, before it runs: the pods it stops, the
//! running gangs it breaks (one member evicted restarts the whole gang),
//! the GPU-hours of work that would be lost, and the kubectl commands that
//! do the same by hand.

use std::collections::BTreeSet;

use crate::analysis::index::Index;
use crate::model::{GangKind, Pod, PodKey, Sym};

use super::Action;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Impact {
    /// Pods that would be evicted or deleted: (pod, node, GPUs).
    pub pods: Vec<(PodKey, Option<Sym>, u64)>,
    /// Running gangs that would restart, as `Kind ns/name`.
    pub gangs: Vec<String>,
    pub gpu_hours: f64,
    pub kubectl: Vec<String>,
    pub warnings: Vec<String>,
}

fn gpus(p: &Pod) -> u64 {
    p.requests.gpu + p.requests.mig_total()
}

fn hours(p: &Pod, now: i64) -> f64 {
    if p.phase == crate::model::PodPhase::Running {
        gpus(p) as f64 * (now - p.transitioned).max(0) as f64 / 3600.0
    } else {
        0.0
    }
}

/// Pods a drain of `node` evicts: not DaemonSet-owned, not mirror pods, not finished.
pub fn drain_victims<'a>(index: &Index<'a>, node: Sym, gpu_only: bool) -> Vec<&'a Pod> {
    index
        .pods_on(node)
        .iter()
        .copied()
        .filter(|p| !p.mirror && p.owner_kind() != Some("DaemonSet"))
        .filter(|p| !gpu_only || p.wants_gpu())
        .collect()
}

fn eviction_command(p: &Pod) -> String {
    format!(
        "echo '{{\"apiVersion\":\"policy/v1\",\"kind\":\"Eviction\",\"metadata\":{{\"name\":\"{n}\",\"namespace\":\"{ns}\"}}}}' | kubectl create --raw /api/v1/namespaces/{ns}/pods/{n}/eviction -f -",
        n = p.name,
        ns = p.namespace
    )
}

fn add_pods(index: &Index<'_>, victims: &[&Pod], impact: &mut Impact) {
    let mut gangs = BTreeSet::new();
    let mut counted: BTreeSet<PodKey> = BTreeSet::new();
    for p in victims {
        impact.pods.push((p.key(), p.node, gpus(p)));
        if counted.insert(p.key()) {
            impact.gpu_hours += hours(p, index.now);
        }
        if let Some(g) = index.gang_of(&p.key()) {
            gangs.insert(g.clone());
        }
    }
    for g in &gangs {
        // Every other running member restarts too.
        for m in index.members(g) {
            if m.holds_resources() && counted.insert(m.key()) {
                impact.gpu_hours += hours(m, index.now);
            }
        }
        impact.gangs.push(format!("{} {}/{}", g.kind.kind_name(), g.namespace, g.name));
    }
}

pub fn of(index: &Index<'_>, action: &Action) -> Impact {
    let mut impact = Impact::default();
    match action {
        Action::Cordon { node } => impact.kubectl.push(format!("kubectl cordon {node}")),
        Action::Uncordon { node } => impact.kubectl.push(format!("kubectl uncordon {node}")),
        Action::Drain { node, gpu_only } => {
            let victims = drain_victims(index, *node, *gpu_only);
            add_pods(index, &victims, &mut impact);
            impact.kubectl.push(format!("kubectl cordon {node}"));
            if *gpu_only {
                impact.kubectl.extend(victims.iter().map(|p| eviction_command(p)));
            } else {
                impact
                    .kubectl
                    .push(format!("kubectl drain {node} --ignore-daemonsets --delete-emptydir-data --timeout=300s"));
            }
            let bare: Vec<String> = victims.iter().filter(|p| p.owner.is_none()).map(|p| p.name.to_string()).collect();
            if !bare.is_empty() {
                impact.warnings.push(format!(
                    "{} pod(s) have no controller and will not come back: {}",
                    bare.len(),
                    bare.join(", ")
                ));
            }
        }
        Action::Requeue { gang } => {
            let members: Vec<&Pod> = index.members(gang).iter().copied().filter(|p| !p.phase.is_terminal()).collect();
            add_pods(index, &members, &mut impact);
            impact.gangs.retain(|g| !g.ends_with(&format!("{}/{}", gang.namespace, gang.name)));
            match gang.kind {
                GangKind::KueueWorkload => {
                    for active in [false, true] {
                        impact.kubectl.push(format!(
                            "kubectl patch workload -n {} {} --type=merge -p '{{\"spec\":{{\"active\":{active}}}}}'",
                            gang.namespace, gang.name
                        ));
                    }
                }
                GangKind::VolcanoPodGroup => {
                    impact.kubectl.push(format!("vcctl job suspend -n {} -N {}", gang.namespace, gang.name));
                    impact.kubectl.push(format!("vcctl job resume -n {} -N {}", gang.namespace, gang.name));
                }
            }
        }
        Action::RepartitionMig { node, config } => {
            let victims = drain_victims(index, *node, true);
            add_pods(index, &victims, &mut impact);
            impact.kubectl.push(format!("kubectl cordon {node}"));
            impact.kubectl.extend(victims.iter().map(|p| eviction_command(p)));
            impact.kubectl.push(format!("kubectl label node {node} nvidia.com/mig.config={config} --overwrite"));
            impact.kubectl.push(format!("kubectl get node {node} -L nvidia.com/mig.config.state -w"));
            impact.kubectl.push(format!("kubectl uncordon {node}"));
        }
        Action::RunPlan { target, evictions, reserve, .. } => {
            let victims: Vec<&Pod> = evictions.iter().filter_map(|k| index.snap.pods.get(k).map(|p| &**p)).collect();
            add_pods(index, &victims, &mut impact);
            let value = super::defrag::reservation_value(target);
            let taint = super::defrag::RESERVATION_TAINT;
            impact.kubectl.extend(reserve.iter().map(|n| format!("kubectl taint node {n} {taint}={value}:NoSchedule")));
            impact.kubectl.push(format!(
                "# add to each pending pod of the target: tolerations: [{{key: {taint}, operator: Equal, value: {value}, effect: NoSchedule}}]"
            ));
            impact.kubectl.extend(victims.iter().map(|p| eviction_command(p)));
            impact.kubectl.push("# wait until the target's pods are bound, then:".into());
            impact.kubectl.extend(reserve.iter().map(|n| format!("kubectl taint node {n} {taint}-")));
        }
    }
    impact
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::build::{node, pod};
    use crate::model::{Cluster, ModelEvent, Object, SourceInfo, SourceKind};

    #[test]
    fn drain_counts_pods_and_gpu_hours_and_skips_daemonsets() {
        let mut c = Cluster::new(SourceInfo { kind: SourceKind::Demo, name: "t".into() });
        c.apply(ModelEvent::Upsert(Object::Node(node("n1").gpus(8).build())));
        for p in [
            pod("train").gpus(4).on("n1").running().owner("Job", "train").transitioned(0).build(),
            pod("dp").on("n1").running().owner("DaemonSet", "nvidia-device-plugin").build(),
            pod("bare").gpus(1).on("n1").running().transitioned(1800).build(),
        ] {
            c.apply(ModelEvent::Upsert(Object::Pod(p)));
        }
        let snap = c.snapshot();
        let index = Index::build(&snap, 7200);
        let i = of(&index, &Action::Drain { node: Sym::new("n1"), gpu_only: false });
        assert_eq!(i.pods.len(), 2, "the DaemonSet pod stays");
        // 4 GPUs × 2h + 1 GPU × 1.5h
        assert!((i.gpu_hours - 9.5).abs() < 1e-9, "{}", i.gpu_hours);
        assert!(i.warnings[0].contains("bare"));
        assert!(i.kubectl.iter().any(|k| k.starts_with("kubectl drain n1 --ignore-daemonsets")));
    }
}
