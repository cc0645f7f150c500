//! A real Kubernetes control plane for live tests: etcd, kube-apiserver and
//! kube-scheduler built from their Go modules by `tests/cluster/build.sh`
//! (cached outside the repo), started on free loopback ports with token auth.
//!
//! One control plane per test binary (`ControlPlane::shared()`). Each
//! component runs in its own process group; a watchdog process stops them
//! all when the test binary exits — normally, on panic, or killed — so no
//! etcd outlives its tests. Logs stay in `target/kgpu-cp/<pid>/` and the
//! path is printed, so a failed test can be read afterwards.
//!
//! `KGPU_SKIP_LIVE=1` skips live tests (by hand only; CI never sets it).
//! Without Go or the module proxy the live tests fail and say what is missing.

#![allow(dead_code)] // each test binary uses a different part of the harness

use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

pub const ADMIN_TOKEN: &str = "kgpu-admin-token";
/// A user with no RBAC at all until a test grants some.
pub const VIEWER_TOKEN: &str = "kgpu-viewer-token";

pub struct ControlPlane {
    pub dir: PathBuf,
    pub bin: PathBuf,
    pub crds: PathBuf,
    pub server: String,
    pub kubeconfig: PathBuf,
    pub viewer_kubeconfig: PathBuf,
    etcd_port: u16,
    api_port: u16,
    scheduler_port: u16,
    apiserver: Mutex<Option<Child>>,
    others: Mutex<Vec<(String, Child)>>,
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

fn wait_until(what: &str, timeout: Duration, log: &Path, mut ok: impl FnMut() -> bool) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let tail = fs::read_to_string(log).unwrap_or_default();
    let tail: Vec<&str> = tail.lines().rev().take(30).collect();
    Err(format!(
        "{what} not ready after {}s; last log lines of {}:\n{}",
        timeout.as_secs(),
        log.display(),
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    ))
}

fn http_ok(port: u16, path: &str, needle: &str) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").is_err() {
        return false;
    }
    let mut body = String::new();
    let _ = s.read_to_string(&mut body);
    body.contains(needle)
}

/// `curl -sk` against the apiserver (TLS without a Rust TLS stack here).
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

fn kubeconfig_yaml(server: &str, token: &str, user: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: kgpu-test\n  cluster:\n    server: {server}\n    insecure-skip-tls-verify: true\nusers:\n- name: {user}\n  user:\n    token: {token}\ncontexts:\n- name: kgpu-test\n  context:\n    cluster: kgpu-test\n    user: {user}\ncurrent-context: kgpu-test\n"
    )
}

/// Builds (or finds cached) binaries and CRDs; returns the cache directory.
pub fn build() -> Result<PathBuf, String> {
    eprintln!("control plane: tests/cluster/build.sh (cold: about 5 minutes on 2 cores; cached afterwards)");
    let out = Command::new(repo().join("tests/cluster/build.sh"))
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run tests/cluster/build.sh: {e}"))?;
    if !out.status.success() {
        return Err("tests/cluster/build.sh failed (its message is above): the live tests need Go >= 1.26 and the Go module proxy (once; then the cache)".into());
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let dir = stdout.lines().last().unwrap_or("").trim();
    if dir.is_empty() {
        return Err("tests/cluster/build.sh printed no directory".into());
    }
    Ok(PathBuf::from(dir))
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

    pub fn start() -> Result<ControlPlane, String> {
        let cache = build()?;
        let bin = cache.join("bin");
        let crds = cache.join("crds");
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let root = repo().join("target/kgpu-cp");
        let dir = root.join(format!("{}-{n}", std::process::id()));
        prune_old_runs(&root);
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("etcd")).map_err(|e| e.to_string())?;
        let _ = fs::set_permissions(dir.join("etcd"), std::os::unix::fs::PermissionsExt::from_mode(0o700));
        let (etcd_port, peer_port, api_port, scheduler_port) = (free_port()?, free_port()?, free_port()?, free_port()?);
        let server = format!("https://127.0.0.1:{api_port}");
        let key = dir.join("sa.key");
        let status = Command::new("openssl")
            .args(["genrsa", "-out"])
            .arg(&key)
            .arg("2048")
            .stderr(Stdio::null())
            .status()
            .map_err(|e| format!("openssl not found ({e}); the live tests need openssl"))?;
        if !status.success() {
            return Err("openssl genrsa failed".into());
        }
        fs::write(
            dir.join("tokens.csv"),
            format!("{ADMIN_TOKEN},admin,admin-uid,system:masters\n{VIEWER_TOKEN},viewer,viewer-uid,\n"),
        )
        .map_err(|e| e.to_string())?;
        let kubeconfig = dir.join("admin.kubeconfig");
        let viewer_kubeconfig = dir.join("viewer.kubeconfig");
        fs::write(&kubeconfig, kubeconfig_yaml(&server, ADMIN_TOKEN, "admin")).map_err(|e| e.to_string())?;
        fs::write(&viewer_kubeconfig, kubeconfig_yaml(&server, VIEWER_TOKEN, "viewer")).map_err(|e| e.to_string())?;
        fs::write(
            dir.join("scheduler.yaml"),
            format!(
                "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nclientConnection:\n  kubeconfig: {}\nleaderElection:\n  leaderElect: false\n",
                kubeconfig.display()
            ),
        )
        .map_err(|e| e.to_string())?;
        let cp = ControlPlane {
            dir: dir.clone(),
            bin,
            crds,
            server,
            kubeconfig,
            viewer_kubeconfig,
            etcd_port,
            api_port,
            scheduler_port,
            apiserver: Mutex::new(None),
            others: Mutex::new(Vec::new()),
        };
        cp.spawn_watchdog()?;
        let t0 = Instant::now();
        let etcd = cp.spawn(
            "etcd",
            &[
                "--name=kgpu".into(),
                format!("--data-dir={}", dir.join("etcd").display()),
                format!("--listen-client-urls=http://127.0.0.1:{etcd_port}"),
                format!("--advertise-client-urls=http://127.0.0.1:{etcd_port}"),
                format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"),
                format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}"),
                format!("--initial-cluster=kgpu=http://127.0.0.1:{peer_port}"),
                "--unsafe-no-fsync=true".into(),
                "--log-level=warn".into(),
                "--quota-backend-bytes=4294967296".into(),
            ],
        )?;
        cp.others.lock().unwrap_or_else(|p| p.into_inner()).push(("etcd".into(), etcd));
        wait_until("etcd", Duration::from_secs(30), &dir.join("etcd.log"), || {
            http_ok(etcd_port, "/health", "\"health\":\"true\"")
        })?;
        cp.start_apiserver()?;
        let sched = cp.spawn(
            "kube-scheduler",
            &[
                format!("--config={}", dir.join("scheduler.yaml").display()),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={scheduler_port}"),
            ],
        )?;
        cp.others.lock().unwrap_or_else(|p| p.into_inner()).push(("kube-scheduler".into(), sched));
        let sched_url = format!("https://127.0.0.1:{scheduler_port}");
        wait_until("kube-scheduler", Duration::from_secs(30), &dir.join("kube-scheduler.log"), || {
            curl(&sched_url, "", &[], "/readyz").is_ok_and(|(c, _)| c == 200)
        })?;
        eprintln!(
            "control plane: ready in {:.1}s at {} (logs and kubeconfig in {})",
            t0.elapsed().as_secs_f64(),
            cp.server,
            dir.display()
        );
        Ok(cp)
    }

    fn spawn(&self, name: &str, args: &[String]) -> Result<Child, String> {
        let log = fs::File::create(self.dir.join(format!("{name}.log"))).map_err(|e| e.to_string())?;
        let err = log.try_clone().map_err(|e| e.to_string())?;
        let child = Command::new(self.bin.join(name))
            .args(args)
            .stdout(log)
            .stderr(err)
            .stdin(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot start {name}: {e}"))?;
        fs::write(self.dir.join(format!("{name}.pid")), child.id().to_string()).map_err(|e| e.to_string())?;
        Ok(child)
    }

    /// Stops every component when this test process is gone (any way).
    fn spawn_watchdog(&self) -> Result<(), String> {
        let script = format!(
            r#"while kill -0 {parent} 2>/dev/null; do sleep 1; done
for c in kube-scheduler kube-apiserver etcd; do
  p=$(cat "{dir}/$c.pid" 2>/dev/null) || continue
  kill -TERM -"$p" 2>/dev/null
  for i in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
  kill -KILL -"$p" 2>/dev/null
done"#,
            parent = std::process::id(),
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
            .map_err(|e| format!("cannot start the watchdog: {e}"))
    }

    /// Starts kube-apiserver (again, on the same port) and waits for /readyz.
    pub fn start_apiserver(&self) -> Result<(), String> {
        let d = &self.dir;
        let args = vec![
            format!("--etcd-servers=http://127.0.0.1:{}", self.etcd_port),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={}", self.api_port),
            "--advertise-address=127.0.0.1".into(),
            format!("--cert-dir={}", d.join("pki").display()),
            "--service-cluster-ip-range=10.0.0.0/24".into(),
            format!("--service-account-issuer=https://127.0.0.1:{}", self.api_port),
            format!("--service-account-key-file={}", d.join("sa.key").display()),
            format!("--service-account-signing-key-file={}", d.join("sa.key").display()),
            format!("--token-auth-file={}", d.join("tokens.csv").display()),
            "--authorization-mode=RBAC".into(),
            "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition".into(),
            "--allow-privileged=true".into(),
            "--enable-priority-and-fairness=false".into(),
            "--endpoint-reconciler-type=none".into(),
        ];
        let child = self.spawn("kube-apiserver", &args)?;
        *self.apiserver.lock().unwrap_or_else(|p| p.into_inner()) = Some(child);
        let server = self.server.clone();
        wait_until("kube-apiserver", Duration::from_secs(90), &d.join("kube-apiserver.log"), || {
            curl(&server, ADMIN_TOKEN, &[], "/readyz").is_ok_and(|(c, _)| c == 200)
                && curl(&server, ADMIN_TOKEN, &[], "/api/v1/namespaces/default").is_ok_and(|(c, _)| c == 200)
        })
    }

    /// Stops kube-apiserver (SIGTERM, then SIGKILL) and waits for it to exit.
    pub fn stop_apiserver(&self) {
        if let Some(mut child) = self.apiserver.lock().unwrap_or_else(|p| p.into_inner()).take() {
            stop(&mut child);
        }
    }

    /// Applies CRD files (server-side apply) and waits until each is Established.
    pub fn install_crds(&self, files: &[PathBuf]) -> Result<(), String> {
        let mut names = Vec::new();
        for f in files {
            let text = fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
            let doc: serde_yaml::Value = serde_yaml::from_str(&text).map_err(|e| format!("{}: {e}", f.display()))?;
            let name = doc["metadata"]["name"]
                .as_str()
                .ok_or_else(|| format!("{}: no metadata.name", f.display()))?
                .to_string();
            let (code, body) = curl(
                &self.server,
                ADMIN_TOKEN,
                &[
                    "-X",
                    "PATCH",
                    "-H",
                    "Content-Type: application/apply-patch+yaml",
                    "--data-binary",
                    &format!("@{}", f.display()),
                ],
                &format!(
                    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}?fieldManager=kgpu-tests&force=true"
                ),
            )?;
            if !(200..300).contains(&code) {
                return Err(format!("applying CRD {name}: HTTP {code}: {body}"));
            }
            names.push(name);
        }
        for name in names {
            let server = self.server.clone();
            let path = format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}");
            wait_until(
                &format!("CRD {name} Established"),
                Duration::from_secs(30),
                &self.dir.join("kube-apiserver.log"),
                || {
                    curl(&server, ADMIN_TOKEN, &[], &path).is_ok_and(|(c, body)| {
                        c == 200
                            && serde_json::from_str::<serde_json::Value>(&body).is_ok_and(|v| {
                                v["status"]["conditions"].as_array().is_some_and(|cs| {
                                    cs.iter().any(|c| c["type"] == "Established" && c["status"] == "True")
                                })
                            })
                    })
                },
            )?;
        }
        Ok(())
    }

    pub fn kueue_crds(&self) -> Vec<PathBuf> {
        crd_files(&self.crds.join("kueue"))
    }

    pub fn volcano_crds(&self) -> Vec<PathBuf> {
        crd_files(&self.crds.join("volcano"))
    }

    /// Deletes CRDs by name (to test a cluster without them).
    pub fn delete_crds(&self, files: &[PathBuf]) -> Result<(), String> {
        for f in files {
            let text = fs::read_to_string(f).map_err(|e| e.to_string())?;
            let doc: serde_yaml::Value = serde_yaml::from_str(&text).map_err(|e| e.to_string())?;
            if let Some(name) = doc["metadata"]["name"].as_str() {
                curl(
                    &self.server,
                    ADMIN_TOKEN,
                    &["-X", "DELETE"],
                    &format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"),
                )?;
            }
        }
        Ok(())
    }
}

fn crd_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .map(|r| {
            r.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "yaml")).collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn stop(child: &mut Child) {
    let pid = child.id() as i32;
    // `--` so the negative number means the process group, not a signal.
    let _ = Command::new("kill").args(["-s", "TERM", "--", &format!("-{pid}")]).status();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = Command::new("kill").args(["-s", "KILL", "--", &format!("-{pid}")]).status();
    let _ = child.wait();
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

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop_apiserver();
        let mut others = self.others.lock().unwrap_or_else(|p| p.into_inner());
        while let Some((_, mut child)) = others.pop() {
            stop(&mut child);
        }
    }
}
