//! dcgm-exporter's readings from a Prometheus that already scrapes it
//! (kube-prometheus-stack, the GPU Operator's ServiceMonitor): one instant
//! query for the whole fleet each round (`--prometheus`), instead of one
//! request per exporter through the API server's pod proxy.
//!
//! The series are put on nodes by the labels a scrape config gives them:
//! `node` (or `kubernetes_node`, `nodename`) when relabelled in; else the
//! scrape target's address, matched to an exporter pod kgpu watches; else
//! the exporter's `Hostname` when it names a node (the GPU Operator sets it
//! to the node's name) or an exporter pod. Series left over are counted.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use serde::Deserialize;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::model::time::age;
use crate::model::{
    Coverage, EndpointKind, Feed, FeedProblem, FeedState, ModelEvent, Object, ObjectKey, PodKey, Snapshot, Sym,
    UsageSource,
};
use crate::sources::dcgm_series::{Sample, usage_of};
use crate::sources::http_get::{get_limited, read_limited_to};
use crate::sources::kube::client::short_error;

/// The three series kgpu reads, in one query.
pub const QUERY: &str = r#"{__name__=~"DCGM_FI_DEV_GPU_UTIL|DCGM_FI_PROF_GR_ENGINE_ACTIVE|DCGM_FI_DEV_FB_USED"}"#;
/// A fleet's answer: three series a GPU (more on MIG and shared GPUs) at a
/// few hundred bytes each; 64 MiB is some 60,000 GPUs.
const MAX_BODY: usize = 64 << 20;
const ANSWER_WITHIN: Duration = Duration::from_secs(15);
/// A failing Prometheus is asked again after this, doubling to the most.
const RETRY_FIRST: Duration = Duration::from_secs(10);
const RETRY_MAX: Duration = Duration::from_secs(300);

/// What `--prometheus` asks for: a Prometheus found in the cluster
/// (`auto`), or this one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choice {
    Find,
    At(Endpoint),
}

impl Choice {
    /// `auto`, or what [`Endpoint::parse`] takes.
    pub fn parse(text: &str) -> Result<Choice, String> {
        if text == "auto" { Ok(Choice::Find) } else { Endpoint::parse(text).map(Choice::At) }
    }
}

/// The Services a Prometheus is found by, in order: the one the Prometheus
/// operator makes for every Prometheus (kube-prometheus-stack, kube-prometheus),
/// then the prometheus-community chart's server.
pub const SERVICE_SELECTORS: [&str; 2] =
    ["operated-prometheus=true", "app.kubernetes.io/name=prometheus,app.kubernetes.io/component=server"];

/// The first Service that [`SERVICE_SELECTORS`] find, with its web port.
pub async fn find(client: &Client) -> Result<Option<Endpoint>, String> {
    use k8s_openapi::api::core::v1::Service;
    let services: kube::Api<Service> = kube::Api::all(client.clone());
    for selector in SERVICE_SELECTORS {
        let list = services
            .list(&kube::api::ListParams::default().labels(selector).limit(50))
            .await
            .map_err(|e| format!("listing Services labelled {selector}: {}", short_error(&e)))?;
        for svc in list.items {
            let (Some(namespace), Some(name)) = (svc.metadata.namespace, svc.metadata.name) else { continue };
            let ports = svc.spec.and_then(|s| s.ports).unwrap_or_default();
            let web = ports
                .iter()
                .find(|p| matches!(p.name.as_deref(), Some("web" | "http-web" | "http")))
                .or_else(|| ports.first());
            if let Some(p) = web {
                let port = p.name.clone().filter(|n| !n.is_empty()).unwrap_or_else(|| p.port.to_string());
                return Ok(Some(Endpoint::Service { namespace, name, port }));
            }
        }
    }
    Ok(None)
}

/// Where Prometheus answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `http://host:port/prefix` (a port-forward, or from inside the cluster).
    Url { host: String, port: u16, prefix: String },
    /// A Service, through the API server's service proxy, with the
    /// cockpit's own credentials (`get services/proxy`).
    Service { namespace: String, name: String, port: String },
}

impl Endpoint {
    /// `http://host:port[/prefix]` or `NAMESPACE/SERVICE:PORT`.
    pub fn parse(text: &str) -> Result<Endpoint, String> {
        let usage = || {
            format!(
                "'{text}' is not a Prometheus to ask: give http://HOST:PORT[/PATH] (e.g. a port-forward: \
                 http://localhost:9090) or NAMESPACE/SERVICE:PORT (through the API server's service proxy, \
                 e.g. monitoring/prometheus-operated:9090) or auto"
            )
        };
        if let Some(rest) = text.strip_prefix("http://") {
            let (authority, path) = rest.split_once('/').map_or((rest, ""), |(a, p)| (a, p));
            let (host, port) = match authority.rsplit_once(':') {
                Some((h, p)) => (h, p.parse::<u16>().map_err(|_| usage())?),
                None => (authority, 80),
            };
            let host = host.trim_start_matches('[').trim_end_matches(']');
            if host.is_empty() || host.contains(['@', '?', '#', ' ']) {
                return Err(usage());
            }
            let prefix = path.trim_end_matches('/');
            let prefix = if prefix.is_empty() { String::new() } else { format!("/{prefix}") };
            return Ok(Endpoint::Url { host: host.to_string(), port, prefix });
        }
        if text.starts_with("https://") {
            return Err(format!(
                "'{text}': kgpu asks Prometheus over plain HTTP only; use a port-forward (http://localhost:9090) \
                 or the service form NAMESPACE/SERVICE:PORT, which goes through the API server's TLS"
            ));
        }
        let (namespace, service) = text.split_once('/').ok_or_else(usage)?;
        let (name, port) = service.split_once(':').ok_or_else(usage)?;
        let dns_label = |s: &str| {
            !s.is_empty()
                && s.len() <= 63
                && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !s.starts_with('-')
                && !s.ends_with('-')
        };
        if !dns_label(namespace) || !dns_label(name) || !(dns_label(port) || port.parse::<u16>().is_ok()) {
            return Err(usage());
        }
        Ok(Endpoint::Service { namespace: namespace.into(), name: name.into(), port: port.into() })
    }

    /// How the feed names it.
    pub fn describe(&self) -> String {
        match self {
            Endpoint::Url { host, port, prefix } => format!("Prometheus at http://{host}:{port}{prefix}"),
            Endpoint::Service { namespace, name, port } => {
                format!("Prometheus service {namespace}/{name}:{port} (through the API server)")
            }
        }
    }

    fn path(&self) -> String {
        let query = format!("/api/v1/query?query={}", encode(QUERY));
        match self {
            Endpoint::Url { prefix, .. } => format!("{prefix}{query}"),
            Endpoint::Service { namespace, name, port } => {
                format!("/api/v1/namespaces/{namespace}/services/{name}:{port}/proxy{query}")
            }
        }
    }
}

/// Percent-encodes a query parameter (RFC 3986 unreserved characters pass).
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Prometheus's answer to an instant query.
#[derive(Deserialize)]
struct Answer {
    status: String,
    #[serde(default)]
    data: Option<Data>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
struct Data {
    #[serde(rename = "resultType")]
    result_type: String,
    #[serde(default)]
    result: Vec<Series>,
}

#[derive(Deserialize)]
struct Series {
    metric: HashMap<String, String>,
    /// `[unix seconds, "value"]`.
    value: (f64, String),
}

/// What one answer says, node by node.
#[derive(Debug, PartialEq)]
pub struct Fleet {
    pub usage: Vec<crate::model::NodeUsage>,
    /// Series no node could be found for.
    pub unplaced: usize,
}

/// The exporter pods and nodes kgpu knows, to place series on nodes.
#[derive(Default)]
pub struct Places {
    nodes: BTreeSet<Sym>,
    /// Exporter pod IP → node.
    by_ip: HashMap<String, Sym>,
    /// Exporter pod name → node.
    by_pod: HashMap<String, Sym>,
    exporters: BTreeSet<PodKey>,
}

impl Places {
    pub fn of(snap: &Snapshot) -> Places {
        let mut places = Places { nodes: snap.nodes.keys().cloned().collect(), ..Places::default() };
        for pod in snap.endpoints.values() {
            let (Some(e), Some(node)) = (pod.endpoint.as_ref(), pod.node.clone()) else { continue };
            if e.kind != EndpointKind::DcgmExporter {
                continue;
            }
            if let Some(ip) = e.ip {
                places.by_ip.insert(ip.to_string(), node.clone());
            }
            places.by_pod.insert(pod.name.to_string(), node);
            places.exporters.insert(pod.key());
        }
        places
    }

    fn node_of(&self, labels: &HashMap<String, String>) -> Option<Sym> {
        let get = |k: &str| labels.get(k).map(String::as_str).filter(|v| !v.is_empty());
        // A name never interned is no node's (and is not interned here).
        let known = |name: &str| Sym::get(name).filter(|n| self.nodes.contains(n));
        if let Some(n) = ["node", "kubernetes_node", "nodename"].iter().find_map(|k| get(k)) {
            return known(n);
        }
        if let Some(host) = get("instance").map(|i| i.rsplit_once(':').map_or(i, |(h, _)| h)) {
            let host = host.trim_start_matches('[').trim_end_matches(']');
            if let Some(n) = self.by_ip.get(host) {
                return Some(n.clone());
            }
        }
        let hostname = get("Hostname")?;
        known(hostname).or_else(|| self.by_pod.get(hostname).cloned())
    }
}

/// An instant query's JSON as each node's usage.
pub fn parse(text: &str, places: &Places, at: i64) -> Result<Fleet, String> {
    let answer: Answer =
        serde_json::from_str(text).map_err(|e| format!("not a Prometheus query answer ({e}): {}", first(text)))?;
    if answer.status != "success" {
        return Err(format!("the query failed: {}", answer.error.as_deref().unwrap_or("no reason given")));
    }
    let data = answer.data.ok_or("the answer has no data")?;
    if data.result_type != "vector" {
        return Err(format!("the answer is a {}, not the instant vector asked for", data.result_type));
    }
    let mut by_node: BTreeMap<Sym, Vec<&Series>> = BTreeMap::new();
    let mut unplaced = 0usize;
    for series in &data.result {
        match places.node_of(&series.metric) {
            Some(node) => by_node.entry(node).or_default().push(series),
            None => unplaced += 1,
        }
    }
    let usage = by_node
        .into_iter()
        .map(|(node, series)| {
            let samples = series.iter().filter_map(|s| {
                let metric = s.metric.get("__name__")?;
                let value = s.value.1.parse::<f64>().ok()?;
                let labels = s.metric.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                Some(Sample { metric, labels, value })
            });
            usage_of(node.as_str(), samples, at, |k| places.exporters.contains(k)).usage
        })
        .collect();
    Ok(Fleet { usage, unplaced })
}

/// The API server's own words in a Status body, else the body's first line.
fn status_message(text: &str) -> String {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| v["message"].as_str().map(|m| m.chars().take(200).collect()))
        .unwrap_or_else(|| first(text))
}

fn first(text: &str) -> String {
    text.lines().next().unwrap_or("").chars().take(200).collect()
}

/// Asks Prometheus once.
async fn ask(client: &Client, endpoint: &Endpoint) -> Result<String, FeedProblem> {
    let error = |why: String| FeedProblem::Error(format!("{}: {why}", endpoint.describe()));
    let read = async {
        match endpoint {
            Endpoint::Url { host, port, .. } => {
                get_limited(host, *port, &endpoint.path(), MAX_BODY).await.map_err(error)
            }
            Endpoint::Service { namespace, .. } => {
                let req = http::Request::get(endpoint.path())
                    .header(http::header::ACCEPT, "application/json")
                    .body(Vec::new())
                    .map_err(|e| error(e.to_string()))?;
                let response =
                    client.send(req.map(kube::client::Body::from)).await.map_err(|e| error(short_error(&e)))?;
                let status = response.status();
                let text = read_limited_to(response.into_body(), "Prometheus", MAX_BODY).await.map_err(error)?;
                match status.as_u16() {
                    403 => Err(FeedProblem::Forbidden(format!(
                        "forbidden: the cockpit needs 'get services/proxy' in {namespace} to ask {}",
                        endpoint.describe()
                    ))),
                    _ if !status.is_success() => Err(error(format!("answered {status}: {}", status_message(&text)))),
                    _ => Ok(text),
                }
            }
        }
    };
    tokio::time::timeout(ANSWER_WITHIN, read)
        .await
        .map_err(|_| error(format!("did not answer within {}s", ANSWER_WITHIN.as_secs())))?
}

/// Reads dcgm-exporter's series from Prometheus every `interval`, as the
/// dcgm-exporter feed; a failing Prometheus is asked again later each time.
pub fn spawn(
    client: Client,
    endpoint: Endpoint,
    snapshots: watch::Receiver<Arc<Snapshot>>,
    interval: Duration,
    tx: mpsc::Sender<Vec<ModelEvent>>,
) -> JoinHandle<()> {
    tokio::spawn(run(client, endpoint, snapshots, interval, tx))
}

/// What [`spawn`] runs.
pub async fn run(
    client: Client,
    endpoint: Endpoint,
    snapshots: watch::Receiver<Arc<Snapshot>>,
    interval: Duration,
    tx: mpsc::Sender<Vec<ModelEvent>>,
) {
    let feed = Feed::DcgmExporter;
    if tx.send(vec![ModelEvent::Feed { feed, state: FeedState::Syncing }]).await.is_err() {
        return;
    }
    let mut reported: BTreeSet<Sym> = BTreeSet::new();
    let via = Sym::new(&endpoint.describe());
    let mut retry = RETRY_FIRST;
    let mut last: Option<(FeedState, Coverage)> = None;
    loop {
        // Series are placed on the nodes and exporter pods kgpu knows:
        // not before the nodes and pods have listed.
        let listing = |f: Feed| matches!(snapshots.borrow().feed(f).map(|s| &s.state), None | Some(FeedState::Syncing));
        if listing(Feed::Nodes) || listing(Feed::Pods) {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        }
        let at = crate::clock::wall_clock();
        let places = Places::of(&snapshots.borrow());
        let mut events = Vec::new();
        let (state, wait) = match ask(&client, &endpoint).await.and_then(|text| {
            parse(&text, &places, at).map_err(|why| FeedProblem::Error(format!("{}: {why}", endpoint.describe())))
        }) {
            Ok(fleet) => {
                retry = RETRY_FIRST;
                let now: BTreeSet<Sym> = fleet.usage.iter().map(|u| u.node.clone()).collect();
                for gone in reported.difference(&now) {
                    events.push(ModelEvent::Delete(ObjectKey::Usage(UsageSource::DcgmExporter, gone.clone())));
                }
                let coverage = Coverage {
                    reporters: u32::try_from(now.len()).unwrap_or(u32::MAX),
                    read: u32::try_from(now.len()).unwrap_or(u32::MAX),
                    oldest_reading: Some(at),
                    budget: None,
                    via: Some(via.clone()),
                };
                events.extend(fleet.usage.into_iter().map(|u| ModelEvent::Upsert(Object::Usage(u))));
                reported = now;
                if fleet.unplaced > 0 {
                    tracing::warn!("{}: {} series on no known node", endpoint.describe(), fleet.unplaced);
                }
                ((FeedState::Live, coverage), interval)
            }
            Err(problem) => {
                let wait = retry;
                retry = (retry * 2).min(RETRY_MAX);
                let asked_again = format!("; asked again in {}", age(wait.as_secs() as i64));
                let problem = match problem {
                    FeedProblem::Forbidden(why) => FeedProblem::Forbidden(why + &asked_again),
                    FeedProblem::Error(why) => FeedProblem::Error(why + &asked_again),
                    other => other,
                };
                let coverage = last.as_ref().map_or(Coverage::default(), |(_, c)| c.clone());
                ((FeedState::Unavailable(problem), coverage), wait)
            }
        };
        // Said only when it changes: each change costs a large fleet an analysis.
        if last.as_ref().map(|(s, _)| s) != Some(&state.0) {
            events.push(ModelEvent::Feed { feed, state: state.0.clone() });
        }
        if last.as_ref().map(|(_, c)| c) != Some(&state.1) && state.0 == FeedState::Live {
            events.push(ModelEvent::Coverage { feed, coverage: state.1.clone() });
        }
        last = Some(state);
        if !events.is_empty() && tx.send(events).await.is_err() {
            return;
        }
        tokio::time::sleep(wait).await;
    }
}

#[cfg(test)]
mod tests;
