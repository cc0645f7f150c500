//! Fragmentation and plan tests on small built clusters.
use super::*;
use crate::analysis::testing::{node, pod, podgroup, snapshot};
use crate::model::TaintEffect;
use crate::model::{Pod, PodKey, Timestamp};

const NOW: Timestamp = 100_000;
const HOUR: Timestamp = 3600;

/// A running, controller-owned pod of `gpus` GPUs on `node`, started `hours` ago.
fn running(name: &str, gpus: u64, node: &str, hours: i64) -> Pod {
    pod(name).gpus(gpus).owner("Job", name).on(node).running().transitioned(NOW - hours * HOUR).build()
}

fn shape<'a>(f: &'a Fragmentation, label: &str, pending: bool) -> &'a ShapeFit {
    f.shapes.iter().find(|s| s.demand.label() == label && s.demand.is_pending() == pending).expect(label)
}

#[test]
fn sixty_four_gpus_of_mixed_job_sizes() {
    // 8 nodes × 8 GPUs = 64. Running jobs of 1, 2, 4 and 8 GPUs:
    //   n1: 4+2+1 = 7 used → 1 free     n5: 8         → 0 free
    //   n2: 4+2   = 6 used → 2 free     n6: 1         → 7 free
    //   n3: 4         used → 4 free     n7: (empty)   → 8 free
    //   n4: 2+2+1 = 5 used → 3 free     n8: 2         → 6 free
    // used 33, free 31; only n7 is a whole free node.
    let nodes = (1..=8).map(|i| node(&format!("n{i}")).gpus(8).build()).collect();
    let layout: [(&str, &[u64]); 7] = [
        ("n1", &[4, 2, 1]),
        ("n2", &[4, 2]),
        ("n3", &[4]),
        ("n4", &[2, 2, 1]),
        ("n5", &[8]),
        ("n6", &[1]),
        ("n8", &[2]),
    ];
    let mut pods: Vec<Pod> = layout
        .iter()
        .flat_map(|(n, sizes)| sizes.iter().enumerate().map(move |(i, g)| running(&format!("{n}-{i}"), *g, n, 1)))
        .collect();
    pods.push(pod("wants-8").gpus(8).build());
    pods.push(pod("wants-2").gpus(2).build());
    let snap = snapshot(nodes, pods, vec![], NOW);
    let f = analyze(&Index::build(&snap, NOW));

    assert_eq!(f.free_total, 31);
    assert_eq!(f.free_on_whole_nodes, 8);
    // score = 1 − 8/31 = 23/31
    assert!((f.score - 23.0 / 31.0).abs() < 1e-9, "{}", f.score);

    // 1×8: only n7 has 8 free. Usable 8; the other 31 − 8 = 23 free GPUs
    // are stranded for this shape.
    let s = shape(&f, "1×8", true);
    assert_eq!((s.largest_gang, s.usable_free, s.stranded_free, s.fits_now), (1, 8, 23, true));
    // 1×2: slots per node = ⌊free/2⌋ = 0+1+2+1+0+3+4+3 = 14 → 28 usable;
    // the odd GPUs on n1, n4 and n6 (1 each) are stranded: 31 − 28 = 3.
    let s = shape(&f, "1×2", true);
    assert_eq!((s.largest_gang, s.usable_free, s.stranded_free), (14, 28, 3));
    // Canonical 4×8 (four 8-GPU pods): one fits, so it does not.
    let s = shape(&f, "4×8", false);
    assert_eq!((s.largest_gang, s.fits_now), (1, false));
    // Canonical 1×1: every free GPU is usable.
    let s = shape(&f, "1×1", false);
    assert_eq!((s.largest_gang, s.usable_free, s.stranded_free), (31, 31, 0));

    // Fleet-wide a free GPU is stranded when no pending shape can use it.
    // Per node, free − most usable by a pending shape (8-GPU or 2-GPU):
    //   n1 1−0 = 1, n2 2−2 = 0, n3 4−4 = 0, n4 3−2 = 1, n6 7−6 = 1,
    //   n7 8−8 = 0, n8 6−6 = 0 → 3.
    assert_eq!(f.stranded_total, 3);
    let stranded: Vec<(&str, u64)> = f.stranded_by_node.iter().map(|(n, s)| (n.as_str(), *s)).collect();
    assert_eq!(stranded, [("n1", 1), ("n4", 1), ("n6", 1)]);
    // Everything pending fits somewhere: no plan needed.
    assert_eq!(f.plan.status, PlanStatus::NotNeeded);
}

#[test]
fn the_plan_moves_the_cheapest_work_that_frees_whole_nodes() {
    // 8 × 8 GPUs. A PodGroup needs 2 pods × 8 GPUs; no node has 8 free.
    //   n1: 1-GPU pod a, 1 h old  → 1 GPU-hour   (7 free)
    //   n2: 1-GPU pod b, 3 h old  → 3 GPU-hours  (7 free)
    //   n3: 2-GPU pod c, 1 h old  → 2 GPU-hours  (6 free)
    //   n4..n8: a 4-GPU pod each, 1 h → 4 GPU-hours (4 free each)
    // Free 7+7+6+5×4 = 40, all stranded for 2×8; usable 0.
    let nodes = (1..=8).map(|i| node(&format!("n{i}")).gpus(8).build()).collect();
    let mut pods = vec![running("a", 1, "n1", 1), running("b", 1, "n2", 3), running("c", 2, "n3", 1)];
    pods.extend((4..=8).map(|i| running(&format!("d{i}"), 4, &format!("n{i}"), 1)));
    pods.extend((0..2).map(|i| pod(&format!("train-{i}")).gpus(8).group("train").build()));
    let snap = snapshot(nodes, pods, vec![podgroup("train", 2, 8).phase("Inqueue").build()], NOW);
    let f = analyze(&Index::build(&snap, NOW));

    let s = shape(&f, "2×8", true);
    assert_eq!((s.largest_gang, s.usable_free, s.stranded_free, s.fits_now), (0, 0, 40, false));
    assert_eq!(f.plan.target.as_deref(), Some("PodGroup default/train"));
    assert_eq!(f.plan.status, PlanStatus::Found);
    // One move per node is the fewest; by GPU-hours: a (1) then c (2);
    // b (3) and the 4-GPU pods (4) cost more. Each lands on the fullest
    // node that takes it without costing the gang a slot: n4 (4 free,
    // then 3 free after a).
    let moves = plan_moves(&f);
    assert_eq!(moves, [("a", "n1", "n4"), ("c", "n3", "n4")]);
    // Work lost (docs/DESIGN.md): 1 GPU × (1 h + 10 min restart) + 2 GPUs × (1 h + 10 min).
    assert!((f.plan.gpu_hours - 3.5).abs() < 1e-9, "{}", f.plan.gpu_hours);
    let freed: Vec<&str> = f.plan.nodes_freed.iter().map(|n| n.as_str()).collect();
    assert_eq!(freed, ["n1", "n3"]);
    // The freed nodes hold the gang: they are what running it reserves.
    assert_eq!(f.plan.reserve, f.plan.nodes_freed);
    assert_eq!(f.plan.target_key, Some(ShapeSource::Gang(snap.gangs.keys().next().unwrap().clone())));
}

#[test]
fn work_held_before_fit_gets_no_plan_and_says_why() {
    // The same fleet, but the PodGroup is still Pending in its Volcano
    // queue: freed nodes would not start it.
    let nodes = (1..=2).map(|i| node(&format!("n{i}")).gpus(8).build()).collect();
    let mut pods = vec![running("a", 1, "n1", 1), running("b", 1, "n2", 1)];
    pods.extend((0..2).map(|i| pod(&format!("train-{i}")).gpus(8).group("train").build()));
    let snap = snapshot(nodes, pods, vec![podgroup("train", 2, 8).build()], NOW);
    let f = analyze(&Index::build(&snap, NOW));
    let PlanStatus::Impossible(why) = &f.plan.status else { panic!("{:?}", f.plan.status) };
    assert!(why.contains("waits for admission"), "{why}");
    assert!(f.plan.steps.is_empty() && f.plan.reserve.is_empty());
}

#[test]
fn a_plan_reserves_the_nodes_that_already_have_room_too() {
    // n1 has 8 free already; n2 needs a move. The 2×8 gang lands on
    // both, so both are reserved, or a replacement could take n1.
    let nodes = (1..=3).map(|i| node(&format!("n{i}")).gpus(8).build()).collect();
    let mut pods = vec![running("small", 1, "n2", 1), running("half", 4, "n3", 1)];
    pods.extend((0..2).map(|i| pod(&format!("train-{i}")).gpus(8).group("train").build()));
    let snap = snapshot(nodes, pods, vec![podgroup("train", 2, 8).phase("Inqueue").build()], NOW);
    let f = analyze(&Index::build(&snap, NOW));
    assert_eq!(f.plan.status, PlanStatus::Found);
    let freed: Vec<&str> = f.plan.nodes_freed.iter().map(|n| n.as_str()).collect();
    let reserve: Vec<&str> = f.plan.reserve.iter().map(|n| n.as_str()).collect();
    assert_eq!(freed, ["n2"]);
    assert_eq!(reserve, ["n2", "n1"]);
}

#[test]
fn no_plan_when_the_fleet_is_too_small_or_the_pods_cannot_move() {
    // Two 8-GPU nodes cannot hold a 3×8 gang even when empty.
    let nodes = vec![node("n1").gpus(8).build(), node("n2").gpus(8).build()];
    let pods: Vec<Pod> = (0..3).map(|i| pod(&format!("big-{i}")).gpus(8).group("big").build()).collect();
    let snap = snapshot(nodes, pods, vec![podgroup("big", 3, 8).phase("Inqueue").build()], NOW);
    let f = analyze(&Index::build(&snap, NOW));
    let PlanStatus::Impossible(why) = &f.plan.status else { panic!("{:?}", f.plan.status) };
    assert!(why.contains("room for only 2 of 3"), "{why}");

    // One node, one pod in the way of higher priority than the gang,
    // with nowhere else to go: neither a move nor an eviction.
    let mut blocker = running("blocker", 1, "n1", 1);
    blocker.priority = 1000;
    let snap = snapshot(
        vec![node("n1").gpus(8).build()],
        vec![blocker, pod("w").gpus(8).group("w").build()],
        vec![podgroup("w", 1, 8).phase("Inqueue").build()],
        NOW,
    );
    let f = analyze(&Index::build(&snap, NOW));
    let PlanStatus::Impossible(why) = &f.plan.status else { panic!("{:?}", f.plan.status) };
    assert!(why.contains("more important than the target"), "{why}");
}

#[test]
fn when_moves_cannot_make_room_the_cheapest_evictions_can() {
    // n1: a notebook Job pod of 2 GPUs, 3 h old, and a Job pod of 1 GPU,
    // 1 h old, with no other node to go to: the gang of one 8-GPU pod
    // needs n1 empty. Both are evicted as lost work, lowest priority first.
    let notebook = pod("notebook").gpus(2).owner("Job", "notebook").on("n1").running().transitioned(NOW - 3 * HOUR);
    let snap = snapshot(
        vec![node("n1").gpus(8).build()],
        vec![notebook.build(), running("eval", 1, "n1", 1), pod("w").gpus(8).group("w").build()],
        vec![podgroup("w", 1, 8).phase("Inqueue").build()],
        NOW,
    );
    let f = analyze(&Index::build(&snap, NOW));
    assert_eq!(f.plan.status, PlanStatus::Found, "{:?}", f.plan);
    let steps: Vec<(&str, Option<Sym>)> = f.plan.steps.iter().map(|s| (s.pod.as_str(), s.to_node.clone())).collect();
    assert_eq!(steps, [("eval", None), ("notebook", None)], "least GPU-hours first at equal priority");
    assert_eq!(f.plan.steps_summary(), "0 move(s) and 2 eviction(s) (work lost)");
    // 1 GPU × (1 h + 10 min restart) + 2 GPUs × (3 h + 10 min).
    assert!((f.plan.gpu_hours - 7.5).abs() < 1e-9, "7.5 GPU-hours lost: {}", f.plan.gpu_hours);
    assert_eq!(f.plan.reserve, [Sym::new("n1")]);
}

#[test]
fn a_plan_never_evicts_a_pod_without_a_controller() {
    // The same notebook as a bare pod: evicting it would delete it for
    // good (kubectl drain refuses it unless forced), so no plan stops it.
    let bare = pod("notebook").gpus(2).on("n1").running().transitioned(NOW - 3 * HOUR).build();
    let snap = snapshot(
        vec![node("n1").gpus(8).build()],
        vec![bare, running("eval", 1, "n1", 1), pod("w").gpus(8).group("w").build()],
        vec![podgroup("w", 1, 8).phase("Inqueue").build()],
        NOW,
    );
    let f = analyze(&Index::build(&snap, NOW));
    let PlanStatus::Impossible(why) = &f.plan.status else { panic!("{:?}", f.plan.status) };
    assert!(why.contains("pods without a controller"), "{why}");
    assert!(f.plan.steps.iter().all(|s| s.pod.as_str() != "notebook"));
    // The same, beside a node whose device plugin hides its 8 GPUs: fix
    // the plugin rather than evict anyone.
    let bare = pod("notebook").gpus(2).on("n1").running().transitioned(NOW - 3 * HOUR).build();
    let snap = snapshot(
        vec![node("n1").gpus(8).build(), node("n2").hardware(8).build()],
        vec![bare, running("eval", 1, "n1", 1), pod("w").gpus(8).group("w").build()],
        vec![podgroup("w", 1, 8).phase("Inqueue").build()],
        NOW,
    );
    let f = analyze(&Index::build(&snap, NOW));
    let PlanStatus::Impossible(why) = &f.plan.status else { panic!("{:?}", f.plan.status) };
    assert!(why.contains("device plugin does not advertise"), "{why}");
}

#[test]
fn a_plan_that_empties_too_many_nodes_is_a_rebalancing() {
    // 20 nodes with one 1-GPU pod each; an 18×8 gang would need 18
    // nodes emptied, more than MAX_NODES_FREED.
    let nodes = (0..20).map(|i| node(&format!("n{i:02}")).gpus(8).build()).collect();
    let mut pods: Vec<Pod> = (0..20).map(|i| running(&format!("p{i:02}"), 1, &format!("n{i:02}"), 1)).collect();
    pods.extend((0..18).map(|i| pod(&format!("g-{i}")).gpus(8).group("g").build()));
    let snap = snapshot(nodes, pods, vec![podgroup("g", 18, 8).phase("Inqueue").build()], NOW);
    let f = analyze(&Index::build(&snap, NOW));
    let PlanStatus::Impossible(why) = &f.plan.status else { panic!("{:?}", f.plan.status) };
    assert!(why.contains("rebalancing"), "{why}");
    assert!(f.plan.steps.is_empty());
}

#[test]
fn mig_profiles_that_fit_and_that_do_not() {
    // m1 offers 7 × 1g.10gb, 3 in use; m2 offers 2 × 3g.40gb, none in use.
    let nodes = vec![node("m1").mig("1g.10gb", 7).build(), node("m2").mig("3g.40gb", 2).build()];
    let mut pods: Vec<Pod> =
        (0..3).map(|i| pod(&format!("small-{i}")).mig("1g.10gb", 1).on("m1").running().build()).collect();
    pods.push(pod("wants-1g").mig("1g.10gb", 1).build());
    pods.push(pod("wants-3g").mig("3g.40gb", 1).build());
    pods.push(pod("wants-2g").mig("2g.20gb", 1).build());
    let snap = snapshot(nodes, pods, vec![], NOW);
    let f = analyze(&Index::build(&snap, NOW));
    // 1g.10gb: 7 − 3 = 4 free slices on m1 → 4 pods fit.
    let s = shape(&f, "1×1g.10gb", true);
    assert_eq!((s.largest_gang, s.usable_free, s.fits_now), (4, 4, true));
    // 3g.40gb: both slices on m2 are free.
    let s = shape(&f, "1×3g.40gb", true);
    assert_eq!((s.largest_gang, s.usable_free, s.fits_now), (2, 2, true));
    // 2g.20gb: no node offers it; nothing is usable.
    let s = shape(&f, "1×2g.20gb", true);
    assert_eq!((s.largest_gang, s.usable_free, s.fits_now), (0, 0, false));
    // The plan moves whole-GPU work only: a missing MIG profile needs a
    // repartition, not evictions, and the plan says so.
    let PlanStatus::Impossible(why) = &f.plan.status else { panic!("{:?}", f.plan.status) };
    assert!(why.contains("needs MIG slices") && why.contains("repartition"), "{why}");
}

#[test]
fn placement_rules_decide_where_free_gpus_count() {
    // A tainted pool the pending pod does not tolerate: its free GPUs are
    // idle for that pod, not usable and not stranded.
    let nodes = vec![
        node("open").gpus(8).build(),
        node("tainted").gpus(8).taint("dedicated", "infer", TaintEffect::NoSchedule).build(),
    ];
    let pods = vec![running("x", 6, "open", 1), pod("w").gpus(4).build()];
    let snap = snapshot(nodes, pods, vec![], NOW);
    let f = analyze(&Index::build(&snap, NOW));
    let s = shape(&f, "1×4", true);
    // open has 2 free (stranded for 4 GPUs); tainted's 8 do not count.
    assert_eq!((s.largest_gang, s.usable_free, s.stranded_free), (0, 0, 2));
    assert_eq!(f.stranded_by_node.keys().map(|n| n.as_str()).collect::<Vec<_>>(), ["open"]);
    assert_eq!(f.free_total, 10);
}

#[test]
fn an_idle_holder_is_the_cheapest_to_move_and_the_plan_says_so() {
    // The fleet of the test above, but b (1 GPU, 3 h) has held its GPU idle
    // for the last 2 h 50 min: moving it loses 10 minutes of work, not 3 hours.
    let nodes = (1..=8).map(|i| node(&format!("n{i}")).gpus(8).build()).collect();
    let mut pods = vec![running("a", 1, "n1", 1), running("b", 1, "n2", 3), running("c", 2, "n3", 1)];
    pods.extend((4..=8).map(|i| running(&format!("d{i}"), 4, &format!("n{i}"), 1)));
    pods.extend((0..2).map(|i| pod(&format!("train-{i}")).gpus(8).group("train").build()));
    let mut snap = snapshot(nodes, pods, vec![podgroup("train", 2, 8).phase("Inqueue").build()], NOW);
    let mut cluster = crate::model::Cluster::new(snap.source.clone());
    cluster.apply(crate::model::ModelEvent::Clock(NOW));
    let idle_since = NOW - 170 * 60;
    cluster.apply(crate::model::ModelEvent::Upsert(crate::model::Object::Usage(crate::model::NodeUsage {
        problem: None,
        node: Sym::new("n2"),
        source: crate::model::UsageSource::Agent,
        at: NOW,
        devices: Box::new([crate::model::DeviceReading {
            gpu: Sym::new("GPU-n2-0"),
            index: 0,
            slice: None,
            holders: Box::new([PodKey::new("default", "b")]),
            busy_pct: Some(0.0),
            memory_used_mib: Some(20_000),
            idle_since: Some(idle_since),
        }]),
    })));
    snap.usage = cluster.snapshot().usage;
    let f = analyze(&Index::build(&snap, NOW));
    let moves: Vec<(&str, Option<i64>)> = f.plan.steps.iter().map(|s| (s.pod.as_str(), s.idle_seconds)).collect();
    assert_eq!(moves, [("b", Some(170 * 60)), ("a", None)], "b first: the least work lost");
    // b: 10 busy minutes + its 10-minute restart; a: its hour + 10 minutes.
    assert!((f.plan.gpu_hours - (20.0 / 60.0 + 70.0 / 60.0)).abs() < 1e-9, "{}", f.plan.gpu_hours);
}

/// A pod whose bound volume is pinned to a full node: the free node does
/// not count as room for it, and the plan frees the node its volume allows.
#[test]
fn a_plan_frees_the_node_a_pods_volume_allows() {
    use crate::analysis::testing::storage::{self, bound, manual, volume};
    use crate::model::{ClaimUse, StorageObject, keys};
    let nodes = ["n1", "n2"].iter().map(|n| node(n).gpus(8).label(keys::HOSTNAME, n).build()).collect();
    let mut pinned = pod("pinned").ns("ml").gpus(8).build();
    pinned.volumes = Box::new([ClaimUse { claim: "cache".into(), ephemeral: false }]);
    let snap = snapshot(nodes, vec![running("busy", 8, "n1", 1), pinned], vec![], NOW);
    let snap = storage::with(
        snap,
        vec![
            manual("manual"),
            bound("cache", "manual", "pv-n1"),
            StorageObject::Volume(volume("pv-n1", "manual", 10, Some("n1"))),
        ],
    );
    let f = analyze(&Index::build(&snap, NOW));
    let s = shape(&f, "1×8", true);
    assert_eq!((s.largest_gang, s.fits_now), (0, false), "n2's 8 free GPUs are not room for it");
    assert_eq!(f.plan.status, PlanStatus::Found);
    let moves = plan_moves(&f);
    assert_eq!(moves, [("busy", "n1", "n2")]);
}

/// Equal costs are decided by name (the index keeps each node's pods in
/// order), not by the order pods arrive in: a watch delivers them in any
/// order, and the plan a cockpit shows must not flip between ticks.
#[test]
fn the_plan_is_the_same_whatever_order_pods_arrive_in() {
    let nodes = || (1..=3).map(|i| node(&format!("n{i}")).gpus(8).build()).collect::<Vec<_>>();
    // Twin pods of equal cost on n1 (1 free); a 1×3 pending pod needs one of them moved to n2 or n3.
    let mut pods = vec![
        running("twin-b", 2, "n1", 1),
        running("twin-a", 2, "n1", 1),
        running("fill1", 3, "n1", 1),
        running("fill2", 6, "n2", 1),
        running("fill3", 6, "n3", 1),
    ];
    pods.push(pod("mid").gpus(3).build());
    let plan_of = |pods: Vec<Pod>| {
        let snap = snapshot(nodes(), pods, vec![], NOW);
        analyze(&Index::build(&snap, NOW)).plan.steps.iter().map(|s| s.pod.clone()).collect::<Vec<_>>()
    };
    let forwards = plan_of(pods.clone());
    pods.reverse();
    assert_eq!(plan_of(pods), forwards);
    assert_eq!(forwards, ["twin-a"], "of two equal costs, the first by name");
}

/// The plan's moves as (pod, from, to).
fn plan_moves(f: &Fragmentation) -> Vec<(&str, &str, &str)> {
    f.plan
        .steps
        .iter()
        .map(|s| (s.pod.as_str(), s.from_node.as_str(), s.to_node.as_ref().map_or("-", |n| n.as_str())))
        .collect()
}
