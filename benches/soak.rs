//! Soak: a cockpit's source left open while a busy fleet changes for days,
//! compressed. The real kube source follows, in this process, the loopback
//! list/watch server (benches/support/listwatch.rs), run in a child process
//! of its own so that its change log is not counted as kgpu's memory, while
//! the server plays a simulated day every `KGPU_BENCH_DAY` seconds (default
//! 257: a week in 30 minutes):
//!
//! - every pod replaced three times a day by a pod of a new Job (a fresh
//!   pod name, Job name, controller uid);
//! - GFD labelling every node again every simulated hour (its
//!   `nvidia.com/gfd.timestamp` moves on);
//! - 200 nodes a day joining with fresh names, as many leaving;
//! - a compaction every simulated 6 hours: watches answered 410 Gone list
//!   again.
//!
//! Every `KGPU_BENCH_SAMPLE` seconds (default 30) it builds the views of the
//! current snapshot (an analysis, as the cockpit does) and prints the heap
//! (counting allocator), the resident memory, and the symbols the interner
//! holds (after it drops those no one holds). At the end: the slope of each
//! after the first simulated day, per simulated day, and whether the
//! followed model equals a fresh list of the same state.
//!
//! `cargo bench --bench soak`; `KGPU_BENCH_MINUTES` (default 30),
//! `KGPU_BENCH_NODES` (2,000), `KGPU_BENCH_PODS` (20,000).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark may panic on setup failure

#[path = "support/counting.rs"]
mod counting;
#[path = "support/labels.rs"]
mod labels;
#[allow(dead_code)] // the protocol's probes are for tests/listwatch.rs
#[path = "support/listwatch.rs"]
mod listwatch;

#[global_allocator]
static ALLOC: counting::Counting = counting::Counting;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kgpu::runtime::source::{self, Run, Source};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.replace(['_', ','], "").parse().ok()).unwrap_or(default)
}

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

struct Sample {
    day: f64,
    heap: f64,
    rss: f64,
    symbols: f64,
    symbol_bytes: f64,
}

/// The least-squares slope of `y` over `day`.
fn slope(samples: &[&Sample], y: fn(&Sample) -> f64) -> f64 {
    let n = samples.len() as f64;
    let (mx, my) = (samples.iter().map(|s| s.day).sum::<f64>() / n, samples.iter().map(|s| y(s)).sum::<f64>() / n);
    let sxy: f64 = samples.iter().map(|s| (s.day - mx) * (y(s) - my)).sum();
    let sxx: f64 = samples.iter().map(|s| (s.day - mx).powi(2)).sum();
    if sxx > 0.0 { sxy / sxx } else { 0.0 }
}

/// Plays the fleet's changes until `stop`, `day` seconds a simulated day.
fn play(fleet: &listwatch::Fleet, nodes: usize, pods: usize, day: f64, stop: &AtomicBool) -> u64 {
    // Per simulated day.
    let replacements = pods as f64 * 3.0;
    let relabels = nodes as f64 * 24.0;
    let joins = 200.0;
    let compactions = 4.0;
    let start = Instant::now();
    let (mut replaced, mut relabelled, mut joined, mut compacted) = (0u64, 0u64, 0u64, 0u64);
    let mut changes = 0;
    let mut joined_nodes = std::collections::VecDeque::new();
    let mut next_pod = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let days = start.elapsed().as_secs_f64() / day;
        while (replaced as f64) < days * replacements {
            // A pod's Job ends (its pod goes) and a new Job's pod comes.
            fleet.churn_pod(next_pod);
            fleet.churn_pod(next_pod);
            next_pod = (next_pod + 7_919) % pods;
            replaced += 1;
            changes += 2;
        }
        while (relabelled as f64) < days * relabels {
            fleet.relabel_node(relabelled as usize);
            relabelled += 1;
            changes += 1;
        }
        while (joined as f64) < days * joins {
            joined_nodes.push_back(fleet.add_node() - 1);
            // The fleet keeps its size: the oldest node that joined leaves.
            if joined_nodes.len() > 20
                && let Some(old) = joined_nodes.pop_front()
            {
                fleet.remove_node(old);
                changes += 1;
            }
            joined += 1;
            changes += 1;
        }
        while (compacted as f64) < days * compactions {
            fleet.compact();
            compacted += 1;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    changes
}

/// The child's part: serve the fleet, say the port, play the changes until
/// stdin closes, say how many there were, then serve the still fleet until
/// killed.
fn serve_and_play(nodes: usize, pods: usize, day: f64) {
    use std::io::{BufRead, Write};
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let fleet = listwatch::Fleet::new(nodes, pods);
    let port = rt.block_on(listwatch::serve(fleet.clone()));
    println!("{port}");
    std::io::stdout().flush().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let player = {
        let (fleet, stop) = (fleet.clone(), stop.clone());
        std::thread::spawn(move || play(&fleet, nodes, pods, day, &stop))
    };
    // Wait for the parent to close stdin.
    for _ in std::io::stdin().lock().lines() {}
    stop.store(true, Ordering::Relaxed);
    println!("{}", player.join().unwrap());
    std::io::stdout().flush().unwrap();
    loop {
        std::thread::park();
    }
}

fn main() {
    use std::io::BufRead;
    let nodes = env("KGPU_BENCH_NODES", 2_000) as usize;
    let pods = env("KGPU_BENCH_PODS", 20_000) as usize;
    let minutes = env("KGPU_BENCH_MINUTES", 30);
    let day = env("KGPU_BENCH_DAY", 257) as f64;
    let every = Duration::from_secs(env("KGPU_BENCH_SAMPLE", 30));
    if std::env::var_os("KGPU_SOAK_SERVER").is_some() {
        return serve_and_play(nodes, pods, day);
    }
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .env("KGPU_SOAK_SERVER", "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let port: u16 = said.next().unwrap().unwrap().trim().parse().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, listwatch::kubeconfig(port)).unwrap();
    let target = kgpu::sources::kube::client::Target { kubeconfig: Some(kubeconfig), context: None };
    let from = Source::Kube { target: target.clone(), scope: Default::default() };
    eprintln!("{nodes} nodes, {pods} pods; a simulated day every {day} s for {minutes} minutes");

    rt.block_on(async {
        let mut session = source::start(&from, Run::Once).await.unwrap();
        session.synced().await;
        let start = Instant::now();
        let mut samples = Vec::new();
        while start.elapsed() < Duration::from_secs(minutes * 60) {
            tokio::time::sleep(every).await;
            let snap = session.snapshots.borrow().clone();
            let now = session.now(&snap);
            let views = kgpu::view_model::panes::Views::build(snap, now, &Default::default(), None);
            drop(views);
            let (symbols, symbol_bytes) = kgpu::model::sym::interned();
            let sample = Sample {
                day: start.elapsed().as_secs_f64() / day,
                heap: counting::live() as f64 / 1048576.0,
                rss: rss_mib(),
                symbols: symbols as f64,
                symbol_bytes: symbol_bytes as f64 / 1048576.0,
            };
            eprintln!(
                "day {:.2}: heap {:.1} MiB, resident {:.1} MiB, {} symbols ({:.2} MiB of text)",
                sample.day, sample.heap, sample.rss, symbols, sample.symbol_bytes
            );
            samples.push(sample);
        }
        // The fleet stands still: the child stops playing and says how much it played.
        drop(child.stdin.take());
        let changes: u64 = said.next().unwrap().unwrap().trim().parse().unwrap();

        // The followed model against a fresh list of the same (now still)
        // state: equal once the source has caught up (a watch told 410 by
        // the last compaction lists again after its backoff), within a minute.
        let (fresh, _) = kgpu::runtime::load::kube(&target, &Default::default()).await.unwrap();
        let stood = Instant::now();
        let equal = |followed: &kgpu::model::Snapshot| {
            followed.pods == fresh.pods
                && followed.nodes.len() == fresh.nodes.len()
                && followed.nodes.iter().zip(fresh.nodes.iter()).all(|((a, x), (b, y))| a == b && x == y)
        };
        let mut followed = session.snapshots.borrow().clone();
        while !equal(&followed) && stood.elapsed() < Duration::from_secs(60) {
            tokio::time::sleep(Duration::from_millis(200)).await;
            followed = session.snapshots.borrow().clone();
        }
        let caught_up = equal(&followed).then(|| stood.elapsed());
        if caught_up.is_none() {
            let only_followed: Vec<_> = followed.pods.keys().filter(|k| !fresh.pods.contains_key(*k)).collect();
            let only_fresh: Vec<_> = fresh.pods.keys().filter(|k| !followed.pods.contains_key(*k)).collect();
            let differ: Vec<_> =
                followed.pods.iter().filter(|(k, p)| fresh.pods.get(*k).is_some_and(|q| q != *p)).map(|(k, _)| k).collect();
            println!(
                "pods only followed: {} (first {:?}); only in the fresh list: {} (first {:?}); differing: {} (first {:?}); nodes {} against {}; feeds {:?}",
                only_followed.len(),
                only_followed.first(),
                only_fresh.len(),
                only_fresh.first(),
                differ.len(),
                differ.first().map(|k| (&followed.pods[*k], &fresh.pods[*k])),
                followed.nodes.len(),
                fresh.nodes.len(),
                followed.feeds.get(&kgpu::model::Feed::Pods)
            );
        }

        let days = start.elapsed().as_secs_f64() / day;
        let warm: Vec<&Sample> = samples.iter().filter(|s| s.day >= 1.0).collect();
        println!(
            "soak: {nodes} nodes, {pods} pods, {days:.1} simulated days in {minutes} min ({changes} changes, {:.0}/s)",
            changes as f64 / start.elapsed().as_secs_f64()
        );
        if let (Some(first), Some(last)) = (warm.first(), warm.last()) {
            println!(
                "after day 1: heap {:.1} → {:.1} MiB ({:+.2} MiB a day), resident {:.1} → {:.1} MiB ({:+.2} MiB a day)",
                first.heap,
                last.heap,
                slope(&warm, |s| s.heap),
                first.rss,
                last.rss,
                slope(&warm, |s| s.rss)
            );
            println!(
                "symbols: {:.0} → {:.0} ({:+.0} a day, {:+.2} MiB of text a day)",
                first.symbols,
                last.symbols,
                slope(&warm, |s| s.symbols),
                slope(&warm, |s| s.symbol_bytes)
            );
        } else {
            println!("too short to pass the first simulated day: raise KGPU_BENCH_MINUTES");
        }
        match caught_up {
            Some(after) => println!(
                "the followed model equals a fresh list of the still fleet ({} pods, {} nodes), {:.1} s after the changes stopped",
                fresh.pods.len(),
                fresh.nodes.len(),
                after.as_secs_f64()
            ),
            None => println!("the followed model DIFFERS from a fresh list a minute after the changes stopped"),
        }
    });
    let _ = child.kill();
    let _ = child.wait();
}
