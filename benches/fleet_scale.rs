//! Fleet scale: the cockpit on the real kube source against a loopback
//! list/watch server (benches/support/listwatch.rs) holding generated,
//! real-shaped GPU nodes and pods — beyond what one API server on this
//! machine can hold. Measures, each run in tmux at 200×60:
//!
//! - time to the first complete view (the header counts every node's GPUs
//!   and every pod), next to the floor: the raw paginated LIST of the same
//!   objects (pages of 500, bodies read and dropped);
//! - resident memory 5 s after the first view and at the end of the idle
//!   window, and its peak;
//! - idle CPU over 30 s;
//! - under a steady stream of pod changes (a pod finishes, its replacement
//!   comes):
//!   CPU, and the data age: a node joins every 2 s and the time until the
//!   header counts its GPUs.
//!
//! `cargo bench --bench fleet_scale` (10,000 nodes, 100,000 pods, 1,000
//! changes/s); `KGPU_BENCH_NODES=65000 KGPU_BENCH_PODS=1000000` for the
//! largest fleet; `KGPU_BENCH_CHURN`, `KGPU_BENCH_RUNS`, `KGPU_BENCH_WINDOW`
//! (seconds of idle and of churn); `KGPU_BENCH_SERVE=1` only serves the fleet
//! (kubeconfig in $TMPDIR/kgpu-fleet.kubeconfig) for a session by hand;
//! `KGPU_BENCH_LOG=DIR` keeps kgpu's debug log (each analysis's cost) in DIR.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark may panic on setup failure

#[path = "support/counting.rs"]
mod counting;
#[path = "support/floor.rs"]
mod floor;
#[path = "support/labels.rs"]
mod labels;
#[allow(dead_code)] // compact() is for the protocol test
#[path = "support/listwatch.rs"]
mod listwatch;
#[allow(dead_code)] // the keys are measured by benches/peers.rs
#[path = "support/terminal.rs"]
mod terminal;

#[global_allocator]
static ALLOC: counting::Counting = counting::Counting;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use terminal::Terminal;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.replace(['_', ','], "").parse().ok()).unwrap_or(default)
}

/// The header's GPU count with thousands as the cockpit writes them.
fn gpus_shown(screen: &str) -> Option<u64> {
    let line = screen.lines().nth(1)?;
    line.split(" GPUs").next()?.trim().replace(',', "").parse().ok()
}

fn used_shown(screen: &str) -> Option<u64> {
    let line = screen.lines().nth(1)?;
    let (_, rest) = line.split_once(" GPUs · ")?;
    rest.split(" used").next()?.trim().replace(',', "").parse().ok()
}

struct Run {
    first_view: f64,
    rss: f64,
    /// At the end of the idle window: what stays.
    idle_rss: f64,
    peak: f64,
    idle_cpu: f64,
    churn_cpu: f64,
    ages: Vec<f64>,
    churn_rss: f64,
}

fn main() {
    let nodes = env("KGPU_BENCH_NODES", 10_000) as usize;
    let pods = env("KGPU_BENCH_PODS", 100_000) as usize;
    let rate = env("KGPU_BENCH_CHURN", 1_000);
    let runs = env("KGPU_BENCH_RUNS", 3);
    let window = Duration::from_secs(env("KGPU_BENCH_WINDOW", 30));
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let fleet = listwatch::Fleet::new(nodes, pods);
    let port = rt.block_on(listwatch::serve(fleet.clone()));
    let dir = tempfile::tempdir().unwrap();
    // KGPU_BENCH_LOG=DIR: kgpu logs each analysis's cost there (DIR/kgpu.log).
    let log_dir = std::env::var_os("KGPU_BENCH_LOG").map(std::path::PathBuf::from);
    let log_level = if log_dir.is_some() { "debug" } else { "info" };
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, listwatch::kubeconfig(port)).unwrap();
    eprintln!("list/watch server on 127.0.0.1:{port}: {nodes} nodes, {pods} pods");
    if std::env::var("KGPU_BENCH_SERVE").is_ok_and(|v| v == "1") {
        // By hand: serve the fleet until interrupted, for `kgpu --kubeconfig`.
        let path = std::env::temp_dir().join("kgpu-fleet.kubeconfig");
        std::fs::write(&path, listwatch::kubeconfig(port)).unwrap();
        eprintln!("serving; try: kgpu --kubeconfig {}", path.display());
        std::thread::park();
    }

    let mut floors = Vec::new();
    for _ in 0..runs {
        floors.push(rt.block_on(floor::raw_list(&kubeconfig)));
    }
    let floor = median(&mut floors);
    eprintln!("raw LIST (pods and nodes side by side, pages of 500): {floors:.2?} s");

    let split = rt.block_on(memory_split(&kubeconfig));

    let kgpu = env!("CARGO_BIN_EXE_kgpu");
    let mut results = Vec::new();
    for run in 0..runs {
        let t0 = Instant::now();
        let term = Terminal::start(
            "fleet",
            200,
            60,
            &format!(
                "env KGPU_DATA_DIR={d} KGPU_CONFIG_DIR={d} {kgpu} --kubeconfig {} --log-level {log_level} 2>/dev/null",
                kubeconfig.display(),
                d = log_dir.as_deref().unwrap_or(dir.path()).display()
            ),
        );
        let (now_nodes, now_used) = fleet.counts();
        let complete = |s: &str| gpus_shown(s) == Some(now_nodes as u64 * 8) && used_shown(s) == Some(now_used as u64);
        let Some(_) = term.wait(Duration::from_secs(600), complete) else {
            panic!("no complete view in 10 minutes; screen:\n{}", term.screen());
        };
        let first_view = t0.elapsed().as_secs_f64();
        std::thread::sleep(Duration::from_secs(5));
        let rss = term.rss_mib();
        let idle_cpu = term.cpu_share(window);
        let idle_rss = term.rss_mib();

        // Churn: `rate` pod changes a second in batches every 10 ms, and a
        // node joining every 2 s whose GPUs the header must show.
        let stop = Arc::new(AtomicBool::new(false));
        let churn = {
            let (fleet, stop) = (fleet.clone(), stop.clone());
            std::thread::spawn(move || {
                let start = Instant::now();
                let mut done = 0u64;
                let mut next = run as usize * 7_919;
                while !stop.load(Ordering::Relaxed) {
                    let due = (start.elapsed().as_secs_f64() * rate as f64) as u64;
                    while done < due {
                        // A pod finishes, and its replacement comes: the fleet keeps its size.
                        fleet.churn_pod(next);
                        done += 1;
                        if done.is_multiple_of(2) {
                            next += 104_729; // a prime stride: changes spread over the fleet
                        }
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                done as f64 / start.elapsed().as_secs_f64()
            })
        };
        let cpu_before = term.cpu_seconds();
        let churn_start = Instant::now();
        let mut ages = Vec::new();
        while churn_start.elapsed() + Duration::from_secs(2) <= window {
            std::thread::sleep(Duration::from_secs(1));
            let total = fleet.add_node();
            let want = total as u64 * 8;
            match term.wait(Duration::from_secs(30), |s| gpus_shown(s).is_some_and(|g| g >= want)) {
                Some(age) => ages.push(age.as_secs_f64()),
                None => ages.push(f64::INFINITY),
            }
        }
        let churn_cpu = (term.cpu_seconds() - cpu_before) / churn_start.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        let achieved = churn.join().unwrap();
        let churn_rss = term.rss_mib();
        let peak = term.peak_mib();
        eprintln!(
            "run {}: first complete view {first_view:.2} s; {rss:.0} MiB resident, {idle_rss:.0} MiB idle (peak {peak:.0}); idle CPU {:.2}%; \
             under {achieved:.0} changes/s: CPU {:.0}%, data age {} s, {churn_rss:.0} MiB",
            run + 1,
            idle_cpu * 100.0,
            churn_cpu * 100.0,
            ages.iter().map(|a| format!("{a:.2}")).collect::<Vec<_>>().join(" ")
        );
        results.push(Run { first_view, rss, idle_rss, peak, idle_cpu, churn_cpu, ages, churn_rss });
        drop(term);
        // Let the server's watches notice the client is gone.
        std::thread::sleep(Duration::from_secs(1));
    }

    let m = |f: fn(&Run) -> f64| median(&mut results.iter().map(f).collect::<Vec<_>>());
    let first = m(|r| r.first_view);
    let worst_age = results.iter().flat_map(|r| r.ages.iter().copied()).fold(0.0, f64::max);
    let median_age = median(&mut results.iter().flat_map(|r| r.ages.iter().copied()).collect::<Vec<_>>());
    let (nodes_now, used_now) = fleet.counts();
    println!(
        "fleet: {nodes} nodes, {pods} pods (list/watch server; {nodes_now} nodes, {used_now} GPUs in use at the end)"
    );
    println!("raw paginated LIST: {floor:.2} s (median of {runs})");
    println!("first complete view: {first:.2} s = {:.2}× the raw LIST (median of {runs})", first / floor);
    println!(
        "resident once loaded: {:.0} MiB 5 s after the first view, {:.0} MiB after {} s idle (peak {:.0} MiB)",
        m(|r| r.rss),
        m(|r| r.idle_rss),
        window.as_secs(),
        m(|r| r.peak)
    );
    println!("{split}");
    println!("idle CPU: {:.2}% of a core over {} s", m(|r| r.idle_cpu) * 100.0, window.as_secs());
    println!(
        "under {rate} changes/s: {:.0}% of a core, data age median {median_age:.2} s, worst {worst_age:.2} s, {:.0} MiB resident",
        m(|r| r.churn_cpu) * 100.0,
        m(|r| r.churn_rss)
    );
}

/// Where the memory goes, in this process with the counting allocator: the
/// model as loaded from the server, then one analysis with its views.
async fn memory_split(kubeconfig: &std::path::Path) -> String {
    let target = kgpu::sources::kube::client::Target { kubeconfig: Some(kubeconfig.to_path_buf()), context: None };
    let before = counting::live();
    let (snap, now) = kgpu::runtime::load::kube(&target, &Default::default()).await.unwrap();
    let snap = Arc::new(snap);
    // The source's tasks have stopped; what is left is the snapshot.
    let model = counting::live() - before;
    let views = kgpu::view_model::panes::Views::build(snap.clone(), now, &Default::default(), None);
    let analysed = counting::live() - before - model;
    let pods = snap.pods.len().max(1) as f64;
    drop(views);
    format!(
        "heap (counting allocator): model {:.0} MiB ({:.0} B per pod, nodes included), one analysis with its views {:.0} MiB",
        model as f64 / 1048576.0,
        model as f64 / pods,
        analysed as f64 / 1048576.0
    )
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}
