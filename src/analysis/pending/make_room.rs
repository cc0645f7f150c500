//! "Free GPUs on that node": which nodes short only of GPUs to make room
//! on, cheapest work lost first (priced as every eviction is, `lost_work`),
//! so the advice never points at a busy pretraining node while idle
//! notebooks hold another.

use std::collections::HashMap;

use crate::model::{GangKey, Node, Pod, PodKey};

use super::super::index::Index;
use super::super::lost_work;

/// What stopping a unit frees: a lone pod, or a gang (all its running
/// members stop, wherever they run).
#[derive(Clone, PartialEq, Eq)]
enum Unit {
    Pod(PodKey),
    Gang(GangKey),
}

/// The cheapest holders on `node` to stop until `needed` more whole GPUs
/// are free there, each with its work lost: units (a pod, or every running
/// member of its gang, whose loss is the gang's) taken cheapest per GPU
/// freed first. None when its holders cannot free that many.
fn cheapest_freeing(
    index: &Index<'_>,
    node: &Node,
    needed: u64,
    own: Option<&GangKey>,
    gang_prices: &mut HashMap<GangKey, f64>,
) -> Option<Freeing> {
    // In the order met (a HashMap's order would change ties between runs).
    let mut gangs_here: Vec<(&GangKey, u64)> = Vec::new();
    let mut units: Vec<(Unit, u64, f64)> = Vec::new();
    for pod in index.pods_on(&node.name).iter().filter(|p| p.requests.gpu > 0 && !p.terminating) {
        match index.gang_of(&pod.key()) {
            // A gang's own placed members are what it waits with, not room.
            Some(gang) if Some(gang) == own => {}
            Some(gang) => match gangs_here.iter_mut().find(|(g, _)| *g == gang) {
                Some((_, gpus)) => *gpus += pod.requests.gpu,
                None => gangs_here.push((gang, pod.requests.gpu)),
            },
            None => units.push((Unit::Pod(pod.key()), pod.requests.gpu, lost_work::of(index, &[*pod]).gpu_hours)),
        }
    }
    for (gang, gpus) in gangs_here {
        let price = *gang_prices.entry(gang.clone()).or_insert_with(|| {
            let members: Vec<&Pod> = index.members(gang).to_vec();
            lost_work::of(index, &members).gpu_hours
        });
        units.push((Unit::Gang(gang.clone()), gpus, price));
    }
    units.sort_by(|a, b| (a.2 / a.1 as f64).total_cmp(&(b.2 / b.1 as f64)).then(b.1.cmp(&a.1)));
    let mut freed = 0;
    let mut chosen = Vec::new();
    for (unit, gpus, cost) in units {
        if freed >= needed {
            break;
        }
        freed += gpus;
        chosen.push((unit, cost));
    }
    (freed >= needed).then_some(chosen)
}

/// The units a freeing stops, each with its work lost.
type Freeing = Vec<(Unit, f64)>;

fn price(chosen: &Option<Freeing>) -> f64 {
    chosen.as_ref().map_or(f64::INFINITY, |c| c.iter().map(|(_, cost)| cost).sum())
}

/// A freeing that makes room for `missing` more pods of `gpus_per_pod`
/// GPUs, one per node, on the nodes short only of GPUs (`(free, node)`):
/// the least work lost first, then the most free; `own` is the pending
/// gang itself. A gang's missing members
/// need that many nodes, not the one closest.
pub(super) fn make_room(
    index: &Index<'_>,
    candidates: &[(u64, &Node)],
    own: Option<&GangKey>,
    gpus_per_pod: u64,
    missing: u64,
) -> Option<String> {
    if missing == 0 || candidates.is_empty() {
        return None;
    }
    let mut gang_prices = HashMap::new();
    let mut priced: Vec<(u64, &Node, Option<Freeing>)> = candidates
        .iter()
        .map(|&(free, node)| {
            (free, node, cheapest_freeing(index, node, gpus_per_pod.saturating_sub(free), own, &mut gang_prices))
        })
        .collect();
    priced.sort_by(|a, b| price(&a.2).total_cmp(&price(&b.2)).then(b.0.cmp(&a.0)).then(a.1.name.cmp(&b.1.name)));
    let picked = &priced[..priced.len().min(missing as usize)];
    if missing == 1 {
        let (free, node, chosen) = &picked[0];
        let cost = if chosen.is_some() {
            format!(": stopping the cheapest pods there loses {:.1} GPU-hours of work", price(chosen))
        } else {
            String::new()
        };
        return Some(format!(
            "free {} more GPU(s) on {} ({free} free of {}){cost}",
            gpus_per_pod.saturating_sub(*free),
            node.name,
            node.allocatable.gpu
        ));
    }
    let listed = picked
        .iter()
        .map(|(free, node, _)| {
            format!(
                "{} more on {} ({free} free of {})",
                gpus_per_pod.saturating_sub(*free),
                node.name,
                node.allocatable.gpu
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    // A gang stopped for one node frees its members on the others too: counted once.
    let mut units: Vec<(&Unit, f64)> = Vec::new();
    for (unit, cost) in picked.iter().filter_map(|(_, _, c)| c.as_ref()).flatten() {
        if !units.iter().any(|(u, _)| *u == unit) {
            units.push((unit, *cost));
        }
    }
    let total = if picked.iter().all(|(_, _, c)| c.is_some()) {
        format!(
            "; stopping the cheapest pods there loses {:.1} GPU-hours of work",
            units.iter().map(|(_, c)| c).sum::<f64>()
        )
    } else {
        String::new()
    };
    Some(if (picked.len() as u64) < missing {
        format!(
            "room for {missing} more pod(s) of {gpus_per_pod} GPU(s) is needed and only {} node(s) are short only of GPUs: free GPUs there ({listed}) or add nodes{total}",
            picked.len()
        )
    } else {
        format!("free GPUs on {missing} node(s), one pod of {gpus_per_pod} each: {listed}{total}")
    })
}
