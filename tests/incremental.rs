//! The incremental analysis (`analysis::Analyzer`, which keeps the pods'
//! ledger between snapshots) says what the full recompute (`analysis::analyze`)
//! says, after any sequence of changes: the index it builds, in the same
//! order, and the whole JSON snapshot.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use kgpu::analysis::index::{Index, PodLedger};
use kgpu::analysis::{self, Analyzer, Thresholds};
use kgpu::model::build::{node, pod, podgroup};
use kgpu::model::{
    Cluster, Feed, FeedState, GangKey, GangKind, ModelEvent, Object, ObjectKey, Owner, PodKey, PodPhase, Snapshot,
    SourceInfo, SourceKind, Sym, TaintEffect,
};
use kgpu::sources::sim::scenarios;
use proptest::prelude::*;

/// What an index says, in its own order: any difference in a count, a
/// list or its order shows.
fn index_facts(index: &Index<'_>, snap: &Snapshot) -> Vec<String> {
    let names =
        |pods: &[&kgpu::model::Pod]| pods.iter().map(|p| format!("{}/{}", p.namespace, p.name)).collect::<Vec<_>>();
    let mut facts = Vec::new();
    let mut stray: Vec<_> = index.stray_pods().map(|(n, pods)| (n.to_string(), names(pods))).collect();
    stray.sort();
    let stray_nodes: Vec<Sym> = stray.iter().map(|(n, _)| Sym::new(n)).collect();
    for n in index.node_list().iter().map(|n| n.name.clone()).chain(stray_nodes).chain([Sym::new("gone")]) {
        facts.push(format!(
            "{n}: used {:?}, pods {:?}, gpu pods {}, failed {:?}",
            index.used(&n),
            names(index.pods_on(&n)),
            index.gpu_pods_on(&n),
            names(index.failed_on(&n))
        ));
    }
    facts.push(format!("stray {stray:?}"));
    facts.push(format!("pending {:?}", names(index.pending_pods())));
    let workloads: Vec<_> = index
        .gpu_workloads()
        .iter()
        .map(|w| format!("{}/{} at {:?} {:?}", w.pod.namespace, w.pod.name, w.node, w.cuda))
        .collect();
    facts.push(format!("gpu workloads {workloads:?}"));
    for key in snap.gangs.keys() {
        facts.push(format!("{key:?}: {:?}", names(index.members(key))));
    }
    for key in snap.pods.keys() {
        if let Some(gang) = index.gang_of(key) {
            facts.push(format!("{key:?} in {gang:?}"));
        }
    }
    facts.push(format!("lowest holder priority {:?}", index.lowest_holder_priority()));
    facts
}

fn document(snap: &Snapshot, a: &analysis::Analysis) -> serde_json::Value {
    serde_json::to_value(kgpu::view_model::json::document(snap, a, None, None)).unwrap()
}

/// Both ways agree on `snap`: the ledger's index and the walk's, and the
/// analyses built on them.
fn agree(analyzer: &mut Analyzer, ledger: &mut PodLedger, snap: &Snapshot, step: &str) {
    let now = snap.clock;
    ledger.update(snap);
    assert!(ledger.is_current(snap));
    let kept = index_facts(&Index::with_ledger(snap, now, ledger), snap);
    let walked = index_facts(&Index::build(snap, now), snap);
    assert_eq!(kept, walked, "index after {step}");
    let thresholds = Thresholds::default();
    let incremental = analyzer.analyze(snap, now, &thresholds);
    let full = analysis::analyze(snap, now, &thresholds);
    assert_eq!(document(snap, &incremental), document(snap, &full), "analysis after {step}");
}

/// Every demo scenario, run forward for ten minutes of its life (pods
/// scheduled, finished, failed; gangs admitted and placed; nodes faulting).
#[test]
fn every_scenario_run_forward_is_analysed_alike_both_ways() {
    for name in scenarios::names() {
        let mut sim = scenarios::build(name, 7).unwrap();
        let mut cluster = Cluster::new(SourceInfo { kind: SourceKind::Demo, name: name.into() });
        cluster.apply_all(sim.initial_events());
        let (mut analyzer, mut ledger) = (Analyzer::new(), PodLedger::new());
        agree(&mut analyzer, &mut ledger, &cluster.snapshot(), &format!("{name} at start"));
        let mut incremental_steps = 0;
        for step in 0..120 {
            cluster.apply_all(sim.step(5));
            let snap = cluster.snapshot();
            agree(&mut analyzer, &mut ledger, &snap, &format!("{name} after {} s", (step + 1) * 5));
            incremental_steps += usize::from(ledger.last_changes() < snap.pods.len());
        }
        assert!(incremental_steps > 0, "{name}: some steps must change a few pods, not start over");
    }
}

/// Pods still listing are walked, nothing kept; once the list is complete
/// the ledger starts over at once (not at the first change after it), then
/// keeps up a few pods at a time — a gang's status redoes no pod, a new
/// gang only the pods of its namespace — and starts over after a change in bulk.
#[test]
fn pods_listing_are_walked_and_the_ledger_started_over_once_the_list_is_complete() {
    let mut cluster = Cluster::new(SourceInfo { kind: SourceKind::Kube, name: "bulk".into() });
    cluster.apply(ModelEvent::Clock(1_796_029_200));
    cluster.apply_all((0..40).map(|i| ModelEvent::Upsert(Object::Node(node(&format!("n{i}")).gpus(8).build()))));
    let bound = |i: usize| pod(&format!("p{i:04}")).gpus(1).on(&format!("n{}", i % 40)).running().build();
    let (mut analyzer, mut ledger) = (Analyzer::new(), PodLedger::new());
    let thresholds = Thresholds::default();
    cluster.apply(ModelEvent::Feed { feed: Feed::Pods, state: FeedState::Syncing });
    for page in 0..3 {
        cluster.apply_all((page * 500..page * 500 + 500).map(|i| ModelEvent::Upsert(Object::Pod(bound(i)))));
        let snap = cluster.snapshot();
        ledger.update(&snap);
        assert!(!ledger.is_current(&snap), "page {page}: pods still listing are walked");
        assert_eq!(ledger.last_changes(), 0);
        let full = analysis::analyze(&snap, snap.clock, &thresholds);
        assert_eq!(document(&snap, &analyzer.analyze(&snap, snap.clock, &thresholds)), document(&snap, &full));
    }
    cluster.apply(ModelEvent::Feed { feed: Feed::Pods, state: FeedState::Live });
    agree(&mut analyzer, &mut ledger, &cluster.snapshot(), "the first list complete");
    assert_eq!(ledger.last_changes(), 1_500, "started over with the list complete");
    cluster.apply(ModelEvent::Delete(ObjectKey::Pod(PodKey::new("default", "p0007"))));
    agree(&mut analyzer, &mut ledger, &cluster.snapshot(), "a pod deleted");
    assert_eq!(ledger.last_changes(), 1, "kept: one pod taken out");
    cluster.apply(ModelEvent::Upsert(Object::Pod(bound(5_000))));
    agree(&mut analyzer, &mut ledger, &cluster.snapshot(), "a pod added");
    assert_eq!(ledger.last_changes(), 1, "kept: one pod put in");
    // A gang's status changes (Volcano's phase): no pod moves, none is redone.
    let team = |i: usize| pod(&format!("t{i}")).ns("team-x").group("train").gpus(8).on(&format!("n{i}")).build();
    cluster.apply_all((0..10).map(|i| ModelEvent::Upsert(Object::Pod(team(i)))));
    cluster.apply(ModelEvent::Upsert(Object::Gang(podgroup("other", 2, 8).ns("team-y").build())));
    agree(&mut analyzer, &mut ledger, &cluster.snapshot(), "ten pods and a gang in another namespace");
    assert_eq!(ledger.last_changes(), 10, "kept: ten pods put in, none of team-x redone");
    cluster.apply(ModelEvent::Upsert(Object::Gang(podgroup("other", 2, 8).ns("team-y").phase("Running").build())));
    agree(&mut analyzer, &mut ledger, &cluster.snapshot(), "a gang's phase changed");
    assert_eq!(ledger.last_changes(), 0, "kept: a gang's status moves no pod");
    // A gang comes that the pods of team-x name: they are redone, the rest are not.
    cluster.apply(ModelEvent::Upsert(Object::Gang(podgroup("train", 10, 8).ns("team-x").build())));
    agree(&mut analyzer, &mut ledger, &cluster.snapshot(), "the gang team-x's pods name");
    assert_eq!(ledger.last_changes(), 20, "kept: team-x's ten pods taken out and put back in");
    // A burst larger than an eighth of the fleet (and 1,000 pods): started over.
    cluster.apply_all((1_500..2_700).map(|i| ModelEvent::Upsert(Object::Pod(bound(i)))));
    agree(&mut analyzer, &mut ledger, &cluster.snapshot(), "a burst of 1,200 new pods");
    assert_eq!(ledger.last_changes(), 2_710, "started over after a burst");
    // A relist after a lost watch: walked while its pages arrive, however few.
    cluster.apply(ModelEvent::Feed { feed: Feed::Pods, state: FeedState::Syncing });
    cluster.apply(ModelEvent::Upsert(Object::Pod(bound(5_001))));
    let snap = cluster.snapshot();
    ledger.update(&snap);
    assert!(!ledger.is_current(&snap), "pods still listing: walked");
    cluster.apply(ModelEvent::Feed { feed: Feed::Pods, state: FeedState::Live });
    agree(&mut analyzer, &mut ledger, &cluster.snapshot(), "the relist complete");
    assert_eq!(ledger.last_changes(), 2_711, "started over with the relist complete");
}

/// One change to a small fleet, as the API server would send it.
#[derive(Clone, Debug)]
enum Change {
    /// A pod (re)written: where it is and how it stands.
    Pod {
        id: u8,
        namespace: u8,
        node: Option<u8>,
        state: u8,
        gpus: u8,
        priority: i8,
        gang: Option<u8>,
        /// A Job of that number owns it (a Kueue workload may name it).
        job: Option<u8>,
        created: u8,
    },
    DeletePod {
        id: u8,
        namespace: u8,
    },
    Node {
        id: u8,
        gpus: u8,
        tainted: bool,
    },
    DeleteNode {
        id: u8,
    },
    /// A Volcano PodGroup, or with `job` a Kueue Workload owned by that Job.
    Gang {
        id: u8,
        namespace: u8,
        min: u8,
        job: Option<u8>,
    },
    DeleteGang {
        id: u8,
        namespace: u8,
        kueue: bool,
    },
    Clock {
        advance: u8,
    },
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        6 => (
            (0u8..24, 0u8..2, proptest::option::of(0u8..6), 0u8..5, 0u8..4, -2i8..3),
            (proptest::option::of(0u8..3), proptest::option::of(0u8..3), 0u8..4),
        )
            .prop_map(|((id, namespace, node, state, gpus, priority), (gang, job, created))| Change::Pod {
                id, namespace, node, state, gpus, priority, gang, job, created
            }),
        2 => (0u8..24, 0u8..2).prop_map(|(id, namespace)| Change::DeletePod { id, namespace }),
        1 => (0u8..6, 0u8..9, any::<bool>()).prop_map(|(id, gpus, tainted)| Change::Node { id, gpus, tainted }),
        1 => (0u8..6).prop_map(|id| Change::DeleteNode { id }),
        2 => (0u8..3, 0u8..2, 1u8..4, proptest::option::of(0u8..3))
            .prop_map(|(id, namespace, min, job)| Change::Gang { id, namespace, min, job }),
        1 => (0u8..3, 0u8..2, any::<bool>()).prop_map(|(id, namespace, kueue)| Change::DeleteGang { id, namespace, kueue }),
        1 => (1u8..120).prop_map(|advance| Change::Clock { advance }),
    ]
}

const NAMESPACES: [&str; 2] = ["team-a", "team-b"];

fn event(change: &Change, now: i64) -> ModelEvent {
    match *change {
        Change::Pod { id, namespace, node, state, gpus, priority, gang, job, created } => {
            let mut b = pod(&format!("p{id:02}"))
                .ns(NAMESPACES[namespace as usize])
                .gpus(u64::from(gpus))
                .priority(i32::from(priority) * 100)
                .created(1_796_000_000 + i64::from(created) * 60)
                .cuda_require(["cuda>=12.4", "cuda>=12.8"][id as usize % 2]);
            if let Some(g) = gang {
                b = b.group(&format!("g{g}"));
            }
            if let Some(j) = job {
                b = b.owner("Job", &format!("job-{j}"));
            }
            // Bound: running, failed, succeeded; unbound: pending or failed.
            let node_name = node.map(|n| format!("n{n}"));
            b = match (state, &node_name) {
                (0, _) => b.unschedulable("0/6 nodes are available: 6 Insufficient nvidia.com/gpu.", now),
                (1, Some(n)) => b.on(n).running(),
                (2, Some(n)) => b.on(n).failed("UnexpectedAdmissionError", "Allocate failed"),
                (3, Some(n)) => b.on(n).phase(PodPhase::Succeeded),
                (_, Some(n)) => b.on(n),
                (_, None) => b.phase(PodPhase::Failed),
            };
            ModelEvent::Upsert(Object::Pod(b.build()))
        }
        Change::DeletePod { id, namespace } => {
            ModelEvent::Delete(ObjectKey::Pod(PodKey::new(NAMESPACES[namespace as usize], &format!("p{id:02}"))))
        }
        Change::Node { id, gpus, tainted } => {
            let mut b = node(&format!("n{id}")).gpus(u64::from(gpus)).driver("570.124.06", "12.8");
            if tainted {
                b = b.taint("nvidia.com/gpu", "present", TaintEffect::NoSchedule);
            }
            ModelEvent::Upsert(Object::Node(b.build()))
        }
        Change::DeleteNode { id } => ModelEvent::Delete(ObjectKey::Node(Sym::new(&format!("n{id}")))),
        Change::Gang { id, namespace, min, job } => {
            let mut gang = podgroup(&format!("g{id}"), u32::from(min), 1).ns(NAMESPACES[namespace as usize]).build();
            if let Some(j) = job {
                // A Workload is named after its Job; here its name may clash
                // with a PodGroup's, which then wins the pods naming it.
                gang.kind = GangKind::KueueWorkload;
                gang.owner = Some(Owner { kind: Sym::new("Job"), name: Sym::new(&format!("job-{j}")) });
                gang.phase = None;
            }
            ModelEvent::Upsert(Object::Gang(gang))
        }
        Change::DeleteGang { id, namespace, kueue } => ModelEvent::Delete(ObjectKey::Gang(GangKey {
            kind: if kueue { GangKind::KueueWorkload } else { GangKind::VolcanoPodGroup },
            namespace: Sym::new(NAMESPACES[namespace as usize]),
            name: format!("g{id}").into(),
        })),
        Change::Clock { advance } => ModelEvent::Clock(now + i64::from(advance)),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Any sequence of pod, node, gang and clock changes, analysed after
    /// each batch of one to three.
    #[test]
    fn any_sequence_of_changes_is_analysed_alike_both_ways(
        batches in proptest::collection::vec(proptest::collection::vec(change(), 1..4), 1..30)
    ) {
        let mut cluster = Cluster::new(SourceInfo { kind: SourceKind::Kube, name: "prop".into() });
        cluster.apply(ModelEvent::Clock(1_796_029_200));
        let (mut analyzer, mut ledger) = (Analyzer::new(), PodLedger::new());
        for (i, batch) in batches.iter().enumerate() {
            for c in batch {
                let now = cluster.snapshot().clock;
                cluster.apply(event(c, now));
            }
            agree(&mut analyzer, &mut ledger, &cluster.snapshot(), &format!("batch {i}: {batch:?}"));
        }
    }
}
