//! A MIG shortage: which node's repartition would serve it, and at what
//! cost. The config is mig-parted's (its default file) that gives the most
//! of the wanted profile on that node's GPU; the cost is the work of the GPU
//! pods a repartition evicts, priced as every eviction is (`lost_work`).

use crate::model::{Node, Pod, Sym};
use crate::reference::mig;

use super::super::fit::{self, Shape};
use super::super::index::Index;
use super::super::lost_work;

/// The cheapest node to repartition for `missing` more slices of `profile`,
/// in words, if some node's GPU can be cut into it.
pub(super) fn advice(index: &Index<'_>, shape: &Shape<'_>, profile: Sym, missing: u64) -> Option<String> {
    let mut best: Option<(f64, usize, &Node, String, u64)> = None;
    // Nodes the pod may use at all (its selectors, affinity, tolerations).
    let usable = |n: &&Node| index.accepts_work(n) && fit::placement_verdicts(shape, n).is_empty();
    for node in index.nodes().filter(usable) {
        let Some(model) = node.gpu.product.as_ref().and_then(|p| mig::model_for_product(p.as_str())) else { continue };
        let gpus = u64::from(node.gpu.count.unwrap_or(0));
        let per_gpu = mig::configs_for_model(model)
            .into_iter()
            .filter_map(|c| c.devices.iter().find(|(p, _)| p == profile.as_str()).map(|(_, n)| (c.name.clone(), *n)))
            .max_by_key(|(_, n)| *n);
        let Some((config, per_gpu)) = per_gpu.filter(|_| gpus > 0) else { continue };
        // A node already cut this way has no more of it to give.
        if node.operator.mig_config.as_ref().is_some_and(|c| c.as_str() == config) {
            continue;
        }
        let pods: Vec<&Pod> =
            index.pods_on(&node.name).iter().filter(|p| p.holds_resources() && p.wants_gpu()).copied().collect();
        let hours: f64 = pods.iter().map(|p| lost_work::of(index, &[p]).gpu_hours).sum();
        let better = best.as_ref().is_none_or(|(h, n, ..)| (hours, pods.len()) < (*h, *n));
        if better {
            best = Some((hours, pods.len(), node, config, u64::from(per_gpu) * gpus));
        }
    }
    let (hours, pods, node, config, offered) = best?;
    // A sum of nothing is -0.0: never print "-0.0 GPU-hours".
    let hours = hours.abs();
    let enough = if offered >= missing { "enough" } else { "part of what it needs" };
    Some(format!(
        "repartition {} to {config} (select it in Fleet or MIG, m): {offered}× {profile} ({enough}); it evicts {pods} GPU pod(s), {hours:.1} GPU-hours of work",
        node.name
    ))
}
