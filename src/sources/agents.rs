//! The cockpit's side of the node agents: find the agent pods, read each
//! one's snapshot, and turn it into the model's `NodeDevices`.
//!
//! The default path is the API server's pod proxy
//! (`/api/v1/namespaces/NS/pods/NAME:PORT/proxy/v1/snapshot`): no network
//! path to the nodes is needed, only RBAC `get pods/proxy`. The proxy
//! authenticates the cockpit with its own Authorization header and drops
//! it, so the agent's token travels in `X-Kgpu-Token`. A cockpit inside the
//! cluster network can instead reach agents at their pod IPs (`direct`).
//! One unreachable agent marks its node, never the others.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::Api;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::agent::server::TOKEN_HEADER;
use crate::agent::wire::{AgentSnapshot, GpuReport, node_token};
use crate::model::{
    AgentStatus, CudaVersion, DeviceReading, DriverVersion, EndpointKind, Feed, Gpu, GpuHealth, MigInstance, MigMode,
    MigSlice, ModelEvent, NodeDevices, NodeUsage, Object, ObjectKey, PodKey, Snapshot, Sym, Timestamp, UsageSource,
    XidEvent,
};
use crate::reference::mig;
use crate::sources::http_get::first_line;
pub use crate::sources::http_get::{MAX_AGENT_BODY, direct_get, read_limited};
use crate::sources::poll::{self, Budget, Discovery, ReadError, Reader, Target};

pub const DEFAULT_NAMESPACE: &str = "kgpu-system";
pub const SELECTOR: &str = "app.kubernetes.io/name=kgpu-agent";
pub const DEFAULT_PORT: u16 = crate::sources::kube::convert::ENDPOINT_DEFAULT_PORT;
/// The Secret assets/agent/ creates, with the token under `token`.
pub const TOKEN_SECRET: &str = "kgpu-agent-token";
/// How long the agents' key read from its Secret is used before it is read again.
const TOKEN_FRESH: Duration = Duration::from_secs(300);

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Transport {
    /// Through the API server's pod proxy.
    #[default]
    PodProxy,
    /// To the pod IP (a cockpit inside the cluster network).
    Direct,
    /// Agents are not read.
    Off,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub namespace: String,
    pub transport: Transport,
    /// A file with the agents' token; without it, the Secret is read.
    pub token_file: Option<PathBuf>,
    /// How often one reporter is read, at most.
    pub interval: Duration,
    /// Requests a second the agents and dcgm-exporter together may send
    /// the API server through its pod proxy.
    pub budget: f64,
    /// dcgm-exporter's readings from this Prometheus instead of each exporter.
    pub prometheus: Option<crate::sources::prometheus::Choice>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            namespace: DEFAULT_NAMESPACE.into(),
            transport: Transport::default(),
            token_file: None,
            interval: Duration::from_secs(10),
            budget: poll::DEFAULT_BUDGET,
            prometheus: None,
        }
    }
}

/// The request for one agent's snapshot through the pod proxy.
pub fn proxy_request(
    namespace: &str,
    pod: &str,
    port: u16,
    token: &str,
) -> Result<http::Request<Vec<u8>>, http::Error> {
    http::Request::get(format!("/api/v1/namespaces/{namespace}/pods/{pod}:{port}/proxy/v1/snapshot"))
        .header(TOKEN_HEADER, token)
        .header(http::header::ACCEPT, "application/json")
        .body(Vec::new())
}

/// How the agents and exporters are started: the cockpit's client, its
/// snapshots (where the reporters are found), whether its pod watch sees
/// every namespace, and the budget both share.
pub struct Polling {
    pub client: Client,
    pub config: Config,
    pub snapshots: watch::Receiver<Arc<Snapshot>>,
    pub watched: bool,
    pub budget: Option<Arc<Budget>>,
}

impl Polling {
    pub fn discovery(&self, kind: EndpointKind, namespace: Option<String>, selectors: &[&str]) -> Discovery {
        Discovery::new(
            self.snapshots.clone(),
            kind,
            namespace,
            self.watched,
            self.client.clone(),
            selectors.iter().map(|s| s.to_string()).collect(),
        )
    }
}

pub fn spawn(p: &Polling, tx: mpsc::Sender<Vec<ModelEvent>>) -> Option<JoinHandle<()>> {
    if p.config.transport == Transport::Off {
        return None;
    }
    let discovery = p.discovery(EndpointKind::Agent, Some(p.config.namespace.clone()), &[SELECTOR]);
    let reader = Agents { client: p.client.clone(), config: p.config.clone(), key: None };
    Some(tokio::spawn(poll::run(Feed::Agents, discovery, reader, p.budget.clone(), p.config.interval, tx)))
}

/// The agents' reader: their key, read once in a while, gives each node its token.
struct Agents {
    client: Client,
    config: Config,
    key: Option<(Instant, String)>,
}

impl Reader for Agents {
    fn prepare(&mut self) -> BoxFuture<'_, Result<(), ReadError>> {
        Box::pin(async move {
            if self.key.as_ref().is_some_and(|(at, _)| at.elapsed() < TOKEN_FRESH) {
                return Ok(());
            }
            self.key = None;
            let key = token(&self.client, &self.config).await.map_err(ReadError::Feed)?;
            self.key = Some((Instant::now(), key));
            Ok(())
        })
    }

    fn read<'a>(&'a self, target: &'a Target) -> BoxFuture<'a, Result<Vec<Object>, ReadError>> {
        Box::pin(async move {
            let key = self.key.as_ref().map_or("", |(_, k)| k.as_str());
            // Each agent gets its own node's token, never the key itself.
            let snap = fetch(&self.client, &self.config, target, &node_token(key, target.node.as_str())).await?;
            let now = crate::clock::wall_clock();
            Ok(if snap.node == target.node.as_str() {
                vec![Object::Devices(to_model(&snap, now)), Object::Usage(usage_of(&snap, now))]
            } else {
                vec![Object::Devices(of_node(target.node.as_str(), &target.name, &snap, now))]
            })
        })
    }

    fn failed(&self, target: &Target, why: &str, _now: Timestamp) -> Vec<Object> {
        vec![Object::Devices(unreachable(target.node.as_str(), why))]
    }

    fn keys(&self, node: Sym) -> Vec<ObjectKey> {
        vec![ObjectKey::Devices(node.clone()), ObjectKey::Usage(UsageSource::Agent, node)]
    }
}

/// What an agent pod reports, filed under the node the API server says it
/// runs on. An agent that claims another node is not believed: one
/// compromised node must not rewrite what kgpu shows about the others.
pub fn of_node(node: &str, pod: &str, snap: &AgentSnapshot, now: i64) -> NodeDevices {
    if snap.node != node {
        let claimed: String = snap.node.chars().take(64).collect();
        return unreachable(
            node,
            &format!("agent {pod} runs on {node} but reports node '{claimed}'; its data is not used"),
        );
    }
    to_model(snap, now)
}

fn unreachable(node: &str, why: &str) -> NodeDevices {
    NodeDevices {
        node: Sym::new(node),
        status: AgentStatus::Unavailable(why.into()),
        driver: None,
        cuda_driver: None,
        gpus: Box::new([]),
        observed: 0,
    }
}

async fn token(client: &Client, config: &Config) -> Result<String, String> {
    if let Some(path) = &config.token_file {
        return crate::inputs::read_text(path, crate::inputs::TOKEN_MAX, "the agent token")
            .map(|t| t.trim().to_string());
    }
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &config.namespace);
    let secret = secrets.get(TOKEN_SECRET).await.map_err(|e| {
        format!(
            "no agent token: reading Secret {}/{TOKEN_SECRET} failed ({}); pass --agent-token-file",
            config.namespace,
            crate::sources::kube::client::short_error(&e)
        )
    })?;
    let bytes = secret
        .data
        .and_then(|d| d.get("token").cloned())
        .ok_or_else(|| format!("Secret {}/{TOKEN_SECRET} has no 'token' key", config.namespace))?;
    String::from_utf8(bytes.0)
        .map(|t| t.trim().to_string())
        .map_err(|_| format!("Secret {}/{TOKEN_SECRET}: the token is not text", config.namespace))
}

async fn fetch(client: &Client, config: &Config, agent: &Target, token: &str) -> Result<AgentSnapshot, ReadError> {
    let fail = |why: String| ReadError::Target(why);
    if !agent.running {
        return Err(fail(format!("agent pod {} is not running", agent.name)));
    }
    let read = async {
        let body = match config.transport {
            Transport::Direct => {
                let ip = agent.ip.ok_or_else(|| fail(format!("agent pod {} has no IP yet", agent.name)))?;
                direct_get(&ip.to_string(), agent.port, "/v1/snapshot", Some(token)).await.map_err(fail)?
            }
            _ => {
                let req = proxy_request(&config.namespace, &agent.name, agent.port, token)
                    .map_err(|e| fail(e.to_string()))?;
                let response = client.send(req.map(kube::client::Body::from)).await.map_err(|e| {
                    fail(format!("agent {}: {}", agent.name, crate::sources::kube::client::short_error(&e)))
                })?;
                let status = response.status();
                let text = read_limited(response.into_body(), &agent.name).await.map_err(fail)?;
                match status.as_u16() {
                    403 => {
                        return Err(ReadError::Forbidden(format!(
                            "forbidden: the cockpit needs 'get pods/proxy' in {}",
                            config.namespace
                        )));
                    }
                    _ if !status.is_success() => {
                        return Err(fail(format!("agent {} answered {status}: {}", agent.name, first_line(&text))));
                    }
                    _ => text,
                }
            }
        };
        serde_json::from_str::<AgentSnapshot>(&body)
            .map_err(|e| fail(format!("agent {} sent no snapshot: {e}", agent.name)))
    };
    tokio::time::timeout(Duration::from_secs(5), read)
        .await
        .map_err(|_| fail(format!("agent {} did not answer within 5s", agent.name)))?
}

/// An agent's snapshot in the model's terms.
pub fn to_model(s: &AgentSnapshot, observed: i64) -> NodeDevices {
    let status = if s.nvml.available {
        AgentStatus::Reporting
    } else {
        AgentStatus::Unavailable(s.nvml.reason.clone().unwrap_or_else(|| "NVML unavailable".into()).into())
    };
    NodeDevices {
        node: Sym::new(&s.node),
        status,
        driver: s.driver_version.as_deref().and_then(DriverVersion::parse),
        cuda_driver: s.cuda_driver_version.as_deref().and_then(CudaVersion::parse),
        gpus: s.gpus.iter().map(gpu).collect(),
        observed: if s.collected_at > 0 { s.collected_at } else { observed },
    }
}

/// What an agent says about how busy its GPUs are and who holds them. A MIG
/// GPU is read per instance: NVML gives no utilization for one, so only
/// its holders and not how busy it is are known from an agent.
pub fn usage_of(s: &AgentSnapshot, observed: i64) -> NodeUsage {
    let holders = |device: &dyn Fn(&str) -> bool, g: &GpuReport| -> Box<[PodKey]> {
        let mut pods: Vec<PodKey> =
            g.pods.iter().filter(|p| device(&p.device)).map(|p| PodKey::new(&p.namespace, &p.name)).collect();
        pods.sort();
        pods.dedup();
        pods.into_boxed_slice()
    };
    let mut devices = Vec::new();
    for g in &s.gpus {
        let gpu = Sym::new(&g.uuid);
        match g.mig.as_ref().filter(|m| m.enabled) {
            Some(mig) => {
                for (n, i) in mig.instances.iter().enumerate() {
                    let uuid = i.uuid.as_deref();
                    devices.push(DeviceReading {
                        gpu: gpu.clone(),
                        index: g.index,
                        slice: Some(MigSlice {
                            profile: Sym::new(&i.profile),
                            id: i.gpu_instance_id.unwrap_or(u32::try_from(n).unwrap_or(u32::MAX)),
                        }),
                        holders: holders(&|d| Some(d) == uuid, g),
                        busy_pct: None,
                        memory_used_mib: None,
                        idle_since: None,
                    });
                }
            }
            None => devices.push(DeviceReading {
                gpu,
                index: g.index,
                slice: None,
                holders: holders(&|_| true, g),
                busy_pct: g.utilization_pct.map(|u| u.min(100) as f32),
                memory_used_mib: Some(g.memory_used_mib),
                idle_since: g.idle_since,
            }),
        }
    }
    NodeUsage {
        problem: None,
        node: Sym::new(&s.node),
        source: UsageSource::Agent,
        at: if s.collected_at > 0 { s.collected_at } else { observed },
        devices: devices.into_boxed_slice(),
    }
}

fn gpu(g: &GpuReport) -> Gpu {
    let mode = |on: bool| if on { MigMode::Enabled } else { MigMode::Disabled };
    let (mig_mode, mig_pending) = match &g.mig {
        Some(m) => (mode(m.enabled), (m.pending_enabled != m.enabled).then(|| mode(m.pending_enabled))),
        None => (MigMode::Disabled, None),
    };
    Gpu {
        index: g.index,
        uuid: Sym::new(&g.uuid),
        // GFD's spelling, so that it matches the node's product label.
        product: Sym::new(&g.name.replace(' ', "-")),
        memory_mib: g.memory_total_mib,
        mig_mode,
        mig_pending,
        instances: instances(g).into_boxed_slice(),
        health: if g.health == "healthy" { GpuHealth::Healthy } else { GpuHealth::Unhealthy(g.health.clone().into()) },
        xids: g.xids.iter().map(|x| XidEvent { code: x.code, at: x.at }).collect(),
        utilization: g.utilization_pct.map(|u| u8::try_from(u.min(100)).unwrap_or(100)),
    }
}

/// Memory slices of a MIG-capable GPU (A100, H100, H200, B200 alike).
const MEMORY_SLICES: u8 = 8;

/// MIG instances at their placements. An agent whose driver would not
/// give placements gets a valid layout from the GPU's geometry instead.
fn instances(g: &GpuReport) -> Vec<MigInstance> {
    let Some(m) = g.mig.as_ref().filter(|m| m.enabled) else { return Vec::new() };
    let geometry = mig::geometry_for_product(&g.name);
    let mut out: Vec<MigInstance> = Vec::new();
    let mut unplaced = Vec::new();
    // A GPU has 8 memory slices and at most 7 instances: an agent that
    // reports more, or a placement of no slices, past the end or over
    // another, is not believed (the placement is worked out instead).
    for i in m.instances.iter().take(usize::from(MEMORY_SLICES)) {
        let valid = i.placement.and_then(|p| {
            let (start, size) = (u8::try_from(p.start).ok()?, u8::try_from(p.size).ok()?);
            let fits = size > 0 && start.checked_add(size).is_some_and(|end| end <= MEMORY_SLICES);
            let overlaps = out.iter().any(|o| start < o.start + o.size && o.start < start + size);
            (fits && !overlaps).then_some((start, size))
        });
        match valid {
            Some((start, size)) => out.push(MigInstance {
                profile: Sym::new(&i.profile),
                start,
                size,
                uuid: i.uuid.as_deref().map(Sym::new),
            }),
            None => unplaced.push(i),
        }
    }
    if let (Some(geo), false) = (geometry, unplaced.is_empty()) {
        let placed: Vec<mig::Placed> = out
            .iter()
            .map(|i| mig::Placed {
                start: i.start,
                size: i.size,
                compute: geo.profile(i.profile.as_str()).map_or(i.size, |p| p.compute),
            })
            .collect();
        let wanted: Vec<&mig::Profile> = unplaced.iter().filter_map(|i| geo.profile(&i.profile)).collect();
        if wanted.len() == unplaced.len()
            && let Some(starts) = geo.place(&placed, &wanted)
        {
            for ((i, p), start) in unplaced.iter().zip(&wanted).zip(starts) {
                out.push(MigInstance {
                    profile: Sym::new(&i.profile),
                    start,
                    size: p.size,
                    uuid: i.uuid.as_deref().map(Sym::new),
                });
            }
        }
    }
    out.sort_by_key(|i| i.start);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::wire::{Mig, MigInstanceReport, Placement};

    fn with_placements(placements: &[Option<(u32, u32)>]) -> GpuReport {
        GpuReport {
            name: "NVIDIA H100 80GB HBM3".into(),
            mig: Some(Mig {
                enabled: true,
                pending_enabled: true,
                instances: placements
                    .iter()
                    .map(|p| MigInstanceReport {
                        profile: "1g.10gb".into(),
                        placement: p.map(|(start, size)| Placement { start, size }),
                        ..Default::default()
                    })
                    .collect(),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_placement_an_agent_cannot_have_is_not_believed() {
        let at = |g: &GpuReport| instances(g).iter().map(|i| (i.start, i.size)).collect::<Vec<_>>();
        // Size 0, past the 8th slice, a u32 that wraps u8, and one over another: each is placed by the geometry instead.
        for bad in [(0, 0), (7, 2), (300, 1), (u32::MAX, u32::MAX)] {
            let placed = at(&with_placements(&[Some(bad)]));
            assert_eq!(placed.len(), 1, "{bad:?}");
            assert!(placed.iter().all(|&(s, n)| n > 0 && s + n <= 8), "{bad:?} → {placed:?}");
        }
        let placed = at(&with_placements(&[Some((0, 1)), Some((0, 1))]));
        assert_eq!(placed.len(), 2);
        assert_ne!(placed[0], placed[1], "two instances never share a slice: {placed:?}");
        // A thousand instances on one GPU: at most its 8 slices' worth are kept.
        let many = with_placements(&vec![None; 1000]);
        assert!(instances(&many).len() <= 8);
    }

    #[test]
    fn the_proxy_request_names_the_pod_port_and_carries_the_token_in_its_own_header() {
        let req = proxy_request("kgpu-system", "kgpu-agent-x7k2p", 9400, "s3cr3t-token-value").unwrap();
        assert_eq!(req.method(), http::Method::GET);
        assert_eq!(req.uri().path(), "/api/v1/namespaces/kgpu-system/pods/kgpu-agent-x7k2p:9400/proxy/v1/snapshot");
        assert_eq!(req.headers()[TOKEN_HEADER], "s3cr3t-token-value");
        // The API server strips Authorization after authenticating the
        // cockpit: the agent's token must not depend on it.
        assert!(req.headers().get(http::header::AUTHORIZATION).is_none());
    }
}
