//! The MIG config picker's rows: what each config cuts the node's GPUs
//! into, and which of the pending MIG demand it would serve, so the config
//! that helps is the one the picker starts on.

use std::collections::BTreeMap;

use crate::model::{Snapshot, Sym};
use crate::reference::mig;

#[derive(Clone, Debug, PartialEq)]
pub struct PickerRow {
    pub config: String,
    /// Per GPU: `7× 1g.10gb`, `MIG off`.
    pub cuts: String,
    /// The pending MIG demand it serves on this node: `serves 4 of 4 pending 1g.10gb`.
    pub serves: Option<String>,
    /// How many pending slices that is, all profiles together.
    pub served: u64,
    /// The node's config now (`nvidia.com/mig.config`): choosing it changes
    /// nothing, so it serves nothing new.
    pub current: bool,
}

/// Pending pods' MIG slices by profile (pods not yet on a node).
fn pending_slices(snap: &Snapshot) -> BTreeMap<&str, u64> {
    let mut out = BTreeMap::new();
    for p in snap.pods.values().filter(|p| p.is_pending()) {
        for (profile, n) in p.requests.mig() {
            let total = out.entry(profile).or_insert(0u64);
            *total = total.saturating_add(n);
        }
    }
    out
}

/// The node's GPU count, the configs its GPU knows, and the pending slices.
fn context(snap: &Snapshot, node: Sym) -> (u64, Vec<mig::MigConfig>, BTreeMap<&str, u64>) {
    let n = snap.nodes.get(&node);
    let gpus = u64::from(n.and_then(|n| n.gpu.count).unwrap_or(0));
    let model = n.and_then(|n| n.gpu.product.clone()).and_then(|p| mig::model_for_product(p.as_str()));
    (gpus, model.map(mig::configs_for_model).unwrap_or_default(), pending_slices(snap))
}

/// One row per config name, in the order given.
pub fn rows(snap: &Snapshot, node: Sym, configs: &[String]) -> Vec<PickerRow> {
    let (gpus, known, wanted) = context(snap, node.clone());
    let now = snap.nodes.get(&node).and_then(|n| n.operator.mig_config.clone());
    configs
        .iter()
        .map(|name| {
            let config = known.iter().find(|c| &c.name == name);
            let cuts = match config {
                Some(c) if !c.mig_enabled => "MIG off".to_string(),
                Some(c) if c.devices.is_empty() => "MIG on, no slices".to_string(),
                Some(c) => c.devices.iter().map(|(p, k)| format!("{k}× {p}")).collect::<Vec<_>>().join(" + "),
                None => String::new(),
            };
            // Per wanted profile: how many of its pending slices this node would give.
            let per_profile: Vec<(&str, u64, u64)> = config
                .into_iter()
                .flat_map(|c| c.devices.iter())
                .filter_map(|(profile, per_gpu)| {
                    let want = *wanted.get(profile.as_str())?;
                    Some((profile.as_str(), u64::from(*per_gpu).saturating_mul(gpus).min(want), want))
                })
                .collect();
            let current = now.as_ref().is_some_and(|c| c.as_str() == name.as_str());
            let words: Vec<String> =
                per_profile.iter().map(|(p, given, want)| format!("{given} of {want} pending {p}")).collect();
            let serves = (!words.is_empty() && !current).then(|| format!("serves {}", words.join(", ")));
            let served = if current { 0 } else { per_profile.iter().map(|(_, given, _)| given).sum() };
            PickerRow { config: name.clone(), cuts, serves, served, current }
        })
        .collect()
}

/// The row to start on: the config that serves the most pending slices
/// (of those, the first listed; the first when none does).
pub fn best(rows: &[PickerRow]) -> usize {
    rows.iter().enumerate().max_by_key(|(i, r)| (r.served, std::cmp::Reverse(*i))).map_or(0, |(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::build::{node, pod};
    use crate::model::{Cluster, ModelEvent, Object, SourceInfo, SourceKind};

    #[test]
    fn the_picker_says_what_each_config_cuts_and_starts_on_the_one_that_serves_the_pending_slices() {
        let mut c = Cluster::new(SourceInfo { kind: SourceKind::Demo, name: "t".into() });
        c.apply(ModelEvent::Upsert(Object::Node(node("a100").gpus(2).product("NVIDIA-A100-SXM4-40GB").build())));
        for name in ["w1", "w2", "w3"] {
            c.apply(ModelEvent::Upsert(Object::Pod(pod(name).mig("3g.20gb", 2).build())));
        }
        let snap = c.snapshot();
        let node = Sym::new("a100");
        let configs = vec!["all-disabled".to_string(), "all-1g.5gb".to_string(), "all-3g.20gb".to_string()];
        let rows = rows(&snap, node.clone(), &configs);
        assert_eq!(rows[0].cuts, "MIG off");
        assert_eq!(rows[0].serves, None);
        assert_eq!(rows[1].cuts, "7× 1g.5gb");
        assert_eq!(rows[1].serves, None, "no pending pod wants 1g.5gb");
        assert_eq!(rows[2].cuts, "2× 3g.20gb");
        assert_eq!(rows[2].serves.as_deref(), Some("serves 4 of 6 pending 3g.20gb"), "2 GPUs × 2 slices");
        assert_eq!(best(&rows), 2);
        assert_eq!(best(&super::rows(&snap, Sym::new("gone"), &configs)), 0);
        // Already cut that way: choosing it again serves nothing new.
        let mut cut = crate::model::build::node("a100").gpus(2).product("NVIDIA-A100-SXM4-40GB").build();
        cut.operator.mig_config = Some(Sym::new("all-3g.20gb"));
        c.apply(ModelEvent::Upsert(Object::Node(cut)));
        let rows = super::rows(&c.snapshot(), node, &configs);
        assert!(rows[2].current && rows[2].serves.is_none() && rows[2].served == 0, "{:?}", rows[2]);
        assert_eq!(best(&rows), 0);
    }
}
