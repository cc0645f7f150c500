//! One price of lost work, wherever kgpu prices an eviction (the
//! preemption hint, the defrag plan, an action's blast radius, the lessons,
//! the JSON; docs/DESIGN.md "Lost work"):
//!
//! work lost = GPU share × busy time since the last checkpoint (or since
//! the start) + GPU share × restart time.
//!
//! - The GPU share is what the pod holds of physical GPUs: a whole GPU is
//!   1, a MIG slice its compute slices out of its GPU's (as the Usage pane
//!   counts it), a time-slicing replica 1 ÷ replicas per GPU.
//! - Idle time is not lost: the time a pod has held its GPUs idle (read by
//!   the agents or dcgm-exporter) is taken off; a pod busy at no time since
//!   then has nothing to resume, so it costs no restart either: evicting a
//!   deadlocked or idle holder costs ~0.
//! - A gang member's loss is its gang's: every running member restarts,
//!   and the gang is busy while any member is.

use crate::model::time::age;
use crate::model::{Node, Pod, Timestamp, keys};
use crate::reference::mig;

use super::index::Index;

/// Restart cost when a pod does not say (`kgpu.dev/restart-seconds`):
/// rescheduling, image pull, NCCL initialisation and checkpoint load.
pub const DEFAULT_RESTART_SECONDS: i64 = 600;

/// The price of stopping one unit of work (a pod, or a whole gang), with
/// its arithmetic.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LostWork {
    /// Physical GPUs held, in shares of a GPU.
    pub gpu_share: f64,
    /// Seconds since its last checkpoint (or start), idle time taken off.
    pub busy_seconds: i64,
    /// Seconds of that window it held its GPUs idle.
    pub idle_seconds: i64,
    /// `false`: no checkpoint annotation; its whole run is counted.
    pub checkpoint_known: bool,
    /// Counted only when it was busy: 0 for an idle holder.
    pub restart_seconds: i64,
    pub gpu_hours: f64,
}

/// The arithmetic, in words: `4 GPUs × (1h busy since its last checkpoint
/// + 10m restart) = 4.7 GPU-hours`; an idle holder says so.
pub fn arithmetic(l: &LostWork) -> String {
    let share = if (l.gpu_share - l.gpu_share.round()).abs() < 1e-9 {
        format!("{}", l.gpu_share.round())
    } else {
        format!("{:.2}", l.gpu_share)
    };
    let since = if l.checkpoint_known { "its last checkpoint" } else { "its start (no checkpoint annotation)" };
    let idle = if l.idle_seconds > 0 { format!(", {} idle not counted", age(l.idle_seconds)) } else { String::new() };
    if l.busy_seconds == 0 {
        return format!("{share} GPU(s), idle since {since}{idle}: nothing to lose, 0 GPU-hours");
    }
    format!(
        "{share} GPU(s) × ({} busy since {since} + {} restart{idle}) = {:.1} GPU-hours",
        age(l.busy_seconds),
        age(l.restart_seconds),
        l.gpu_hours
    )
}

/// Shares of a physical GPU that `pod`'s requests hold on `node`.
pub fn gpu_share(pod: &Pod, node: Option<&Node>) -> f64 {
    // Replicas are shares of a GPU only where the node time-slices.
    let per_gpu = node.and_then(super::supply::replicas_per_gpu).map_or(1.0, f64::from);
    let whole = (pod.requests.gpu + pod.requests.get(keys::RESOURCE_GPU_SHARED)) as f64 / per_gpu;
    let geometry = node.and_then(|n| n.gpu.product.clone()).and_then(|p| mig::geometry_for_product(p.as_str()));
    let slices: f64 = pod.requests.mig().map(|(profile, n)| n as f64 * mig::compute_share(profile, geometry)).sum();
    whole + slices
}

/// Physical GPUs' worth `pod` holds: through the device plugin
/// ([`gpu_share`]) and through DRA claims.
pub fn share_held(index: &Index<'_>, pod: &Pod) -> f64 {
    let node = pod.node.clone().and_then(|n| index.snap.nodes.get(&n)).map(|n| &**n);
    gpu_share(pod, node) + index.dra().held_by(pod).share
}

/// The work lost by stopping `members` (one pod, or every running member
/// of a gang) at `index.now`.
pub fn of(index: &Index<'_>, members: &[&Pod]) -> LostWork {
    of_at(index.now, members, |p| (share_held(index, p), index.idle_seconds(&p.key())))
}

/// [`of`], given each member's GPU share and trailing idle seconds.
pub fn of_at(now: Timestamp, members: &[&Pod], facts: impl Fn(&Pod) -> (f64, Option<i64>)) -> LostWork {
    let running: Vec<(&Pod, f64, Option<i64>)> = members
        .iter()
        .filter(|p| p.phase == crate::model::PodPhase::Running)
        .map(|p| {
            let (share, idle) = facts(p);
            (*p, share, idle)
        })
        .collect();
    let started = running.iter().map(|(p, _, _)| p.transitioned).min().unwrap_or(now);
    let checkpoint = running.iter().filter_map(|(p, _, _)| p.resume.as_ref().and_then(|r| r.last_checkpoint)).max();
    let since = checkpoint.map_or(started, |c| c.max(started));
    let window = (now - since).max(0);
    // The gang computes while any member does: its idle time is the least.
    let idle = running.iter().map(|(_, _, idle)| idle.unwrap_or(0)).min().unwrap_or(0).clamp(0, window);
    let busy = window - idle;
    let restart = if busy > 0 {
        running
            .iter()
            .filter_map(|(p, _, _)| p.resume.as_ref().and_then(|r| r.restart_seconds))
            .max()
            .map_or(DEFAULT_RESTART_SECONDS, i64::from)
    } else {
        0
    };
    let gpu_share: f64 = running.iter().map(|(_, share, _)| share).sum();
    LostWork {
        gpu_share,
        busy_seconds: busy,
        idle_seconds: idle,
        checkpoint_known: checkpoint.is_some(),
        restart_seconds: restart,
        gpu_hours: gpu_share * (busy + restart) as f64 / 3600.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::build::{node, pod};

    const NOW: i64 = 100_000;

    fn running(name: &str, started: i64) -> crate::model::build::PodBuilder {
        pod(name).on("n").running().transitioned(started)
    }

    #[test]
    fn busy_time_since_the_checkpoint_and_the_restart_are_lost() {
        let p = running("a", NOW - 7200).gpus(4).checkpointed(NOW - 3600, 600).build();
        let l = of_at(NOW, &[&p], |_| (4.0, None));
        assert_eq!((l.busy_seconds, l.restart_seconds, l.checkpoint_known), (3600, 600, true));
        assert!((l.gpu_hours - 4.0 * 4200.0 / 3600.0).abs() < 1e-9);
    }

    #[test]
    fn an_idle_holder_costs_nothing_not_even_a_restart() {
        let p = running("nb", NOW - 7200).gpus(1).build();
        let l = of_at(NOW, &[&p], |_| (1.0, Some(7200)));
        assert_eq!((l.busy_seconds, l.restart_seconds, l.gpu_hours), (0, 0, 0.0));
        // Idle for the last half hour of two: the busy part is lost.
        let l = of_at(NOW, &[&p], |_| (1.0, Some(1800)));
        assert_eq!(l.busy_seconds, 5400);
    }

    #[test]
    fn a_gang_is_busy_while_any_member_is() {
        let a = running("a", NOW - 3600).gpus(8).build();
        let b = running("b", NOW - 3600).gpus(8).build();
        let l = of_at(NOW, &[&a, &b], |p| (8.0, Some(if p.name.as_ref() == "a" { 3600 } else { 0 })));
        assert_eq!((l.gpu_share, l.busy_seconds), (16.0, 3600));
        // A deadlocked gang: no member ever computed.
        let l = of_at(NOW, &[&a, &b], |_| (8.0, Some(3600)));
        assert_eq!(l.gpu_hours, 0.0);
    }

    #[test]
    fn a_slice_or_a_replica_is_a_share_of_a_gpu() {
        let mig_node = node("n").product("NVIDIA-H100-80GB-HBM3").mig("1g.10gb", 7).build();
        let p = pod("e").mig("1g.10gb", 1).on("n").build();
        assert!((gpu_share(&p, Some(&mig_node)) - 1.0 / 7.0).abs() < 1e-9);
        let ts = node("n")
            .gpus(32)
            .hardware(8)
            .product("NVIDIA-H100-80GB-HBM3-SHARED")
            .label("nvidia.com/gpu.replicas", "4")
            .build();
        let r = pod("r").gpus(1).on("n").build();
        assert_eq!(gpu_share(&r, Some(&ts)), 0.25);
        assert_eq!(gpu_share(&pod("w").gpus(2).build(), None), 2.0);
    }
}
