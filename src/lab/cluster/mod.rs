//! Starting and stopping a lab cluster's processes on loopback: etcd,
//! kube-apiserver, kube-scheduler, and optionally kube-controller-manager,
//! KWOK and the Kueue manager. The live tests use the same code with fewer
//! components (tests/support/controlplane.rs).
//!
//! Each component runs in its own process group with its log in the run
//! directory. A watchdog shell stops them all (in reverse order, TERM then
//! KILL) as soon as the process that started them is gone, however it ended.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::binaries::Binaries;
use super::{LabError, http, kwok, pki};

mod objects;
mod ports;

pub use ports::free_port;

/// The processes a lab may run, in start order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Component {
    Etcd,
    ApiServer,
    Scheduler,
    ControllerManager,
    Kwok,
    Kueue,
}

impl Component {
    pub const ALL: [Component; 6] = [
        Component::Etcd,
        Component::ApiServer,
        Component::Scheduler,
        Component::ControllerManager,
        Component::Kwok,
        Component::Kueue,
    ];

    /// The binary's name, also the name of its log and pid files.
    pub fn binary(self) -> &'static str {
        match self {
            Component::Etcd => "etcd",
            Component::ApiServer => "kube-apiserver",
            Component::Scheduler => "kube-scheduler",
            Component::ControllerManager => "kube-controller-manager",
            Component::Kwok => "kwok",
            Component::Kueue => "kueue",
        }
    }

    /// What it does for the lab, in a few words.
    pub fn role(self) -> &'static str {
        match self {
            Component::Etcd => "storage",
            Component::ApiServer => "the API",
            Component::Scheduler => "places pods",
            Component::ControllerManager => "Jobs, ReplicaSets, eviction, GC, node lifecycle",
            Component::Kwok => "fake kubelets: node heartbeats, pods that run and finish",
            Component::Kueue => "admits Kueue workloads",
        }
    }
}

/// What to start.
#[derive(Clone, Debug)]
pub struct Options {
    /// Logs, keys, kubeconfigs and etcd's data (created; emptied first).
    pub dir: PathBuf,
    pub binaries: Binaries,
    /// kube-scheduler (off for a test whose API server serves only what an
    /// older scheduler would read: this one waits for DRA's v1).
    pub scheduler: bool,
    /// kube-controller-manager.
    pub controllers: bool,
    /// KWOK with the lab's stages (nodes annotated `kwok.x-k8s.io/node: fake`).
    pub kwok: bool,
    /// The Kueue manager (implies the Kueue CRDs).
    pub kueue: bool,
    /// CRD groups to install once the API server is up (`kueue`, `volcano`).
    pub crd_groups: Vec<&'static str>,
    /// The kubeconfig context's name.
    pub context: String,
    /// More kube-apiserver flags (a test's `--runtime-config` that serves
    /// only DRA's betas, as a 1.32 cluster would).
    pub apiserver_flags: Vec<String>,
}

impl Options {
    /// etcd, the API server and the scheduler: what the live tests need.
    pub fn control_plane(dir: PathBuf, binaries: Binaries) -> Options {
        Options {
            dir,
            binaries,
            scheduler: true,
            controllers: false,
            kwok: false,
            kueue: false,
            crd_groups: Vec::new(),
            context: "kgpu-test".into(),
            apiserver_flags: Vec::new(),
        }
    }

    /// Everything that makes the cluster live: controllers, KWOK, the CRDs.
    pub fn living(dir: PathBuf, binaries: Binaries, kueue: bool) -> Options {
        Options {
            dir,
            binaries,
            scheduler: true,
            controllers: true,
            kwok: true,
            kueue,
            crd_groups: vec!["kueue", "volcano"],
            context: "kgpu-lab".into(),
            apiserver_flags: Vec::new(),
        }
    }

    fn wants(&self, c: Component) -> bool {
        match c {
            Component::Etcd | Component::ApiServer => true,
            Component::Scheduler => self.scheduler,
            Component::ControllerManager => self.controllers,
            Component::Kwok => self.kwok,
            Component::Kueue => self.kueue,
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Ports {
    etcd: u16,
    etcd_peer: u16,
    /// etcd's /health and /metrics, plain HTTP (no data there).
    etcd_metrics: u16,
    api: u16,
    scheduler: u16,
    controller_manager: u16,
    kwok: u16,
    kueue_health: u16,
    kueue_metrics: u16,
    kueue_webhook: u16,
}

/// A running lab cluster. Dropping it stops every process it started.
pub struct Cluster {
    pub dir: PathBuf,
    pub binaries: Binaries,
    /// `https://127.0.0.1:<port>`.
    pub server: String,
    /// Admin (`system:masters`).
    pub kubeconfig: PathBuf,
    /// A user with no RBAC.
    pub viewer_kubeconfig: PathBuf,
    /// The bearer tokens of both, new for each start.
    pub tokens: pki::Tokens,
    /// etcd's CA and certificates (clients must present one of its CA).
    pub etcd_certs: pki::EtcdCerts,
    options: Options,
    ports: Ports,
    running: Mutex<Vec<(Component, Child)>>,
}

impl Cluster {
    /// Starts every component `options` asks for and waits until each is
    /// ready. `progress` hears one line per step.
    pub fn start(options: Options, progress: &mut dyn FnMut(&str)) -> Result<Cluster, LabError> {
        let dir = options.dir.clone();
        stop_orphans(&dir);
        let _ = fs::remove_dir_all(&dir);
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| LabError::Io { path, source }
        };
        fs::create_dir_all(dir.join("etcd")).map_err(io(&dir))?;
        let _ = fs::set_permissions(dir.join("etcd"), std::os::unix::fs::PermissionsExt::from_mode(0o700));
        let ports = Ports {
            etcd: free_port()?,
            etcd_peer: free_port()?,
            etcd_metrics: free_port()?,
            api: free_port()?,
            scheduler: free_port()?,
            controller_manager: free_port()?,
            kwok: free_port()?,
            kueue_health: free_port()?,
            kueue_metrics: free_port()?,
            kueue_webhook: free_port()?,
        };
        let server = format!("https://127.0.0.1:{}", ports.api);
        pki::service_account_key(&dir.join("sa.key"), &dir.join("sa.pub"))?;
        let tokens = pki::Tokens::generate()?;
        pki::write(&dir.join("tokens.csv"), &pki::tokens_csv(&tokens))?;
        let etcd_certs = pki::EtcdCerts::generate(&dir.join("etcd-pki"))?;
        let kubeconfig = dir.join("admin.kubeconfig");
        let viewer_kubeconfig = dir.join("viewer.kubeconfig");
        pki::write(&kubeconfig, &pki::kubeconfig(&server, &tokens.admin, "admin", &options.context))?;
        pki::write(
            &viewer_kubeconfig,
            &pki::kubeconfig(&server, &tokens.viewer, "viewer", &format!("{}-viewer", options.context)),
        )?;
        let cluster = Cluster {
            dir,
            binaries: options.binaries.clone(),
            server,
            kubeconfig,
            viewer_kubeconfig,
            tokens,
            etcd_certs,
            options,
            ports,
            running: Mutex::new(Vec::new()),
        };
        cluster.spawn_watchdog()?;
        for component in Component::ALL {
            if !cluster.options.wants(component) {
                continue;
            }
            if component == Component::Kwok || component == Component::Kueue {
                cluster.install_wanted_crds(progress)?;
            }
            let t0 = Instant::now();
            cluster.start_component(component)?;
            progress(&format!(
                "{} ready in {:.1}s ({})",
                component.binary(),
                t0.elapsed().as_secs_f64(),
                component.role()
            ));
        }
        cluster.install_wanted_crds(progress)?;
        Ok(cluster)
    }

    fn start_component(&self, component: Component) -> Result<(), LabError> {
        let d = &self.dir;
        let p = self.ports;
        let kubeconfig = self.kubeconfig.display().to_string();
        let args: Vec<String> = match component {
            Component::Etcd => vec![
                "--name=kgpu".into(),
                format!("--data-dir={}", d.join("etcd").display()),
                format!("--listen-client-urls=https://127.0.0.1:{}", p.etcd),
                format!("--advertise-client-urls=https://127.0.0.1:{}", p.etcd),
                format!("--listen-peer-urls=https://127.0.0.1:{}", p.etcd_peer),
                format!("--initial-advertise-peer-urls=https://127.0.0.1:{}", p.etcd_peer),
                format!("--initial-cluster=kgpu=https://127.0.0.1:{}", p.etcd_peer),
                format!("--listen-metrics-urls=http://127.0.0.1:{}", p.etcd_metrics),
                // Every client and peer shows a certificate of the lab's own CA.
                "--client-cert-auth=true".into(),
                format!("--trusted-ca-file={}", self.etcd_certs.ca.display()),
                format!("--cert-file={}", self.etcd_certs.server_cert.display()),
                format!("--key-file={}", self.etcd_certs.server_key.display()),
                "--peer-client-cert-auth=true".into(),
                format!("--peer-trusted-ca-file={}", self.etcd_certs.ca.display()),
                format!("--peer-cert-file={}", self.etcd_certs.server_cert.display()),
                format!("--peer-key-file={}", self.etcd_certs.server_key.display()),
                "--unsafe-no-fsync=true".into(),
                "--log-level=warn".into(),
                "--quota-backend-bytes=4294967296".into(),
            ],
            Component::ApiServer => {
                // Without the controller manager nothing would lift the
                // not-ready taint TaintNodesByCondition puts on new nodes; with
                // it, the lab behaves as a real cluster does.
                let disabled =
                    if self.options.controllers { "ServiceAccount" } else { "ServiceAccount,TaintNodesByCondition" };
                vec![
                    format!("--etcd-servers=https://127.0.0.1:{}", p.etcd),
                    format!("--etcd-cafile={}", self.etcd_certs.ca.display()),
                    format!("--etcd-certfile={}", self.etcd_certs.client_cert.display()),
                    format!("--etcd-keyfile={}", self.etcd_certs.client_key.display()),
                    "--bind-address=127.0.0.1".into(),
                    format!("--secure-port={}", p.api),
                    "--advertise-address=127.0.0.1".into(),
                    format!("--cert-dir={}", d.join("pki").display()),
                    "--service-cluster-ip-range=10.0.0.0/24".into(),
                    format!("--service-account-issuer=https://127.0.0.1:{}", p.api),
                    format!("--service-account-key-file={}", d.join("sa.pub").display()),
                    format!("--service-account-signing-key-file={}", d.join("sa.key").display()),
                    format!("--token-auth-file={}", d.join("tokens.csv").display()),
                    "--authorization-mode=RBAC".into(),
                    format!("--disable-admission-plugins={disabled}"),
                    "--allow-privileged=true".into(),
                    "--enable-priority-and-fairness=false".into(),
                    "--endpoint-reconciler-type=none".into(),
                ]
                .into_iter()
                .chain(self.options.apiserver_flags.iter().cloned())
                .collect()
            }
            Component::Scheduler => {
                pki::write(
                    &d.join("scheduler.yaml"),
                    &format!(
                        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nclientConnection:\n  kubeconfig: {kubeconfig}\nleaderElection:\n  leaderElect: false\n"
                    ),
                )?;
                vec![
                    format!("--config={}", d.join("scheduler.yaml").display()),
                    "--bind-address=127.0.0.1".into(),
                    format!("--secure-port={}", p.scheduler),
                ]
            }
            Component::ControllerManager => vec![
                format!("--kubeconfig={kubeconfig}"),
                "--leader-elect=false".into(),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={}", p.controller_manager),
                "--use-service-account-credentials=false".into(),
                format!("--service-account-private-key-file={}", d.join("sa.key").display()),
                // No cloud, no CIDRs to hand out, no certificates to sign.
                "--controllers=*,-node-ipam-controller,-service-lb-controller,-cloud-node-lifecycle-controller,-node-route-controller,-certificatesigningrequest-signing-controller".into(),
                "--concurrent-gc-syncs=4".into(),
            ],
            Component::Kwok => vec![
                format!("--kubeconfig={kubeconfig}"),
                format!("--manage-nodes-with-annotation-selector={}=fake", kwok::NODE_ANNOTATION),
                "--enable-crds=Stage".into(),
                "--node-lease-duration-seconds=40".into(),
                "--cidr=10.244.0.0/16".into(),
                format!("--server-address=127.0.0.1:{}", p.kwok),
            ],
            Component::Kueue => {
                let certs = d.join("kueue-webhook");
                pki::serving_cert(&certs)?;
                kueue_metrics_certs()?;
                pki::write(
                    &d.join("kueue.yaml"),
                    &format!(
                        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nnamespace: kueue-system\nhealth:\n  healthProbeBindAddress: \"127.0.0.1:{}\"\nmetrics:\n  bindAddress: \"127.0.0.1:{}\"\nwebhook:\n  port: {}\n  host: 127.0.0.1\n  certDir: {}\nleaderElection:\n  leaderElect: false\ninternalCertManagement:\n  enable: false\nintegrations:\n  frameworks: [\"batch/job\"]\nresources:\n  deviceClassMappings:\n  - name: whole-gpus\n    deviceClassNames: [gpu.nvidia.com]\n  - name: mig-devices\n    deviceClassNames: [mig.nvidia.com]\n",
                        p.kueue_health,
                        p.kueue_metrics,
                        p.kueue_webhook,
                        certs.display()
                    ),
                )?;
                self.create_namespace("kueue-system")?;
                vec![
                    format!("--config={}", d.join("kueue.yaml").display()),
                    format!("--kubeconfig={kubeconfig}"),
                    // DRA quota (alpha in Kueue v0.17): NVIDIA's classes counted as
                    // whole-gpus and mig-devices, as the config above maps them.
                    "--feature-gates=VisibilityOnDemand=false,DynamicResourceAllocation=true".into(),
                ]
            }
        };
        let child = self.spawn(component, &args)?;
        self.running.lock().unwrap_or_else(|p| p.into_inner()).push((component, child));
        self.wait_ready(component)
    }

    fn wait_ready(&self, component: Component) -> Result<(), LabError> {
        let p = self.ports;
        let (timeout, ready): (u64, Box<dyn Fn() -> bool>) = match component {
            Component::Etcd => (30, Box::new(move || http::plain_ok(p.etcd_metrics, "/health", "\"health\":\"true\""))),
            Component::ApiServer => {
                let kubeconfig = self.kubeconfig.clone();
                (
                    90,
                    Box::new(move || {
                        http::block_on(async {
                            let Ok(client) = http::client(&kubeconfig).await else { return false };
                            http::get(&client, "/readyz").await.is_ok_and(|(s, _)| s == 200)
                                && http::get(&client, "/api/v1/namespaces/default").await.is_ok_and(|(s, _)| s == 200)
                        })
                        .unwrap_or(false)
                    }),
                )
            }
            Component::Scheduler => {
                let url = format!("https://127.0.0.1:{}", p.scheduler);
                (30, Box::new(move || http::anonymous_ok(&url, "/readyz")))
            }
            Component::ControllerManager => {
                let url = format!("https://127.0.0.1:{}", p.controller_manager);
                (60, Box::new(move || http::anonymous_ok(&url, "/healthz")))
            }
            Component::Kwok => (30, Box::new(move || http::plain_ok(p.kwok, "/healthz", "ok"))),
            Component::Kueue => (60, Box::new(move || http::plain_ok(p.kueue_health, "/readyz", "ok"))),
        };
        let log = self.log(component);
        let deadline = Instant::now() + Duration::from_secs(timeout);
        while Instant::now() < deadline {
            if ready() {
                return Ok(());
            }
            if let Some(code) = self.exited(component) {
                return Err(LabError::Start {
                    component: component.binary().into(),
                    message: format!("exited ({code}); last lines of {}:\n{}", log.display(), tail(&log, 30)),
                });
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Err(LabError::Start {
            component: component.binary().into(),
            message: format!("not ready after {timeout}s; last lines of {}:\n{}", log.display(), tail(&log, 30)),
        })
    }

    /// The components that have stopped on their own: each with its exit
    /// status and the last lines of its log.
    pub fn stopped(&self) -> Vec<(Component, String)> {
        let components: Vec<Component> = self.processes().into_iter().map(|(c, _)| c).collect();
        components
            .into_iter()
            .filter_map(|c| {
                let status = self.exited(c)?;
                let log = self.log(c);
                Some((c, format!("exited ({status}); last lines of {}:\n{}", log.display(), tail(&log, 10))))
            })
            .collect()
    }

    /// The exit status of a component that has stopped on its own.
    fn exited(&self, component: Component) -> Option<String> {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        let (_, child) = running.iter_mut().find(|(c, _)| *c == component)?;
        match child.try_wait() {
            Ok(Some(status)) => Some(status.to_string()),
            _ => None,
        }
    }

    pub fn log(&self, component: Component) -> PathBuf {
        self.dir.join(format!("{}.log", component.binary()))
    }

    fn spawn(&self, component: Component, args: &[String]) -> Result<Child, LabError> {
        let name = component.binary();
        let log_path = self.log(component);
        let log = fs::File::create(&log_path).map_err(|source| LabError::Io { path: log_path.clone(), source })?;
        let err = log.try_clone().map_err(|source| LabError::Io { path: log_path, source })?;
        let child = Command::new(self.binaries.bin.join(name))
            .args(args)
            .stdout(log)
            .stderr(err)
            .stdin(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| LabError::Start { component: name.into(), message: format!("cannot start it: {e}") })?;
        // With its owner: a later lab in the same directory rewrites these files,
        // and the previous lab's watchdog must not stop the new lab's processes.
        pki::write(&self.dir.join(format!("{name}.pid")), &format!("{} {}\n", child.id(), std::process::id()))?;
        Ok(child)
    }

    /// Stops every component once this process is gone, whichever way.
    fn spawn_watchdog(&self) -> Result<(), LabError> {
        let names: Vec<&str> = Component::ALL.iter().rev().map(|c| c.binary()).collect();
        let script = format!(
            r#"while kill -0 {parent} 2>/dev/null; do sleep 1; done
for c in {names}; do
  read -r p owner < "{dir}/$c.pid" 2>/dev/null || continue
  [ "$owner" = {parent} ] || continue
  kill -TERM -"$p" 2>/dev/null
  for i in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
  kill -KILL -"$p" 2>/dev/null
done"#,
            parent = std::process::id(),
            names = names.join(" "),
            dir = self.dir.display()
        );
        Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map(|_| ())
            .map_err(|e| LabError::Start { component: "watchdog".into(), message: e.to_string() })
    }

    /// Stops one component (TERM to its process group, KILL after 10 s).
    pub fn stop(&self, component: Component) {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = running.iter().position(|(c, _)| *c == component) {
            let (_, mut child) = running.remove(i);
            drop(running);
            stop_child(&mut child);
            let _ = fs::remove_file(self.dir.join(format!("{}.pid", component.binary())));
        }
    }

    /// Starts a stopped component again (same ports, same data) and waits for it.
    pub fn restart(&self, component: Component) -> Result<(), LabError> {
        self.stop(component);
        self.start_component(component)
    }

    /// etcd's client URL (`https://127.0.0.1:<port>`; a client shows a
    /// certificate of [`Cluster::etcd_certs`]' CA).
    pub fn etcd_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.ports.etcd)
    }

    /// The components started, with their process ids, in start order.
    pub fn processes(&self) -> Vec<(Component, u32)> {
        self.running.lock().unwrap_or_else(|p| p.into_inner()).iter().map(|(c, child)| (*c, child.id())).collect()
    }
}

/// Kueue v0.17 reads its metrics certificate from a fixed path when it does
/// not manage certificates itself (cmd/kueue/main.go).
fn kueue_metrics_certs() -> Result<(), LabError> {
    let dir = Path::new("/etc/kueue/metrics/certs");
    if dir.join("tls.crt").exists() && dir.join("tls.key").exists() {
        return Ok(());
    }
    pki::serving_cert(dir).map(|_| ()).map_err(|e| LabError::Start {
        component: "kueue".into(),
        message: format!(
            "Kueue v0.17 reads its metrics certificate from /etc/kueue/metrics/certs, which cannot be written here ({e}); run once as root, or create that directory writable by you"
        ),
    })
}

fn tail(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let last: Vec<&str> = text.lines().rev().take(lines).collect();
    last.into_iter().rev().collect::<Vec<_>>().join("\n")
}

/// Stops what an earlier cluster in `dir` left running, before the
/// directory is wiped: its components' pid files are the only record of
/// them, and their own watchdog may not have stopped them yet (it polls).
/// Whoever starts a cluster in a directory owns it (the lab holds its lock;
/// tests use fresh directories), so every component another process started
/// there is an orphan: its owner may still be a zombie that `kill -0` finds.
fn stop_orphans(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    let alive =
        |pid: &str| Command::new("kill").args(["-0", pid]).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
    for path in entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "pid")) {
        let text = fs::read_to_string(&path).unwrap_or_default();
        let mut words = text.split_whitespace();
        let (Some(child), Some(owner)) = (words.next(), words.next()) else { continue };
        if child.parse::<u32>().is_err() || owner.parse::<u32>().ok() == Some(std::process::id()) {
            continue;
        }
        let group = format!("-{child}");
        let _ = Command::new("kill").args(["-s", "TERM", "--", &group]).stderr(Stdio::null()).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while alive(child) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = Command::new("kill").args(["-s", "KILL", "--", &group]).stderr(Stdio::null()).status();
        let _ = fs::remove_file(&path);
    }
}

fn stop_child(child: &mut Child) {
    let group = format!("-{}", child.id());
    // `--` so the negative number means the process group, not a signal.
    let _ = Command::new("kill").args(["-s", "TERM", "--", &group]).stderr(Stdio::null()).status();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = Command::new("kill").args(["-s", "KILL", "--", &group]).stderr(Stdio::null()).status();
    let _ = child.wait();
}

impl Drop for Cluster {
    /// Stops the components one at a time, newest first (etcd last: an API
    /// server without etcd spins on reconnects).
    fn drop(&mut self) {
        let mut running = std::mem::take(&mut *self.running.lock().unwrap_or_else(|p| p.into_inner()));
        while let Some((component, mut child)) = running.pop() {
            stop_child(&mut child);
            let _ = fs::remove_file(self.dir.join(format!("{}.pid", component.binary())));
        }
    }
}
