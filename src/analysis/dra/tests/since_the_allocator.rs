//! The allocator's refusals before any search (the claim limit, pools not
//! ready), what binding writes, and what the views say of claims the
//! cluster left behind (stale, shared, unreadable, tainted NoExecute).

use std::sync::Arc;

use crate::analysis::index::Index;
use crate::analysis::testing::pod;
use crate::model::dra::Amount;
use crate::model::{ClaimSource, DraObject, PodClaim, Sym};

use super::{chain, claim, claim_of, cluster, exact, gpu_on_root, judge, served_both_ways, slice, world};
use crate::analysis::dra::cel::Selectors;

/// What the scheduler writes as it binds: the pending claim's devices
/// (never the one a claim holds, its request named), and for GPUs a class
/// serves on a node that does not advertise them, the claim it makes.
#[test]
fn binding_allocates_the_free_devices_and_makes_the_claim_for_served_resources() {
    use crate::analysis::dra::bind::allocation;
    let snap = cluster(claim("wants", vec![exact("gpu.nvidia.com", 1)], &[]));
    let index = Index::build(&snap, 0);
    let waiting = snap.pods.values().find(|p| &*p.name == "waiting").unwrap();
    // a's GPU is busy (a MIG device of it is held): nothing there.
    assert_eq!(allocation(&index, &mut Selectors::default(), waiting, &snap.nodes[&Sym::new("a")]), None);
    let b = allocation(&index, &mut Selectors::default(), waiting, &snap.nodes[&Sym::new("b")]).unwrap();
    assert_eq!(b.extended, None);
    let [(name, devices)] = b.claims.as_slice() else { panic!("{b:?}") };
    assert_eq!(&**name, "wants");
    let got: Vec<_> = devices.iter().map(|d| (d.request.as_str(), d.pool.as_str(), d.device.as_str())).collect();
    assert_eq!(got, [("gpu/0", "b", "gpu-0")]);

    // Two nvidia.com/gpu on a (no device plugin there): a claim of the class
    // for both GPUs, and the requests leave the device plugin's tally.
    let snap = served_both_ways(8, 2, false);
    let index = Index::build(&snap, 0);
    let waiting = index.snap.pods.values().find(|p| &*p.name == "waiting").unwrap();
    let a = allocation(&index, &mut Selectors::default(), waiting, &snap.nodes[&Sym::new("a")]).unwrap();
    let Some((served, made)) = &a.extended else { panic!("{a:?}") };
    assert_eq!(served.gpu, 2);
    assert_eq!((made.allocated_node.as_ref().map(Sym::as_str), made.allocated.len()), (Some("a"), 2));
    assert!(made.allocated.iter().all(|d| d.request.as_str() == "nvidia.com/gpu"));
    // On dp its device plugin serves them: no claim to make.
    let dp = allocation(&index, &mut Selectors::default(), waiting, &snap.nodes[&Sym::new("dp")]).unwrap();
    assert_eq!(dp, crate::analysis::dra::bind::Allocation::default());
}

/// One claim's allocation holds at most 32 devices: a claim for more fails
/// every attempt with the allocator's error, however many are free (the
/// scheduler checks it before any search; allocator_incubating.go).
#[test]
fn a_claim_for_more_devices_than_an_allocation_holds_aborts_every_attempt() {
    use crate::analysis::dra::claims::{ALLOCATION_RESULTS_MAX, AbortCause};
    let gpus = |n: usize| (0..n).map(|i| gpu_on_root(&format!("gpu-{i}"), &format!("U{i}"), "pci0000:15")).collect();
    let v = judge(&world(
        vec![slice("big", gpus(40))],
        vec![],
        claim_of(vec![("gpus", exact("gpu.nvidia.com", 40))], vec![]),
    ));
    assert!(v.blocks() && v.nodes_fit.is_empty(), "{v:?}");
    assert_eq!(v.aborted.len(), 1, "{v:?}");
    assert_eq!(v.aborted[0].cause, AbortCause::ClaimLimit { devices: 40 });
    assert_eq!(v.aborted[0].message, "claim ml/wants: number of requested devices 40 exceeds the claim limit of 32");
    // 32 fit; two requests of 20 do not (the claim's total counts).
    let v = judge(&world(
        vec![slice("big", gpus(40))],
        vec![],
        claim_of(vec![("gpus", exact("gpu.nvidia.com", ALLOCATION_RESULTS_MAX))], vec![]),
    ));
    assert_eq!(v.nodes_fit, [Sym::new("big")]);
    let two = claim_of(vec![("a", exact("gpu.nvidia.com", 20)), ("b", exact("gpu.nvidia.com", 20))], vec![]);
    assert_eq!(
        judge(&world(vec![slice("big", gpus(40))], vec![], two)).aborted[0].cause,
        AbortCause::ClaimLimit { devices: 40 }
    );
    // The chain says why no node will do.
    let snap =
        world(vec![slice("big", gpus(40))], vec![], claim_of(vec![("gpus", exact("gpu.nvidia.com", 40))], vec![]));
    let item = chain(&snap, "waiting");
    assert!(item.summary.contains("more than one claim can hold (32)"), "{}", item.summary);
}

/// The scheduler takes no device from a pool whose newest generation lacks
/// some of its slices, or publishes a device name twice; a request for all
/// devices on such a node fails the attempt (pools_incubating.go).
#[test]
fn a_pool_being_updated_or_invalid_gives_no_device() {
    use crate::analysis::dra::claims::{AbortCause, PoolProblem};
    let two = || vec![gpu_on_root("gpu-0", "U0", "pci0000:15"), gpu_on_root("gpu-1", "U1", "pci0000:15")];
    let incomplete = || {
        let DraObject::Slice(mut s) = slice("a", two()) else { unreachable!() };
        s.slice_count = 2;
        DraObject::Slice(s)
    };
    let wants_one = || claim_of(vec![("gpus", exact("gpu.nvidia.com", 1))], vec![]);
    let v = judge(&world(
        vec![incomplete(), slice("b", vec![gpu_on_root("gpu-0", "V0", "pci0000:15")])],
        vec![],
        wants_one(),
    ));
    assert_eq!(v.nodes_fit, [Sym::new("b")], "{v:?}");
    assert_eq!(
        v.pools_not_ready,
        [(Sym::new("a"), "gpu.nvidia.com/a".to_string(), PoolProblem::Incomplete { slices: 1, expected: 2 })]
    );
    // A device name twice in the pool's slices: invalid.
    let DraObject::Slice(mut again) = slice("a", two()) else { unreachable!() };
    again.name = "a-gpu.nvidia.com-second".into();
    let (DraObject::Slice(mut first), DraObject::Slice(mut second)) = (slice("a", two()), DraObject::Slice(again))
    else {
        unreachable!()
    };
    first.slice_count = 2;
    second.slice_count = 2;
    let v = judge(&world(vec![DraObject::Slice(first), DraObject::Slice(second)], vec![], wants_one()));
    assert!(v.nodes_fit.is_empty(), "{v:?}");
    assert_eq!(v.pools_not_ready[0].2, PoolProblem::DuplicateDevice(Sym::new("gpu-0")));
    let item = chain(&world(vec![incomplete()], vec![], wants_one()), "waiting");
    assert!(
        item.steps.iter().any(|s| s
            .details
            .iter()
            .any(|d| d.contains("pool gpu.nvidia.com/a is being updated (1 of its 2 ResourceSlices published)"))),
        "{:?}",
        item.steps
    );
    // All devices, on a node whose pool is being updated: the attempt fails.
    let mut all = exact("gpu.nvidia.com", 1);
    all.amount = Amount::All;
    let v = judge(&world(vec![incomplete()], vec![], claim_of(vec![("gpus", all)], vec![])));
    assert_eq!(v.aborted[0].cause, AbortCause::PoolNotReady { pool: "gpu.nvidia.com/a".into(), invalid: false });
    assert_eq!(
        v.aborted[0].message,
        "claim ml/wants, request gpus: asks for all devices, but resource pool gpu.nvidia.com/a is currently being updated"
    );
}

/// A GPU of a MIG node held whole through DRA: the MIG pane says who holds
/// it, not an empty GPU.
#[test]
fn a_mig_gpu_held_whole_names_its_claim() {
    let mut snap = cluster(claim("wants", vec![exact("gpu.nvidia.com", 1)], &[]));
    let free = Index::build(&snap, 0).dra().mig_gpus(&Sym::new("a"));
    assert_eq!(free.len(), 1);
    assert_eq!(free[0].held_whole, None);
    // The MIG device's claim gone, a claim holds the GPU whole instead.
    let whole = claim("whole", vec![exact("gpu.nvidia.com", 1)], &[("a", "gpu-0")]);
    let held_key = snap.dra.keys().find(|k| &*k.name == "held").cloned().unwrap();
    snap.dra.remove(&held_key);
    let whole = DraObject::Claim(whole);
    snap.dra.insert(whole.key(), Arc::new(whole));
    let gpus = Index::build(&snap, 0).dra().mig_gpus(&Sym::new("a"));
    assert_eq!(gpus[0].held_whole.as_deref(), Some("ml/whole"));
    assert!(gpus[0].partitions.iter().all(|p| !p.free && p.held_by.is_none()), "{gpus:?}");
}

/// A node's static MIG devices published through DRA count as its MIG
/// slices, as the device plugin's do (the Fleet row's MIG column).
#[test]
fn static_mig_devices_through_dra_are_the_nodes_mig_slices() {
    let snap = cluster(claim("wants", vec![exact("gpu.nvidia.com", 1)], &[]));
    let nodes = crate::analysis::fleet::summarize(&Index::build(&snap, 0), &Default::default());
    let a = nodes.iter().find(|n| n.name.as_str() == "a").unwrap();
    let slices: Vec<_> =
        a.mig_slices().into_iter().map(|m| (m.profile.to_string(), m.allocated, m.allocatable)).collect();
    assert_eq!(slices, [("1g.10gb".to_string(), 1, 1)]);
    let b = nodes.iter().find(|n| n.name.as_str() == "b").unwrap();
    assert!(b.mig_slices().is_empty());
}

/// A claim still allocated after every pod it served is gone holds its
/// devices until the resource-claim controller releases it: the chain names
/// it on the nodes that are short.
#[test]
fn a_claim_whose_pods_are_gone_is_named_where_devices_are_short() {
    let mut held = claim("leftover", vec![exact("gpu.nvidia.com", 1)], &[("b", "gpu-0")]);
    held.reserved_for = Box::new([Arc::from("finished-long-ago")]);
    let slices = vec![slice("b", vec![gpu_on_root("gpu-0", "U0", "pci0000:15")])];
    let v =
        judge(&world(slices.clone(), vec![held.clone()], claim_of(vec![("gpus", exact("gpu.nvidia.com", 1))], vec![])));
    assert!(v.nodes_fit.is_empty());
    assert_eq!(v.stale_holds, [(Sym::new("b"), "ml/leftover".to_string(), 1)]);
    // Reserved for the pod that waits here (it exists): not stale.
    held.reserved_for = Box::new([Arc::from("waiting")]);
    let v = judge(&world(slices, vec![held], claim_of(vec![("gpus", exact("gpu.nvidia.com", 1))], vec![])));
    assert!(v.stale_holds.is_empty(), "{v:?}");
}

/// A claim reserved for several pods: each holds its devices, and says the
/// claim is shared (the node detail's per-pod lines add up past the node's).
#[test]
fn a_pod_holding_gpus_through_a_shared_claim_says_so() {
    let mut team = claim("team", vec![exact("gpu.nvidia.com", 1)], &[("b", "gpu-0")]);
    team.reserved_for = Box::new([Arc::from("p1"), Arc::from("p2")]);
    let slices = vec![slice("b", vec![gpu_on_root("gpu-0", "U0", "pci0000:15")])];
    let snap = world(slices, vec![team], claim_of(vec![("gpus", exact("gpu.nvidia.com", 1))], vec![]));
    let index = Index::build(&snap, 0);
    let mut p1 = pod("p1").ns("ml").build();
    p1.claims =
        Box::new([PodClaim { name: Sym::new("gpu"), source: ClaimSource::Claim("team".into()), generated: None }]);
    let held = index.dra().held_by(&p1);
    assert_eq!((held.gpus, held.shared), (1, true));
}

/// A claim kgpu skipped as malformed exists: the chain says it could not
/// read it, not that it does not exist, and decides nothing on it.
#[test]
fn a_claim_kgpu_could_not_read_is_not_called_missing() {
    use crate::analysis::pending::VerdictSource;
    let mut snap = cluster(claim("wants", vec![exact("gpu.nvidia.com", 1)], &[]));
    let pending = snap.dra.keys().find(|k| &*k.name == "wants").cloned().unwrap();
    snap.dra.remove(&pending);
    snap.skipped.insert(
        crate::model::Feed::ResourceClaims,
        (1, "ResourceClaim wants: resourceclaim ml/wants: a negative device count".into()),
    );
    let item = chain(&snap, "waiting");
    let step = item.steps.iter().find(|s| s.step == crate::analysis::pending::Step::Claims).unwrap();
    assert_eq!(&*step.summary, "ResourceClaim wants exists but kgpu could not read it");
    assert_eq!(step.said_by, Some(VerdictSource::Undecided));
}

/// A NoExecute taint on a device a claim holds: the node's issue names the
/// pod the device-taint eviction controller (1.36, on by default) deletes.
#[test]
fn a_no_execute_device_taint_names_the_pods_it_evicts() {
    use crate::model::TaintEffect;
    use crate::model::dra::DeviceTaint;
    let mut gpu = gpu_on_root("gpu-0", "U0", "pci0000:15");
    gpu.taints = Box::new([DeviceTaint {
        key: Sym::new("gpu.nvidia.com/xid"),
        value: Some(Sym::new("79")),
        effect: TaintEffect::NoExecute,
    }]);
    let mut held = claim("victim-gpu", vec![exact("gpu.nvidia.com", 1)], &[("b", "gpu-0")]);
    held.reserved_for = Box::new([Arc::from("victim")]);
    let snap =
        world(vec![slice("b", vec![gpu])], vec![held], claim_of(vec![("gpus", exact("gpu.nvidia.com", 1))], vec![]));
    let nodes = crate::analysis::fleet::summarize(&Index::build(&snap, 0), &Default::default());
    let b = nodes.iter().find(|n| n.name.as_str() == "b").unwrap();
    let issue = b.issues.iter().find(|i| i.code == crate::analysis::node_issue::IssueCode::DeviceTainted).unwrap();
    assert!(issue.detail.contains("the device-taint eviction controller deletes ml/victim"), "{}", issue.detail);
}
