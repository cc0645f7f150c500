//! Actions the cockpit can take. They are data (`Action`) until the one
//! executor (`exec`) carries them out against a backend (the simulator or a real
//! API server), so the app stays synchronous and testable.

pub mod audit;
pub mod backend;
pub mod exec;

use crate::model::{GangKey, PodKey, Sym};

#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    Cordon {
        node: Sym,
    },
    Uncordon {
        node: Sym,
    },
    /// Cordon, then evict through the Eviction API (PDBs honoured).
    Drain {
        node: Sym,
        gpu_only: bool,
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
    /// The defragmentation plan's evictions.
    RunPlan {
        evictions: Vec<PodKey>,
        target: String,
    },
}

impl Action {
    pub fn verb(&self) -> &'static str {
        match self {
            Action::Cordon { .. } => "cordon",
            Action::Uncordon { .. } => "uncordon",
            Action::Drain { .. } => "drain",
            Action::Requeue { .. } => "requeue",
            Action::RepartitionMig { .. } => "repartition-mig",
            Action::RunPlan { .. } => "run-defrag-plan",
        }
    }

    /// What the action acts on, for people and the audit log.
    pub fn targets(&self) -> Vec<String> {
        match self {
            Action::Cordon { node } | Action::Uncordon { node } | Action::Drain { node, .. } => {
                vec![format!("node/{node}")]
            }
            Action::RepartitionMig { node, config } => vec![format!("node/{node}"), format!("mig.config={config}")],
            Action::Requeue { gang } => {
                vec![format!("{}/{}/{}", gang.kind.kind_name().to_ascii_lowercase(), gang.namespace, gang.name)]
            }
            Action::RunPlan { evictions, .. } => {
                evictions.iter().map(|k| format!("pod/{}/{}", k.namespace, k.name)).collect()
            }
        }
    }

    /// Whether it disrupts running work (and so needs the full confirmation).
    pub fn is_disruptive(&self) -> bool {
        !matches!(self, Action::Cordon { .. } | Action::Uncordon { .. })
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ActionRequest {
    pub action: Action,
    /// Server-side dry run: the API server validates, nothing changes.
    pub dry_run: bool,
}
