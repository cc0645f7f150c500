//! Connecting to a cluster: kubeconfig (explicit, `$KUBECONFIG`, or
//! `~/.kube/config`) with an optional context, or the in-cluster config in a
//! pod. Connection failures are quick (3 s connect timeout) and say what to do.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use thiserror::Error;

/// Which cluster, as the command line said.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Target {
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
}

/// What we know about the cluster we talk to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterInfo {
    /// The kube context name (`in-cluster` in a pod).
    pub context: String,
    pub server: String,
    /// The kubeconfig user (for the audit log).
    pub user: String,
}

impl ClusterInfo {
    /// Contexts that look like production get a visible accent.
    pub fn looks_like_production(&self) -> bool {
        let c = self.context.to_ascii_lowercase();
        c.contains("prod") || c.contains("prd") || c.contains("live")
    }
}

#[derive(Debug, Error)]
pub enum ClientError {
    #[error("cannot read kubeconfig '{path}': {message}")]
    Kubeconfig { path: String, message: String },
    #[error("no kubeconfig found ({looked}) and not running in a pod; pass --kubeconfig, or try `kgpu demo`")]
    NoConfig { looked: String },
    #[error("context '{context}' is not in the kubeconfig; contexts there: {known}")]
    UnknownContext { context: String, known: String },
    #[error("kubeconfig problem: {0}")]
    Config(String),
    #[error(
        "cannot reach the cluster at {server}: {message}. Is the cluster up and the context right? To explore without a cluster, run `kgpu demo`"
    )]
    Unreachable { server: String, message: String },
}

/// The connect timeout: an unreachable cluster fails within seconds.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// How long a connection may stay silent before it counts as stalled (an
/// API server paused, a proxy holding a dead connection). Every read waits
/// at most this long; the watches ask the server to end each watch sooner
/// ([`Liveness::watch_seconds`]), so a healthy watch on a quiet cluster
/// always has something to read before then.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Liveness {
    pub stall_after: Duration,
}

impl Default for Liveness {
    fn default() -> Self {
        Liveness { stall_after: Duration::from_secs(30) }
    }
}

impl Liveness {
    /// How long the server keeps one watch open (its `timeoutSeconds`): ten
    /// stall timeouts (5 minutes by default). Watches are long because the
    /// probe, not each watch's silence, tells when the server stops
    /// answering: each renewal is a request to the API server.
    pub fn watch_seconds(self) -> u32 {
        u32::try_from((self.stall_after * 10).as_secs()).unwrap_or(u32::MAX).max(1)
    }

    /// How often the probe asks the API server whether it answers (a third
    /// of the stall timeout: a silent server is noticed within it).
    pub fn probe_every(self) -> Duration {
        (self.stall_after / 3).max(Duration::from_millis(200))
    }
}

/// Two clients on one configuration: `requests` (lists, gets, the probe)
/// gives up on a read silent for the stall timeout; `watches` has no read
/// timeout (a quiet cluster's watch says nothing for minutes) — the server
/// ends each watch at its `timeoutSeconds`, and the probe says when the
/// server stops answering.
#[derive(Clone)]
pub struct Clients {
    pub requests: Client,
    pub watches: Client,
}

fn tune(mut cfg: Config, liveness: Liveness) -> Config {
    cfg.connect_timeout = Some(CONNECT_TIMEOUT);
    cfg.read_timeout = Some(liveness.stall_after);
    // Count from the request, not from when a pooled connection went idle.
    cfg.reset_reader_on_write = true;
    // Proxies would need extra features.
    cfg.proxy_url = None;
    cfg
}

fn kubeconfig_paths(target: &Target) -> Vec<PathBuf> {
    if let Some(p) = &target.kubeconfig {
        return vec![p.clone()];
    }
    if let Some(v) = std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
        return std::env::split_paths(&v).collect();
    }
    std::env::var_os("HOME").map(|h| vec![PathBuf::from(h).join(".kube/config")]).unwrap_or_default()
}

/// Where kgpu looked for a kubeconfig and found none, in words: the files
/// `$KUBECONFIG` names (a typo there is the usual cause), or the default.
fn looked_at(candidates: &[PathBuf]) -> String {
    let names = || candidates.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
    // Why each is not there: missing, a link loop, a link to nothing, denied.
    let why = |p: &PathBuf| match std::fs::metadata(p) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && std::fs::symlink_metadata(p).is_ok() => {
            let to = std::fs::read_link(p).map(|t| t.display().to_string()).unwrap_or_default();
            format!("{} (a link to nothing: {to})", p.display())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => format!("{} (no such file)", p.display()),
        Err(e) => {
            format!("{} ({})", p.display(), e.to_string().split(" (os error").next().unwrap_or("").to_lowercase())
        }
        Ok(_) => p.display().to_string(),
    };
    match std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
        Some(_) => format!("$KUBECONFIG names {}", candidates.iter().map(why).collect::<Vec<_>>().join(", ")),
        None if candidates.is_empty() => "$KUBECONFIG unset, $HOME unset".into(),
        None => format!("$KUBECONFIG unset, no {}", names()),
    }
}

/// The context names of the kubeconfig(s) `target` reads (none in a pod,
/// or when they cannot be read: the palette then completes nothing).
pub fn contexts(target: &Target) -> Vec<String> {
    let mut names: Vec<String> = kubeconfig_paths(target)
        .iter()
        .filter(|p| crate::inputs::check(p, crate::inputs::KUBECONFIG_MAX, "the kubeconfig").is_ok())
        .filter_map(|p| Kubeconfig::read_from(p).ok())
        .flat_map(|kc| kc.contexts.into_iter().map(|c| c.name))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Builds the client config and what we know about the target.
pub async fn config(target: &Target, liveness: Liveness) -> Result<(Config, ClusterInfo), ClientError> {
    let candidates = kubeconfig_paths(target);
    let paths: Vec<PathBuf> =
        candidates.iter().filter(|p| target.kubeconfig.is_some() || p.exists()).cloned().collect();
    if paths.is_empty() {
        let cfg = Config::incluster().map_err(|_| ClientError::NoConfig { looked: looked_at(&candidates) })?;
        let info = ClusterInfo {
            context: "in-cluster".into(),
            server: cfg.cluster_url.to_string(),
            user: "serviceaccount".into(),
        };
        return Ok((tune(cfg, liveness), info));
    }
    let mut merged: Option<Kubeconfig> = None;
    for p in &paths {
        // A bounded regular file: not /dev/zero, a FIFO or 50 GB.
        crate::inputs::check(p, crate::inputs::KUBECONFIG_MAX, "the kubeconfig")
            .map_err(|message| ClientError::Kubeconfig { path: p.display().to_string(), message })?;
        let kc = Kubeconfig::read_from(p).map_err(|e| ClientError::Kubeconfig {
            path: p.display().to_string(),
            message: without_excerpt(&e.to_string()),
        })?;
        merged = Some(match merged {
            None => kc,
            Some(m) => m.merge(kc).map_err(|e| ClientError::Config(e.to_string()))?,
        });
    }
    let kc = merged.ok_or_else(|| ClientError::NoConfig { looked: looked_at(&candidates) })?;
    let context = match &target.context {
        Some(c) => {
            if !kc.contexts.iter().any(|x| &x.name == c) {
                return Err(ClientError::UnknownContext {
                    context: c.clone(),
                    known: kc.contexts.iter().map(|x| x.name.clone()).collect::<Vec<_>>().join(", "),
                });
            }
            c.clone()
        }
        None => kc
            .current_context
            .clone()
            .ok_or_else(|| ClientError::Config("no current-context; pass --context".into()))?,
    };
    let user = kc
        .contexts
        .iter()
        .find(|x| x.name == context)
        .and_then(|x| x.context.as_ref())
        .and_then(|c| c.user.clone())
        .unwrap_or_default();
    referenced_files_bounded(&kc, &context)?;
    let opts = KubeConfigOptions { context: Some(context.clone()), cluster: None, user: None };
    let cfg = Config::from_custom_kubeconfig(kc, &opts).await.map_err(|e| ClientError::Config(e.to_string()))?;
    let info = ClusterInfo { context, server: cfg.cluster_url.to_string(), user };
    Ok((tune(cfg, liveness), info))
}

/// A kubeconfig parse error's first line (`… line 5 column 114: misplaced
/// bracket`): the YAML parser goes on with an excerpt of the file, which
/// on a user's line holds its token or key.
fn without_excerpt(message: &str) -> String {
    message.lines().next().unwrap_or_default().to_string()
}

/// The files `context` names (its user's token file, client certificate
/// and key, its cluster's CA) are bounded regular files like the kubeconfig
/// itself: kube-rs reads them whole, and a `tokenFile: /dev/zero` would
/// fill the memory before any error.
fn referenced_files_bounded(kc: &Kubeconfig, context: &str) -> Result<(), ClientError> {
    let named = kc.contexts.iter().find(|c| c.name == context).and_then(|c| c.context.as_ref());
    let user = named
        .and_then(|c| c.user.as_deref())
        .and_then(|u| kc.auth_infos.iter().find(|a| a.name == u))
        .and_then(|a| a.auth_info.as_ref());
    let cluster = named
        .map(|c| c.cluster.as_str())
        .and_then(|name| kc.clusters.iter().find(|c| c.name == name))
        .and_then(|c| c.cluster.as_ref());
    let files = [
        (user.and_then(|u| u.token_file.as_deref()), crate::inputs::TOKEN_MAX, "its token file"),
        (user.and_then(|u| u.client_certificate.as_deref()), crate::inputs::KUBECONFIG_MAX, "its client certificate"),
        (user.and_then(|u| u.client_key.as_deref()), crate::inputs::KUBECONFIG_MAX, "its client key"),
        (cluster.and_then(|c| c.certificate_authority.as_deref()), crate::inputs::KUBECONFIG_MAX, "its cluster's CA"),
    ];
    for (path, limit, what) in files {
        if let Some(path) = path {
            crate::inputs::check(Path::new(path), limit, what)
                .map_err(|message| ClientError::Config(format!("context '{context}': {message}")))?;
        }
    }
    Ok(())
}

/// Connects and checks the API server answers (within a few seconds).
pub async fn connect(target: &Target) -> Result<(Client, ClusterInfo), ClientError> {
    connect_with(target, Liveness::default()).await
}

/// [`connect`] with another stall timeout (the tests shorten it).
pub async fn connect_with(target: &Target, liveness: Liveness) -> Result<(Client, ClusterInfo), ClientError> {
    let (cfg, info) = config(target, liveness).await?;
    let client = Client::try_from(cfg).map_err(|e| ClientError::Config(e.to_string()))?;
    answers(&client, &info).await?;
    Ok((client, info))
}

/// The API server answers within a few seconds.
async fn answers(client: &Client, info: &ClusterInfo) -> Result<(), ClientError> {
    match tokio::time::timeout(Duration::from_secs(6), client.apiserver_version()).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(ClientError::Unreachable { server: info.server.clone(), message: short_error(&e) }),
        Err(_) => Err(ClientError::Unreachable { server: info.server.clone(), message: "no answer within 6s".into() }),
    }
}

/// [`connect_with`], and a second client for long watches on the same
/// configuration (one kubeconfig read, one set of credentials).
pub async fn connect_clients(target: &Target, liveness: Liveness) -> Result<(Clients, ClusterInfo), ClientError> {
    let (mut cfg, info) = config(target, liveness).await?;
    // kube-rs would retry a 429, 503 or 504 fifteen times, doubling from
    // 5 ms: a list, a stream or a watch start silent for four minutes while
    // the feed looks merely slow. The feeds back off themselves (1 s, up to
    // 30 s) and show the error meanwhile.
    cfg.default_retry = false;
    let mut watch_cfg = cfg.clone();
    watch_cfg.read_timeout = None;
    let requests = Client::try_from(cfg).map_err(|e| ClientError::Config(e.to_string()))?;
    let watches = Client::try_from(watch_cfg).map_err(|e| ClientError::Config(e.to_string()))?;
    answers(&requests, &info).await?;
    Ok((Clients { requests, watches }, info))
}

/// A client for actions: no automatic retries (a PDB's 429 must reach us at
/// once so the drain can show it, back off and retry visibly).
pub async fn action_client(target: &Target) -> Result<Client, ClientError> {
    let (mut cfg, _) = config(target, Liveness::default()).await?;
    cfg.default_retry = false;
    Client::try_from(cfg).map_err(|e| ClientError::Config(e.to_string()))
}

/// The most useful line of a kube error.
pub fn short_error(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("HTTP {}: {}", s.code, s.message.lines().next().unwrap_or("")),
        other => {
            let mut text = other.to_string();
            let mut source = std::error::Error::source(other);
            while let Some(s) = source {
                text = s.to_string();
                source = s.source();
            }
            text
        }
    }
}
