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
use crate::analysis::dra::room::{Ask, DeviceId, DeviceMoves};
use crate::analysis::index::Index;
use crate::analysis::tally::Tally;
use crate::model::{Node, Pod, Sym};

use super::{Demand, room};

pub(super) struct DraTarget<'i, 'a> {
    index: &'i Index<'a>,
    ask: Ask<'a>,
    /// GPUs one of its pods asks.
    per_pod: u64,
    /// CEL programs compiled once for every trial (the planner's methods
    /// read the workspace through `&self`).
    selectors: RefCell<Selectors>,
}

impl<'i, 'a> DraTarget<'i, 'a> {
    /// The target's claims as its next pod asks them; None where its GPUs
    /// do not come through claims, or one is missing.
    pub(super) fn of(index: &'i Index<'a>, target: &Demand) -> Option<Self> {
        let dra = target.dra.as_ref()?;
        let ask = index.dra().ask(&dra.namespace, &dra.claims)?;
        Some(DraTarget { index, ask, per_pod: dra.gpus, selectors: RefCell::new(Selectors::default()) })
    }

    /// Pods of the target `node` takes once `moves` are made, at most what
    /// its CPU, memory and pod count leave after `used`.
    pub(super) fn room(&self, target: &Demand, node: &Node, used: &Tally, moves: &DeviceMoves) -> u64 {
        let most = room(target, node, used);
        if most == 0 {
            return 0;
        }
        let mut selectors = self.selectors.borrow_mut();
        self.index.dra().room_after(&mut selectors, &node.name, &self.ask, most, moves).pods
    }

    /// Whether the node publishes enough devices the target's GPU requests
    /// match for one pod, held or free: elsewhere no move helps.
    pub(super) fn may_use(&self, node: &Node) -> bool {
        let mut selectors = self.selectors.borrow_mut();
        let room = self.index.dra().room(&mut selectors, &node.name, &self.ask, 1);
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
