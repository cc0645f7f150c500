//! NVIDIA's dcgm-exporter, which the GPU Operator runs on every GPU node:
//! its `/metrics` read through the API server's pod proxy, turned into the
//! model's per-device utilization with the pods that hold each device.
//!
//! The exporter's text is parsed by `prometheus-parse`. `openmetrics-parser`
//! was tried first and rejects real exporter output: a MIG GPU's free slice
//! has no pod labels, so one metric family mixes label sets, and the
//! exporter may repeat a family after a blank line (both in
//! `tests/fixtures/dcgm-exporter/`).

use std::time::Duration;

use futures::future::BoxFuture;
use kube::Client;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::model::UsageSource;
use crate::model::{
    EndpointKind, Feed, FeedProblem, FeedState, ModelEvent, NodeUsage, Object, ObjectKey, Sym, Timestamp,
};
use crate::sources::agents::{Polling, Transport, direct_get, read_limited};
use crate::sources::dcgm_series::{Sample, usage_of};
use crate::sources::kube::client::short_error;
use crate::sources::poll::{self, ReadError, Reader, Target};

/// The GPU Operator's DaemonSet labels its pods `app=nvidia-dcgm-exporter`;
/// the exporter's own Helm chart `app.kubernetes.io/name=dcgm-exporter`.
pub const SELECTORS: [&str; 2] = ["app=nvidia-dcgm-exporter", "app.kubernetes.io/name=dcgm-exporter"];
pub const DEFAULT_PORT: u16 = crate::sources::kube::convert::ENDPOINT_DEFAULT_PORT;
/// Reads every exporter at the agents' interval, over the agents'
/// transport, within the budget they share; or asks `--prometheus`.
pub fn spawn(p: &Polling, tx: mpsc::Sender<Vec<ModelEvent>>) -> Option<JoinHandle<()>> {
    use crate::sources::prometheus::{self, Choice};
    let exporters = (p.config.transport != Transport::Off).then(|| {
        let discovery = p.discovery(EndpointKind::DcgmExporter, None, &SELECTORS);
        let reader = Exporters { client: p.client.clone(), transport: p.config.transport };
        poll::run(Feed::DcgmExporter, discovery, reader, p.budget.clone(), p.config.interval, tx.clone())
    });
    let (client, snapshots, interval) = (p.client.clone(), p.snapshots.clone(), p.config.interval);
    // Where a Prometheus already scrapes the exporters, one query reads them all.
    match p.config.prometheus.clone() {
        None => exporters.map(tokio::spawn),
        Some(Choice::At(endpoint)) => Some(prometheus::spawn(client, endpoint, snapshots, interval, tx)),
        Some(Choice::Find) => Some(tokio::spawn(async move {
            let why = match prometheus::find(&client).await {
                Ok(Some(endpoint)) => {
                    tracing::info!("--prometheus auto: found {}", endpoint.describe());
                    return prometheus::run(client, endpoint, snapshots, interval, tx).await;
                }
                Ok(None) => format!(
                    "--prometheus auto: no Prometheus Service found (labels {})",
                    prometheus::SERVICE_SELECTORS.join(" or ")
                ),
                Err(e) => format!("--prometheus auto: {e}"),
            };
            tracing::warn!("{why}; reading each exporter instead");
            match exporters {
                Some(read_each) => read_each.await,
                None => {
                    let state = FeedState::Unavailable(FeedProblem::Missing(why));
                    let _ = tx.send(vec![ModelEvent::Feed { feed: Feed::DcgmExporter, state }]).await;
                }
            }
        })),
    }
}

struct Exporters {
    client: Client,
    transport: Transport,
}

impl Reader for Exporters {
    fn read<'a>(&'a self, target: &'a Target) -> BoxFuture<'a, Result<Vec<Object>, ReadError>> {
        Box::pin(async move {
            let text = scrape(&self.client, self.transport, target).await?;
            let usage = parse(target.node.as_str(), &text, crate::clock::wall_clock())
                .map_err(|why| ReadError::Target(format!("{}/{}: {why}", target.namespace, target.name)))?;
            Ok(vec![Object::Usage(usage)])
        })
    }

    fn failed(&self, target: &Target, why: &str, now: Timestamp) -> Vec<Object> {
        vec![Object::Usage(NodeUsage {
            node: target.node.clone(),
            source: UsageSource::DcgmExporter,
            at: now,
            devices: Box::new([]),
            problem: Some(why.into()),
        })]
    }

    fn keys(&self, node: Sym) -> Vec<ObjectKey> {
        vec![ObjectKey::Usage(UsageSource::DcgmExporter, node)]
    }
}

/// The request for one exporter's metrics through the pod proxy.
pub fn proxy_request(namespace: &str, pod: &str, port: u16) -> Result<http::Request<Vec<u8>>, http::Error> {
    http::Request::get(format!("/api/v1/namespaces/{namespace}/pods/{pod}:{port}/proxy/metrics"))
        .header(http::header::ACCEPT, "text/plain")
        .body(Vec::new())
}

async fn scrape(client: &Client, transport: Transport, e: &Target) -> Result<String, ReadError> {
    let fail = |why: String| ReadError::Target(format!("{}/{}: {why}", e.namespace, e.name));
    if !e.running {
        return Err(fail("the exporter pod is not running".into()));
    }
    let read = async {
        match transport {
            Transport::Direct => {
                let ip = e.ip.ok_or_else(|| fail("the exporter pod has no IP yet".into()))?;
                direct_get(&ip.to_string(), e.port, "/metrics", None).await.map_err(fail)
            }
            _ => {
                let req = proxy_request(e.namespace.as_str(), &e.name, e.port).map_err(|x| fail(x.to_string()))?;
                let response =
                    client.send(req.map(kube::client::Body::from)).await.map_err(|x| fail(short_error(&x)))?;
                let status = response.status();
                let text = read_limited(response.into_body(), &e.name).await.map_err(fail)?;
                match status.as_u16() {
                    403 => Err(ReadError::Forbidden(format!(
                        "forbidden: the cockpit needs 'get pods/proxy' in {}",
                        e.namespace
                    ))),
                    _ if !status.is_success() => {
                        Err(fail(format!("answered {status}: {}", text.lines().next().unwrap_or(""))))
                    }
                    _ => Ok(text),
                }
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(5), read).await.map_err(|_| fail("did not answer within 5s".into()))?
}

/// One exporter's `/metrics` as the usage of the node it runs on (the
/// node is the API server's word, never the `Hostname` label's).
pub fn parse(node: &str, text: &str, at: i64) -> Result<NodeUsage, String> {
    let lines = text.lines().map(|l| Ok(l.to_string()));
    let scrape = prometheus_parse::Scrape::parse(lines).map_err(|e| format!("not Prometheus text: {e}"))?;
    let samples = scrape.samples.iter().filter_map(|sample| {
        let value = match sample.value {
            prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v)
            | prometheus_parse::Value::Counter(v) => v,
            _ => return None,
        };
        // Keys trimmed: the exporter's README prints `{gpu="0", UUID=…}`.
        let labels = sample.labels.iter().map(|(k, v)| (k.trim(), v.as_str())).collect();
        Some(Sample { metric: &sample.metric, labels, value })
    });
    let usage = usage_of(node, samples, at, |_| false);
    if usage.recognised == 0 && !scrape.samples.is_empty() {
        return Err(format!(
            "none of its {} samples is DCGM_FI_DEV_GPU_UTIL, DCGM_FI_PROF_GR_ENGINE_ACTIVE or DCGM_FI_DEV_FB_USED",
            scrape.samples.len()
        ));
    }
    Ok(usage.usage)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::dcgm_series::DEVICES_PER_NODE;

    #[test]
    fn the_proxy_request_names_the_exporter_pod_and_port() {
        let req = proxy_request("gpu-operator", "nvidia-dcgm-exporter-ml2wh", 9400).unwrap();
        assert_eq!(
            req.uri().path(),
            "/api/v1/namespaces/gpu-operator/pods/nvidia-dcgm-exporter-ml2wh:9400/proxy/metrics"
        );
    }

    #[test]
    fn text_that_is_not_metrics_is_an_error_and_an_empty_page_is_no_devices() {
        assert!(parse("n", "<html>502 Bad Gateway</html>", 0).is_ok_and(|u| u.devices.is_empty()));
        let other = "# TYPE go_goroutines gauge\ngo_goroutines 12\n";
        assert!(parse("n", other, 0).unwrap_err().contains("none of its 1 samples"));
        assert!(parse("n", "", 0).is_ok_and(|u| u.devices.is_empty()));
    }

    #[test]
    fn absurd_values_are_bounded() {
        let text = "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-a\"} 1e9\nDCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu=\"1\",UUID=\"GPU-b\"} NaN\nDCGM_FI_DEV_FB_USED{gpu=\"1\",UUID=\"GPU-b\"} -5\n";
        let u = parse("n", text, 0).unwrap();
        assert_eq!(u.devices[0].busy_pct, Some(100.0));
        assert_eq!((u.devices[1].busy_pct, u.devices[1].memory_used_mib), (None, Some(0)));
        let many: String =
            (0..5000).map(|i| format!("DCGM_FI_DEV_GPU_UTIL{{gpu=\"{i}\",UUID=\"GPU-{i}\"}} 0\n")).collect();
        assert_eq!(parse("n", &many, 0).unwrap().devices.len(), DEVICES_PER_NODE);
    }
}
