//! Time to the first complete frame on a real API server with 2,000 nodes
//! and 20,000 pods, next to `kubectl get pods -A -o json --chunk-size=500`
//! timed in the same run (DESIGN.md budget: within 1.2×), and model bytes per
//! pod for real-shaped pods as the API server returns them (budget ≤ 1 KiB).
//! kgpu is timed twice, each collection listed by pages and streamed over a
//! watch (WatchList), with the peak heap of each.
//!
//! `cargo bench --bench live_sync` (builds and starts the test control plane);
//! `KGPU_BENCH_NODES` and `KGPU_BENCH_PODS` set the fleet.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark may panic on setup failure

#[path = "support/counting.rs"]
mod counting;

#[path = "../tests/support/controlplane.rs"]
mod controlplane;
#[path = "support/labels.rs"]
mod labels;
#[allow(dead_code)] // gpu_operator() is for benches/peers.rs
#[path = "support/populate.rs"]
mod populate;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use kube::api::{Api, ListParams};

#[global_allocator]
static ALLOC: counting::Counting = counting::Counting;

fn size(var: &str, default: usize) -> usize {
    std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    let (nodes, pods) = (size("KGPU_BENCH_NODES", 2_000), size("KGPU_BENCH_PODS", 20_000));
    let cp = controlplane::ControlPlane::start().expect("control plane");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let target = kgpu::sources::kube::client::Target { kubeconfig: Some(cp.kubeconfig.clone()), context: None };
        let (client, _) = kgpu::sources::kube::client::connect(&target).await.unwrap();
        let t0 = Instant::now();
        populate::fleet(&client, nodes, pods).await;
        eprintln!("created {nodes} nodes and {pods} pods in {:.1}s", t0.elapsed().as_secs_f64());

        // kubectl, the baseline.
        let kubectl = cp.bin().join("kubectl");
        let mut kubectl_times = Vec::new();
        for _ in 0..3 {
            let start = Instant::now();
            let status = Command::new(&kubectl)
                .args(["get", "pods", "-A", "-o", "json", "--chunk-size=500", "--kubeconfig"])
                .arg(&cp.kubeconfig)
                .stdout(Stdio::null())
                .status()
                .unwrap();
            assert!(status.success());
            kubectl_times.push(start.elapsed().as_secs_f64());
        }
        // kgpu: connect, list and watch every feed, first complete snapshot
        // and frame; by pages, then streamed.
        let listings = [("pages", kgpu::model::Listing::Pages { refused: None }), ("stream", kgpu::model::Listing::Stream)];
        let mut kgpu_runs: Vec<(&str, Vec<f64>, i64)> = Vec::new();
        for (name, listing) in listings {
            let pages = matches!(listing, kgpu::model::Listing::Pages { .. });
            let scope = kgpu::sources::kube::watch::Scope { pages, ..Default::default() };
            let (mut times, mut peak) = (Vec::new(), 0);
            for _ in 0..3 {
                let base = counting::live();
                counting::reset_peak();
                let start = Instant::now();
                let (snap, now) = kgpu::runtime::load::kube(&target, &scope).await.unwrap();
                let views = kgpu::view_model::panes::Views::build(Arc::new(snap), now, &Default::default(), None);
                let mut term = ratatui::Terminal::new(ratatui::backend::TestBackend::new(200, 60)).unwrap();
                let app = kgpu::app::App::new(true, "dark", false);
                let theme = kgpu::ui::Theme::builtin("dark");
                term.draw(|f| {
                    kgpu::ui::draw(f, &app, &views, &theme, &Default::default());
                })
                .unwrap();
                times.push(start.elapsed().as_secs_f64());
                peak = peak.max(counting::peak() - base);
                assert_eq!(views.snap.pods.len(), pods);
                assert_eq!(views.snap.nodes.len(), nodes);
                let listed = views.snap.feed(kgpu::model::Feed::Pods).and_then(|f| f.listed.clone());
                assert_eq!(listed, Some(listing.clone()), "the server did as asked");
            }
            kgpu_runs.push((name, times, peak));
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(|a, b| a.total_cmp(b));
            v[v.len() / 2]
        };
        let k = median(&mut kubectl_times);
        let g = kgpu_runs.iter_mut().map(|(_, times, _)| median(times)).fold(f64::INFINITY, f64::min);

        // Bytes per pod: real API objects converted into the model.
        let pod_api: Api<kgpu::sources::kube::lean::Pod> = Api::all(client.clone());
        let list = pod_api.list(&ListParams::default().limit(5000)).await.unwrap();
        let mut cluster = kgpu::model::Cluster::new(kgpu::model::SourceInfo {
            kind: kgpu::model::SourceKind::Kube,
            name: "bench".into(),
        });
        // The first pod interns the shared strings (namespace, image, the requirement).
        let first = kgpu::sources::kube::convert::pod(&list.items[0]).unwrap();
        cluster.apply(kgpu::model::ModelEvent::Upsert(kgpu::model::Object::Pod(first)));
        let before = counting::live();
        let n = list.items.len() - 1;
        for p in &list.items[1..] {
            let pod = kgpu::sources::kube::convert::pod(p).unwrap();
            cluster.apply(kgpu::model::ModelEvent::Upsert(kgpu::model::Object::Pod(pod)));
        }
        let per_pod = (counting::live() - before) as f64 / n as f64;

        println!("kubectl get pods -A -o json --chunk-size=500: {k:.2}s (median of 3)");
        for (name, times, peak) in &mut kgpu_runs {
            println!(
                "kgpu first complete frame (all feeds, {nodes} nodes, {pods} pods), listed by {name}: {:.2}s (median of 3) = {:.2}× kubectl, peak heap {} MiB",
                median(times),
                median(times) / k,
                *peak >> 20
            );
        }
        println!("ratio, the better listing: {:.2}× (budget ≤ 1.2×)", g / k);
        println!("model memory per real-shaped pod from the API server: {per_pod:.0} B (budget 1024 B)");
        let ok = g / k <= 1.2 && per_pod <= 1024.0;
        println!("budgets: {}", if ok { "met" } else { "MISSED" });
        if !ok {
            std::process::exit(1);
        }
    });
}
