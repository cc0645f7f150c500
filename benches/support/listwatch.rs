//! A loopback server that speaks the Kubernetes list/watch protocol for
//! generated GPU nodes and pods, so the real kube source can be measured at
//! fleet sizes one API server on this machine cannot hold (65,000 nodes,
//! 1,000,000 pods). It lives with the benchmarks, not in the product.
//!
//! What it speaks, as kube-apiserver does:
//! - `GET /api/v1/{nodes,pods,events}?limit=N&continue=T`: paginated LIST; the
//!   continue token names the list's resourceVersion and the next index, and
//!   is answered `410 Gone` (reason `Expired`) once that resourceVersion left
//!   the event window, as after an etcd compaction.
//! - `?watch=true&resourceVersion=R&allowWatchBookmarks=true&timeoutSeconds=S`:
//!   a chunked stream of `{"type","object"}` lines from R on, a BOOKMARK every
//!   few seconds, ended after S; a resourceVersion older than the window gets
//!   an `ERROR` event with a 410 Status, and a watcher too slow to keep up is
//!   cut off (it resumes from its last resourceVersion, or lists again).
//! - `?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan`
//!   (KEP-3157 WatchList, as 1.34+ serves it): every current object as an
//!   ADDED line, then a BOOKMARK annotated `k8s.io/initial-events-end` with
//!   the state's resourceVersion, then the watch. `Fleet::refuse_streams`
//!   answers it 422 instead, as 1.33 and servers before 1.32 do.
//! - Events, namespaces and storage are empty; custom resources answer 404,
//!   as in a cluster without Kueue, Volcano or the GPU Operator; a LIST with a label selector (the agent and
//!   dcgm-exporter discovery) answers an empty list.
//!
//! Pages are served from the current objects with the list's
//! resourceVersion (the real server reads them from that etcd revision);
//! under churn a page may show a change the following watch replays, which
//! the client applies again to the same end state.
//!
//! Objects are real-shaped: nodes carry the 197 labels of a real H100 node
//! (tests/fixtures/nodes/), GPU capacity, the GPU taint and conditions; pods
//! are bound Job pods with requests, tolerations, an owner, a Kueue queue
//! label and the real 1.5 KB `NVIDIA_REQUIRE_CUDA` of nvidia/cuda:12.4.1.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use tokio::sync::broadcast;

const REQUIRE: &str = include_str!("../../tests/fixtures/compat/nvidia-require-cuda-12.4.1.env");

/// How many changes stay replayable for a watch or a continue token; older
/// resourceVersions are "too old" (410 Gone).
const WINDOW: usize = 200_000;
/// How often a watch hears a BOOKMARK.
const BOOKMARK_EVERY: Duration = Duration::from_secs(5);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Node,
    Pod,
}

/// One change, as the watch sends it.
#[derive(Clone)]
struct Change {
    rv: u64,
    kind: Kind,
    line: Bytes,
}

struct Objects {
    nodes: usize,
    /// The nodes the pods were spread over (nodes joining later stay empty).
    initial_nodes: usize,
    pods: usize,
    /// Per node: left the fleet, and how many times GFD labelled it again.
    node_gone: Vec<bool>,
    node_relabelled: Vec<u32>,
    /// Per pod: deleted (churn), and its generation (bumps its uid).
    pod_gone: Vec<bool>,
    pod_generation: Vec<u32>,
    rv: u64,
    log: VecDeque<Change>,
    /// The oldest resourceVersion a watch or continue may still start from.
    oldest: u64,
}

impl Objects {
    fn gone(&self, kind: Kind, i: usize) -> bool {
        match kind {
            Kind::Node => self.node_gone[i],
            Kind::Pod => self.pod_gone[i],
        }
    }
}

/// What a replacement adds to its Job's name (none for the first).
fn fresh(generation: u32) -> String {
    if generation == 0 { String::new() } else { format!("-r{generation}") }
}

pub struct Fleet {
    objects: Mutex<Objects>,
    /// Streamed lists refused (422), as a server without WatchList.
    refuses_streams: std::sync::atomic::AtomicBool,
    /// Streamed lists answered 429, as a watch cache still filling.
    busy_streams: std::sync::atomic::AtomicBool,
    /// Requests served, by what they asked: (pages of lists, streamed lists).
    served: Mutex<(usize, usize)>,
    changes: broadcast::Sender<Change>,
    node_labels: String,
    require: String,
}

impl Fleet {
    pub fn new(nodes: usize, pods: usize) -> Arc<Fleet> {
        let labels = super::labels::h100x8();
        let node_labels = labels
            .iter()
            // Each node's own: its hostname and the time GFD labelled it.
            .filter(|(k, _)| *k != "kubernetes.io/hostname" && *k != "nvidia.com/gfd.timestamp")
            .map(|(k, v)| format!("{}:{}", serde_json::Value::from(k.as_str()), v))
            .collect::<Vec<_>>()
            .join(",");
        let require = REQUIRE.lines().find_map(|l| l.strip_prefix("NVIDIA_REQUIRE_CUDA=")).unwrap().to_string();
        let (changes, _) = broadcast::channel(16_384);
        Arc::new(Fleet {
            objects: Mutex::new(Objects {
                nodes,
                initial_nodes: nodes,
                pods,
                node_gone: vec![false; nodes],
                node_relabelled: vec![0; nodes],
                pod_gone: vec![false; pods],
                pod_generation: vec![0; pods],
                rv: 1,
                log: VecDeque::new(),
                oldest: 1,
            }),
            changes,
            refuses_streams: Default::default(),
            busy_streams: Default::default(),
            served: Default::default(),
            node_labels: format!("{{{}", node_labels),
            require: serde_json::Value::from(require).to_string(),
        })
    }

    /// From now on, answer a streamed list 422 as 1.33's API server does.
    pub fn refuse_streams(&self) {
        self.refuses_streams.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// From now on, answer a streamed list 429 as an API server whose watch
    /// cache is still filling after a restart does (a list is served).
    pub fn busy_streams(&self) {
        self.busy_streams.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Pages of lists and streamed lists served so far (nodes and pods).
    pub fn served(&self) -> (usize, usize) {
        *self.served.lock().unwrap()
    }

    /// Nodes, and the GPUs the pods present hold.
    pub fn counts(&self) -> (usize, usize) {
        let o = self.objects.lock().unwrap();
        let used = (0..o.pods).filter(|&i| !o.pod_gone[i] && placement(i, o.pods, o.initial_nodes).1).count();
        (o.node_gone.iter().filter(|gone| !**gone).count(), used)
    }

    /// A CPU-only pod beside the GPU pods (a data loader of the same team).
    fn loader_json(&self, i: usize, node: usize, generation: u32, rv: u64) -> String {
        let ns = ["team-a", "team-b", "inference", "research"][i % 4];
        let created = rfc3339(1_796_000_000 + i as i64 % 3_600 + i64::from(generation));
        format!(
            concat!(
                r#"{{"kind":"Pod","apiVersion":"v1","metadata":{{"name":"loader-{i:07}{fresh}-5f7d9","namespace":"{ns}","uid":"00000000-0000-4000-a{g:03}-{i:012}","#,
                r#""resourceVersion":"{rv}","creationTimestamp":"{created}","labels":{{"app":"loader"}}}},"#,
                r#""spec":{{"nodeName":"gpu-node-{node:05}","schedulerName":"default-scheduler","restartPolicy":"Always","#,
                r#""tolerations":[{{"key":"nvidia.com/gpu","operator":"Exists","effect":"NoSchedule"}}],"#,
                r#""containers":[{{"name":"loader","image":"python:3.11-slim","resources":{{"requests":{{"cpu":"4","memory":"16Gi"}}}}}}]}},"#,
                r#""status":{{"phase":"Running","qosClass":"Burstable","startTime":"{created}","conditions":[{{"type":"Ready","status":"True"}}]}}}}"#
            ),
            i = i,
            fresh = fresh(generation),
            ns = ns,
            g = generation % 1000,
            rv = rv,
            created = created,
            node = node,
        )
    }

    fn node_json(&self, i: usize, o: &Objects, rv: u64) -> String {
        let name = format!("gpu-node-{i:05}");
        let created = 1_796_000_000 - 86_400;
        format!(
            concat!(
                r#"{{"kind":"Node","apiVersion":"v1","metadata":{{"name":"{name}","uid":"00000000-0000-4000-8000-{i:012}","resourceVersion":"{rv}","#,
                r#""creationTimestamp":"{created}","labels":{labels},"kubernetes.io/hostname":"{name}","nvidia.com/gfd.timestamp":"{labelled}"}},"annotations":{{"node.alpha.kubernetes.io/ttl":"0","volumes.kubernetes.io/controller-managed-attach-detach":"true"}}}},"#,
                r#""spec":{{"taints":[{{"key":"nvidia.com/gpu","value":"present","effect":"NoSchedule"}}]}},"#,
                r#""status":{{"capacity":{{"cpu":"192","memory":"2113356452Ki","pods":"110","nvidia.com/gpu":"8","ephemeral-storage":"3750330308Ki"}},"#,
                r#""allocatable":{{"cpu":"191500m","memory":"2102870692Ki","pods":"110","nvidia.com/gpu":"8","ephemeral-storage":"3456283749826"}},"#,
                r#""conditions":[{{"type":"MemoryPressure","status":"False","reason":"KubeletHasSufficientMemory"}},{{"type":"DiskPressure","status":"False","reason":"KubeletHasNoDiskPressure"}},"#,
                r#"{{"type":"PIDPressure","status":"False","reason":"KubeletHasSufficientPID"}},{{"type":"Ready","status":"True","reason":"KubeletReady","message":"kubelet is posting ready status"}}],"#,
                r#""nodeInfo":{{"kubeletVersion":"v1.30.4","containerRuntimeVersion":"containerd://1.7.20","kernelVersion":"5.15.0-119-generic","osImage":"Ubuntu 22.04.4 LTS","architecture":"amd64","operatingSystem":"linux"}}}}}}"#
            ),
            name = name,
            i = i,
            rv = rv,
            created = rfc3339(created),
            labels = self.node_labels,
            labelled = gfd_timestamp(i) + 60 * u64::from(o.node_relabelled[i]),
        )
    }

    fn pod_json(&self, i: usize, o: &Objects, rv: u64) -> String {
        let (node, gpu) = placement(i, o.pods, o.initial_nodes);
        if !gpu {
            return self.loader_json(i, node, o.pod_generation[i], rv);
        }
        let generation = o.pod_generation[i];
        let job = i / 8;
        let ns = ["team-a", "team-b", "inference", "research"][job % 4];
        let node = format!("gpu-node-{node:05}");
        let created = rfc3339(1_796_000_000 + i as i64 % 3_600 + i64::from(generation));
        let mut s = String::with_capacity(3_000);
        let _ = write!(
            s,
            concat!(
                r#"{{"kind":"Pod","apiVersion":"v1","metadata":{{"name":"train-{job:06}{fresh}-{rank}-x7k2q","namespace":"{ns}","uid":"00000000-0000-4000-9{g:03}-{i:012}","#,
                r#""resourceVersion":"{rv}","creationTimestamp":"{created}","#,
                // Map keys in order, as the API server (Go's encoding/json) writes them.
                r#""labels":{{"batch.kubernetes.io/controller-uid":"7d1c7a3e-0000-4000-8{g:03}-{job:012}","batch.kubernetes.io/job-name":"train-{job:06}{fresh}","job-name":"train-{job:06}{fresh}","kueue.x-k8s.io/queue-name":"research"}},"#,
                r#""ownerReferences":[{{"apiVersion":"batch/v1","kind":"Job","name":"train-{job:06}{fresh}","uid":"7d1c7a3e-0000-4000-8{g:03}-{job:012}","controller":true,"blockOwnerDeletion":true}}]}},"#,
                r#""spec":{{"nodeName":"{node}","schedulerName":"default-scheduler","priority":0,"restartPolicy":"Never","terminationGracePeriodSeconds":30,"serviceAccountName":"default","#,
                r#""tolerations":[{{"key":"nvidia.com/gpu","operator":"Exists","effect":"NoSchedule"}},{{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}},{{"key":"node.kubernetes.io/unreachable","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}}],"#,
                r#""containers":[{{"name":"main","image":"nvcr.io/nvidia/pytorch:24.03-py3","command":["torchrun","--nproc-per-node=1","train.py"],"#,
                r#""env":[{{"name":"NVIDIA_REQUIRE_CUDA","value":{require}}},{{"name":"NCCL_DEBUG","value":"INFO"}}],"#,
                r#""resources":{{"requests":{{"cpu":"12","memory":"120Gi","nvidia.com/gpu":"1"}},"limits":{{"nvidia.com/gpu":"1"}}}},"#,
                r#""volumeMounts":[{{"name":"kube-api-access","mountPath":"/var/run/secrets/kubernetes.io/serviceaccount","readOnly":true}}]}}]}},"#,
                r#""status":{{"phase":"Running","qosClass":"Burstable","startTime":"{created}","#,
                r#""conditions":[{{"type":"PodScheduled","status":"True"}},{{"type":"Initialized","status":"True"}},{{"type":"ContainersReady","status":"True"}},{{"type":"Ready","status":"True"}}],"#,
                r#""containerStatuses":[{{"name":"main","ready":true,"started":true,"restartCount":0,"image":"nvcr.io/nvidia/pytorch:24.03-py3","imageID":"","containerID":"containerd://{i:064}","state":{{"running":{{"startedAt":"{created}"}}}}}}]}}}}"#
            ),
            job = job,
            // A replacement is a new Job: its name and uid are new.
            fresh = fresh(generation),
            rank = i % 8,
            ns = ns,
            g = generation % 1000,
            i = i,
            rv = rv,
            created = created,
            node = node,
            require = self.require,
        );
        s
    }

    fn object_json(&self, kind: Kind, i: usize, o: &Objects, rv: u64) -> String {
        match kind {
            Kind::Node => self.node_json(i, o, rv),
            Kind::Pod => self.pod_json(i, o, rv),
        }
    }

    /// Records one change and tells the watches.
    fn record(&self, o: &mut Objects, kind: Kind, kind_word: &str, i: usize) {
        o.rv += 1;
        let rv = o.rv;
        let object = self.object_json(kind, i, o, rv);
        let line = Bytes::from(format!("{{\"type\":\"{kind_word}\",\"object\":{object}}}\n"));
        let change = Change { rv, kind, line };
        o.log.push_back(change.clone());
        while o.log.len() > WINDOW {
            if let Some(c) = o.log.pop_front() {
                o.oldest = c.rv;
            }
        }
        let _ = self.changes.send(change);
    }

    /// One pod change: a running pod goes (its Job's pod finished), or a
    /// gone one comes back (a new pod of the same name, a new uid).
    pub fn churn_pod(&self, i: usize) {
        let mut o = self.objects.lock().unwrap();
        let i = i % o.pods.max(1);
        if o.pod_gone[i] {
            o.pod_gone[i] = false;
            o.pod_generation[i] += 1;
            self.record(&mut o, Kind::Pod, "ADDED", i);
        } else {
            self.record(&mut o, Kind::Pod, "DELETED", i);
            o.pod_gone[i] = true;
        }
    }

    /// A node joins the fleet (a visible change: the header's node count).
    pub fn add_node(&self) -> usize {
        let mut o = self.objects.lock().unwrap();
        o.nodes += 1;
        o.node_gone.push(false);
        o.node_relabelled.push(0);
        let i = o.nodes - 1;
        self.record(&mut o, Kind::Node, "ADDED", i);
        o.nodes
    }

    /// Node `i` leaves the fleet (one that joined later holds no pods).
    pub fn remove_node(&self, i: usize) {
        let mut o = self.objects.lock().unwrap();
        if i < o.nodes && !o.node_gone[i] {
            self.record(&mut o, Kind::Node, "DELETED", i);
            o.node_gone[i] = true;
        }
    }

    /// GFD labels node `i` again: its `gfd.timestamp` moves on a minute.
    pub fn relabel_node(&self, i: usize) {
        let mut o = self.objects.lock().unwrap();
        let i = i % o.nodes.max(1);
        if !o.node_gone[i] {
            o.node_relabelled[i] += 1;
            self.record(&mut o, Kind::Node, "MODIFIED", i);
        }
    }

    /// Forgets every change so far: a watch or continue from before now is
    /// answered 410, as after a compaction.
    pub fn compact(&self) {
        let mut o = self.objects.lock().unwrap();
        o.log.clear();
        o.oldest = o.rv;
    }

    fn list(&self, kind: Kind, limit: usize, cont: Option<&str>) -> Response {
        self.served.lock().unwrap().0 += 1;
        let o = self.objects.lock().unwrap();
        let (list_rv, from) = match cont.map(parse_continue) {
            None => (o.rv, 0),
            Some(Some((rv, _))) if rv < o.oldest => return gone("Expired", "the continue token has expired"),
            Some(Some(at)) => at,
            Some(None) => return status(StatusCode::BAD_REQUEST, "BadRequest", "invalid continue token"),
        };
        let total = match kind {
            Kind::Node => o.nodes,
            Kind::Pod => o.pods,
        };
        let limit = if limit == 0 { total.max(1) } else { limit };
        let mut body = String::with_capacity(limit.min(total) * 3_200 + 256);
        let _ = write!(
            body,
            r#"{{"kind":"{}List","apiVersion":"v1","metadata":{{"resourceVersion":"{list_rv}""#,
            kind_name(kind)
        );
        let mut items = String::new();
        let mut i = from;
        let mut n = 0;
        while i < total && n < limit {
            if !o.gone(kind, i) {
                if n > 0 {
                    items.push(',');
                }
                items.push_str(&self.object_json(kind, i, &o, list_rv));
                n += 1;
            }
            i += 1;
        }
        if i < total {
            let _ = write!(body, r#","continue":"{list_rv}.{i}","remainingItemCount":{}"#, total - i);
        }
        let _ = write!(body, r#"}},"items":[{items}]}}"#);
        ([(header::CONTENT_TYPE, "application/json")], body).into_response()
    }

    fn watch(self: &Arc<Fleet>, kind: Kind, from: u64, timeout: Duration, initial: bool) -> Response {
        // Subscribe before reading the log, so nothing falls between them.
        let mut live = self.changes.subscribe();
        // What the backlog covers: every change up to `covered`; the live
        // ones after it come through the subscription.
        let (backlog, too_old, from, covered) = {
            let o = self.objects.lock().unwrap();
            // A streamed list starts from the state as of now.
            let from = if initial { o.rv } else { from };
            if from < o.oldest {
                (Vec::new(), true, from, from)
            } else {
                let backlog = o.log.iter().filter(|c| c.rv > from && c.kind == kind).map(|c| c.line.clone()).collect();
                (backlog, false, from, o.rv.max(from))
            }
        };
        if initial {
            self.served.lock().unwrap().1 += 1;
        }
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, Infallible>>(64);
        let fleet = self.clone();
        tokio::spawn(async move {
            if too_old {
                let line = format!(
                    r#"{{"type":"ERROR","object":{{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: {from}","reason":"Expired","code":410}}}}{}"#,
                    "\n"
                );
                let _ = tx.send(Ok(Bytes::from(line))).await;
                return;
            }
            if initial && !fleet.send_initial_events(kind, from, &tx).await {
                return;
            }
            for line in backlog {
                if tx.send(Ok(line)).await.is_err() {
                    return;
                }
            }
            // Not the log's end as it is now: changes made while the backlog
            // was sent are in the subscription, not the backlog (reading the
            // log's end here skipped them, and a soak lost deletes to it).
            let mut last = covered;
            let end = tokio::time::Instant::now() + timeout;
            let mut bookmark = tokio::time::interval(BOOKMARK_EVERY);
            bookmark.tick().await;
            loop {
                tokio::select! {
                    _ = tokio::time::sleep_until(end) => return,
                    _ = bookmark.tick() => {
                        let rv = fleet.objects.lock().unwrap().rv;
                        let line = format!(
                            r#"{{"type":"BOOKMARK","object":{{"kind":"{}","apiVersion":"v1","metadata":{{"resourceVersion":"{rv}"}}}}}}{}"#,
                            kind_name(kind),
                            "\n"
                        );
                        if tx.send(Ok(Bytes::from(line))).await.is_err() {
                            return;
                        }
                    }
                    change = live.recv() => match change {
                        Ok(c) if c.kind == kind && c.rv > last => {
                            last = c.rv;
                            if tx.send(Ok(c.line)).await.is_err() {
                                return;
                            }
                        }
                        Ok(_) => {}
                        // Too slow to keep up: end the watch; the client
                        // resumes from the last resourceVersion it saw.
                        Err(_) => return,
                    },
                }
            }
        });
        let stream = tokio_stream_from(rx);
        ([(header::CONTENT_TYPE, "application/json")], Body::from_stream(stream)).into_response()
    }
}

impl Fleet {
    /// Every object of `kind` as an ADDED line, a page's worth per lock (as
    /// with pages, a change meanwhile may show early and be replayed by the
    /// watch), then the bookmark that ends the initial state at `rv`. False
    /// when the client went away.
    async fn send_initial_events(
        &self,
        kind: Kind,
        rv: u64,
        tx: &tokio::sync::mpsc::Sender<Result<Bytes, Infallible>>,
    ) -> bool {
        const CHUNK: usize = 500;
        let mut i = 0;
        loop {
            let chunk = {
                let o = self.objects.lock().unwrap();
                let total = match kind {
                    Kind::Node => o.nodes,
                    Kind::Pod => o.pods,
                };
                if i >= total {
                    break;
                }
                let mut chunk = String::with_capacity(CHUNK * 3_300);
                for j in i..(i + CHUNK).min(total) {
                    if !o.gone(kind, j) {
                        let _ = writeln!(chunk, r#"{{"type":"ADDED","object":{}}}"#, self.object_json(kind, j, &o, rv));
                    }
                }
                i += CHUNK;
                chunk
            };
            if tx.send(Ok(Bytes::from(chunk))).await.is_err() {
                return false;
            }
        }
        tx.send(Ok(Bytes::from(initial_events_end(kind_name(kind), rv)))).await.is_ok()
    }
}

/// The bookmark that ends a streamed list's initial state at `rv`.
fn initial_events_end(kind: &str, rv: u64) -> String {
    format!(
        r#"{{"type":"BOOKMARK","object":{{"kind":"{kind}","apiVersion":"v1","metadata":{{"resourceVersion":"{rv}","annotations":{{"k8s.io/initial-events-end":"true"}}}}}}}}{}"#,
        "\n"
    )
}

fn tokio_stream_from(
    mut rx: tokio::sync::mpsc::Receiver<Result<Bytes, Infallible>>,
) -> impl futures::Stream<Item = Result<Bytes, Infallible>> {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// Pod `i`'s node (pods spread evenly, in blocks) and whether it holds a
/// GPU: the first eight on each node do, the rest are CPU-only.
fn placement(i: usize, pods: usize, nodes: usize) -> (usize, bool) {
    let nodes = nodes.max(1);
    let node = i * nodes / pods.max(1);
    let first = (node * pods).div_ceil(nodes);
    (node, i - first < 8)
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Node => "Node",
        Kind::Pod => "Pod",
    }
}

fn parse_continue(token: &str) -> Option<(u64, usize)> {
    let (rv, at) = token.split_once('.')?;
    Some((rv.parse().ok()?, at.parse().ok()?))
}

fn rfc3339(unix: i64) -> String {
    let days = unix.div_euclid(86_400);
    let secs = unix.rem_euclid(86_400);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", secs / 3_600, secs % 3_600 / 60, secs % 60)
}

fn status(code: StatusCode, reason: &str, message: &str) -> Response {
    let body = format!(
        r#"{{"kind":"Status","apiVersion":"v1","metadata":{{}},"status":"Failure","message":{},"reason":"{reason}","code":{}}}"#,
        serde_json::Value::from(message),
        code.as_u16()
    );
    (code, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

fn gone(reason: &str, message: &str) -> Response {
    status(StatusCode::GONE, reason, message)
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Params {
    watch: Option<String>,
    limit: Option<usize>,
    #[serde(rename = "continue")]
    cont: Option<String>,
    resource_version: Option<String>,
    timeout_seconds: Option<u64>,
    label_selector: Option<String>,
    send_initial_events: Option<String>,
}

async fn serve_path(State(fleet): State<Arc<Fleet>>, uri: Uri, Query(p): Query<Params>) -> Response {
    let kind = match uri.path() {
        "/api/v1/nodes" => Some(Kind::Node),
        "/api/v1/pods" => Some(Kind::Pod),
        // Kinds every cluster serves, empty here: a feed answered 404 for
        // them would reconnect for ever and a one-shot wait its full minute.
        "/api/v1/events"
        | "/api/v1/namespaces"
        | "/api/v1/persistentvolumeclaims"
        | "/api/v1/persistentvolumes"
        | "/apis/storage.k8s.io/v1/storageclasses" => None,
        // The agent and dcgm-exporter discovery lists pods by label in a namespace.
        path if path.starts_with("/api/v1/namespaces/") && path.ends_with("/pods") => None,
        "/version" => {
            return (
                [(header::CONTENT_TYPE, "application/json")],
                r#"{"major":"1","minor":"36","gitVersion":"v1.36.3-listwatch"}"#,
            )
                .into_response();
        }
        _ => return status(StatusCode::NOT_FOUND, "NotFound", "the server could not find the requested resource"),
    };
    let watching = p.watch.as_deref().is_some_and(|w| w == "true" || w == "1");
    let initial = watching && p.send_initial_events.as_deref() == Some("true");
    if initial && fleet.refuses_streams.load(std::sync::atomic::Ordering::Relaxed) {
        // kube-apiserver 1.33's words (the WatchList gate off by default).
        return status(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid",
            "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
        );
    }
    if initial && fleet.busy_streams.load(std::sync::atomic::Ordering::Relaxed) {
        return status(StatusCode::TOO_MANY_REQUESTS, "TooManyRequests", "storage is (re)initializing");
    }
    let Some(kind) = kind.filter(|_| p.label_selector.is_none()) else {
        // Events, and the label-selected discovery lists: nothing here.
        if watching {
            let rv = fleet.objects.lock().unwrap().rv;
            let end = initial.then(|| Bytes::from(initial_events_end("Status", rv)));
            let body = Body::from_stream(futures::stream::iter(end.map(Ok::<_, Infallible>)).chain(
                futures::stream::once(async move {
                    tokio::time::sleep(Duration::from_secs(p.timeout_seconds.unwrap_or(300))).await;
                    Ok::<_, Infallible>(Bytes::new())
                }),
            ));
            return ([(header::CONTENT_TYPE, "application/json")], body).into_response();
        }
        let rv = fleet.objects.lock().unwrap().rv;
        return (
            [(header::CONTENT_TYPE, "application/json")],
            format!(r#"{{"kind":"List","apiVersion":"v1","metadata":{{"resourceVersion":"{rv}"}},"items":[]}}"#),
        )
            .into_response();
    };
    if watching {
        let from = p.resource_version.as_deref().and_then(|r| r.parse().ok()).unwrap_or(0);
        fleet.watch(kind, from, Duration::from_secs(p.timeout_seconds.unwrap_or(300)), initial)
    } else {
        fleet.list(kind, p.limit.unwrap_or(0), p.cont.as_deref())
    }
}

/// Serves `fleet` on a loopback port; returns the port. Runs until the
/// runtime ends.
pub async fn serve(fleet: Arc<Fleet>) -> u16 {
    let app = axum::Router::new().fallback(serve_path).with_state(fleet);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    port
}

/// A kubeconfig for a plain-HTTP server on `port`.
pub fn kubeconfig(port: u16) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: listwatch\n  cluster:\n    server: http://127.0.0.1:{port}\ncontexts:\n- name: listwatch\n  context:\n    cluster: listwatch\n    user: bench\ncurrent-context: listwatch\nusers:\n- name: bench\n  user:\n    token: bench\n"
    )
}

/// GFD's `gfd.timestamp` of node `i`: each node was labelled at its own time.
fn gfd_timestamp(i: usize) -> u64 {
    1_715_709_242 + 7 * i as u64
}
