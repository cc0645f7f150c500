//! What a kgpu that ended without finishing left in the cluster: for each
//! action whose start has no end in the audit log (its process gone), the
//! nodes it still reserves (`kgpu.dev/defrag`) or left cordoned, read from
//! the snapshot now; and reservations no open action accounts for.

use crate::model::audit::AuditEntry;
use crate::model::{Snapshot, Sym};

/// One abandoned action and what of it is still in the cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct Abandoned {
    /// Its `started` line.
    pub start: AuditEntry,
    /// Nodes it reserved that still carry kgpu's reservation taint.
    pub reserved: Vec<Sym>,
    /// Nodes it cordons (a drain, a MIG repartition) that are still cordoned.
    pub cordoned: Vec<Sym>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Leftovers {
    pub abandoned: Vec<Abandoned>,
    /// Nodes carrying kgpu's reservation that no abandoned action names: a
    /// plan running now (here or elsewhere), or one whose log is elsewhere.
    pub unaccounted: Vec<(Sym, Sym)>,
}

impl Leftovers {
    pub fn is_empty(&self) -> bool {
        self.abandoned.is_empty() && self.unaccounted.is_empty()
    }

    /// Every node an abandoned action still reserves, once each.
    pub fn reserved(&self) -> Vec<Sym> {
        let mut nodes: Vec<Sym> = self.abandoned.iter().flat_map(|a| a.reserved.iter().cloned()).collect();
        nodes.sort();
        nodes.dedup();
        nodes
    }
}

/// Actions that cordon the node they name.
const CORDONING: [&str; 2] = ["drain", "repartition-mig"];

/// `abandoned`: starts with no end whose kgpu is gone, oldest first.
pub fn find(abandoned: &[AuditEntry], snap: &Snapshot) -> Leftovers {
    let reserved_now = |name: &str| {
        let node = snap.nodes.get(&Sym::new(name))?;
        node.defrag_reservation().map(|_| node.name.clone())
    };
    let cordoned_now = |name: &str| snap.nodes.get(&Sym::new(name)).filter(|n| n.unschedulable).map(|n| n.name.clone());
    let abandoned: Vec<Abandoned> = abandoned
        .iter()
        .map(|start| {
            let reserved =
                start.targets.iter().filter_map(|t| t.strip_prefix("reserve node/")).filter_map(reserved_now);
            let cordons = CORDONING.contains(&start.action.as_str());
            let cordoned = start
                .targets
                .iter()
                .filter_map(|t| t.strip_prefix("node/"))
                .filter(|_| cordons)
                .filter_map(cordoned_now);
            Abandoned { start: start.clone(), reserved: reserved.collect(), cordoned: cordoned.collect() }
        })
        .collect();
    let mut leftovers = Leftovers { abandoned, unaccounted: Vec::new() };
    let accounted = leftovers.reserved();
    leftovers.unaccounted = snap
        .nodes
        .values()
        .filter(|n| !accounted.contains(&n.name))
        .filter_map(|n| n.defrag_reservation().map(|t| (n.name.clone(), t.value.clone())))
        .collect();
    leftovers
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::testing::{node, snapshot};
    use crate::model::audit::{RunMark, STARTED};
    use crate::model::{TaintEffect, keys};

    fn start(action: &str, targets: &[&str]) -> AuditEntry {
        AuditEntry {
            time: "2026-12-05T08:00:00Z".into(),
            context: "prod".into(),
            user: "sre".into(),
            action: action.into(),
            targets: targets.iter().map(|t| t.to_string()).collect(),
            dry_run: false,
            result: STARTED.into(),
            detail: String::new(),
            run: Some(RunMark { host: "jump-1".into(), pid: 4242, action: 1 }),
        }
    }

    #[test]
    fn what_an_abandoned_action_left_is_read_from_the_cluster_now() {
        let reserve = |n: &str, v: &str| node(n).gpus(8).taint(keys::DEFRAG_RESERVATION, v, TaintEffect::NoSchedule);
        let nodes = vec![
            reserve("g1", "research.llm").build(),
            node("g2").gpus(8).build(),
            reserve("g3", "ml.other").build(),
            node("g4").gpus(8).cordoned().build(),
            node("g5").gpus(8).cordoned().build(),
        ];
        let snap = snapshot(nodes, vec![], vec![], 0);
        let defrag = start(
            "run-defrag-plan",
            &["target workload/research/llm", "reserve node/g1", "reserve node/g2", "pod/a/b"],
        );
        let drain = start("drain", &["node/g4"]);
        let cordon = start("cordon", &["node/g5"]);
        let found = find(&[defrag, drain, cordon], &snap);
        assert_eq!(found.abandoned[0].reserved, [Sym::new("g1")], "g2's reservation is gone already");
        assert!(found.abandoned[0].cordoned.is_empty());
        assert_eq!(found.abandoned[1].cordoned, [Sym::new("g4")], "a drain leaves its node cordoned");
        assert!(found.abandoned[2].cordoned.is_empty(), "a cordon that ran is its goal, not a leftover");
        assert_eq!(found.unaccounted, [(Sym::new("g3"), Sym::new("ml.other"))], "a reservation no open run names");
        assert_eq!(found.reserved(), [Sym::new("g1")]);
        assert!(find(&[], &snapshot(vec![node("g2").gpus(8).build()], vec![], vec![], 0)).is_empty());
    }
}
