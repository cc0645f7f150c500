//! "Free GPUs on that node": which nodes short only of GPUs to make room
//! on, cheapest work lost first (priced as every eviction is, `lost_work`),
//! so the advice never points at a busy pretraining node while idle
//! notebooks hold another.

use std::collections::HashMap;
use std::sync::Arc;

use crate::model::{GangKey, Node, Pod, PodKey, SymMap};

use super::super::index::Index;
use super::super::lost_work;

/// What stopping a unit frees: a lone pod, or a gang (all its running
/// members stop, wherever they run).
#[derive(Clone, PartialEq, Eq)]
enum Unit {
    Pod(PodKey),
    Gang(GangKey),
}

/// A unit, the GPUs it holds on one node, and the work its stop loses.
type Priced = (Unit, u64, f64);

/// Each node's GPU holders as units to stop, cheapest per GPU first, priced
/// once per analysis: every pending shape short of GPUs asks about the same
/// nodes (priced again for each, 40 shapes over 10,000 nodes took 0.8 s).
#[derive(Default)]
pub(super) struct Holders {
    by_node: SymMap<Arc<[Priced]>>,
    gang_prices: HashMap<GangKey, f64>,
}

impl Holders {
    fn on(&mut self, index: &Index<'_>, node: &Node) -> Arc<[Priced]> {
        if let Some(units) = self.by_node.get(&node.name) {
            return units.clone();
        }
        // In the order met (a HashMap's order would change ties between runs).
        let mut gangs_here: Vec<(&GangKey, u64)> = Vec::new();
        let mut units: Vec<Priced> = Vec::new();
        for pod in index.pods_on(&node.name).iter().filter(|p| p.requests.gpu > 0 && !p.terminating) {
            match index.gang_of(&pod.key()) {
                Some(gang) => match gangs_here.iter_mut().find(|(g, _)| *g == gang) {
                    Some((_, gpus)) => *gpus += pod.requests.gpu,
                    None => gangs_here.push((gang, pod.requests.gpu)),
                },
                None => units.push((Unit::Pod(pod.key()), pod.requests.gpu, lost_work::of(index, &[*pod]).gpu_hours)),
            }
        }
        for (gang, gpus) in gangs_here {
            let price = *self.gang_prices.entry(gang.clone()).or_insert_with(|| {
                let members: Vec<&Pod> = index.members(gang).to_vec();
                lost_work::of(index, &members).gpu_hours
            });
            units.push((Unit::Gang(gang.clone()), gpus, price));
        }
        units.sort_by(|a, b| (a.2 / a.1 as f64).total_cmp(&(b.2 / b.1 as f64)).then(b.1.cmp(&a.1)));
        let units: Arc<[Priced]> = units.into();
        self.by_node.insert(node.name.clone(), units.clone());
        units
    }
}

/// The cheapest holders on `units`' node to stop until `needed` more whole
/// GPUs are free there, each with its work lost: units (a pod, or every
/// running member of its gang, whose loss is the gang's) taken cheapest per
/// GPU freed first. None when its holders cannot free that many.
fn cheapest_freeing(units: &[Priced], needed: u64, own: Option<&GangKey>) -> Option<Freeing> {
    let mut chosen = Vec::new();
    take_cheapest(units, needed, own, |(unit, _, cost)| chosen.push((unit.clone(), *cost))).then_some(chosen)
}

/// The work [`cheapest_freeing`] would lose, without naming the units:
/// every candidate node is priced, few are picked.
fn freeing_price(units: &[Priced], needed: u64, own: Option<&GangKey>) -> f64 {
    let mut price = 0.0;
    if take_cheapest(units, needed, own, |(_, _, cost)| price += cost) { price } else { f64::INFINITY }
}

/// Hands `take` the units, cheapest first, until `needed` GPUs are freed;
/// whether they were.
fn take_cheapest(units: &[Priced], needed: u64, own: Option<&GangKey>, mut take: impl FnMut(&Priced)) -> bool {
    let mut freed = 0;
    for priced in units {
        if freed >= needed {
            break;
        }
        // A gang's own placed members are what it waits with, not room.
        if matches!((&priced.0, own), (Unit::Gang(g), Some(own)) if g == own) {
            continue;
        }
        freed += priced.1;
        take(priced);
    }
    freed >= needed
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
    holders: &mut Holders,
    candidates: &[(u64, &Node)],
    own: Option<&GangKey>,
    gpus_per_pod: u64,
    missing: u64,
) -> Option<String> {
    if missing == 0 || candidates.is_empty() {
        return None;
    }
    let mut priced: Vec<(f64, u64, &Node, Arc<[Priced]>)> = candidates
        .iter()
        .map(|&(free, node)| {
            let units = holders.on(index, node);
            (freeing_price(&units, gpus_per_pod.saturating_sub(free), own), free, node, units)
        })
        .collect();
    let order = |a: &(f64, u64, &Node, _), b: &(f64, u64, &Node, _)| {
        a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)).then(a.2.name.cmp(&b.2.name))
    };
    let take = priced.len().min(missing as usize);
    if take < priced.len() {
        priced.select_nth_unstable_by(take, order);
        priced.truncate(take);
    }
    priced.sort_by(order);
    let picked: Vec<(u64, &Node, Option<Freeing>)> = priced
        .iter()
        .map(|(_, free, node, units)| (*free, *node, cheapest_freeing(units, gpus_per_pod.saturating_sub(*free), own)))
        .collect();
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
