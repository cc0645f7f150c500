//! `kgpu lab up|status|down`: the living local cluster (see `crate::lab`).

use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};

use crate::cli::{LabArgs, LabCommand};
use crate::lab::cluster::{Cluster, Options};
use crate::lab::{Lab, LabError, LabState, binaries, churn, http, kind};
use crate::sources::sim::scenarios;

use super::UsageError;

pub fn run(args: &LabArgs) -> anyhow::Result<ExitCode> {
    let root = binaries::cache_root()?;
    let lab = Lab::at(&root);
    match &args.command {
        LabCommand::Up { scenario, kueue, churn, churn_every, seed, kind: true, print } => {
            if let Some(name) = scenario {
                scenarios::find(name)?;
            }
            let up =
                Up { scenario: scenario.clone(), kueue: *kueue, churn: *churn, churn_every: *churn_every, seed: *seed };
            up_kind(&lab, &up, *print)
        }
        LabCommand::Up { scenario, kueue, churn, churn_every, seed, .. } => {
            if let Some(name) = scenario {
                scenarios::find(name)?;
            }
            let up =
                Up { scenario: scenario.clone(), kueue: *kueue, churn: *churn, churn_every: *churn_every, seed: *seed };
            up_here(&lab, &root, &up)
        }
        LabCommand::Status => status(&lab),
        LabCommand::Down => down(&lab),
    }
}

struct Up {
    scenario: Option<String>,
    kueue: bool,
    churn: bool,
    churn_every: u32,
    seed: u64,
}

fn say(line: &str) {
    eprintln!("lab: {line}");
}

fn lock(lab: &Lab) -> anyhow::Result<crate::lab::LabLock> {
    lab.lock().map_err(|e| match e {
        LabError::AlreadyRunning { .. } => UsageError(e.to_string()).into(),
        other => anyhow::Error::from(other),
    })
}

fn up_here(lab: &Lab, root: &std::path::Path, up: &Up) -> anyhow::Result<ExitCode> {
    let _lock = lock(lab)?;
    let t0 = Instant::now();
    // First, so it can be copied while the lab builds and starts.
    super::outln!("export KUBECONFIG={}", lab.kubeconfig().display());
    say(
        "finding or building etcd, kube-apiserver, kube-scheduler, kube-controller-manager, KWOK and Kueue (cold: about 10 min on 2 cores; then cached)",
    );
    let bins = binaries::ensure(root)?;
    say(&format!("binaries ready in {:.0}s ({})", t0.elapsed().as_secs_f64(), bins.bin.display()));
    let cluster = Cluster::start(Options::living(lab.run_dir(), bins, up.kueue), &mut |line| say(line))?;
    crate::lab::pki::write(&lab.kubeconfig(), &std::fs::read_to_string(&cluster.kubeconfig)?)?;
    crate::lab::pki::write(
        &lab.kubeconfig().with_file_name("viewer.kubeconfig"),
        &std::fs::read_to_string(&cluster.viewer_kubeconfig)?,
    )?;
    let state = LabState {
        pid: std::process::id(),
        started: crate::clock::wall_clock(),
        server: cluster.server.clone(),
        kubeconfig: lab.kubeconfig(),
        run_dir: lab.run_dir(),
        scenario: up.scenario.clone(),
        kueue: up.kueue,
        churn: up.churn,
        processes: cluster.processes().into_iter().map(|(c, pid)| (c.binary().to_string(), pid)).collect(),
    };
    lab.write_state(&state)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let result = runtime.block_on(live(&cluster, up, t0));
    // In the order the cluster stops them: the last started first.
    let running: Vec<String> = state.processes.iter().rev().map(|(name, _)| name.clone()).collect();
    say(&format!("stopping: {}", running.join(", ")));
    drop(runtime);
    drop(cluster);
    super::outln!("lab stopped");
    result.map(|()| ExitCode::SUCCESS)
}

/// The scenario, the churn, and the wait for a signal.
async fn live(cluster: &Cluster, up: &Up, t0: Instant) -> anyhow::Result<()> {
    let client = http::client(&cluster.kubeconfig).await.map_err(LabError::Api)?;
    if let Some(name) = &up.scenario {
        let summary = super::scenario::apply_now(&client, name, false, |_| {}).await?;
        say(&format!("scenario {name}: {}", super::scenario::describe(&summary, false)));
        wait_for_nodes(&client).await;
        wait_for_adoption(&client, name).await;
    }
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let churn_task = up.churn.then(|| {
        let client = client.clone();
        let (seed, every) = (up.seed, up.churn_every);
        tokio::spawn(churn::run(client, seed, every, stop_rx, |line| say(&line)))
    });
    super::outln!(
        "lab ready in {:.0}s{}{}: run `kgpu` with the KUBECONFIG above; ctrl-c stops it",
        t0.elapsed().as_secs_f64(),
        up.scenario.as_ref().map_or(String::new(), |s| format!(", scenario {s}")),
        if up.churn { ", churn on" } else { "" }
    );
    watch_until_signal(cluster).await;
    let _ = stop_tx.send(true);
    if let Some(task) = churn_task {
        let _ = task.await;
    }
    Ok(())
}

/// Until KWOK has made the scenario's nodes Ready (or 60 s), saying how many are.
async fn wait_for_nodes(client: &kube::Client) {
    let nodes: Api<Node> = Api::all(client.clone());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(list) = nodes.list(&ListParams::default()).await {
            let fake = list.items.iter().filter(|n| is_fake(n)).count();
            let ready = list.items.iter().filter(|n| is_fake(n) && node_ready(n)).count();
            if ready == fake || Instant::now() > deadline {
                let silent = list.items.len() - fake;
                say(&format!(
                    "{ready} of {} node(s) Ready{}",
                    list.items.len(),
                    if silent > 0 {
                        format!(" ({silent} without a kubelet, as the scenario wants)")
                    } else {
                        String::new()
                    }
                ));
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Until the scenario's controllers have adopted its pods (or 60 s): before
/// that, kgpu would see bare pods that nothing recreates.
async fn wait_for_adoption(client: &kube::Client, scenario: &str) {
    let pods: Api<Pod> = Api::all(client.clone());
    let selector = format!("{}={scenario}", crate::sources::kube::manifest::SCENARIO_LABEL);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(list) = pods.list(&ListParams::default().labels(&selector)).await {
            let wanting = |p: &&Pod| {
                let labels = p.metadata.labels.as_ref();
                let selected =
                    labels.is_some_and(|l| l.contains_key("batch.kubernetes.io/job-name") || l.contains_key("app"));
                selected && p.metadata.owner_references.as_ref().is_none_or(|o| o.is_empty())
            };
            let orphans = list.items.iter().filter(wanting).count();
            if orphans == 0 || Instant::now() > deadline {
                say(&format!(
                    "{} pod(s) adopted by their controllers{}",
                    list.items.len() - orphans,
                    if orphans > 0 { format!(", {orphans} not yet") } else { String::new() }
                ));
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn is_fake(n: &Node) -> bool {
    n.metadata.annotations.as_ref().is_some_and(|a| a.get(crate::lab::kwok::NODE_ANNOTATION).is_some())
}

fn node_ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Until a signal, saying once of each component that stops on its own
/// (killed, crashed): the lab goes on without it, and says so.
async fn watch_until_signal(cluster: &Cluster) {
    let mut told = std::collections::HashSet::new();
    let mut tick = tokio::time::interval(Duration::from_secs(2));
    let signal = wait_for_signal();
    tokio::pin!(signal);
    loop {
        tokio::select! {
            _ = &mut signal => return,
            _ = tick.tick() => {
                for (component, what) in cluster.stopped() {
                    if told.insert(component) {
                        say(&format!(
                            "{} {what}\nthe lab goes on without it (`kgpu lab status` shows it GONE); `kgpu lab down` then `up` restarts everything",
                            component.binary()
                        ));
                    }
                }
            }
        }
    }
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut hup)) = (signal(SignalKind::terminate()), signal(SignalKind::hangup())) else {
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
        _ = hup.recv() => {}
    }
}

fn status(lab: &Lab) -> anyhow::Result<ExitCode> {
    let Some(state) = lab.state() else {
        if lab.is_running() {
            super::outln!("a lab is starting (building or starting its components); try again in a moment");
            return Ok(ExitCode::SUCCESS);
        }
        super::outln!("no lab is running here; start one with `kgpu lab up` (try `--scenario fragmented --churn`)");
        return Ok(ExitCode::from(1));
    };
    let up_for = crate::clock::wall_clock() - state.started;
    super::outln!("lab running for {} (pid {})", crate::model::time::age(up_for), state.pid);
    super::outln!("  export KUBECONFIG={}", state.kubeconfig.display());
    super::outln!("  server      {}", state.server);
    super::outln!("  scenario    {}", state.scenario.as_deref().unwrap_or("(none)"));
    super::outln!("  kueue       {}   churn {}", on_off(state.kueue), on_off(state.churn));
    super::outln!("  logs        {}", state.run_dir.display());
    for (name, pid) in &state.processes {
        let alive = std::path::Path::new("/proc").join(pid.to_string()).exists();
        super::outln!("  {name:<24} pid {pid:<8} {}", if alive { "running" } else { "GONE (see its log)" });
    }
    let kubeconfig = state.kubeconfig.clone();
    let counts = http::block_on(async move {
        let client = http::client(&kubeconfig).await?;
        let nodes: Api<Node> = Api::all(client.clone());
        let pods: Api<Pod> = Api::all(client);
        let nodes = nodes.list(&ListParams::default()).await.map_err(|e| e.to_string())?;
        let pods = pods.list(&ListParams::default()).await.map_err(|e| e.to_string())?;
        Ok::<_, String>((nodes.items, pods.items))
    });
    match counts {
        Ok(Ok((nodes, pods))) => {
            let ready = nodes.iter().filter(|n| node_ready(n)).count();
            let mut phases: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
            for p in &pods {
                *phases.entry(p.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default()).or_default() += 1;
            }
            let phases: Vec<String> = phases.iter().map(|(p, n)| format!("{n} {p}")).collect();
            super::outln!("  nodes       {} ({ready} Ready)", nodes.len());
            super::outln!("  pods        {} ({})", pods.len(), phases.join(", "));
        }
        Ok(Err(e)) | Err(e) => super::outln!("  the API server does not answer: {e}"),
    }
    Ok(ExitCode::SUCCESS)
}

fn on_off(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}

fn down(lab: &Lab) -> anyhow::Result<ExitCode> {
    let Some(state) = lab.state() else {
        super::outln!("no lab is running here");
        return Ok(ExitCode::from(1));
    };
    let ok = Command::new("kill")
        .args(["-s", "TERM", &state.pid.to_string()])
        .status()
        .context("cannot run kill")?
        .success();
    if !ok {
        return Err(UsageError(format!("cannot signal the lab's process {}", state.pid)).into());
    }
    let deadline = Instant::now() + Duration::from_secs(90);
    while lab.is_running() {
        if Instant::now() > deadline {
            return Err(anyhow::anyhow!("the lab (pid {}) did not stop within 90 s", state.pid));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    super::outln!("lab stopped");
    Ok(ExitCode::SUCCESS)
}

/// Whether a program is on PATH (and, for container engines, answers).
fn tool_works(name: &str) -> bool {
    let on_path =
        std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(name).is_file()));
    if !on_path {
        return false;
    }
    match name {
        "docker" | "podman" | "nerdctl" => Command::new(name)
            .arg("info")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success()),
        _ => true,
    }
}

fn up_kind(lab: &Lab, up: &Up, print: bool) -> anyhow::Result<ExitCode> {
    let kgpu = std::env::current_exe().map_or_else(|_| "kgpu".to_string(), |p| p.display().to_string());
    let plan = kind::plan(&lab.run_dir(), &kgpu, up.scenario.as_deref(), up.kueue);
    if print {
        super::emit(&plan.script())?;
        return Ok(ExitCode::SUCCESS);
    }
    let missing = kind::missing_tools(tool_works);
    if !missing.is_empty() {
        return Err(UsageError(format!(
            "kgpu lab up --kind needs {} here; `kgpu lab up --kind --print` shows the steps, and `kgpu lab up` (without --kind) runs the lab on this machine with no container engine",
            missing.join(", ")
        ))
        .into());
    }
    let _lock = lock(lab)?;
    for (path, text) in &plan.files {
        crate::lab::pki::write(path, text)?;
    }
    super::outln!("export KUBECONFIG={}  # context {}", kind_kubeconfig().display(), plan.context);
    let t0 = Instant::now();
    for step in &plan.steps {
        say(step.why);
        let status = Command::new(&step.argv[0]).args(&step.argv[1..]).status();
        if !status.is_ok_and(|s| s.success()) {
            say(&format!("failed: {}; tearing down", step.argv.join(" ")));
            let _ = Command::new(&plan.teardown.argv[0]).args(&plan.teardown.argv[1..]).status();
            return Err(anyhow::anyhow!("`{}` failed", step.argv.join(" ")));
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let result = runtime.block_on(async {
        let target = crate::sources::kube::client::Target { kubeconfig: None, context: Some(plan.context.clone()) };
        let (client, _) = crate::sources::kube::client::connect(&target).await?;
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let churn_task =
            up.churn.then(|| tokio::spawn(churn::run(client, up.seed, up.churn_every, stop_rx, |l| say(&l))));
        super::outln!("lab ready on kind in {:.0}s; ctrl-c deletes the kind cluster", t0.elapsed().as_secs_f64());
        wait_for_signal().await;
        let _ = stop_tx.send(true);
        if let Some(task) = churn_task {
            let _ = task.await;
        }
        Ok::<_, anyhow::Error>(())
    });
    say(plan.teardown.why);
    let _ = Command::new(&plan.teardown.argv[0]).args(&plan.teardown.argv[1..]).status();
    result.map(|()| ExitCode::SUCCESS)
}

/// kind writes its context into the default kubeconfig.
fn kind_kubeconfig() -> std::path::PathBuf {
    std::env::var_os("KUBECONFIG")
        .and_then(|v| std::env::split_paths(&v).next())
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".kube/config")))
        .unwrap_or_else(|| "~/.kube/config".into())
}
