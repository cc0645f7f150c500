//! A real Kubernetes control plane for live tests: etcd, kube-apiserver and
//! kube-scheduler (`ControlPlane`), or the whole living lab with
//! kube-controller-manager and KWOK (`ControlPlane::lab()`), built from their
//! Go modules (`tests/cluster/build.sh`, cached outside the repo) and started
//! on free loopback ports with token auth by `kgpu::lab::cluster`, the same
//! code `kgpu lab up` runs.
//!
//! One of each per test binary (`shared()`, `lab()`). A watchdog stops every
//! component when the test binary exits — normally, on panic, or killed.
//! Logs stay in `target/kgpu-cp/<pid>-<n>/` (the last six runs are kept), so
//! a failed test can be read afterwards.
//!
//! `KGPU_SKIP_LIVE=1` skips live tests (by hand only; CI never sets it).
//! Without Go or the module proxy the live tests fail and say what is missing.

#![allow(dead_code)] // each test binary uses a different part of the harness

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use kgpu::lab::binaries::{self, Binaries};
use kgpu::lab::cluster::{Cluster, Component, Options};

/// A running control plane; everything of `Cluster` (server, kubeconfigs,
/// `install_crds`, `restart`) through `Deref`.
pub struct ControlPlane(Cluster);

impl std::ops::Deref for ControlPlane {
    type Target = Cluster;
    fn deref(&self) -> &Cluster {
        &self.0
    }
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Builds (or finds cached) binaries and CRDs.
pub fn build() -> Result<Binaries, String> {
    eprintln!("control plane: tests/cluster/build.sh (cold: 10-20 minutes on 2 cores; cached afterwards)");
    let root = binaries::cache_root().map_err(|e| e.to_string())?;
    binaries::ensure(&root).map_err(|e| e.to_string())
}

/// `curl -sk` against the API server (raw requests, as a user would make them).
pub fn curl(server: &str, token: &str, args: &[&str], path: &str) -> Result<(u16, String), String> {
    let out = Command::new("curl")
        .args(["-sk", "--max-time", "20", "-o", "-", "-w", "\n%{http_code}", "-H"])
        .arg(format!("Authorization: Bearer {token}"))
        .args(args)
        .arg(format!("{server}{path}"))
        .output()
        .map_err(|e| format!("curl not found ({e}); the live tests need curl"))?;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    Ok((code.trim().parse().unwrap_or(0), body.to_string()))
}

impl ControlPlane {
    /// Whether live tests run (`KGPU_SKIP_LIVE=1` by hand skips them).
    pub fn enabled() -> bool {
        std::env::var("KGPU_SKIP_LIVE").map_or(true, |v| v != "1")
    }

    /// The shared control plane, or `None` (said on stderr) when live tests
    /// are off: `let Some(cp) = ControlPlane::shared_if_enabled() else { return };`
    pub fn shared_if_enabled() -> Option<&'static ControlPlane> {
        if !ControlPlane::enabled() {
            eprintln!("skipped: KGPU_SKIP_LIVE=1");
            return None;
        }
        Some(ControlPlane::shared())
    }

    /// The control plane of this test binary, started on first use.
    pub fn shared() -> &'static ControlPlane {
        static CP: OnceLock<ControlPlane> = OnceLock::new();
        CP.get_or_init(|| match ControlPlane::start() {
            Ok(cp) => cp,
            Err(e) => {
                panic!("cannot start the test control plane: {e}\n(set KGPU_SKIP_LIVE=1 to skip live tests by hand)")
            }
        })
    }

    /// The living lab of this test binary (controllers and KWOK; no Kueue
    /// manager unless `kueue`), started on first use; `None` when live
    /// tests are off.
    pub fn lab_if_enabled() -> Option<&'static ControlPlane> {
        if !ControlPlane::enabled() {
            eprintln!("skipped: KGPU_SKIP_LIVE=1");
            return None;
        }
        static LAB: OnceLock<ControlPlane> = OnceLock::new();
        Some(LAB.get_or_init(|| match ControlPlane::start_with(|dir, bins| Options::living(dir, bins, false)) {
            Ok(cp) => cp,
            Err(e) => panic!("cannot start the test lab: {e}\n(set KGPU_SKIP_LIVE=1 to skip live tests by hand)"),
        }))
    }

    /// A control plane of its own (etcd, API server, scheduler).
    pub fn start() -> Result<ControlPlane, String> {
        ControlPlane::start_with(Options::control_plane)
    }

    /// A cluster of its own, with the components `options` chooses.
    pub fn start_with(options: impl FnOnce(PathBuf, Binaries) -> Options) -> Result<ControlPlane, String> {
        let bins = build()?;
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let root = repo().join("target/kgpu-cp");
        prune_old_runs(&root);
        let dir = root.join(format!("{}-{n}", std::process::id()));
        let t0 = std::time::Instant::now();
        let cluster = Cluster::start(options(dir, bins), &mut |line| eprintln!("control plane: {line}"))
            .map_err(|e| e.to_string())?;
        eprintln!(
            "control plane: ready in {:.1}s at {} (logs and kubeconfig in {})",
            t0.elapsed().as_secs_f64(),
            cluster.server,
            cluster.dir.display()
        );
        Ok(ControlPlane(cluster))
    }

    /// Stops kube-apiserver (SIGTERM, then SIGKILL) and waits for it to exit.
    pub fn stop_apiserver(&self) {
        self.stop(Component::ApiServer);
    }

    /// Starts kube-apiserver again on the same port and waits for /readyz.
    pub fn start_apiserver(&self) -> Result<(), String> {
        self.restart(Component::ApiServer).map_err(|e| e.to_string())
    }

    /// Stops etcd (SIGTERM, then SIGKILL) and waits for it to exit: the API
    /// server stays up and answers every request that needs storage with errors.
    pub fn stop_etcd(&self) {
        self.stop(Component::Etcd);
    }

    /// Starts etcd again on the same ports and data and waits for it.
    pub fn start_etcd(&self) -> Result<(), String> {
        self.restart(Component::Etcd).map_err(|e| e.to_string())
    }

    /// Pauses kube-apiserver (SIGSTOP): its connections stay open and say
    /// nothing, as a hung or overloaded server's do.
    pub fn pause_apiserver(&self) {
        self.signal_apiserver("-STOP");
    }

    /// Lets a paused kube-apiserver run again (SIGCONT).
    pub fn resume_apiserver(&self) {
        self.signal_apiserver("-CONT");
    }

    /// The running kube-apiserver's process id.
    pub fn apiserver_pid(&self) -> u32 {
        let (_, pid) = self.processes().into_iter().find(|(c, _)| *c == Component::ApiServer).expect("apiserver runs");
        pid
    }

    fn signal_apiserver(&self, signal: &str) {
        let pid = self.apiserver_pid();
        let ok = Command::new("kill").args([signal, &pid.to_string()]).status().is_ok_and(|s| s.success());
        assert!(ok, "kill {signal} {pid}");
    }

    /// Compacts etcd's history up to its current revision (what the API
    /// server does every 5 minutes), through etcd's JSON gateway; returns
    /// that revision. A watch from any older resource version then gets
    /// 410 Gone.
    pub fn compact_etcd(&self) -> i64 {
        let post = |path: &str, body: &str| -> serde_json::Value {
            let out = Command::new("curl")
                .args(["-sf", "--max-time", "10", "-X", "POST", "-d", body])
                .arg("--cacert")
                .arg(&self.etcd_certs.ca)
                .arg("--cert")
                .arg(&self.etcd_certs.client_cert)
                .arg("--key")
                .arg(&self.etcd_certs.client_key)
                .arg(format!("{}{path}", self.etcd_url()))
                .output()
                .expect("curl");
            assert!(out.status.success(), "etcd {path}: {}", String::from_utf8_lossy(&out.stderr));
            serde_json::from_slice(&out.stdout).expect("etcd answers JSON")
        };
        // Any key: the answer's header carries the current revision.
        let range = post("/v3/kv/range", r#"{"key":"AA=="}"#);
        let revision: i64 = range["header"]["revision"].as_str().and_then(|r| r.parse().ok()).expect("a revision");
        post("/v3/kv/compaction", &format!(r#"{{"revision":"{revision}","physical":true}}"#));
        revision
    }

    pub fn install_crds(&self, files: &[PathBuf]) -> Result<(), String> {
        self.0.install_crds(files).map_err(|e| e.to_string())
    }

    pub fn delete_crds(&self, files: &[PathBuf]) -> Result<(), String> {
        self.0.delete_crds(files).map_err(|e| e.to_string())
    }

    pub fn kueue_crds(&self) -> Vec<PathBuf> {
        self.binaries.crd_files("kueue")
    }

    pub fn volcano_crds(&self) -> Vec<PathBuf> {
        self.binaries.crd_files("volcano")
    }

    /// The built binaries (kubectl among them).
    pub fn bin(&self) -> &Path {
        &self.binaries.bin
    }
}

/// Keeps the logs of the last few runs only; never the directory of a run
/// whose process still lives (its watchdog reads the pid files there).
fn prune_old_runs(root: &Path) {
    let Ok(entries) = fs::read_dir(root) else { return };
    let alive = |path: &Path| {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let pid = name.split('-').next().unwrap_or("");
        !pid.is_empty() && Path::new("/proc").join(pid).exists()
    };
    let mut dirs: Vec<(std::time::SystemTime, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .filter(|(_, path)| !alive(path))
        .collect();
    dirs.sort();
    let n = dirs.len();
    for (_, d) in dirs.into_iter().take(n.saturating_sub(6)) {
        let _ = fs::remove_dir_all(d);
    }
}
