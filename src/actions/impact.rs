//! The blast radius of an action, before it runs: the pods it stops, the
//! running gangs it breaks (one member evicted restarts the whole gang),
//! the GPU-hours of work that would be lost, and the kubectl commands that
//! do the same by hand.

use std::collections::BTreeSet;

use crate::analysis::index::Index;
use crate::analysis::lost_work;
use crate::model::{Pod, PodKey, Sym};

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Impact {
    /// Pods that would be evicted or deleted: (pod, node, what it holds).
    pub pods: Vec<(PodKey, Option<Sym>, Holds)>,
    /// Running gangs that would restart, as `Kind ns/name`.
    pub gangs: Vec<String>,
    pub gpu_hours: f64,
    pub kubectl: Vec<String>,
    pub warnings: Vec<String>,
}

/// What a pod holds of GPUs: whole GPUs (or replicas) and MIG slices, and
/// their share of physical GPUs, as the price of lost work counts it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Holds {
    pub gpus: u64,
    pub slices: Vec<(Sym, u64)>,
    pub gpu_share: f64,
}

impl std::fmt::Display for Holds {
    /// `8 GPU`, or `1× 1g.10gb = 0.14 GPU`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.slices.is_empty() && (self.gpu_share - self.gpus as f64).abs() < 1e-9 {
            return write!(f, "{} GPU", self.gpus);
        }
        let mut parts: Vec<String> = self.slices.iter().map(|(p, n)| format!("{n}× {p}")).collect();
        if self.gpus > 0 {
            parts.insert(0, format!("{} replica(s)", self.gpus));
        }
        write!(f, "{} = {:.2} GPU", parts.join(" + "), self.gpu_share)
    }
}

fn holds(index: &Index<'_>, p: &Pod) -> Holds {
    // GPUs through DRA claims count as the device plugin's do.
    let dra = index.dra().held_by(p);
    let mut slices: Vec<(Sym, u64)> = p.requests.mig().map(|(profile, n)| (Sym::new(profile), n)).collect();
    if dra.slices > 0 {
        slices.push((Sym::new("DRA MIG device"), dra.slices));
    }
    Holds { gpus: p.requests.gpu + dra.gpus, slices, gpu_share: lost_work::share_held(index, p) }
}

/// Pods a drain of `node` evicts: not DaemonSet-owned, not mirror pods, not finished.
pub fn drain_victims<'a>(index: &Index<'a>, node: Sym, gpu_only: bool) -> Vec<&'a Pod> {
    index
        .pods_on(&node)
        .iter()
        .copied()
        .filter(|p| !p.mirror && p.owner_kind() != Some("DaemonSet"))
        .filter(|p| !gpu_only || p.wants_gpu() || index.dra().held_by(p).share > 0.0)
        .collect()
}

pub(super) fn eviction_command(p: &Pod) -> String {
    format!(
        "echo '{{\"apiVersion\":\"policy/v1\",\"kind\":\"Eviction\",\"metadata\":{{\"name\":\"{n}\",\"namespace\":\"{ns}\"}}}}' | kubectl create --raw /api/v1/namespaces/{ns}/pods/{n}/eviction -f -",
        n = p.name,
        ns = p.namespace
    )
}

/// Adds `victims` to the blast radius, their work priced as every eviction
/// is (`lost_work`): a lone pod alone, a gang member as its whole gang
/// (every other running member restarts too).
pub(super) fn add_pods(index: &Index<'_>, victims: &[&Pod], impact: &mut Impact) {
    let mut gangs = BTreeSet::new();
    for p in victims {
        impact.pods.push((p.key(), p.node.clone(), holds(index, p)));
        match index.gang_of(&p.key()) {
            Some(g) => {
                gangs.insert(g.clone());
            }
            None => impact.gpu_hours += lost_work::of(index, &[*p]).gpu_hours,
        }
    }
    for g in &gangs {
        let members: Vec<&Pod> = index.members(g).iter().copied().filter(|m| m.holds_resources()).collect();
        impact.gpu_hours += lost_work::of(index, &members).gpu_hours;
        impact.gangs.push(format!("{} {}/{}", g.kind.kind_name(), g.namespace, g.name));
    }
    impact.warnings.extend(claims_left_behind(index, victims));
}

/// What becomes of the DRA claims the pods use, as the resource-claim
/// controller decides once they are gone: a claim made for a pod from a
/// template goes with it (its replacement gets one anew, anywhere); a shared
/// claim is deallocated when its last consumer goes, but while a pod this
/// action leaves still uses it, it stays allocated on its node, and a
/// replacement that uses it can run only there.
fn claims_left_behind(index: &Index<'_>, victims: &[&Pod]) -> Vec<String> {
    let going: BTreeSet<PodKey> = victims.iter().map(|p| p.key()).collect();
    let mut pinned: Vec<String> = Vec::new();
    for p in victims {
        for state in index.dra().pod_claims(p) {
            let crate::analysis::dra::PodClaimState::Found(_, claim) = state else { continue };
            if claim.owner_pod.is_some() || !claim.is_allocated() {
                continue;
            }
            let staying: Vec<&str> = claim
                .reserved_for
                .iter()
                .filter(|name| !going.contains(&PodKey::new(claim.namespace.as_str(), name)))
                .map(|name| &**name)
                .collect();
            if staying.is_empty() {
                continue;
            }
            let node = claim.allocated_node.as_ref().map_or_else(|| "its node".to_string(), |n| n.to_string());
            let line = format!(
                "shared claim {}/{} stays allocated on {node} while {} use(s) it: a replacement of {} that uses it can only run on {node}",
                claim.namespace,
                claim.name,
                staying.join(", "),
                p.name
            );
            if !pinned.contains(&line) {
                pinned.push(line);
            }
        }
    }
    pinned
}

/// What a line of the blast radius is, for the one who draws it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineKind {
    /// `blast radius: …`, the counts.
    Summary,
    /// A pod it stops, or how many more there are.
    Pod,
    /// A running gang that restarts.
    Gang,
    Warning,
    /// `by hand:`
    ByHand,
    /// A kubectl command, unindented (the drawer adds its prompt).
    Command,
}

/// How many pods and commands the blast radius lists before `… N more`.
pub const LISTED: usize = 40;

impl Impact {
    /// The blast radius in words, one list for the cockpit's confirmation
    /// and the command line's. A dry run says "would": nothing has happened.
    pub fn lines(&self, disruptive: bool, dry_run: bool) -> Vec<(LineKind, String)> {
        let would = if dry_run { "would be " } else { "" };
        let mut out = vec![(
            LineKind::Summary,
            if disruptive {
                format!(
                    "blast radius: {} pod(s), {} gang(s) broken, {:.1} GPU-h {would}lost (busy + restart)",
                    self.pods.len(),
                    self.gangs.len(),
                    self.gpu_hours
                )
            } else {
                "blast radius: none, nothing running stops".to_string()
            },
        )];
        for (pod, node, holds) in self.pods.iter().take(LISTED) {
            out.push((
                LineKind::Pod,
                format!("  pod {pod} on {} ({holds})", node.as_ref().map_or("-", |n| n.as_str())),
            ));
        }
        if self.pods.len() > LISTED {
            out.push((LineKind::Pod, format!("  … and {} more pod(s)", self.pods.len() - LISTED)));
        }
        out.extend(self.gangs.iter().map(|g| (LineKind::Gang, format!("  gang {g} restarts"))));
        out.extend(self.warnings.iter().map(|w| (LineKind::Warning, format!("  ! {w}"))));
        if !self.kubectl.is_empty() {
            out.push((LineKind::ByHand, "by hand:".to_string()));
            out.extend(self.kubectl.iter().take(LISTED).map(|k| (LineKind::Command, k.clone())));
            if self.kubectl.len() > LISTED {
                out.push((LineKind::Pod, format!("  … {} more command(s)", self.kubectl.len() - LISTED)));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actions::Action;
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
        let i = Action::Drain { node: Sym::new("n1"), gpu_only: false, force: true }.impact(&index);
        assert_eq!(i.pods.len(), 2, "the DaemonSet pod stays");
        // Busy since start (no usage read) + the default 10 min restart:
        // 4 GPUs × (2h + 10m) + 1 GPU × (1.5h + 10m)
        let want = (4.0 * 7800.0 + 6000.0) / 3600.0;
        assert!((i.gpu_hours - want).abs() < 1e-9, "{}", i.gpu_hours);
        assert!(i.warnings[0].contains("bare"));
        assert!(i.kubectl.iter().any(|k| k.starts_with("kubectl drain n1 --ignore-daemonsets")));
    }

    /// A shared claim goes with its last consumer; while a pod the drain
    /// leaves (here a DaemonSet's) still uses it, it stays on the node.
    #[test]
    fn a_shared_claim_a_pod_left_behind_still_uses_pins_the_replacements() {
        use crate::model::dra::{AllocatedDevice, Device, ResourceClaim, ResourceSlice};
        use crate::model::{ClaimSource, DraObject, PodClaim};
        let shared = || {
            Box::new([PodClaim {
                name: Sym::new("gpu"),
                source: ClaimSource::Claim("team-gpus".into()),
                generated: None,
            }]) as Box<[PodClaim]>
        };
        let drain = |with_monitor: bool| {
            let mut c = Cluster::new(SourceInfo { kind: SourceKind::Demo, name: "t".into() });
            c.apply(ModelEvent::Upsert(Object::Node(node("n1").build())));
            let mut serve = pod("serve").on("n1").running().owner("ReplicaSet", "serve-7d9").build();
            serve.claims = shared();
            let mut monitor = pod("monitor").on("n1").running().owner("DaemonSet", "gpu-monitor").build();
            monitor.claims = shared();
            let mut reserved: Vec<std::sync::Arc<str>> = vec!["serve".into()];
            c.apply(ModelEvent::Upsert(Object::Pod(serve)));
            if with_monitor {
                c.apply(ModelEvent::Upsert(Object::Pod(monitor)));
                reserved.push("monitor".into());
            }
            let gpu = Device {
                name: Sym::new("gpu-0"),
                attributes: Box::new([(
                    Sym::new("gpu.nvidia.com/type"),
                    crate::model::dra::AttributeValue::String("gpu".into()),
                )]),
                capacity: Box::new([]),
                taints: Box::new([]),
                consumes: Box::new([]),
            };
            let objects = [
                DraObject::Slice(ResourceSlice {
                    name: "n1-gpu".into(),
                    driver: Sym::new("gpu.nvidia.com"),
                    pool: Sym::new("n1"),
                    pool_generation: 1,
                    slice_count: 1,
                    node: Some(Sym::new("n1")),
                    devices: Box::new([gpu]),
                    shared_counters: Box::new([]),
                    unmodelled: Box::new([]),
                }),
                DraObject::Claim(ResourceClaim {
                    namespace: Sym::new("default"),
                    name: "team-gpus".into(),
                    template: false,
                    requests: Box::new([]),
                    constraints: Box::new([]),
                    allocated: Box::new([AllocatedDevice {
                        request: Sym::new("gpu"),
                        driver: Sym::new("gpu.nvidia.com"),
                        pool: Sym::new("n1"),
                        device: Sym::new("gpu-0"),
                        admin_access: false,
                    }]),
                    allocated_node: Some(Sym::new("n1")),
                    reserved_for: reserved.into_boxed_slice(),
                    owner_pod: None,
                    compute_domain: None,
                    unmodelled: Box::new([]),
                    deleting: false,
                    created: 0,
                }),
            ];
            c.apply_all(objects.into_iter().map(|o| ModelEvent::Upsert(Object::Dra(o))));
            let snap = c.snapshot();
            let index = Index::build(&snap, 7200);
            Action::Drain { node: Sym::new("n1"), gpu_only: false, force: true }.impact(&index)
        };
        let i = drain(true);
        assert_eq!(
            i.warnings,
            [
                "shared claim default/team-gpus stays allocated on n1 while monitor use(s) it: a replacement of serve that uses it can only run on n1"
            ]
        );
        assert!(drain(false).warnings.is_empty(), "its last consumer gone, the claim is deallocated");
    }

    #[test]
    fn a_drain_leaves_what_kubectl_leaves_unless_forced() {
        let mut c = Cluster::new(SourceInfo { kind: SourceKind::Demo, name: "t".into() });
        c.apply(ModelEvent::Upsert(Object::Node(node("n1").gpus(8).build())));
        for p in [
            pod("train").gpus(4).on("n1").running().owner("Job", "train").build(),
            pod("scratch").gpus(1).on("n1").running().owner("Job", "scratch").local_data().build(),
            pod("bare").gpus(1).on("n1").running().build(),
        ] {
            c.apply(ModelEvent::Upsert(Object::Pod(p)));
        }
        let snap = c.snapshot();
        let index = Index::build(&snap, 7200);
        let kept = Action::Drain { node: Sym::new("n1"), gpu_only: false, force: false }.impact(&index);
        assert!(kept.pods.is_empty(), "as kubectl drain: nothing is evicted while a pod stops the drain");
        assert!(
            kept.warnings[0].contains("2 pod(s) stop the drain") && kept.warnings[0].contains("emptyDir"),
            "{:?}",
            kept.warnings
        );
        assert!(!kept.kubectl.iter().any(|k| k.contains("--force")));
        let forced = Action::Drain { node: Sym::new("n1"), gpu_only: false, force: true }.impact(&index);
        assert_eq!(forced.pods.len(), 3);
        assert!(forced.warnings.iter().any(|w| w.starts_with("forced: 2 pod(s) lost")), "{:?}", forced.warnings);
        assert!(forced.kubectl.iter().any(|k| k.ends_with("--force --delete-emptydir-data")));
    }

    #[test]
    fn the_blast_radius_reads_the_same_wherever_it_is_shown_and_lists_a_bounded_few() {
        let mut c = Cluster::new(SourceInfo { kind: SourceKind::Demo, name: "t".into() });
        c.apply(ModelEvent::Upsert(Object::Node(node("n1").gpus(64).build())));
        for i in 0..45 {
            let p = pod(&format!("w{i:02}")).gpus(1).on("n1").running().owner("Job", &format!("w{i:02}")).build();
            c.apply(ModelEvent::Upsert(Object::Pod(p)));
        }
        let snap = c.snapshot();
        let index = Index::build(&snap, 7200);
        let drain = Action::Drain { node: Sym::new("n1"), gpu_only: false, force: false };
        let lines = drain.impact(&index).lines(true, true);
        assert!(
            lines[0].1.starts_with("blast radius: 45 pod(s), 0 gang(s) broken") && lines[0].1.contains("would be lost")
        );
        let pods: Vec<&str> = lines.iter().filter(|(k, _)| *k == LineKind::Pod).map(|(_, t)| t.as_str()).collect();
        assert_eq!(pods.len(), LISTED + 1);
        assert_eq!(pods[0], "  pod default/w00 on n1 (1 GPU)");
        assert_eq!(pods[LISTED], "  … and 5 more pod(s)");
        assert!(lines.iter().any(|(k, t)| *k == LineKind::Command && t.starts_with("kubectl drain n1")));
        let cordon = Action::Cordon { node: Sym::new("n1") };
        let lines = cordon.impact(&index).lines(false, false);
        assert_eq!(lines[0].1, "blast radius: none, nothing running stops");
        assert_eq!(lines.last().unwrap(), &(LineKind::Command, "kubectl cordon n1".to_string()));
    }
}
