//! `kgpu agent`: runs on each GPU node (a DaemonSet, see assets/agent/),
//! reads the GPUs through NVML and the kubelet's device assignments, and
//! serves what it sees to cockpits over HTTP (see `server`).
//!
//! Threads: the backend (NVML calls block) on its own thread, reading every
//! interval and waiting for XIDs in between; the kubelet poll and the
//! collector on the async runtime; the collector owns the state and
//! publishes snapshots and stream events.

pub mod backend;
pub mod collect;
pub mod fake;
pub mod nvml;
pub mod podres;
pub mod server;
pub mod wire;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, mpsc, watch};
use tokio::task::JoinHandle;

use backend::{GpuBackend, Reading, XidSeen};
use collect::{DeviceMap, IdleClock, Inputs, XidHistory};
use wire::{AgentSnapshot, Availability, StreamEvent};

/// The agent's token from `path`, refused with the reason when another user
/// could read the file (its group, or everyone), when it is more than one line, or when it is weak:
/// one token guards every GPU fact the node serves.
pub fn read_token(path: &std::path::Path) -> Result<String, String> {
    use std::os::unix::fs::PermissionsExt;
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read the token file {shown}: {e}"))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        let who = if mode & 0o007 != 0 { "every user" } else { "its group" };
        return Err(format!(
            "the token file {shown} is readable by {who} (mode {mode:o}); chmod 600 it (in the DaemonSet: defaultMode 0400, no fsGroup)"
        ));
    }
    let text = crate::inputs::read_text(path, crate::inputs::TOKEN_MAX, "the token file")?;
    let token = text.trim_end_matches(['\n', '\r']);
    if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "the token file {shown} holds more than one word or line; put the token alone on one line"
        ));
    }
    let distinct = token.chars().collect::<std::collections::HashSet<_>>().len();
    if token.len() < 16 || distinct < 8 {
        return Err(format!(
            "the token in {shown} is weak ({} characters, {distinct} different); use at least 16 random ones (openssl rand -hex 32)",
            token.len()
        ));
    }
    Ok(token.to_string())
}

/// Where the agent reads its GPUs from.
#[derive(Clone, Debug, PartialEq)]
pub enum BackendChoice {
    Nvml,
    /// Serve a recorded snapshot (JSON, as `/v1/snapshot` returns it).
    Fake(PathBuf),
}

impl BackendChoice {
    /// `nvml`, or `fake:PATH`.
    pub fn parse(s: &str) -> Result<BackendChoice, String> {
        match s.split_once(':') {
            None if s == "nvml" => Ok(BackendChoice::Nvml),
            Some(("fake", path)) if !path.is_empty() => Ok(BackendChoice::Fake(PathBuf::from(path))),
            _ => Err(format!("'{s}' is not a backend: use nvml, or fake:PATH (a recorded agent snapshot)")),
        }
    }

    pub fn open(&self) -> anyhow::Result<Box<dyn GpuBackend>> {
        Ok(match self {
            BackendChoice::Nvml => Box::new(nvml::NvmlBackend::new()),
            BackendChoice::Fake(path) => Box::new(fake::FakeBackend::from_file(path)?.0),
        })
    }
}

#[derive(Clone, Debug)]
pub struct Options {
    pub node: String,
    pub token: Vec<u8>,
    pub pod_resources_socket: PathBuf,
    /// How often the GPUs and the kubelet are read.
    pub interval: Duration,
    pub limits: server::Limits,
}

/// A running agent: its address and the tasks to stop it.
pub struct Running {
    pub addr: SocketAddr,
    pub latest: watch::Receiver<Arc<AgentSnapshot>>,
    tasks: Vec<JoinHandle<()>>,
    stop: Option<std::sync::mpsc::Sender<()>>,
}

impl Running {
    pub fn stop(&mut self) {
        self.stop.take();
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

enum Input {
    Reading(Result<Reading, String>),
    Xid(XidSeen),
    Devices(Result<DeviceMap, String>),
}

/// Starts the agent on `listener` with `backend`.
pub fn start(
    opts: Options,
    backend: Box<dyn GpuBackend>,
    listener: tokio::net::TcpListener,
) -> std::io::Result<Running> {
    let addr = listener.local_addr()?;
    let backend_name = backend.name();
    let now = crate::clock::wall_clock();
    let starting = collect::assemble(Inputs {
        node: &opts.node,
        backend: backend_name,
        now,
        reading: &Err("starting".into()),
        xids: &XidHistory::default(),
        idle: &IdleClock::default(),
        devices: &Err("starting".into()),
    });
    let (latest_tx, latest) = watch::channel(Arc::new(starting));
    let (events_tx, _) = broadcast::channel::<StreamEvent>(64);
    let (inputs_tx, inputs) = mpsc::channel::<Input>(256);
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();

    spawn_backend_thread(backend, opts.interval, inputs_tx.clone(), stop_rx);
    let mut tasks = Vec::new();
    let socket = opts.pod_resources_socket.clone();
    let interval = opts.interval;
    let kubelet_tx = inputs_tx;
    tasks.push(tokio::spawn(async move {
        loop {
            let devices = podres::list(&socket).await.map(collect::device_map);
            if kubelet_tx.send(Input::Devices(devices)).await.is_err() {
                return;
            }
            tokio::time::sleep(interval).await;
        }
    }));
    tasks.push(tokio::spawn(collector(opts.node.clone(), backend_name, inputs, latest_tx, events_tx.clone())));
    let app = server::router(&opts.token, latest.clone(), events_tx, opts.limits.clone());
    tasks.push(tokio::spawn(server::serve(listener, app, opts.limits.clone())));
    Ok(Running { addr, latest, tasks, stop: Some(stop_tx) })
}

fn spawn_backend_thread(
    mut backend: Box<dyn GpuBackend>,
    interval: Duration,
    tx: mpsc::Sender<Input>,
    stop: std::sync::mpsc::Receiver<()>,
) {
    let stopped = move || !matches!(stop.try_recv(), Err(std::sync::mpsc::TryRecvError::Empty));
    let spawned = std::thread::Builder::new().name("kgpu-gpu-backend".into()).spawn(move || {
        loop {
            if stopped() || tx.blocking_send(Input::Reading(backend.read())).is_err() {
                return;
            }
            let until = std::time::Instant::now() + interval;
            while let Some(left) = until.checked_duration_since(std::time::Instant::now()) {
                for x in backend.wait_xids(left.min(Duration::from_millis(500))) {
                    if tx.blocking_send(Input::Xid(x)).is_err() {
                        return;
                    }
                }
                if stopped() {
                    return;
                }
            }
        }
    });
    if let Err(e) = spawned {
        tracing::error!("cannot start the GPU backend thread: {e}");
    }
}

async fn collector(
    node: String,
    backend: &'static str,
    mut inputs: mpsc::Receiver<Input>,
    latest: watch::Sender<Arc<AgentSnapshot>>,
    events: broadcast::Sender<StreamEvent>,
) {
    let mut reading: Result<Reading, String> = Err("starting".into());
    let mut devices: Result<DeviceMap, String> = Err("not asked yet".into());
    let mut xids = XidHistory::default();
    let mut idle = IdleClock::default();
    while let Some(input) = inputs.recv().await {
        let now = crate::clock::wall_clock();
        match input {
            Input::Reading(r) => {
                if let Ok(r) = &r {
                    idle.observe(r, now);
                }
                reading = r;
            }
            Input::Devices(d) => devices = d,
            Input::Xid(seen) => {
                let xid = xids.record(&seen, now);
                tracing::warn!("Xid {} on {}", seen.code, seen.gpu);
                // No receivers is fine: nobody is streaming.
                let _ = events.send(StreamEvent::Xid { gpu: seen.gpu, xid });
            }
        }
        let snap = collect::assemble(Inputs {
            node: &node,
            backend,
            now,
            reading: &reading,
            xids: &xids,
            idle: &idle,
            devices: &devices,
        });
        let changed = !collect::same_content(&latest.borrow(), &snap);
        if changed {
            let _ = events.send(StreamEvent::Snapshot { snapshot: Box::new(snap.clone()) });
        }
        latest.send_replace(Arc::new(snap));
    }
}

/// `kgpu agent`: serve until SIGTERM or ctrl-c.
pub async fn run(listen: SocketAddr, choice: BackendChoice, opts: Options) -> anyhow::Result<()> {
    let backend = choice.open()?;
    let listener =
        tokio::net::TcpListener::bind(listen).await.map_err(|e| anyhow::anyhow!("cannot listen on {listen}: {e}"))?;
    let mut running = start(opts.clone(), backend, listener)?;
    tracing::info!("kgpu agent for node {} serving on {}", opts.node, running.addr);
    eprintln!("kgpu agent: node {}, serving on http://{}", opts.node, running.addr);
    let mut latest = running.latest.clone();
    let mut said: Option<(Availability, Availability)> = None;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            _ = term.recv() => break,
            changed = latest.changed() => {
                if changed.is_err() {
                    break;
                }
                // Say once when NVML or the kubelet changes state.
                let snap = latest.borrow_and_update().clone();
                let now = (snap.nvml.clone(), snap.pod_resources.clone());
                let starting = now.0.reason.as_deref() == Some("starting");
                if said.as_ref() != Some(&now) && !starting {
                    let describe = |a: &Availability| a.reason.clone().unwrap_or_else(|| "available".into());
                    eprintln!(
                        "kgpu agent: NVML: {}; kubelet pod-resources: {}; {} GPU(s)",
                        describe(&now.0),
                        describe(&now.1),
                        snap.gpus.len()
                    );
                    said = Some(now);
                }
            }
        }
    }
    running.stop();
    Ok(())
}
