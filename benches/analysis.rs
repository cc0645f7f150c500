//! DESIGN.md budget: a full analysis recompute for 10,000 nodes and 100,000
//! pods in ≤ 50 ms; one frame at 200×60 with 10,000 nodes in ≤ 5 ms.
//!
//! `cargo bench --bench analysis`

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark may panic on setup failure

use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use kgpu::analysis::{self, Thresholds};
use kgpu::model::build::{node, pod};
use kgpu::model::{Cluster, ModelEvent, Object, Snapshot, SourceInfo, SourceKind, TaintEffect};

/// A big fleet: 10k 8-GPU nodes in 5 pools (one tainted), 100k pods: 95k
/// running (1-8 GPUs), 5k pending pods in 40 shapes (5 pools × 4 sizes × 2
/// toleration sets): a bad day on a big fleet.
fn fleet_cluster(scale: usize, pending: usize) -> Cluster {
    let nodes = 10_000 / scale;
    let mut c = Cluster::new(SourceInfo { kind: SourceKind::Kube, name: "bench".into() });
    c.apply(ModelEvent::Clock(1_796_029_200));
    for i in 0..nodes {
        let pool = ["h100-a", "h100-b", "a100", "h200", "l40s"][i % 5];
        let mut b = node(&format!("{pool}-{i:05}"))
            .gpus(8)
            .label("kgpu.dev/pool", pool)
            .product("NVIDIA-H100-80GB-HBM3")
            .driver(if i % 3 == 0 { "550.54.15" } else { "570.124.06" }, if i % 3 == 0 { "12.4" } else { "12.8" });
        if pool == "h200" {
            b = b.taint("nvidia.com/gpu", "present", TaintEffect::NoSchedule);
        }
        c.apply(ModelEvent::Upsert(Object::Node(b.build())));
    }
    let mut events = Vec::new();
    for i in 0..95_000 / scale {
        let n = i % nodes;
        let pool = ["h100-a", "h100-b", "a100", "h200", "l40s"][n % 5];
        let gpus = [1u64, 1, 2, 1, 4, 1, 2, 8][i % 8].min(8);
        let p = pod(&format!("run-{i}"))
            .ns(["a", "b", "c", "d"][i % 4])
            .gpus(if i % 40 == 0 { 0 } else { gpus / 2 + 1 })
            .tolerate("nvidia.com/gpu")
            .owner("Job", &format!("job-{}", i / 4))
            .on(&format!("{pool}-{n:05}"))
            .running()
            .transitioned(1_796_000_000)
            .image("nvcr.io/nvidia/pytorch:24.03-py3")
            .cuda_require("cuda>=12.4")
            .build();
        events.push(ModelEvent::Upsert(Object::Pod(p)));
    }
    for i in 0..pending / scale {
        let p = pod(&format!("wait-{i}"))
            .ns(["a", "b", "c", "d"][i % 4])
            .gpus([1u64, 2, 4, 8][i % 4])
            .selector("kgpu.dev/pool", ["h100-a", "h100-b", "a100", "h200", "l40s"][i % 5])
            .tolerate(if i % 7 == 0 { "other" } else { "nvidia.com/gpu" })
            .owner("Job", &format!("wait-job-{i}"))
            .created(1_796_000_000 + i as i64)
            .unschedulable("0/10000 nodes are available: 10000 Insufficient nvidia.com/gpu.", 1_796_000_000)
            .build();
        events.push(ModelEvent::Upsert(Object::Pod(p)));
    }
    c.apply_all(events);
    c
}

/// The cluster's next snapshot after 50 running pods finished and 50 new
/// ones were bound (sharing the unchanged pods with the one before).
fn with_100_pods_changed(c: &mut Cluster) -> Snapshot {
    let base = c.snapshot();
    let running: Vec<_> = base.pods.values().filter(|p| p.holds_resources()).step_by(997).take(50).cloned().collect();
    for (i, p) in running.iter().enumerate() {
        let mut done = (**p).clone();
        done.phase = kgpu::model::PodPhase::Succeeded;
        c.apply(ModelEvent::Upsert(Object::Pod(done)));
        let node = p.node.as_ref().map(|n| n.to_string()).unwrap_or_default();
        c.apply(ModelEvent::Upsert(Object::Pod(pod(&format!("new-{i}")).ns("a").gpus(1).on(&node).running().build())));
    }
    c.snapshot()
}

fn bench(crit: &mut Criterion) {
    // KGPU_BENCH_SCALE=10 runs a tenth of the fleet, for profiling.
    let scale = std::env::var("KGPU_BENCH_SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    // KGPU_BENCH_PENDING sets the pending pods (default 5,000).
    let pending = std::env::var("KGPU_BENCH_PENDING").ok().and_then(|s| s.parse().ok()).unwrap_or(5_000);
    let mut cluster = fleet_cluster(scale, pending);
    let snap = cluster.snapshot();
    let now = snap.clock;
    let thresholds = Thresholds::default();
    let mut g = crit.benchmark_group("budgets");
    g.sample_size(10);
    g.bench_function("analysis 10k nodes 100k pods (budget 50 ms)", |b| {
        b.iter(|| analysis::analyze(&snap, now, &thresholds))
    });
    // The cockpit's way: an analyzer that keeps the pods' ledger between
    // snapshots, here alternating between two that differ in 100 pods
    // (50 finished, 50 new), as a busy cluster's next snapshot does.
    let changed = with_100_pods_changed(&mut cluster);
    drop(cluster);
    let mut analyzer = analysis::Analyzer::new();
    let mut flip = false;
    g.bench_function("incremental analysis, 100 pods changed", |b| {
        b.iter(|| {
            flip = !flip;
            analyzer.analyze(if flip { &changed } else { &snap }, now, &thresholds)
        })
    });
    let mut ledger = analysis::index::PodLedger::new();
    g.bench_function("stage: index from the ledger, 100 pods changed", |b| {
        b.iter(|| {
            flip = !flip;
            let s = if flip { &changed } else { &snap };
            ledger.update(s);
            analysis::index::Index::with_ledger(s, now, &ledger).pending_pods().len()
        })
    });
    // The stages, to see where the time goes; first the floor: one pass over every pod.
    g.bench_function("floor: one pass over the pods", |b| {
        b.iter(|| snap.pods.values().filter(|p| p.requests.wants_gpu() && p.node.is_some()).count())
    });
    use analysis::{compat, fleet, fragmentation, gangs, index::Index, pending};
    g.bench_function("stage: index", |b| b.iter(|| Index::build(&snap, now)));
    // What the first complete view (and any change in bulk) costs: the
    // ledger gathered anew (dropping it is not counted: the first one has
    // nothing to drop).
    g.bench_function("stage: index from a ledger started over", |b| {
        b.iter_with_large_drop(|| {
            let mut ledger = analysis::index::PodLedger::new();
            ledger.update(&snap);
            assert_eq!(ledger.last_changes(), snap.pods.len(), "started over");
            ledger
        })
    });
    let index = Index::build(&snap, now);
    g.bench_function("stage: fleet", |b| b.iter(|| fleet::summarize(&index, &thresholds)));
    g.bench_function("stage: fragmentation", |b| b.iter(|| fragmentation::analyze(&Index::build(&snap, now))));
    let frag = fragmentation::analyze(&index);
    let gang_rows = gangs::analyze(&index);
    g.bench_function("stage: gangs", |b| b.iter(|| gangs::analyze(&index)));
    g.bench_function("stage: pending", |b| b.iter(|| pending::analyze(&Index::build(&snap, now), &gang_rows, &frag)));
    g.bench_function("stage: matrix", |b| b.iter(|| compat::matrix(&index, now)));
    drop(index);
    let snap = Arc::new(snap);
    let views = kgpu::view_model::panes::Views::build(snap.clone(), now, &thresholds, None);
    let theme = kgpu::ui::Theme::builtin("dark");
    let mut app = kgpu::app::App::new(true, "dark", false);
    app.aggregate = Some(false);
    let mut term = ratatui::Terminal::new(ratatui::backend::TestBackend::new(200, 60)).unwrap();
    for pane in kgpu::app::Pane::ALL {
        app.pane = pane;
        g.bench_function(format!("frame 200x60 with 10k nodes, {pane:?} pane (budget 5 ms)"), |b| {
            b.iter(|| {
                term.draw(|f| {
                    kgpu::ui::draw(f, &app, &views, &theme, &Default::default());
                })
                .unwrap();
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
