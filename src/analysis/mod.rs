//! Pure analyses over a [`Snapshot`]: no I/O, no clock (time is an
//! argument), no terminal. This is where the domain lives.

pub mod compat;
pub mod dra;
pub mod fit;
pub mod fleet;
pub mod fragmentation;
pub mod gangs;
pub mod gpu_stack;
pub mod index;
pub mod inter_pod;
pub mod leftovers;
pub mod lost_work;
pub mod node_issue;
pub mod pending;
pub mod preemption;
pub mod queue_msg;
pub mod queues;
pub mod scheduler_msg;
pub mod sharing;
pub mod spot;
pub mod supply;
pub mod tally;
pub mod testing;
pub mod usage;
pub mod volumes;
pub mod waves;

use crate::model::{Snapshot, Timestamp};

/// Tunable limits of the analyses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Thresholds {
    /// An active upgrade state held this long (seconds) counts as stuck.
    pub upgrade_stuck_after: i64,
    /// `upgrade-required` is a queue (nodes wait their turn under
    /// maxParallelUpgrades); waiting this long counts as stuck.
    pub upgrade_queued_stuck_after: i64,
    /// A MIG reconfiguration pending this long looks wedged.
    pub mig_pending_wedged_after: i64,
    /// Window and count for black-hole detection.
    pub black_hole_window: i64,
    pub black_hole_min_failures: usize,
    /// XIDs newer than this count.
    pub xid_window: i64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            upgrade_stuck_after: 3600,
            upgrade_queued_stuck_after: 24 * 3600,
            mig_pending_wedged_after: 900,
            black_hole_window: 3600,
            black_hole_min_failures: 3,
            xid_window: 24 * 3600,
        }
    }
}

/// Everything the views show, computed from one snapshot at one time.
pub struct Analysis {
    pub now: Timestamp,
    pub nodes: Vec<fleet::NodeSummary>,
    pub totals: fleet::Totals,
    pub fragmentation: fragmentation::Fragmentation,
    pub gangs: Vec<gangs::GangSummary>,
    pub pending: Vec<pending::PendingItem>,
    pub queues: Vec<queues::QueueRow>,
    pub matrix: compat::Matrix,
    pub upgrades: Vec<waves::UpgradeRow>,
    pub utilization: usage::Utilization,
    pub spot: spot::Spot,
    /// What the cluster's DRA objects use that kgpu does not model: each
    /// feature with the objects that use it.
    pub dra_unmodelled: Vec<(crate::model::dra::DraFeature, Vec<String>)>,
}

impl Analysis {
    /// GPUs in use by pods that were placed and do not start (image,
    /// container runtime, crash loop): counted in use, serving nothing.
    pub fn held_not_started(&self) -> u64 {
        self.pending.iter().filter(|p| p.blocking == Some(pending::Step::Start)).map(|p| p.gpus).sum()
    }
}

/// Every analysis of `snap` at `now`, from a walk over every pod: the
/// reference [`Analyzer`] is checked against.
pub fn analyze(snap: &Snapshot, now: Timestamp, thresholds: &Thresholds) -> Analysis {
    analyze_index(snap, index::Index::build(snap, now), thresholds)
}

/// Analyses the snapshots of one source in turn, keeping what the pods add
/// up to between them ([`index::PodLedger`]): a snapshot where a few pods
/// changed costs those pods, not a walk over the fleet's, before the
/// analyses run on the index. Gives what [`analyze`] gives.
#[derive(Default)]
pub struct Analyzer {
    ledger: index::PodLedger,
}

impl Analyzer {
    pub fn new() -> Analyzer {
        Analyzer::default()
    }

    pub fn analyze(&mut self, snap: &Snapshot, now: Timestamp, thresholds: &Thresholds) -> Analysis {
        self.ledger.update(snap);
        analyze_index(snap, index::Index::with_ledger(snap, now, &self.ledger), thresholds)
    }

    /// Pods the last analysis took out of its ledger or put in: all of
    /// them when it started over, none while pods were listing.
    pub fn pods_redone(&self) -> usize {
        self.ledger.last_changes()
    }

    /// The index of the snapshot last analysed (any other is walked).
    pub fn index<'a>(&'a self, snap: &'a Snapshot, now: Timestamp) -> index::Index<'a> {
        index::Index::with_ledger(snap, now, &self.ledger)
    }
}

fn analyze_index(snap: &Snapshot, mut index: index::Index<'_>, thresholds: &Thresholds) -> Analysis {
    let now = index.now;
    // A black hole is schedulable but runs nothing: not usable capacity.
    let black_holes = fleet::black_hole_nodes(&index, thresholds);
    index.mark_black_holes(black_holes);
    let gangs = gangs::analyze(&index);
    // The analyses are pure and independent but for fragmentation → the
    // pending gangs' items: the pending pods' items (the costliest part) and
    // the matrix are built beside the rest, so a recompute of a big fleet
    // keeps two cores busy (the budget is per recompute).
    let (fragmentation, nodes, matrix, upgrades, queues, pending) = std::thread::scope(|scope| {
        let side = scope.spawn(|| {
            let pod_items = pending::pod_items(&index, &gangs);
            let matrix = compat::matrix(&index, now);
            (pod_items, matrix)
        });
        let fragmentation = fragmentation::analyze(&index);
        let nodes = fleet::summarize(&index, thresholds);
        // `upgrade-done` is judged against what the operator installs on each node.
        let upgrades = waves::board(&index, index.nodes(), now, thresholds, |n| {
            crate::model::driver_policy::node_target(snap.driver_policies.values().map(|p| &**p), n)
        });
        let queues = queues::rows(snap);
        let (pod_items, matrix) = side.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        let mut pending = pending::complete(&index, &gangs, &fragmentation, pod_items);
        pending::add_preemption_costs(&index, &mut pending);
        (fragmentation, nodes, matrix, upgrades, queues, pending)
    });
    let totals = fleet::totals(&nodes, fragmentation.stranded_total);
    let utilization = usage::analyze_with(snap, now, index.dra());
    let spot = spot::analyze(&index, now);
    let dra_unmodelled = dra::unmodelled(&index);
    Analysis {
        now,
        nodes,
        totals,
        fragmentation,
        gangs,
        pending,
        queues,
        matrix,
        upgrades,
        utilization,
        spot,
        dra_unmodelled,
    }
}

/// The defragmentation plan for one pending gang or pod (`namespace/name`)
/// rather than the fleet's top target; `None` when it is not pending GPU
/// demand.
pub fn defrag_plan_for(
    snap: &Snapshot,
    analysis: &Analysis,
    thresholds: &Thresholds,
    namespace: &str,
    name: &str,
) -> Option<fragmentation::Plan> {
    let mine: Vec<fragmentation::ShapeFit> =
        analysis.fragmentation.shapes.iter().filter(|s| s.demand.is_named(namespace, name)).cloned().collect();
    if mine.is_empty() {
        return None;
    }
    let mut index = index::Index::build(snap, analysis.now);
    index.mark_black_holes(fleet::black_hole_nodes(&index, thresholds));
    Some(fragmentation::plan(&index, &mine))
}
