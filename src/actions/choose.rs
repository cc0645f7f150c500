//! Which action a target means, once for the cockpit's keys and the command
//! line: the MIG configs a node's GPU offers, the plan's action or why there
//! is none, and what `release` with no node named releases.

use crate::analysis::fragmentation::{Plan, PlanStatus};
use crate::analysis::leftovers::Leftovers;
use crate::model::{Snapshot, Sym};
use crate::reference::mig;

use super::Action;
use super::release::of_leftovers;

/// Why a target means no action now; its words are the same everywhere.
#[derive(Clone, Debug, PartialEq)]
pub enum NoAction {
    /// The goal already holds: nothing to do, not an error.
    AlreadyThere(String),
    /// The goal cannot be reached this way.
    Cannot(String),
}

impl NoAction {
    pub fn is_error(&self) -> bool {
        matches!(self, NoAction::Cannot(_))
    }

    pub fn words(&self) -> &str {
        match self {
            NoAction::AlreadyThere(w) | NoAction::Cannot(w) => w,
        }
    }
}

/// The MIG configs `node`'s GPU can be repartitioned to, named as the GPU
/// Operator's default `mig-parted` config names them.
pub fn mig_configs(snap: &Snapshot, node: Sym) -> Result<Vec<String>, NoAction> {
    let dra = crate::analysis::dra::DraIndex::build(snap);
    if dra.mig_gpus(&node).iter().any(|g| g.dynamic) {
        return Err(NoAction::Cannot(format!(
            "{node}: NVIDIA's DRA driver makes its MIG partitions when a claim is allocated (DynamicMIG): there is no mig.config to change"
        )));
    }
    // GPUs through DRA and no MIG manager's label: a mig.config written
    // there would change nothing.
    let labelled = snap.nodes.get(&node).is_some_and(|n| n.label(crate::model::keys::MIG_CONFIG).is_some());
    if dra.gpus(&node).is_some() && !labelled {
        let product = dra.devices_on(&node).iter().find_map(|d| d.nvidia_attribute("productName"));
        return Err(NoAction::Cannot(format!(
            "{node} publishes its GPUs through DRA ({}) and has no {} label: no MIG manager runs there that kgpu can see, so a MIG config would change nothing (MIG through DRA comes from NVIDIA's DRA driver: DynamicMIG)",
            product.unwrap_or("product not published"),
            crate::model::keys::MIG_CONFIG
        )));
    }
    let product = snap.nodes.get(&node).and_then(|n| n.gpu.product.clone());
    let product_name = product.as_ref().map_or("unknown product", |p| p.as_str());
    let configs = mig::config_names_for_product(product.as_ref().map(|p| p.as_str()));
    if configs.is_empty() {
        return Err(NoAction::Cannot(format!("{node}: no MIG configs known for this GPU ({product_name})")));
    }
    Ok(configs)
}

/// `config` for `node`, or why not with the valid ones.
pub fn repartition(snap: &Snapshot, node: Sym, config: &str) -> Result<Action, NoAction> {
    let configs = mig_configs(snap, node.clone())?;
    if !configs.iter().any(|c| c == config) {
        let product =
            snap.nodes.get(&node).and_then(|n| n.gpu.product.as_ref()).map_or("unknown product", |p| p.as_str());
        return Err(NoAction::Cannot(format!(
            "{config} is not a MIG config for {node}'s GPU ({product}); valid: {}",
            configs.join(" ")
        )));
    }
    Ok(Action::RepartitionMig { node, config: config.to_string() })
}

/// The plan's action, or why it has none.
pub fn plan(plan: &Plan) -> Result<Action, NoAction> {
    match &plan.status {
        PlanStatus::Found => {
            Action::run_plan(plan).ok_or_else(|| NoAction::Cannot("no plan: it has no pending target".into()))
        }
        PlanStatus::NotNeeded => Err(NoAction::AlreadyThere("no plan needed: every pending shape fits".into())),
        PlanStatus::Impossible(why) => Err(NoAction::Cannot(format!("no plan: {why}"))),
    }
}

/// What `release` with no node named releases: every reservation an
/// abandoned action still holds, and those actions; or why nothing.
pub fn release_leftovers(left: &Leftovers) -> Result<Action, NoAction> {
    let (nodes, abandoned) = of_leftovers(left);
    if !nodes.is_empty() || !abandoned.is_empty() {
        return Ok(Action::Release { nodes, abandoned });
    }
    let reserved: Vec<String> = left.unaccounted.iter().map(|(n, v)| format!("{n} (for {v})")).collect();
    Err(NoAction::AlreadyThere(if reserved.is_empty() {
        "nothing left behind: no abandoned kgpu action in this context's audit log, no kgpu reservation on any node"
            .into()
    } else {
        format!(
            "no abandoned kgpu action in this context's audit log; kgpu's reservation is on {}: a plan may be running; `kgpu release NODE…` releases it anyway",
            reserved.join(", ")
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::build::node;
    use crate::model::{Cluster, ModelEvent, Object, SourceInfo, SourceKind};

    fn snap_with(n: crate::model::Node) -> Snapshot {
        let mut c = Cluster::new(SourceInfo { kind: SourceKind::Demo, name: "t".into() });
        c.apply(ModelEvent::Upsert(Object::Node(n)));
        c.snapshot()
    }

    #[test]
    fn a_repartition_names_the_configs_of_the_nodes_gpu_or_says_none_are_known() {
        let snap = snap_with(node("a100").gpus(8).product("NVIDIA-A100-SXM4-40GB").build());
        let a100 = Sym::new("a100");
        assert!(mig_configs(&snap, a100.clone()).unwrap().contains(&"all-1g.5gb".to_string()));
        assert!(matches!(repartition(&snap, a100.clone(), "all-1g.5gb"), Ok(Action::RepartitionMig { .. })));
        let no = repartition(&snap, a100, "all-7g.80gb").unwrap_err();
        assert!(no.is_error() && no.words().contains("valid: ") && no.words().contains("all-1g.5gb"), "{no:?}");

        let snap = snap_with(node("t4").gpus(1).product("Tesla-T4").build());
        let no = mig_configs(&snap, Sym::new("t4")).unwrap_err();
        assert_eq!(no.words(), "t4: no MIG configs known for this GPU (Tesla-T4)");
    }

    #[test]
    fn nothing_to_release_is_not_an_error_and_names_reservations_no_action_holds() {
        let left = Leftovers::default();
        let no = release_leftovers(&left).unwrap_err();
        assert!(!no.is_error() && no.words().starts_with("nothing left behind"), "{no:?}");
        let left = Leftovers { abandoned: Vec::new(), unaccounted: vec![(Sym::new("gpu-03"), Sym::new("ml.train"))] };
        let no = release_leftovers(&left).unwrap_err();
        assert!(no.words().contains("gpu-03 (for ml.train)"), "{no:?}");
    }
}
