//! Utilization memory stays bounded: 10,000 GPUs (1,250 nodes × 8) report
//! every 10 s, as the agents do, for two simulated hours, with 1% of the
//! GPUs changing hands each round. Prints the model's usage memory after
//! the first reading, once the window is full, and at the end; the fold
//! and analysis times per round; exits non-zero if memory grows after the
//! window is full or passes the budget (2 KiB per GPU).
//!
//! `cargo bench --bench utilization`

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark may panic on a broken setup

#[path = "support/counting.rs"]
mod counting;

use std::time::Instant;

use kgpu::model::usage::WINDOW_SECONDS;
use kgpu::model::{
    Cluster, DeviceReading, Feed, ModelEvent, NodeUsage, Object, PodKey, SourceInfo, SourceKind, Sym, UsageSource,
};

#[global_allocator]
static ALLOC: counting::Counting = counting::Counting;

const NODES: usize = 1_250;
const GPUS_PER_NODE: usize = 8;
const INTERVAL: i64 = 10;
const ROUNDS: usize = 720;
const BUDGET_PER_GPU: f64 = 2048.0;

/// The pod holding GPU `g` in round `r`: 1% of GPUs get a new pod each round.
fn holder(g: usize, r: usize) -> PodKey {
    let generation = (r + g) / 100;
    PodKey::new(["team-a", "team-b", "inference", "notebooks"][g % 4], &format!("job-{g:05}-{generation}-x7k2q"))
}

fn round(r: usize) -> ModelEvent {
    let at = 1_796_000_000 + r as i64 * INTERVAL;
    let objects = (0..NODES)
        .map(|n| {
            let devices = (0..GPUS_PER_NODE)
                .map(|i| {
                    let g = n * GPUS_PER_NODE + i;
                    // A quarter of the GPUs idle, the rest busy at a level that wanders.
                    let busy = if g.is_multiple_of(4) { (r % 3) as f32 } else { 40.0 + ((g * 7 + r * 13) % 60) as f32 };
                    DeviceReading {
                        gpu: Sym::new(&format!("GPU-{g:08x}-0000-0000-0000-000000000000")),
                        index: i as u32,
                        slice: None,
                        holders: Box::new([holder(g, r)]),
                        busy_pct: Some(busy),
                        memory_used_mib: Some(20_000 + (g % 40) as u64 * 1000),
                        idle_since: None,
                    }
                })
                .collect();
            Object::Usage(NodeUsage {
                problem: None,
                node: Sym::new(&format!("gpu-node-{n:05}")),
                source: UsageSource::Agent,
                at,
                devices,
            })
        })
        .collect();
    ModelEvent::Resync { feed: Feed::Agents, objects }
}

fn main() {
    let gpus = NODES * GPUS_PER_NODE;
    let mut cluster = Cluster::new(SourceInfo { kind: SourceKind::Kube, name: "bench".into() });
    // Interned names (node and GPU ids) are the same every round: intern them first.
    drop(round(0));
    let before = counting::live();
    let window_rounds = (WINDOW_SECONDS / INTERVAL) as usize + 1;
    let (mut first, mut full) = (0i64, 0i64);
    let mut fold_ms = Vec::new();
    let mut analyze_ms = Vec::new();
    for r in 0..ROUNDS {
        let event = round(r);
        let t = Instant::now();
        cluster.apply(event);
        fold_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        if (r + 1).is_multiple_of(60) {
            let snap = cluster.snapshot();
            let t = Instant::now();
            let u = kgpu::analysis::usage::analyze(&snap, snap.clock);
            analyze_ms.push(t.elapsed().as_secs_f64() * 1000.0);
            assert_eq!(u.holders.len(), gpus);
        }
        if r == 0 {
            first = counting::live() - before;
        }
        if r == window_rounds {
            full = counting::live() - before;
        }
    }
    let end = counting::live() - before;
    let per_gpu = end as f64 / gpus as f64;
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "{gpus} GPUs on {NODES} nodes, a reading every {INTERVAL}s for {ROUNDS} rounds ({} h), 1% new holders per round",
        ROUNDS as i64 * INTERVAL / 3600
    );
    println!("usage memory after the first reading:   {:.1} MB", first as f64 / 1e6);
    println!("usage memory with the window full ({window_rounds} readings): {:.1} MB", full as f64 / 1e6);
    println!(
        "usage memory at the end:                {:.1} MB ({per_gpu:.0} B per GPU; budget {BUDGET_PER_GPU:.0} B)",
        end as f64 / 1e6
    );
    println!("fold of one round (all nodes): median {:.1} ms", median(&mut fold_ms));
    println!("idle-holders analysis of {gpus} GPUs: median {:.1} ms", median(&mut analyze_ms));
    let bounded = (end as f64) <= full as f64 * 1.05;
    let ok = bounded && per_gpu <= BUDGET_PER_GPU;
    println!("memory bounded after the window fills: {}", if bounded { "yes" } else { "NO" });
    println!("budgets: {}", if ok { "met" } else { "MISSED" });
    if !ok {
        std::process::exit(1);
    }
}
