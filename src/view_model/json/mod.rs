//! The stable machine-readable snapshot (`kgpu snapshot -o json`), as
//! DESIGN.md's "Machine-readable output" defines it. Field names are a
//! contract: add fields, never rename or repurpose them.
//! The types are in `schema`; this file fills them from an analysis.

use std::collections::BTreeMap;

use crate::analysis::Analysis;
use crate::analysis::fragmentation::{PlanStatus, ShapeSource};
use crate::model::Snapshot;

use super::Section;

mod schema;

pub use schema::*;

fn feed_json(snap: &Snapshot, now: i64) -> BTreeMap<String, FeedJson> {
    super::feeds::health(snap, now)
        .into_iter()
        .map(|h| {
            let listed_by = h.listed_by().map(|(by, why)| (by, why.map(str::to_string)));
            let json = FeedJson {
                state: h.state,
                reason: h.reason,
                age_seconds: h.age,
                skipped: h.skipped.as_ref().map(|(n, _)| *n),
                skipped_reason: h.skipped.map(|(_, why)| why),
                reporters: h.coverage.as_ref().map(|c| c.reporters),
                reporters_read: h.coverage.as_ref().map(|c| c.read),
                oldest_reading_age_seconds: h
                    .coverage
                    .as_ref()
                    .and_then(|c| c.oldest_reading)
                    .map(|t| (now - t).max(0)),
                request_budget_per_second: h.coverage.as_ref().and_then(|c| c.budget),
                read_from: h.coverage.and_then(|c| c.via).map(|v| v.to_string()),
                listed_by: listed_by.as_ref().map(|(by, _)| *by),
                stream_refused: listed_by.and_then(|(_, why)| why),
                api_version: h.older_api.map(|v| v.to_string()),
            };
            (h.feed.name().to_string(), json)
        })
        .collect()
}

pub fn document(
    snap: &Snapshot,
    a: &Analysis,
    section: Option<Section>,
    waves: Option<(&crate::analysis::waves::WavePlan, &str)>,
) -> Document {
    let want = |s: Section| section.is_none_or(|x| x == s);
    let now = a.now;
    Document {
        kgpu_snapshot: 1,
        source: Source { kind: snap.source.kind.as_str(), name: snap.source.name.clone() },
        at: now,
        scenario: snap.scenario.as_ref().map(|s| Scenario {
            name: s.name.clone(),
            title: s.title.clone(),
            story: s.story.clone(),
            signal: s.signal.clone(),
        }),
        feeds: feed_json(snap, now),
        fleet: want(Section::Fleet).then(|| fleet(a)),
        fragmentation: want(Section::Fragmentation).then(|| fragmentation(a)),
        pending: want(Section::Pending).then(|| a.pending.iter().map(pending).collect()),
        gangs: want(Section::Gangs).then(|| gangs(a)),
        queues: want(Section::Queues).then(|| queues(a)),
        drivers: want(Section::Drivers).then(|| drivers(a, waves)),
        mig: want(Section::Mig).then(|| mig(snap, a)),
        events: want(Section::Events).then(|| events(snap, now)),
        utilization: want(Section::Utilization).then(|| utilization(snap, a)),
        spot: (want(Section::Gangs) && a.spot.nodes > 0).then(|| SpotJson {
            nodes: a.spot.nodes,
            replaced_last_24h: a.spot.replaced,
            exposure_hours: round3(a.spot.exposure_hours),
            preemptions_per_node_hour: round3(a.spot.rate_per_node_hour),
            jobs: a
                .spot
                .jobs
                .iter()
                .map(|j| SpotJobJson {
                    name: j.name.clone(),
                    gang: j.gang.is_some(),
                    spot_nodes: j.spot_nodes,
                    gpus: j.gpus,
                    checkpoint_interval_seconds: j.interval_seconds,
                    restart_seconds: j.restart_seconds,
                    break_even_discount: j.lost_fraction.map(round3),
                    interval_for_ten_percent_seconds: j.interval_for_target,
                })
                .collect(),
        }),
        dra_unmodelled: a
            .dra_unmodelled
            .iter()
            .map(|(f, at)| DraUnmodelledJson { feature: f.short(), objects: at.clone() })
            .collect(),
    }
}

fn fleet(a: &Analysis) -> Fleet {
    let t = &a.totals;
    Fleet {
        totals: Totals {
            gpus: t.gpus,
            allocated: t.allocated,
            free: t.free,
            stranded: t.stranded,
            unavailable: t.unavailable,
            unadvertised: t.unadvertised,
            unhealthy: t.unhealthy,
            mig_gpus: t.mig_gpus,
            held_not_started: a.held_not_started(),
            replicas: (t.replicas.0 > 0).then_some(ReplicasJson { advertised: t.replicas.0, allocated: t.replicas.1 }),
            fragmentation_score: round3(a.fragmentation.score),
        },
        nodes: a
            .nodes
            .iter()
            .map(|n| NodeJson {
                name: n.name.to_string(),
                ready: n.ready,
                cordoned: n.cordoned,
                product: n.product.as_ref().map(|p| p.to_string()),
                driver: n.driver.clone(),
                gpu: NodeGpu {
                    hardware: n.hardware,
                    allocatable: n.gpu_allocatable,
                    allocated: n.gpu_allocated,
                    free: n.gpu_free,
                    stranded: a.fragmentation.stranded_by_node.get(&n.name).copied().unwrap_or(0),
                    physical: PhysicalGpus {
                        used: n.buckets.used,
                        free: n.buckets.free,
                        unavailable: n.buckets.unavailable,
                        unadvertised: n.buckets.unadvertised,
                        unhealthy: n.buckets.unhealthy,
                    },
                    dra: n.dra.map(|d| DraGpusJson {
                        published: d.published,
                        allocated: d.allocated,
                        tainted: d.tainted,
                    }),
                },
                mig: n
                    .mig_slices()
                    .iter()
                    .map(|m| (m.profile.to_string(), MigCount { allocatable: m.allocatable, allocated: m.allocated }))
                    .collect(),
                issues: n.issues.iter().map(|i| i.code.as_str().to_string()).collect(),
                issue_details: n.issues.iter().map(|i| format!("{}: {}", i.code.as_str(), i.detail)).collect(),
            })
            .collect(),
    }
}

fn round3(x: f64) -> f64 {
    // `+ 0.0`: an empty sum is -0.0, which JSON would print as such.
    let x = x + 0.0;
    (x * 1000.0).round() / 1000.0
}

fn source_label(s: &ShapeSource) -> String {
    match s {
        ShapeSource::Canonical => "canonical".into(),
        ShapeSource::Pod(k) => format!("Pod {}/{}", k.namespace, k.name),
        ShapeSource::Gang(k) => format!("{} {}/{}", k.kind.kind_name(), k.namespace, k.name),
    }
}

fn fragmentation(a: &Analysis) -> Fragmentation {
    let f = &a.fragmentation;
    let p = &f.plan;
    let (status, reason) = match &p.status {
        PlanStatus::NotNeeded => ("not-needed", None),
        PlanStatus::Found => ("found", None),
        PlanStatus::Impossible(why) => ("impossible", Some(why.clone())),
    };
    Fragmentation {
        score: round3(f.score),
        free: f.free_total,
        free_on_whole_nodes: f.free_on_whole_nodes,
        stranded: f.stranded_total,
        shapes: f
            .shapes
            .iter()
            .map(|s| ShapeJson {
                gpus_per_pod: s.demand.gpus_per_pod,
                mig_profile: s.demand.mig_profile.as_ref().map(|p| p.to_string()),
                dra: s.demand.dra.is_some(),
                pods: s.demand.pods,
                fits_now: s.fits_now,
                usable_free: s.usable_free,
                stranded_free: s.stranded_free,
                largest_gang: s.largest_gang,
                source: source_label(&s.demand.source),
            })
            .collect(),
        plan: p
            .steps
            .iter()
            .map(|s| PlanStepJson {
                action: if s.to_node.is_some() { "move" } else { "evict" },
                namespace: s.namespace.to_string(),
                pod: s.pod.clone(),
                from_node: s.from_node.to_string(),
                to_node: s.to_node.as_ref().map(|n| n.to_string()),
                gpus: s.gpus,
                gpu_hours_disrupted: round3(s.gpu_hours_disrupted),
                gang: s.gang.clone(),
                idle_seconds: s.idle_seconds,
            })
            .collect(),
        plan_summary: PlanSummary {
            status,
            reason,
            target: p.target.clone(),
            target_shape: p.target_shape.clone(),
            evictions: p.steps.len(),
            gpu_hours_disrupted: round3(p.gpu_hours),
            nodes_freed: p.nodes_freed.iter().map(|n| n.to_string()).collect(),
            nodes_reserved: p.reserve.iter().map(|n| n.to_string()).collect(),
        },
    }
}

fn verdict_str(v: crate::analysis::pending::Verdict) -> &'static str {
    use crate::analysis::pending::Verdict;
    match v {
        Verdict::Pass => "pass",
        Verdict::Block => "block",
        Verdict::Warn => "warn",
        Verdict::NotApplicable => "n/a",
    }
}

fn pending(p: &crate::analysis::pending::PendingItem) -> Pending {
    Pending {
        kind: p.kind.as_str(),
        namespace: p.namespace.to_string(),
        name: p.name.clone(),
        blocking_step: p.blocking_str(),
        verdict_source: p.verdict_source.as_str(),
        summary: p.summary.clone(),
        node_reasons: (*p.node_reasons).clone(),
        scheduler_message: p.scheduler_message.clone(),
        scheduler_recognised: p.scheduler_recognised,
        scheduler_reasons: (*p.scheduler_reasons).clone(),
        agrees_with_scheduler: p.agrees_with_scheduler,
        hints: p.hints.clone(),
        age_seconds: p.age,
        queue: p.queue.as_ref().map(|q| q.to_string()),
        shape: p.shape.clone(),
        unblock: p.unblock.clone(),
        nominated_node: p.nominated_node.as_ref().map(|n| n.to_string()),
        preemption: p.preemption.as_ref().map(|c| PreemptionJson {
            node: c.node.to_string(),
            gpu_hours: round3(c.gpu_hours),
            victims: c
                .victims
                .iter()
                .map(|v| VictimJson {
                    name: v.name.clone(),
                    gang: v.gang,
                    pods: v.pods,
                    gpus: v.gpus,
                    gpu_share: round3(v.lost.gpu_share),
                    seconds_since_checkpoint: v.lost.busy_seconds + v.lost.idle_seconds,
                    busy_seconds: v.lost.busy_seconds,
                    checkpoint_known: v.lost.checkpoint_known,
                    restart_seconds: v.lost.restart_seconds,
                    gpu_hours: round3(v.gpu_hours),
                })
                .collect(),
            cheapest_node: c.cheapest.as_ref().map(|(n, _)| n.to_string()),
            cheapest_gpu_hours: c.cheapest.clone().map(|(_, h)| round3(h)),
            policy_never: c.policy_never,
        }),
        steps: p
            .steps
            .iter()
            .map(|s| StepJson {
                step: s.step.as_str(),
                verdict: verdict_str(s.verdict),
                summary: s.summary.to_string(),
                details: s.details.to_vec(),
                commands: s.commands.clone(),
            })
            .collect(),
    }
}

fn gangs(a: &Analysis) -> Vec<GangJson> {
    a.gangs
        .iter()
        .map(|g| GangJson {
            kind: g.key.kind.kind_name(),
            namespace: g.key.namespace.to_string(),
            name: g.key.name.to_string(),
            required: g.required,
            placed: g.placed,
            gpus_held_idle: g.gpus_held_idle,
            state: if g.deadlocked_with.is_empty() { g.state.as_str() } else { "deadlocked" },
            deadlocked_with: g.deadlocked_with.clone(),
            queue: g.queue.as_ref().map(|q| q.to_string()),
            nodes: g.nodes.iter().map(|(n, c)| (n.to_string(), *c)).collect(),
            issues: match g.topology {
                crate::analysis::gangs::Topology::Split { .. } => vec!["topology-split"],
                crate::analysis::gangs::Topology::Unknown => vec!["topology-unknown"],
                _ => Vec::new(),
            }
            .into_iter()
            .chain((g.dra_not_in_quota > 0).then_some("dra-not-in-quota"))
            .collect(),
            topology: g.topology_note(),
            age_seconds: g.age,
        })
        .collect()
}

fn queues(a: &Analysis) -> Vec<QueueJson> {
    a.queues
        .iter()
        .map(|q| QueueJson {
            kind: q.kind.kind_name(),
            name: q.name.to_string(),
            namespace: q.namespace.as_ref().map(|n| n.to_string()),
            flavor: q.flavor.as_ref().map(|f| f.to_string()),
            resource: q.resource.to_string(),
            nominal: q.nominal,
            used: q.used,
            borrowing_limit: q.borrowing_limit,
            pending: q.pending,
            admitted: q.admitted,
            inadmissible: q.inadmissible,
            cohort: q.cohort.as_ref().map(|c| c.to_string()),
            active: q.active,
            borrowed: q.borrowed,
            fair_share: q.fair_share,
        })
        .collect()
}

fn drivers(a: &Analysis, waves: Option<(&crate::analysis::waves::WavePlan, &str)>) -> Drivers {
    Drivers {
        matrix: a
            .matrix
            .cells
            .iter()
            .map(|c| CellJson {
                driver: c.driver.clone(),
                nodes: c.nodes.len(),
                cuda: c.cuda.clone(),
                workloads: c.workloads.count,
                placed: c.placed.count,
                verdict: c.verdict.as_str(),
                reason: c.reason.clone(),
            })
            .collect(),
        upgrades: a
            .upgrades
            .iter()
            .map(|u| UpgradeJson {
                node: u.node.to_string(),
                state: u.state_str().to_string(),
                since_seconds: u.seconds_in_state,
                stuck: u.stuck,
                skip: u.skip,
                driver: u.driver.as_ref().map(|d| d.to_string()),
                done_off_target: u.done_off_target,
            })
            .collect(),
        waves: waves.map(|(w, source)| WavesJson {
            target: w.target.clone(),
            source: source.to_string(),
            wave_size: w.wave_size,
            max_parallel_upgrades: w.policy.max_parallel,
            max_unavailable: w.policy.max_unavailable.to_string(),
            bounds: super::docs::wave_bounds_source(w),
            waves: w
                .waves
                .iter()
                .map(|x| WaveJson {
                    index: x.index,
                    canary: x.canary,
                    nodes: x.nodes.iter().map(|n| n.to_string()).collect(),
                    gangs: x.gangs.clone(),
                    oversized: x.oversized,
                    breaks: x
                        .breaks
                        .iter()
                        .map(|b| BreakJson {
                            pod: b.pod.clone(),
                            node: b.node.to_string(),
                            before: b.before.as_str(),
                            after: b.after.as_str(),
                            reason: b.reason.clone(),
                        })
                        .collect(),
                })
                .collect(),
            excluded: w.excluded.iter().map(|(n, r)| (n.to_string(), r.clone())).collect(),
            stalled: w.stalled.clone(),
            halted: w.halted.as_ref().map(|h| HaltJson {
                failed: h.failed.iter().map(|(n, _)| n.to_string()).collect(),
                rollback_to: h.rollback_to.as_ref().map(|v| v.to_string()),
                summary: h.summary(&w.target),
            }),
        }),
    }
}

/// A node's GPUs whose MIG devices DRA publishes.
fn dra_mig(node: &crate::model::Node, gpus: &[crate::analysis::dra::partitions::MigGpu]) -> MigNode {
    let instance = |p: &crate::analysis::dra::partitions::Partition| MigInstanceJson {
        profile: p.profile.to_string(),
        start: p.start,
        size: p.size,
        held_by: p.held_by.clone(),
    };
    MigNode {
        node: node.name.to_string(),
        config: node.operator.mig_config.as_ref().map(|c| c.to_string()),
        state: node.operator.mig_config_state.as_ref().map(|c| c.to_string()),
        gpus: gpus
            .iter()
            .enumerate()
            .map(|(i, g)| MigGpu {
                index: g.index.unwrap_or(i as u32),
                uuid: g.uuid.to_string(),
                mig_enabled: true,
                instances: g.instances().map(instance).collect(),
                healthy: !g.tainted,
                placeable: Some(g.partitions.iter().filter(|p| p.free).map(instance).collect()),
                held_whole_by: g.held_whole.clone(),
            })
            .collect(),
        through: Some("dra"),
    }
}

fn mig(snap: &Snapshot, a: &Analysis) -> Vec<MigNode> {
    // The MIG pane's nodes, in its order.
    let dra: std::collections::HashMap<&crate::model::Sym, &[crate::analysis::dra::partitions::MigGpu]> =
        a.nodes.iter().filter(|n| !n.dra_mig.is_empty()).map(|n| (&n.name, n.dra_mig.as_slice())).collect();
    snap.nodes
        .values()
        .filter(|n| dra.contains_key(&n.name) || super::is_mig_node(snap, n))
        .map(|n| match dra.get(&n.name) {
            Some(gpus) => dra_mig(n, gpus),
            None => device_mig(snap, n),
        })
        .collect()
}

fn device_mig(snap: &Snapshot, n: &crate::model::Node) -> MigNode {
    MigNode {
        node: n.name.to_string(),
        config: n.operator.mig_config.as_ref().map(|c| c.to_string()),
        state: n.operator.mig_config_state.as_ref().map(|c| c.to_string()),
        gpus: snap
            .devices
            .get(&n.name)
            .map(|d| {
                d.gpus
                    .iter()
                    .map(|g| MigGpu {
                        index: g.index,
                        uuid: g.uuid.to_string(),
                        mig_enabled: g.mig_mode == crate::model::MigMode::Enabled,
                        instances: g
                            .instances
                            .iter()
                            .map(|i| MigInstanceJson {
                                profile: i.profile.to_string(),
                                start: i.start,
                                size: i.size,
                                held_by: None,
                            })
                            .collect(),
                        healthy: g.health == crate::model::GpuHealth::Healthy,
                        placeable: None,
                        held_whole_by: None,
                    })
                    .collect()
            })
            .unwrap_or_default(),
        through: None,
    }
}

fn events(snap: &Snapshot, now: i64) -> Vec<EventJson> {
    let mut v: Vec<_> = snap.events.values().collect();
    v.sort_by(|a, b| b.last.cmp(&a.last).then(a.name.cmp(&b.name)));
    v.into_iter()
        .take(500)
        .map(|e| EventJson {
            kind: match e.kind {
                crate::model::EventType::Normal => "Normal",
                crate::model::EventType::Warning => "Warning",
            },
            reason: e.reason.to_string(),
            object: format!("{}/{}", e.object_kind.as_str().to_ascii_lowercase(), e.object_name),
            namespace: e.namespace.to_string(),
            message: e.message.to_string(),
            count: e.count,
            last_seen_seconds: (now - e.last).max(0),
            source: e.source.to_string(),
        })
        .collect()
}

fn workload_ref(w: &crate::analysis::usage::WorkloadRef) -> WorkloadRefJson {
    WorkloadRefJson { kind: w.kind.to_string(), namespace: w.namespace.to_string(), name: w.name.to_string() }
}

fn utilization(snap: &Snapshot, a: &Analysis) -> UtilizationJson {
    let u = &a.utilization;
    UtilizationJson {
        source: u.source_label(),
        nodes_reporting: u.nodes_by_source.iter().map(|(s, n)| (s.as_str(), *n)).collect(),
        nodes_unreported: u.nodes_unreported,
        idle_below_percent: crate::analysis::usage::idle_below_pct(),
        window_seconds: crate::model::usage::WINDOW_SECONDS,
        gpus_held: round3(u.gpus_held),
        gpus_idle: round3(u.gpus_idle),
        idle_gpu_hours: round3(u.idle_gpu_hours),
        unattributed_busy_devices: u.unattributed_busy,
        pods: u
            .holders
            .iter()
            .map(|h| PodUsageJson {
                namespace: h.pod.namespace.to_string(),
                name: h.pod.name.to_string(),
                node: h.node.to_string(),
                source: h.source.as_str(),
                gpus: round3(h.gpus),
                devices: h
                    .devices
                    .iter()
                    .map(|d| HeldDeviceJson {
                        gpu: d.gpu.to_string(),
                        index: d.index,
                        profile: d.profile.as_ref().map(|p| p.to_string()),
                        shared_by: d.sharers,
                    })
                    .collect(),
                recent_percent: h.recent_pct,
                mean_percent: h.mean_pct,
                memory_used_mib: h.memory_used_mib,
                idle_seconds: h.idle_seconds,
                idle_at_least: h.idle_at_least,
                idle_gpu_hours: round3(h.idle_gpu_hours),
                workload: h.workload.as_ref().map(workload_ref),
                queue: h.queue.as_ref().map(|q| q.to_string()),
                age_seconds: h.age_seconds,
            })
            .collect(),
        workloads: u
            .workloads
            .iter()
            .map(|w| WorkloadUsageJson {
                workload: w.workload.as_ref().map(workload_ref),
                pods: w.pods,
                idle_pods: w.idle_pods,
                gpus: round3(w.gpus),
                idle_gpus: round3(w.idle_gpus),
                queue: w.queue.as_ref().map(|q| q.to_string()),
                mean_percent: w.mean_pct,
                idle_gpu_hours: round3(w.idle_gpu_hours),
                idle_seconds: w.idle_seconds,
            })
            .collect(),
        hint: (!u.has_source()).then(|| super::usage::notes(u, snap).join("\n")),
    }
}
