//! Actions the cockpit can take. They are data (`Action`) until the one
//! executor (`exec`) carries them out against a backend (the simulator or a real
//! API server), so the app stays synchronous and testable. Each action has
//! one module (`cordon`, `drain`, `requeue`, `repartition`, `defrag`) that
//! owns its question, its blast radius and its steps.

pub mod audit;
pub mod backend;
pub mod choose;
mod cordon;
pub mod defrag;
mod drain;
pub mod exec;
pub mod impact;
pub mod release;
mod repartition;
mod requeue;

use crate::model::audit::AuditEntry;
use crate::model::{GangKey, PodKey, Sym};

/// A line from a running action: progress, or (`done`) its end.
#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    pub id: ActionId,
    pub text: String,
    pub error: bool,
    pub done: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    Cordon {
        node: Sym,
    },
    Uncordon {
        node: Sym,
    },
    /// Cordon, then evict through the Eviction API (PDBs honoured). As
    /// kubectl, it leaves pods without a controller (they would not come
    /// back) and pods with `emptyDir` data (it would be lost) unless `force`.
    Drain {
        node: Sym,
        gpu_only: bool,
        force: bool,
    },
    /// Kueue: deactivate then reactivate; Volcano: abort then resume; plain
    /// pods: delete them so their controller recreates them.
    Requeue {
        gang: GangKey,
    },
    /// Cordon → drain GPU pods → set `nvidia.com/mig.config` → wait for
    /// `mig.config.state` → uncordon.
    RepartitionMig {
        node: Sym,
        config: String,
    },
    /// The defragmentation plan: reserve the nodes it frees (a taint of
    /// kgpu's own that only the target's pods tolerate), evict the pods in
    /// the way, wait for the target to be placed, release the nodes.
    RunPlan {
        target: PlanTarget,
        /// `Workload research/train`, for people.
        label: String,
        evictions: Vec<PodKey>,
        /// Where the plan expects each evicted pod's replacement to run
        /// (aligned with `evictions`; `None`: nowhere), to tell when
        /// replacements land elsewhere.
        planned: Vec<Option<Sym>>,
        reserve: Vec<Sym>,
    },
    /// What a kgpu that ended without finishing left: its defrag
    /// reservations come off `nodes`, its open actions (their `started`
    /// lines) are closed in the audit log.
    Release {
        nodes: Vec<Sym>,
        abandoned: Vec<AuditEntry>,
    },
}

/// What a defragmentation plan makes room for.
#[derive(Clone, Debug, PartialEq)]
pub enum PlanTarget {
    Gang(GangKey),
    Pod(PodKey),
}

impl Action {
    /// The blast radius of this action on the cluster `index` describes.
    pub fn impact(&self, index: &crate::analysis::index::Index<'_>) -> impact::Impact {
        let mut out = impact::Impact::default();
        match self {
            Action::Cordon { node } => cordon::impact(node.clone(), true, &mut out),
            Action::Uncordon { node } => cordon::impact(node.clone(), false, &mut out),
            Action::Drain { node, gpu_only, force } => drain::impact(index, node.clone(), *gpu_only, *force, &mut out),
            Action::Requeue { gang } => requeue::impact(index, gang, &mut out),
            Action::RepartitionMig { node, config } => repartition::impact(index, node.clone(), config, &mut out),
            Action::RunPlan { target, evictions, reserve, .. } => {
                defrag::impact(index, target, evictions, reserve, &mut out)
            }
            Action::Release { nodes, abandoned } => release::impact(index.snap, nodes, abandoned, &mut out),
        }
        out
    }

    /// Running a found plan; `None` when it has no pending target.
    pub fn run_plan(plan: &crate::analysis::fragmentation::Plan) -> Option<Action> {
        use crate::analysis::fragmentation::ShapeSource;
        let target = match plan.target_key.as_ref()? {
            ShapeSource::Gang(g) => PlanTarget::Gang(g.clone()),
            ShapeSource::Pod(p) => PlanTarget::Pod(p.clone()),
            ShapeSource::Canonical => return None,
        };
        Some(Action::RunPlan {
            target,
            label: plan.target.clone().unwrap_or_default(),
            evictions: plan
                .steps
                .iter()
                .map(|s| PodKey { namespace: s.namespace.clone(), name: s.pod.as_str().into() })
                .collect(),
            planned: plan.steps.iter().map(|s| s.to_node.clone()).collect(),
            reserve: plan.reserve.clone(),
        })
    }

    pub fn verb(&self) -> &'static str {
        match self {
            Action::Cordon { .. } => "cordon",
            Action::Uncordon { .. } => "uncordon",
            Action::Drain { .. } => "drain",
            Action::Requeue { .. } => "requeue",
            Action::RepartitionMig { .. } => "repartition-mig",
            Action::RunPlan { .. } => "run-defrag-plan",
            Action::Release { .. } => "release",
        }
    }

    /// What the action acts on, for people and the audit log.
    pub fn targets(&self) -> Vec<String> {
        match self {
            Action::Cordon { node } | Action::Uncordon { node } | Action::Drain { node, force: false, .. } => {
                vec![format!("node/{node}")]
            }
            Action::Drain { node, force: true, .. } => vec![format!("node/{node}"), "force".into()],
            Action::RepartitionMig { node, config } => vec![format!("node/{node}"), format!("mig.config={config}")],
            Action::Requeue { gang } => {
                vec![format!("{}/{}/{}", gang.kind.kind_name().to_ascii_lowercase(), gang.namespace, gang.name)]
            }
            Action::RunPlan { target, evictions, reserve, .. } => {
                let target = match target {
                    PlanTarget::Gang(g) => {
                        format!("target {}/{}/{}", g.kind.kind_name().to_ascii_lowercase(), g.namespace, g.name)
                    }
                    PlanTarget::Pod(p) => format!("target pod/{}/{}", p.namespace, p.name),
                };
                std::iter::once(target)
                    .chain(reserve.iter().map(|n| format!("reserve node/{n}")))
                    .chain(evictions.iter().map(|k| format!("pod/{}/{}", k.namespace, k.name)))
                    .collect()
            }
            Action::Release { nodes, abandoned } => nodes
                .iter()
                .map(|n| format!("node/{n}"))
                .chain(
                    abandoned
                        .iter()
                        .filter_map(|a| a.run.as_ref())
                        .map(|r| format!("run {}/{}/{}", r.host, r.pid, r.action)),
                )
                .collect(),
        }
    }

    /// The nodes it changes: the fleet marks them while it runs.
    pub fn nodes(&self) -> Vec<Sym> {
        match self {
            Action::Cordon { node }
            | Action::Uncordon { node }
            | Action::Drain { node, .. }
            | Action::RepartitionMig { node, .. } => vec![node.clone()],
            Action::RunPlan { reserve, .. } => reserve.clone(),
            Action::Release { nodes, .. } => nodes.clone(),
            Action::Requeue { .. } => Vec::new(),
        }
    }

    /// Whether it disrupts running work (and so needs the full confirmation).
    pub fn is_disruptive(&self) -> bool {
        !matches!(self, Action::Cordon { .. } | Action::Uncordon { .. } | Action::Release { .. })
    }

    /// What the confirmation asks, naming every target.
    pub fn question(&self) -> String {
        match self {
            Action::Cordon { node } => cordon::question(node.clone(), true),
            Action::Uncordon { node } => cordon::question(node.clone(), false),
            Action::Drain { node, gpu_only, force } => drain::question(node.clone(), *gpu_only, *force),
            Action::Requeue { gang } => requeue::question(gang),
            Action::RepartitionMig { node, config } => repartition::question(node.clone(), config),
            Action::RunPlan { label, evictions, reserve, .. } => defrag::question(label, evictions, reserve),
            Action::Release { nodes, abandoned } => release::question(nodes, abandoned),
        }
    }

    /// The name a person types to confirm it on a production context: the
    /// node, the workload, the plan's target.
    pub fn confirm_word(&self) -> String {
        match self {
            Action::Cordon { node }
            | Action::Uncordon { node }
            | Action::Drain { node, .. }
            | Action::RepartitionMig { node, .. } => node.to_string(),
            Action::Requeue { gang } => gang.name.to_string(),
            Action::RunPlan { target: PlanTarget::Gang(g), .. } => g.name.to_string(),
            Action::RunPlan { target: PlanTarget::Pod(p), .. } => p.name.to_string(),
            Action::Release { .. } => "release".into(),
        }
    }

    /// A drain told to evict pods without a controller or with emptyDir data.
    pub fn forces(&self) -> bool {
        matches!(self, Action::Drain { force: true, .. })
    }

    /// Whether the confirmation offers "GPU pods only" and "force" (a drain).
    pub fn offers_gpu_only(&self) -> bool {
        matches!(self, Action::Drain { .. })
    }
}

/// One run of an action, from the key that started it to its final report.
pub type ActionId = u64;

#[derive(Clone, Debug, PartialEq)]
pub struct ActionRequest {
    pub action: Action,
    /// Server-side dry run: the API server validates, nothing changes.
    pub dry_run: bool,
}
