//! The plan's view of DRA devices when its target's GPUs come through
//! claims: a node's room for the target is how many of its pods' claims the
//! node's devices allocate once the plan's evictions have freed the devices
//! of the claims made for the evicted pods (a claim from a template, or the
//! scheduler's for extended resources, goes with its pod) and its moved
//! pods' new claims have taken theirs. Devices that draw on shared counters
//! (partitions) and claims of their own name (shared, or standalone) do not
//! move: the plan leaves such pods where they are.

use std::cell::RefCell;

use crate::analysis::dra::cel::Selectors;
use crate::analysis::dra::claims::ThroughDra;
use crate::analysis::dra::room::{Ask, DeviceId, DeviceMoves};
use crate::analysis::index::Index;
use crate::analysis::tally::Tally;
use crate::model::dra::ResourceClaim;
use crate::model::{Node, Pod, Resources, Sym};

use super::{Demand, room, room_for};

pub(super) struct DraTarget<'i, 'a> {
    index: &'i Index<'a>,
    ask: Ask<'a>,
    /// The claim the scheduler would make for its extended resources a
    /// DeviceClass serves, where no node advertises them.
    extended: Option<ResourceClaim>,
    /// Its requests without those (what a node's resources must give).
    rest: Option<Resources>,
    /// GPUs one of its pods asks.
    per_pod: u64,
    /// CEL programs compiled once for every trial (the planner's methods
    /// read the workspace through `&self`).
    selectors: RefCell<Selectors>,
}

impl<'i, 'a> DraTarget<'i, 'a> {
    /// The target's claims as its next pod asks them, the claim the
    /// scheduler would make for its extended resources included; None where
    /// its GPUs do not come through claims, one is missing, or a node's
    /// device plugin serves what a class serves elsewhere (the plan weighs
    /// one way of getting GPUs, not both).
    pub(super) fn of(index: &'i Index<'a>, target: &Demand) -> Option<Self> {
        let (ask, mut per_pod) = match target.dra.as_ref() {
            Some(dra) => (index.dra().ask(&dra.namespace, &dra.claims)?, dra.gpus),
            None => (Ask::default(), 0),
        };
        let through = ThroughDra::of(index.dra(), &target.requests);
        let (extended, rest) = if through.is_empty() {
            (None, None)
        } else if advertised_where_it_may_run(index, target, &through).is_some() {
            return None;
        } else {
            per_pod = target.gpus_per_pod;
            let names: Vec<&str> = through.served.iter().map(|(r, ..)| r.as_str()).collect();
            (through.claim(&target.namespace), Some(target.requests.split_off(&names).1))
        };
        if target.dra.is_none() && extended.is_none() {
            return None;
        }
        Some(DraTarget { index, ask, extended, rest, per_pod, selectors: RefCell::new(Selectors::default()) })
    }

    /// Its claims, the extended resources' among them.
    fn ask(&self) -> Ask<'_> {
        let mut ask = self.ask.clone();
        ask.per_pod.extend(self.extended.as_ref());
        ask
    }

    /// Pods of the target the node's CPU, memory and pod count take after
    /// `used` (what DRA serves aside).
    pub(super) fn most(&self, target: &Demand, node: &Node, used: &Tally) -> u64 {
        match &self.rest {
            Some(rest) => room_for(target, rest, node, used),
            None => room(target, node, used),
        }
    }

    /// Pods of the target `node` takes once `moves` are made, at most what
    /// its CPU, memory and pod count leave after `used`.
    pub(super) fn room(&self, target: &Demand, node: &Node, used: &Tally, moves: &DeviceMoves) -> u64 {
        let most = self.most(target, node, used);
        if most == 0 {
            return 0;
        }
        let mut selectors = self.selectors.borrow_mut();
        self.index.dra().room_after(&mut selectors, &node.name, &self.ask(), most, moves).pods
    }

    /// Whether the node publishes enough devices the target's GPU requests
    /// match for one pod, held or free: elsewhere no move helps.
    pub(super) fn may_use(&self, node: &Node) -> bool {
        let mut selectors = self.selectors.borrow_mut();
        let room = self.index.dra().room(&mut selectors, &node.name, &self.ask(), 1);
        room.matching >= self.per_pod
    }

    /// The devices evicting `pod` frees; None where it holds a device the
    /// plan may not move (see the module's note).
    pub(super) fn movable(&self, pod: &Pod) -> Option<Vec<DeviceId>> {
        self.index.dra().movable_devices(pod)
    }

    /// Whether `pod` holds devices through claims at all.
    pub(super) fn holds_devices(&self, pod: &Pod) -> bool {
        self.index.dra().held_by(pod).share > 0.0
    }

    /// The devices a replacement of `pod` takes on `node` after `moves`.
    pub(super) fn land(&self, pod: &Pod, node: &Sym, moves: &DeviceMoves) -> Option<Vec<DeviceId>> {
        let mut selectors = self.selectors.borrow_mut();
        self.index.dra().land(&mut selectors, node, pod, moves)
    }
}

/// An extended resource of the demand a DeviceClass serves that a node the
/// demand may run on advertises (its device plugin serves it there): the
/// plan weighs one way of getting GPUs, not both.
pub(super) fn advertised_where_it_may_run(index: &Index<'_>, demand: &Demand, through: &ThroughDra<'_>) -> Option<Sym> {
    let placement = index.placement(&demand.shape());
    let may_run: Vec<&Node> = index
        .node_list()
        .iter()
        .zip(placement.iter())
        .filter(|(_, blockers)| blockers.is_empty())
        .map(|(n, _)| *n)
        .collect();
    through
        .served
        .iter()
        .find(|(resource, ..)| may_run.iter().any(|n| n.allocatable.get(resource.as_str()) > 0))
        .map(|(resource, ..)| resource.clone())
}
