//! Peer benchmark: kgpu next to k9s, kubetui and kdash on one real API
//! server (the test control plane) holding 2,000 GPU nodes (the labels of a real H100
//! node, status through the status subresource) and 20,000 bound pods. Each
//! tool runs in tmux at 200×60, three times, and is measured the same way:
//!
//! - first complete view: every pod counted on screen (k9s: the pod view's
//!   `pods(all)[N]`; kubetui: `Pod [i/N]`; kdash: `Pods (ns: all) [N]`;
//!   kgpu: the header's GPUs in use), from the tool's start;
//! - resident memory once loaded, and its peak;
//! - idle CPU over 30 s, and what the idle tool costs the cluster over the
//!   same 30 s: the API server's CPU and requests per second (its own
//!   `apiserver_request_total`) above the baseline measured with no tool
//!   running, and the dcgm-exporter reads that reach the stand-in exporter;
//! - under a steady stream of pod changes (a label patched, 50 a second):
//!   CPU, and the change-to-screen latency of a deleted pod (every 2 s);
//! - key latency: a cursor move (`j`) in a long list (kgpu: the pool's
//!   nodes) until the screen changes (tmux's own capture included).
//!
//! Every GPU node runs the GPU Operator's DaemonSet pods as on a real fleet
//! (driver, toolkit, device plugin, GFD, dcgm-exporter labelled
//! `app=nvidia-dcgm-exporter`, validator, mig-manager, NFD worker), Running
//! at this machine's network address, where one stand-in dcgm-exporter
//! answers every read through the API server's pod proxy.
//!
//! Next to them, the floor: the raw paginated LIST of the same pods and
//! nodes, read and dropped. k9s is built once from the Go module proxy,
//! kubetui and kdash from crates.io, into ~/.cache/kgpu/peers (about ten
//! minutes each here); a peer that does not build or load within 5 minutes
//! is reported so. Each runs as its users start it, with its defaults (kdash
//! lists every 5 s, kubetui follows its own polling).
//!
//! `cargo bench --bench peers`; `KGPU_BENCH_NODES`, `KGPU_BENCH_PODS`,
//! `KGPU_BENCH_RUNS`, `KGPU_BENCH_WINDOW` (seconds of idle and of changes),
//! `KGPU_BENCH_CHURN` (changes/s), `KGPU_BENCH_PEERS` (which peers, default
//! `k9s,kubetui,kdash`; `kgpu-agents-off` adds kgpu with `--agents off`),
//! `KGPU_BENCH_OPERATOR=0` (no GPU Operator pods).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark may panic on setup failure

#[path = "support/apiserver.rs"]
mod apiserver;
#[path = "../tests/support/controlplane.rs"]
mod controlplane;
#[path = "../tests/support/exporter.rs"]
mod exporter;
#[path = "support/floor.rs"]
mod floor;
#[path = "support/labels.rs"]
mod labels;
#[path = "support/populate.rs"]
mod populate;
#[path = "support/terminal.rs"]
mod terminal;

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use terminal::Terminal;

const K9S: &str = "v0.50.16";
const KUBETUI: &str = "1.14.0";
const KDASH: &str = "2.1.1";
const LOAD_LIMIT: Duration = Duration::from_secs(300);

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.replace(['_', ','], "").parse().ok()).unwrap_or(default)
}

/// A tool under test: how to start it and how to read its pod count.
struct Tool {
    name: &'static str,
    command: String,
    /// The count on screen that is complete when it equals the fleet's.
    count: fn(&str) -> Option<u64>,
    /// Keys that open a long list for the cursor to move in.
    to_a_list: &'static [&'static str],
}

/// kgpu's header: "N GPUs · U used · …".
fn kgpu_used(screen: &str) -> Option<u64> {
    let line = screen.lines().nth(1)?;
    let (_, rest) = line.split_once(" GPUs · ")?;
    rest.split(" used").next()?.trim().replace(',', "").parse().ok()
}

/// k9s's table title: "pods(all)[19,991]".
fn k9s_pods(screen: &str) -> Option<u64> {
    let (_, rest) = screen.split_once("pods(all)[")?;
    rest.split(']').next()?.trim().replace(',', "").parse().ok()
}

/// kubetui's pod table title: "Pod [1/20,000]" (selected/shown).
fn kubetui_pods(screen: &str) -> Option<u64> {
    let (_, rest) = screen.split_once("Pod [")?;
    let (_, shown) = rest.split(']').next()?.split_once('/')?;
    shown.trim().replace(',', "").parse().ok()
}

/// kdash's pod table title: "Pods (ns: all) [20000]".
fn kdash_pods(screen: &str) -> Option<u64> {
    let (_, rest) = screen.split_once("Pods (ns: all) [")?;
    rest.split(']').next()?.trim().replace(',', "").parse().ok()
}

#[derive(Default)]
struct Figures {
    first_view: Vec<f64>,
    rss: Vec<f64>,
    peak: Vec<f64>,
    idle: Vec<f64>,
    /// The API server's CPU share and requests/s while the tool idles,
    /// above the baseline; reads that reached the exporter, per second.
    api_cpu: Vec<f64>,
    api_rps: Vec<f64>,
    exporter_rps: Vec<f64>,
    busy: Vec<f64>,
    latency: Vec<f64>,
    keys: Vec<f64>,
    failed: Option<String>,
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn main() {
    let nodes = env("KGPU_BENCH_NODES", 2_000) as usize;
    let pods = env("KGPU_BENCH_PODS", 20_000) as usize;
    let runs = env("KGPU_BENCH_RUNS", 3);
    let window = Duration::from_secs(env("KGPU_BENCH_WINDOW", 30));
    let rate = env("KGPU_BENCH_CHURN", 50);
    let cp = controlplane::ControlPlane::start().expect("control plane");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let target = kgpu::sources::kube::client::Target { kubeconfig: Some(cp.kubeconfig.clone()), context: None };
    let (client, _) = rt.block_on(kgpu::sources::kube::client::connect(&target)).unwrap();
    let t0 = Instant::now();
    let mut gpu_pods = rt.block_on(populate::fleet(&client, nodes, pods));
    eprintln!("created {nodes} nodes and {pods} pods in {:.0} s", t0.elapsed().as_secs_f64());
    let exporter_text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/dcgm-exporter/gpu-util-no-pod.prom"
    ))
    .unwrap();
    let (operator_pods, exporter_reads) = match exporter::network_address() {
        Some(ip) if env("KGPU_BENCH_OPERATOR", 1) == 1 => {
            let (port, reads) = exporter::serve(&ip, 9400, exporter_text);
            let t0 = Instant::now();
            let n = rt.block_on(populate::gpu_operator(&client, nodes, &ip, port));
            eprintln!(
                "created {n} GPU Operator pods (exporters at {ip}:{port}) in {:.0} s",
                t0.elapsed().as_secs_f64()
            );
            (n, Some(reads))
        }
        Some(_) => (0, None),
        None => {
            eprintln!("no network address here: the fleet has no GPU Operator pods (the pod proxy refuses loopback)");
            (0, None)
        }
    };
    let meter = apiserver::Meter { pid: cp.apiserver_pid(), client: client.clone() };
    let exporter_count = || exporter_reads.as_ref().map_or(0, |r| r.load(Ordering::Relaxed));

    let floor = median(&(0..runs).map(|_| rt.block_on(floor::raw_list(&cp.kubeconfig))).collect::<Vec<_>>());
    eprintln!("raw paginated LIST: {floor:.2} s");
    // The cluster's own idle cost (the scheduler's watches, the server's
    // housekeeping), taken off each tool's.
    let before = rt.block_on(meter.read());
    std::thread::sleep(window);
    let baseline = apiserver::rates(&before, &rt.block_on(meter.read()));
    eprintln!("API server with no tool: {:.2}% CPU, {:.2} requests/s", baseline.0 * 100.0, baseline.1);
    let wanted = std::env::var("KGPU_BENCH_PEERS").unwrap_or_else(|_| "k9s,kubetui,kdash".into());
    let wanted: Vec<&str> = wanted.split(',').map(str::trim).collect();

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = cp.kubeconfig.display().to_string();
    let mut tools = vec![Tool {
        name: "kgpu",
        command: format!(
            "env KGPU_DATA_DIR={d} KGPU_CONFIG_DIR={d} {} --kubeconfig {kubeconfig} 2>/dev/null",
            env!("CARGO_BIN_EXE_kgpu"),
            d = dir.path().display()
        ),
        count: kgpu_used,
        // The fleet is one pool: enter lists its 2,000 nodes.
        to_a_list: &["Enter"],
    }];
    if wanted.contains(&"kgpu-agents-off") {
        tools.push(Tool {
            name: "kgpu --agents off",
            command: tools[0].command.replace(" --kubeconfig", " --agents off --kubeconfig"),
            count: kgpu_used,
            to_a_list: &["Enter"],
        });
    }
    // Peers that did not build, and why: the table says so.
    let mut unbuilt: Vec<(&str, String)> = Vec::new();
    let mut peer = |name: &'static str,
                    built: &dyn Fn() -> Result<PathBuf, String>,
                    count: fn(&str) -> Option<u64>,
                    command: &dyn Fn(std::path::Display) -> String| {
        if !wanted.contains(&name) {
            return;
        }
        match built() {
            Ok(bin) => tools.push(Tool { name, command: command(bin.display()), count, to_a_list: &[] }),
            Err(e) => unbuilt.push((name, e)),
        }
    };
    let d = dir.path().display();
    peer("k9s", &build_k9s, k9s_pods, &|bin| {
        format!(
            "env K9S_CONFIG_DIR={d}/k9s XDG_STATE_HOME={d} XDG_DATA_HOME={d} {bin} --kubeconfig {kubeconfig} -A -c pods --logoless --readonly"
        )
    });
    peer("kubetui", &|| build_crate("kubetui", KUBETUI), kubetui_pods, &|bin| {
        format!("env HOME={d} XDG_CONFIG_HOME={d} {bin} --kubeconfig {kubeconfig} --all-namespaces")
    });
    peer("kdash", &|| build_crate("kdash", KDASH), kdash_pods, &|bin| {
        format!("env HOME={d} XDG_CONFIG_HOME={d} KUBECONFIG={kubeconfig} {bin}")
    });

    let pods_api: Api<Pod> = Api::all(client.clone());
    let listed: Vec<(String, String)> = rt
        .block_on(pods_api.list(&Default::default()))
        .unwrap()
        .items
        .iter()
        .map(|p| (p.metadata.namespace.clone().unwrap(), p.metadata.name.clone().unwrap()))
        .collect();
    let mut victims = listed.iter().filter(|(_, n)| n.starts_with("train-")).cloned();
    let mut total_pods = pods + operator_pods;
    let mut results = Vec::new();
    for tool in &tools {
        let mut f = Figures::default();
        for run in 0..runs {
            let want_count = if tool.name.starts_with("kgpu") { gpu_pods } else { total_pods } as u64;
            let term = Terminal::start(tool.name, 200, 60, &tool.command);
            let Some(first) = term.wait(LOAD_LIMIT, |s| (tool.count)(s) == Some(want_count)) else {
                f.failed = Some(format!("no complete view within {} s", LOAD_LIMIT.as_secs()));
                eprintln!("{}: {}; screen:\n{}", tool.name, f.failed.as_deref().unwrap(), term.screen());
                break;
            };
            std::thread::sleep(Duration::from_secs(5));
            f.first_view.push(first.as_secs_f64());
            f.rss.push(term.rss_mib());
            let (api_before, reads_before) = (rt.block_on(meter.read()), exporter_count());
            f.idle.push(term.cpu_share(window));
            let api_after = rt.block_on(meter.read());
            let (api_cpu, api_rps) = apiserver::rates(&api_before, &api_after);
            for (series, n) in apiserver::busiest(&api_before, &api_after, 6) {
                eprintln!("  {}: {n:.0} × {series}", tool.name);
            }
            f.api_cpu.push(api_cpu - baseline.0);
            f.api_rps.push(api_rps - baseline.1);
            f.exporter_rps.push((exporter_count() - reads_before) as f64 / window.as_secs_f64());

            // Changes: `rate` label patches a second, spread over the pods.
            let stop = Arc::new(AtomicBool::new(false));
            let churn = {
                let (api, stop, listed) = (pods_api.clone(), stop.clone(), listed.clone());
                rt.spawn(async move {
                    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate.max(1) as f64));
                    let mut k = run as usize * 7_919;
                    while !stop.load(Ordering::Relaxed) {
                        tick.tick().await;
                        let (ns, name) = &listed[k % listed.len()];
                        k += 104_729;
                        let patch = serde_json::json!({"metadata": {"labels": {"kgpu.dev/bench-tick": k.to_string()}}});
                        let api: Api<Pod> = Api::namespaced(api.clone().into_client(), ns);
                        let _ = api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await;
                    }
                })
            };
            let cpu_before = term.cpu_seconds();
            let start = Instant::now();
            while start.elapsed() + Duration::from_secs(3) <= window {
                std::thread::sleep(Duration::from_secs(2));
                let Some((ns, name)) = victims.next() else { break };
                let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
                rt.block_on(api.delete(&name, &DeleteParams { grace_period_seconds: Some(0), ..Default::default() }))
                    .unwrap();
                gpu_pods -= 1;
                total_pods -= 1;
                let want = if tool.name.starts_with("kgpu") { gpu_pods } else { total_pods } as u64;
                let seen = term.wait(Duration::from_secs(30), |s| (tool.count)(s) == Some(want));
                f.latency.push(seen.map_or(f64::INFINITY, |d| d.as_secs_f64()));
            }
            f.busy.push((term.cpu_seconds() - cpu_before) / start.elapsed().as_secs_f64());
            stop.store(true, Ordering::Relaxed);
            rt.block_on(churn).unwrap();
            f.peak.push(term.peak_mib());

            // Keys: a cursor move, until the screen (with its colours) changes.
            for key in tool.to_a_list {
                term.keys(key);
                std::thread::sleep(Duration::from_secs(1));
            }
            for _ in 0..10 {
                let before = term.styled_screen();
                let t = Instant::now();
                term.keys("j");
                if term.wait(Duration::from_secs(5), |_| term.styled_screen() != before).is_some() {
                    f.keys.push(t.elapsed().as_secs_f64());
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            eprintln!(
                "{} run {}: first view {:.2} s, {:.0} MiB (peak {:.0}), idle {:.2}% (API server +{:.2}%, +{:.2} requests/s, {:.2} exporter reads/s), under changes {:.0}% and {:.2} s to the screen, keys {:.1} ms",
                tool.name,
                run + 1,
                first.as_secs_f64(),
                f.rss.last().unwrap(),
                f.peak.last().unwrap(),
                f.idle.last().unwrap() * 100.0,
                f.api_cpu.last().unwrap() * 100.0,
                f.api_rps.last().unwrap(),
                f.exporter_rps.last().unwrap(),
                f.busy.last().unwrap() * 100.0,
                median(&f.latency),
                median(&f.keys) * 1000.0
            );
        }
        results.push((tool.name, f));
    }
    for (name, why) in unbuilt {
        eprintln!("{name}: {why}");
        results.push((name, Figures { failed: Some(why), ..Default::default() }));
    }
    report(nodes, pods + operator_pods, floor, rate, baseline, &results);
}

fn report(nodes: usize, pods: usize, floor: f64, rate: u64, baseline: (f64, f64), results: &[(&str, Figures)]) {
    println!("{nodes} nodes, {pods} pods on one real API server (medians); raw paginated LIST: {floor:.2} s");
    println!(
        "API server with no tool: {:.2}% of a core, {:.2} requests/s (taken off each tool's cost below)",
        baseline.0 * 100.0,
        baseline.1
    );
    println!(
        "| tool | first complete view | resident (peak) | idle CPU | API server CPU, idle | requests/s, idle | exporter reads/s | CPU under {rate} changes/s | change to screen | key |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let kgpu = results.iter().find(|(n, _)| *n == "kgpu").map(|(_, f)| f);
    for (name, f) in results {
        if let Some(why) = &f.failed {
            println!("| {name} | {why} | | | | | | | | |");
            continue;
        }
        println!(
            "| {name} | {:.2} s ({:.2}× the LIST) | {:.0} MiB ({:.0}) | {:.2}% | {:.2}% | {:.2} | {:.2} | {:.0}% | {:.2} s | {:.1} ms |",
            median(&f.first_view),
            median(&f.first_view) / floor,
            median(&f.rss),
            median(&f.peak),
            median(&f.idle) * 100.0,
            median(&f.api_cpu) * 100.0,
            median(&f.api_rps),
            median(&f.exporter_rps),
            median(&f.busy) * 100.0,
            median(&f.latency),
            median(&f.keys) * 1000.0
        );
    }
    if let Some(k) = kgpu {
        for (name, f) in results.iter().filter(|(n, f)| *n != "kgpu" && f.failed.is_none()) {
            let ratio = |a: &[f64], b: &[f64]| median(a) / median(b);
            println!(
                "{name} ÷ kgpu: first view {:.1}×, resident {:.1}×, idle CPU {:.1}×, API server CPU while idle {:.1}×, CPU under changes {:.1}×, change to screen {:.1}×, key {:.1}×",
                ratio(&f.first_view, &k.first_view),
                ratio(&f.rss, &k.rss),
                ratio(&f.idle, &k.idle),
                ratio(&f.api_cpu, &k.api_cpu),
                ratio(&f.busy, &k.busy),
                ratio(&f.latency, &k.latency),
                ratio(&f.keys, &k.keys)
            );
        }
    }
}

/// k9s from the Go module proxy, built once into ~/.cache/kgpu/peers.
fn build_k9s() -> Result<PathBuf, String> {
    let home = std::env::var("HOME").map_err(|_| "no $HOME for the build cache".to_string())?;
    let dir = PathBuf::from(home).join(format!(".cache/kgpu/peers/k9s-{K9S}"));
    let bin = dir.join("k9s");
    if bin.exists() {
        return Ok(bin);
    }
    eprintln!("building k9s {K9S} from the Go module proxy into {} (a few minutes, once)", dir.display());
    let out = Command::new("go")
        .args(["install", "-p", "2", &format!("github.com/derailed/k9s@{K9S}")])
        .env("GOBIN", &dir)
        .env("GOTOOLCHAIN", "local")
        .env("GOWORK", "off")
        .env("CGO_ENABLED", "0")
        .env("GOFLAGS", "-trimpath")
        .output()
        .map_err(|e| format!("not built: cannot run go ({e})"))?;
    if !out.status.success() || !bin.exists() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!("not built: {}", err.lines().last().unwrap_or("go install failed")));
    }
    Ok(bin)
}

/// A peer from crates.io at its pinned version, built once into
/// ~/.cache/kgpu/peers with its own lock file.
fn build_crate(name: &str, version: &str) -> Result<PathBuf, String> {
    let home = std::env::var("HOME").map_err(|_| "no $HOME for the build cache".to_string())?;
    let dir = PathBuf::from(home).join(format!(".cache/kgpu/peers/{name}-{version}"));
    let bin = dir.join("bin").join(name);
    if bin.exists() {
        return Ok(bin);
    }
    eprintln!("building {name} {version} from crates.io into {} (about ten minutes, once)", dir.display());
    let out = Command::new("cargo")
        .args(["install", "--locked", "--quiet", "--version", version, "--root"])
        .arg(&dir)
        .arg(name)
        .output()
        .map_err(|e| format!("not built: cannot run cargo ({e})"))?;
    if !out.status.success() || !bin.exists() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "not built: {}",
            err.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("cargo install failed")
        ));
    }
    Ok(bin)
}
