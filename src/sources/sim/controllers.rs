//! The simulated cluster's controllers: kubelet start and device admission,
//! Job/ReplicaSet replacement, workload completion, the mig-manager, the GPU
//! Operator's upgrade state machine, arrivals for the live demo, garbage
//! collection, and commands from the cockpit.

use std::sync::Arc;

use crate::analysis::compat;
use crate::model::{Condition, EventType, GangKey, GangKind, PodKey, PodPhase, Sym, keys};
use crate::reference::mig;

use super::Involved;
use super::catalog;
use super::{Command, Fault, MigJob, PodPlan, SimCluster};

/// Seconds a MIG reconfiguration takes in the simulation.
const MIG_RECONFIGURE_SECONDS: i64 = 60;
/// Seconds per upgrade state on the happy path.
const UPGRADE_STEP_SECONDS: i64 = 120;
/// Nodes the upgrade controller works on at once (`maxParallelUpgrades`).
const MAX_PARALLEL_UPGRADES: usize = 2;

fn owner_name(sim: &SimCluster, key: &PodKey) -> Option<String> {
    sim.pods.get(key).and_then(|p| p.owner.as_ref()).map(|o| o.name.to_string())
}

pub(super) fn start_bound_pods(sim: &mut SimCluster) {
    let now = sim.now;
    let bound: Vec<PodKey> = sim
        .pods
        .values()
        .filter(|p| p.node.is_some() && p.phase == PodPhase::Pending && !p.terminating && p.reason.is_none())
        .map(|p| p.key())
        .collect();
    for key in bound {
        let Some(pod) = sim.pods.get(&key) else { continue };
        let Some(node_name) = pod.node.clone() else { continue };
        let fault = sim.faults.get(&node_name).copied();
        let incompatible = pod.cuda.and_then(compat::need_of).and_then(|need| {
            let node = sim.nodes.get(&node_name)?;
            let facts = compat::node_facts(node);
            let enforced = need.source != compat::NeedSource::Guessed && !need.disabled;
            (enforced && compat::runtime_allows(&need, &facts) == Some(false)).then(|| {
                need.sets.first().and_then(|s| s.text.split_whitespace().next().map(str::to_string)).unwrap_or_default()
            })
        });
        let (ns, name) = (pod.namespace.clone(), pod.name.to_string());
        let wants_gpu = pod.wants_gpu();
        let gpus = pod.requests.gpu;
        let Some(pod) = sim.pods.get_mut(&key) else { continue };
        if fault == Some(Fault::BlackHole) && wants_gpu {
            let message = format!(
                "Pod was rejected: Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. Requested: {gpus}, Available: 0, which is unexpected"
            );
            pod.phase = PodPhase::Failed;
            pod.reason = Some(Sym::new("UnexpectedAdmissionError"));
            pod.message = Some(message.as_str().into());
            pod.transitioned = now;
            sim.dirty.pods.insert(key.clone());
            sim.bump();
            sim.record(
                EventType::Warning,
                Involved { kind: "Pod", namespace: ns, name: &name },
                "UnexpectedAdmissionError",
                &message,
                "kubelet",
            );
        } else if let Some(condition) = incompatible {
            let message = format!(
                "Error: failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: error running hook #0: error running hook: exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'\nnvidia-container-cli: requirement error: unsatisfied condition: {condition}, please update your driver to a newer version, or use an earlier cuda container: unknown"
            );
            pod.reason = Some(Sym::new("RunContainerError"));
            pod.message = Some(message.as_str().into());
            pod.transitioned = now;
            sim.dirty.pods.insert(key.clone());
            sim.bump();
            sim.record(
                EventType::Warning,
                Involved { kind: "Pod", namespace: ns, name: &name },
                "Failed",
                &message,
                "kubelet",
            );
        } else {
            pod.phase = PodPhase::Running;
            pod.transitioned = now;
            sim.dirty.pods.insert(key.clone());
            sim.bump();
        }
    }
}

pub(super) fn finish_work(sim: &mut SimCluster) {
    let now = sim.now;
    let done: Vec<PodKey> = sim
        .pods
        .values()
        .filter(|p| p.phase == PodPhase::Running)
        .filter(|p| sim.plans.get(&p.key()).and_then(|plan| plan.runs_for).is_some_and(|d| now - p.transitioned >= d))
        .map(|p| p.key())
        .collect();
    for key in done {
        if let Some(p) = sim.pods.get_mut(&key) {
            p.phase = PodPhase::Succeeded;
            p.transitioned = now;
            sim.dirty.pods.insert(key);
            sim.bump();
        }
    }
    // A Kueue workload finishes when every member succeeded.
    let finished: Vec<GangKey> = sim
        .gangs
        .values()
        .filter(|g| g.kind == GangKind::KueueWorkload && g.admission.is_some() && !g.is_finished())
        .filter(|g| {
            let owner = g.owner.as_ref().map(|o| o.name.clone());
            let members: Vec<_> = sim
                .pods
                .values()
                .filter(|p| p.namespace == g.namespace && p.owner.as_ref().map(|o| o.name.clone()) == owner)
                .collect();
            !members.is_empty()
                && members.len() as u32 >= g.total_pods()
                && members.iter().all(|p| p.phase == PodPhase::Succeeded)
        })
        .map(|g| g.key())
        .collect();
    for key in finished {
        if let Some(g) = sim.gangs.get_mut(&key) {
            let mut c = g.conditions.to_vec();
            c.push(Condition {
                kind: Sym::new("Finished"),
                status: true,
                reason: Sym::new("Succeeded"),
                message: "Job finished successfully".into(),
                since: now,
            });
            g.conditions = c.into_boxed_slice();
            sim.dirty.gangs.insert(key);
            sim.bump();
        }
    }
}

/// Job and ReplicaSet controllers: a failed pod gets a replacement.
pub(super) fn replace_failed(sim: &mut SimCluster) {
    let now = sim.now;
    let failed: Vec<PodKey> = sim
        .pods
        .values()
        .filter(|p| p.phase == PodPhase::Failed && now - p.transitioned >= 10)
        .filter(|p| sim.plans.get(&p.key()).is_some_and(|plan| plan.replace_on_failure))
        .map(|p| p.key())
        .collect();
    for key in failed {
        let Some(old) = sim.pods.get(&key).cloned() else { continue };
        if let Some(plan) = sim.plans.get_mut(&key) {
            plan.replace_on_failure = false;
        }
        let plan = PodPlan { replace_on_failure: true, ..sim.plans.get(&key).cloned().unwrap_or_default() };
        let mut pod = old.clone();
        let base = old.owner.as_ref().map_or_else(|| old.name.to_string(), |o| o.name.to_string());
        let suffix = sim.next_suffix();
        pod.name = Arc::from(format!("{base}-{suffix}").as_str());
        pod.node = None;
        pod.phase = PodPhase::Pending;
        pod.reason = None;
        pod.message = None;
        pod.unschedulable = None;
        pod.created = now;
        pod.transitioned = now;
        super::claims::fresh(&mut pod);
        sim.add_pod(pod, plan);
        sim.bump();
    }
}

/// New work arriving in the live demo.
pub(super) fn churn(sim: &mut SimCluster, dt: i64) {
    if sim.churn_per_hour <= 0.0 || dt <= 0 {
        return;
    }
    let p = (sim.churn_per_hour * dt as f64 / 3600.0).min(1.0);
    if !sim.rng.chance(p) {
        return;
    }
    super::scenarios::arrival(sim);
}

pub(super) fn mig_manager(sim: &mut SimCluster) {
    let now = sim.now;
    let names: Vec<Sym> = sim.nodes.keys().cloned().collect();
    for name in names {
        let Some(node) = sim.nodes.get(&name) else { continue };
        let Some(spec) = sim.specs.get(&name) else { continue };
        let wanted = node.operator.mig_config.as_ref().map(|c| c.as_str().to_string());
        let applied = spec.mig_config.clone().unwrap_or_else(|| "all-disabled".to_string());
        let Some(wanted) = wanted else { continue };
        let state = node.operator.mig_config_state.as_ref().map(|s| s.as_str());
        if wanted == applied && state != Some("pending") {
            continue;
        }
        match sim.mig_jobs.get(&name).cloned() {
            Some(job) if job.config == wanted => {
                let Some(done_at) = job.done_at else { continue }; // wedged
                if now < done_at {
                    continue;
                }
                sim.mig_jobs.remove(&name);
                finish_reconfigure(sim, name, &wanted);
            }
            _ => {
                let wedge = sim.faults.get(&name) == Some(&Fault::MigWedge);
                sim.mig_jobs.insert(
                    name.clone(),
                    MigJob { config: wanted.clone(), done_at: (!wedge).then_some(now + MIG_RECONFIGURE_SECONDS) },
                );
                let n = name.as_str().to_string();
                sim.set_node_label(&n, keys::MIG_CONFIG_STATE, Some("pending"));
                for operand in ["device-plugin", "gpu-feature-discovery", "dcgm-exporter", "dcgm", "nvsm"] {
                    sim.set_node_label(
                        &n,
                        &format!("{}{operand}", keys::GPU_DEPLOY_PREFIX),
                        Some(keys::PAUSED_FOR_MIG_CHANGE),
                    );
                }
                sim.bump();
            }
        }
    }
}

fn finish_reconfigure(sim: &mut SimCluster, name: Sym, wanted: &str) {
    let n = name.as_str().to_string();
    let in_use = sim.pods.values().any(|p| p.node.as_ref() == Some(&name) && p.holds_resources() && p.wants_gpu());
    let known = sim
        .specs
        .get(&name)
        .and_then(|s| mig::model_for_product(s.model.product))
        .is_some_and(|model| mig::configs_for_model(model).iter().any(|c| c.name == wanted));
    if in_use || !known {
        sim.set_node_label(&n, keys::MIG_CONFIG_STATE, Some("failed"));
        let why = if in_use {
            "GPUs in use by pods: drain GPU pods first (nvidia-smi: In use by another client)"
        } else {
            "config not valid for this GPU"
        };
        sim.record(
            EventType::Warning,
            Involved { kind: "Node", namespace: Sym::new(""), name: &n },
            "MigConfigFailed",
            &format!("unable to apply MIG config {wanted}: {why}"),
            "nvidia-mig-manager",
        );
    } else {
        let Some(spec) = sim.specs.get_mut(&name) else { return };
        spec.mig_config = (wanted != "all-disabled").then(|| wanted.to_string());
        let spec = spec.clone();
        let devices = catalog::devices(&spec, sim.now);
        let fresh = catalog::node(&spec, &devices);
        sim.devices.insert(name.clone(), devices);
        sim.dirty.devices.insert(name.clone());
        sim.edit_node(&n, |node| {
            node.capacity = fresh.capacity.clone();
            node.allocatable = fresh.allocatable.clone();
        });
        // MIG per-profile labels follow the new layout.
        let stale: Vec<String> = sim
            .nodes
            .get(&name)
            .map(|node| {
                node.labels
                    .iter()
                    .map(|(k, _)| k.as_str())
                    .filter(|k| k.starts_with(keys::RESOURCE_MIG_PREFIX))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        for k in stale {
            sim.set_node_label(&n, &k, None);
        }
        for (k, v) in fresh.labels.iter().filter(|(k, _)| k.as_str().starts_with(keys::RESOURCE_MIG_PREFIX)) {
            sim.set_node_label(&n, k.as_str(), Some(v.as_str()));
        }
        sim.set_node_label(&n, keys::MIG_STRATEGY, Some(if spec.mig_config.is_some() { "mixed" } else { "single" }));
        sim.set_node_label(&n, keys::MIG_CONFIG_STATE, Some("success"));
        sim.record(
            EventType::Normal,
            Involved { kind: "Node", namespace: Sym::new(""), name: &n },
            "MigConfigApplied",
            &format!("applied MIG config {wanted}"),
            "nvidia-mig-manager",
        );
    }
    for operand in ["device-plugin", "gpu-feature-discovery", "dcgm-exporter", "dcgm", "nvsm"] {
        sim.set_node_label(&n, &format!("{}{operand}", keys::GPU_DEPLOY_PREFIX), Some("true"));
    }
    sim.bump();
}

const HAPPY_PATH: [&str; 8] = [
    "upgrade-required",
    "cordon-required",
    "wait-for-jobs-required",
    "pod-deletion-required",
    "pod-restart-required",
    "validation-required",
    "uncordon-required",
    "upgrade-done",
];

pub(super) fn upgrades(sim: &mut SimCluster) {
    let Some(target) = sim.upgrade_target else { return };
    let now = sim.now;
    let in_flight = sim
        .nodes
        .values()
        .filter(|n| {
            (n.operator.upgrade_state)
                .clone()
                .is_some_and(|s| !matches!(s.as_str(), "upgrade-required" | "upgrade-done" | "upgrade-failed"))
        })
        .count();
    let mut slots = MAX_PARALLEL_UPGRADES.saturating_sub(in_flight);
    let names: Vec<Sym> = sim.nodes.keys().cloned().collect();
    for name in names {
        let Some(node) = sim.nodes.get(&name) else { continue };
        let Some(state) = node.operator.upgrade_state.as_ref().map(|s| s.as_str()) else { continue };
        let since = node.operator.upgrade_since.unwrap_or(now);
        let held = sim.faults.get(&name) == Some(&Fault::UpgradeStuck) || node.operator.upgrade_skip;
        if held || now - since < UPGRADE_STEP_SECONDS {
            continue;
        }
        let Some(pos) = HAPPY_PATH.iter().position(|s| *s == state) else { continue };
        if pos + 1 >= HAPPY_PATH.len() {
            continue;
        }
        if state == "upgrade-required" {
            if slots == 0 {
                continue;
            }
            slots -= 1;
        }
        let next = HAPPY_PATH[pos + 1];
        let n = name.as_str().to_string();
        match next {
            "cordon-required" => sim.edit_node(&n, |node| node.unschedulable = true),
            "pod-restart-required" => {
                let evict: Vec<PodKey> = sim
                    .pods
                    .values()
                    .filter(|p| p.node.as_ref() == Some(&name) && p.holds_resources() && p.wants_gpu())
                    .map(|p| p.key())
                    .collect();
                for k in evict {
                    let _ = command(sim, Command::Evict(k));
                }
                for (k, v) in [
                    (keys::DRIVER_FULL, target.version.to_string()),
                    (keys::DRIVER_MAJOR, target.version.split('.').next().unwrap_or("").to_string()),
                    (keys::DRIVER_MAJOR_DEPRECATED, target.version.split('.').next().unwrap_or("").to_string()),
                    (keys::CUDA_RUNTIME_MAJOR, target.cuda.split('.').next().unwrap_or("").to_string()),
                    (keys::CUDA_RUNTIME_MINOR, target.cuda.split('.').nth(1).unwrap_or("0").to_string()),
                ] {
                    sim.set_node_label(&n, k, Some(&v));
                }
                if let Some(spec) = sim.specs.get_mut(&name) {
                    spec.driver = target;
                }
            }
            "upgrade-done" => sim.edit_node(&n, |node| node.unschedulable = false),
            _ => {}
        }
        sim.set_node_label(&n, keys::DRIVER_UPGRADE_STATE, Some(next));
        sim.record(
            EventType::Normal,
            Involved { kind: "Node", namespace: Sym::new(""), name: &n },
            "GPUDriverUpgrade",
            &format!("Successfully updated node state label to [{next}]"),
            "nvidia-gpu-operator",
        );
        sim.bump();
    }
}

/// Finished pods go after a while, as TTL controllers and GC do.
pub(super) fn garbage_collect(sim: &mut SimCluster) {
    let now = sim.now;
    let old: Vec<PodKey> = sim
        .pods
        .values()
        .filter(|p| match p.phase {
            PodPhase::Succeeded => now - p.transitioned > 600,
            PodPhase::Failed => now - p.transitioned > 3 * 3600,
            _ => false,
        })
        .map(|p| p.key())
        .collect();
    for k in old {
        sim.pods.remove(&k);
        sim.plans.remove(&k);
        sim.dirty.deleted_pods.insert(k);
    }
    let done: Vec<GangKey> = sim
        .gangs
        .values()
        .filter(|g| g.condition("Finished").is_some_and(|c| c.status && now - c.since > 600))
        .map(|g| g.key())
        .collect();
    for k in done {
        sim.gangs.remove(&k);
        sim.templates.remove(&k);
        sim.dirty.gangs.remove(&k);
    }
    // Events older than a day are gone in Kubernetes (TTL 1h by default; keep more for the story).
    sim.events.retain(|_, e| now - e.last <= 24 * 3600);
}

pub(super) fn command(sim: &mut SimCluster, command: Command) -> Result<String, String> {
    let now = sim.now;
    let cordon = matches!(command, Command::Cordon(_));
    match command {
        Command::Cordon(node) | Command::Uncordon(node) => {
            if !sim.nodes.contains_key(&node) {
                return Err(format!("nodes \"{node}\" not found"));
            }
            let n = node.as_str().to_string();
            sim.edit_node(&n, |x| x.unschedulable = cordon);
            sim.bump();
            Ok(format!("node/{node} {}", if cordon { "cordoned" } else { "uncordoned" }))
        }
        Command::Evict(key) => {
            let Some(pod) = sim.pods.remove(&key) else {
                return Err(format!("pods \"{}\" not found", key.name));
            };
            let plan = sim.plans.remove(&key).unwrap_or_default();
            sim.dirty.deleted_pods.insert(key.clone());
            sim.record(
                EventType::Normal,
                Involved { kind: "Pod", namespace: pod.namespace.clone(), name: &pod.name },
                "Killing",
                "Stopping container (evicted)",
                "kubelet",
            );
            // A controller-owned pod comes back and queues for a node again.
            if pod.owner.is_some() && !pod.phase.is_terminal() {
                let mut fresh = pod.clone();
                let base = owner_name(sim, &key)
                    .unwrap_or_else(|| pod.owner.as_ref().map_or_else(|| pod.name.to_string(), |o| o.name.to_string()));
                let suffix = sim.next_suffix();
                fresh.name = Arc::from(format!("{base}-{suffix}").as_str());
                fresh.node = None;
                fresh.phase = PodPhase::Pending;
                fresh.reason = None;
                fresh.message = None;
                fresh.unschedulable = None;
                fresh.created = now;
                fresh.transitioned = now;
                super::claims::fresh(&mut fresh);
                sim.add_pod(fresh, plan);
            }
            sim.bump();
            Ok(format!("pod/{} evicted", key.name))
        }
        Command::SetActive(key, active) => {
            let Some(g) = sim.gangs.get_mut(&key) else {
                return Err(format!("workloads.kueue.x-k8s.io \"{}\" not found", key.name));
            };
            if g.active == active {
                return Ok(format!("workload/{} unchanged (spec.active already {active})", key.name));
            }
            g.active = active;
            let mut c: Vec<Condition> = g.conditions.to_vec();
            if active {
                c.retain(|x| x.kind.as_str() != "Requeued");
                c.push(Condition {
                    kind: Sym::new("Requeued"),
                    status: true,
                    reason: Sym::new("Reactivated"),
                    message: "The workload was reactivated".into(),
                    since: now,
                });
                g.requeue = None;
            } else {
                g.admission = None;
                c.retain(|x| !matches!(x.kind.as_str(), "Evicted" | "QuotaReserved" | "Admitted"));
                c.push(Condition {
                    kind: Sym::new("Evicted"),
                    status: true,
                    reason: Sym::new("Deactivated"),
                    message: "The workload is deactivated".into(),
                    since: now,
                });
                c.push(Condition {
                    kind: Sym::new("QuotaReserved"),
                    status: false,
                    reason: Sym::new("Pending"),
                    message: "The workload is deactivated".into(),
                    since: now,
                });
            }
            g.conditions = c.into_boxed_slice();
            sim.dirty.gangs.insert(key.clone());
            if !active {
                delete_members(sim, &key);
            }
            sim.bump();
            Ok(format!("workload/{} spec.active={active}", key.name))
        }
        Command::DeleteGangPods(key) => {
            let n = delete_members(sim, &key);
            // The owner recreates them: admitted Kueue jobs at once.
            if let Some(g) = sim.gangs.get(&key)
                && let Some(adm) = &g.admission
                && let Some(flavor) = adm.assignments.first().and_then(|a| a.flavors.first()).map(|(_, f)| f.clone())
            {
                let count = g.total_pods();
                super::kueue::create_members(sim, &key, flavor, count);
            }
            sim.bump();
            Ok(format!("{n} pod(s) of {}/{} deleted", key.namespace, key.name))
        }
        Command::SetMigConfig(node, config) => {
            let Some(spec) = sim.specs.get(&node) else {
                return Err(format!("node {node} has no GPUs the simulator can repartition"));
            };
            let valid = mig::model_for_product(spec.model.product)
                .map(mig::configs_for_model)
                .unwrap_or_default()
                .iter()
                .any(|c| c.name == config);
            if !valid {
                return Err(format!("mig.config '{config}' is not valid for {}", spec.model.product));
            }
            let n = node.as_str().to_string();
            sim.set_node_label(&n, keys::MIG_CONFIG, Some(&config));
            sim.bump();
            Ok(format!("node/{node} labeled nvidia.com/mig.config={config}"))
        }
        Command::Taint(node, taint) => {
            if !sim.nodes.contains_key(&node) {
                return Err(format!("nodes \"{node}\" not found"));
            }
            let text = format!("node/{node} tainted {}={}:{}", taint.key, taint.value, taint.effect.as_str());
            sim.edit_node(node.as_str(), |n| {
                let mut taints: Vec<_> =
                    n.taints.iter().filter(|t| !(t.key == taint.key && t.effect == taint.effect)).cloned().collect();
                taints.push(taint);
                n.taints = taints.into_boxed_slice();
            });
            sim.bump();
            Ok(text)
        }
        Command::Untaint(node, key) => {
            if !sim.nodes.contains_key(&node) {
                return Err(format!("nodes \"{node}\" not found"));
            }
            sim.edit_node(node.as_str(), |n| n.taints = n.taints.iter().filter(|t| t.key != key).cloned().collect());
            sim.bump();
            Ok(format!("node/{node} untainted {key}"))
        }
        Command::Tolerate(key, toleration) => {
            let Some(pod) = sim.pods.get_mut(&key) else {
                return Err(format!("pods \"{}\" not found", key.name));
            };
            if !pod.tolerations.contains(&toleration) {
                let mut all = pod.tolerations.to_vec();
                all.push(toleration);
                pod.tolerations = all.into_boxed_slice();
                sim.dirty.pods.insert(key.clone());
                sim.bump();
            }
            Ok(format!("pod/{} tolerates it", key.name))
        }
    }
}

fn delete_members(sim: &mut SimCluster, key: &GangKey) -> usize {
    let owner = sim.gangs.get(key).and_then(|g| g.owner.clone());
    let members: Vec<PodKey> = sim
        .pods
        .values()
        .filter(|p| p.namespace == key.namespace)
        .filter(|p| {
            p.group.as_ref().is_some_and(|g| g.as_str() == &*key.name)
                || owner.as_ref().is_some_and(|o| p.owner.as_ref() == Some(o))
        })
        .map(|p| p.key())
        .collect();
    for k in &members {
        sim.pods.remove(k);
        sim.plans.remove(k);
        sim.dirty.deleted_pods.insert(k.clone());
    }
    members.len()
}
