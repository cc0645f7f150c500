//! The differential oracle: generated clusters are applied to the real
//! control plane, the real kube-scheduler places (or refuses) each pod, and
//! kgpu — reading the same objects through its kube source — must predict
//! it: the node the scheduler chose is one kgpu says fits; a pod the
//! scheduler refuses fits nowhere for kgpu, kgpu's per-node reasons give the
//! scheduler's histogram exactly, and the pending chain says it agrees.
//! The same for Kueue (`queues.rs`): kgpu's quota step predicts which
//! workloads the real Kueue manager admits.
//!
//! Seeded and shrinking (proptest). `KGPU_ORACLE_CASES` (default 80 clusters,
//! about 240 pods) and `KGPU_ORACLE_SEED` set the run; a failure prints the
//! seed and the shrunk case as Kubernetes JSON, ready for a fixture test.
//! docs/oracle.md describes what is generated and what "agrees" means.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

#[path = "../support/mod.rs"]
mod support;

mod cases;
mod dra;
mod inter_pod;
mod preempt;
mod queues;
mod volumes;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kgpu::analysis::fit::{self, Shape};
use kgpu::analysis::fragmentation::{self as frag, PodVolumes, ShapeSource};
use kgpu::analysis::index::Index;
use kgpu::analysis::inter_pod::{Incoming, InterPod};
use kgpu::analysis::pending::Step;
use kgpu::analysis::scheduler_msg;
use kgpu::analysis::volumes::Prepared;
use kgpu::analysis::{self, Thresholds};
use kgpu::model::{PodKey, Snapshot};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use serde_json::Value;
use support::controlplane::ControlPlane;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// A seeded runner: the same seed generates (and shrinks to) the same cases.
pub fn runner(cases: u32, seed: u64) -> TestRunner {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let config = Config { cases, failure_persistence: None, max_shrink_iters: 48, ..Config::default() };
    TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes))
}

/// Refusals in which InterPodAffinity or PodTopologySpread had a say (coverage).
static INTER_POD_REFUSALS: AtomicU32 = AtomicU32::new(0);

/// Pods judged while another pod of equal or higher priority was nominated
/// to some node, and those of them whose verdict on some node the nominated
/// pods changed (coverage of the preemption oracle).
static NOMINATED_AHEAD: AtomicU32 = AtomicU32::new(0);
static NOMINATION_DECIDED: AtomicU32 = AtomicU32::new(0);
/// Pods for a scheduler that does not run (`spec.schedulerName`).
static FOR_ABSENT_SCHEDULER: AtomicU32 = AtomicU32::new(0);

/// What the real scheduler did with one pod.
#[derive(Debug, Clone)]
enum Outcome {
    Bound(String),
    Refused(String),
}

async fn outcome(pods: &Api<Pod>, name: &str) -> Result<Outcome, String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let p = pods.get(name).await.map_err(|e| format!("reading pod {name}: {e}"))?;
        if let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.clone()) {
            return Ok(Outcome::Bound(node));
        }
        let refused = p.status.as_ref().and_then(|s| s.conditions.as_ref()).and_then(|cs| {
            cs.iter().find(|c| c.type_ == "PodScheduled" && c.status == "False").and_then(|c| c.message.clone())
        });
        if let Some(message) = refused {
            return Ok(Outcome::Refused(message));
        }
        if Instant::now() > deadline {
            return Err(format!("pod {name}: no scheduling outcome within 30 s"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A pod for a scheduler that does not run: nothing binds it and nothing
/// explains it. kgpu must never promise it a place: where its model of
/// kube-scheduler finds room, the blocking step is the named scheduler's;
/// elsewhere, the fit step (the oracle's other cases check those verdicts).
async fn judge_unanswered(
    pods: &Api<Pod>,
    snapshots: &Snapshots,
    key: &PodKey,
    scheduler: &str,
) -> Result<Option<String>, String> {
    FOR_ABSENT_SCHEDULER.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let p = pods.get(&key.name).await.map_err(|e| format!("reading pod {key}: {e}"))?;
    if p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some() {
        return Ok(Some(format!("bound, though its scheduler '{scheduler}' does not run")));
    }
    let snap = kgpu_sees(snapshots, "the pod", |s| s.pods.contains_key(key)).await?;
    let now = snap.clock.max(kgpu::clock::wall_clock());
    let room = kgpu_verdicts(&snap, now, key)?.values().any(|reasons| reasons.is_empty());
    let a = analysis::analyze(&snap, now, &Thresholds::default());
    let Some(item) = analysis::pending::find(&a.pending, key.namespace.as_str(), &key.name) else {
        return Ok(Some("kgpu has no pending item for it".into()));
    };
    let expected = if room { Step::Scheduler } else { Step::Fit };
    let named = item.summary.contains(&format!("'{scheduler}'"));
    Ok((item.blocking != Some(expected) || (room && !named)).then(|| {
        format!(
            "for '{scheduler}', which does not run ({}); kgpu blocks at {:?}: {}",
            if room { "kube-scheduler would find room" } else { "no room either" },
            item.blocking,
            item.summary
        )
    }))
}

/// kgpu's view of `key` as a pending pod: every node's reasons, against
/// the snapshot without the pod's own usage, with the pods nominated to
/// each node of equal or higher priority counted there (their resources
/// and ports, and both of the scheduler's passes for the inter-pod rules).
fn kgpu_verdicts(snap: &Snapshot, now: i64, key: &PodKey) -> Result<BTreeMap<String, Vec<fit::NodeReason>>, String> {
    let mut without = snap.clone();
    let pod = without.pods.remove(key).ok_or_else(|| format!("kgpu does not see pod {key}"))?;
    let mut pending = (*pod).clone();
    pending.node = None;
    let index = Index::build(&without, now);
    let incoming = Incoming::of(&pending);
    let inter_pod = InterPod::prepare(&index, &incoming);
    let volumes = PodVolumes::of(&pending).map(|v| v.prepare(&index));
    let demand = frag::pod_demand(&pending, 1, ShapeSource::Pod(key.clone()), &snap.namespaces);
    Ok(index
        .nodes_with_usage()
        .map(|(node, used)| {
            let ahead = demand.nominated_ahead(&index, &node.name);
            let held = used.with_pods(&ahead);
            let holders: Vec<&kgpu::model::Pod> = index.pods_on(&node.name).iter().chain(&ahead).copied().collect();
            let mut reasons = fit::verdicts(&Shape::of(&pending), node, held.as_ref().unwrap_or(used), &holders);
            if let Some(Prepared::Check(check)) = &volumes {
                check.reasons_into(node, &mut reasons);
            }
            InterPod::node_reasons_into(inter_pod.as_ref(), &incoming, node, &ahead, &mut reasons);
            (node.name.to_string(), reasons)
        })
        .collect())
}

/// `snap` with `victims` not yet terminating.
fn before_preemption(mut snap: Snapshot, victims: &[&PodKey]) -> Snapshot {
    for key in victims {
        if let Some(pod) = snap.pods.get_mut(*key) {
            std::sync::Arc::make_mut(pod).terminating = false;
        }
    }
    snap
}

/// Whom the API server says the scheduler nominated, and which pods are
/// terminating, in `pods`' namespace: kgpu must see the same before it
/// judges (the scheduler preempts, nominates and clears nominations as it
/// goes). Called after a short pause, so the scheduler's patches land.
async fn nominations(pods: &Api<Pod>, ns: &str) -> Result<Vec<(PodKey, Option<String>, bool)>, String> {
    tokio::time::sleep(Duration::from_millis(200)).await;
    let listed = pods.list(&ListParams::default()).await.map_err(|e| format!("listing pods: {e}"))?;
    Ok(listed
        .items
        .iter()
        .map(|p| {
            let nominated = p.status.as_ref().and_then(|s| s.nominated_node_name.clone()).filter(|n| !n.is_empty());
            (
                PodKey::new(ns, p.metadata.name.as_deref().unwrap_or_default()),
                nominated,
                p.metadata.deletion_timestamp.is_some(),
            )
        })
        .collect())
}

/// The volume PreFilters' refusal of `key`, in the scheduler's words, if
/// kgpu finds one (no node is then tried).
fn kgpu_refusal(snap: &Snapshot, key: &PodKey) -> Option<String> {
    let pod = snap.pods.get(key)?;
    let index = Index::build(snap, snap.clock);
    match PodVolumes::of(pod)?.prepare(&index) {
        Prepared::Refused(r) => Some(r.scheduler_text(pod.namespace.clone(), &pod.name)),
        _ => None,
    }
}

/// The scheduler's histogram as kgpu would print it: per node, the reasons
/// of the first failing filter, each text once.
fn kgpu_histogram(verdicts: &BTreeMap<String, Vec<fit::NodeReason>>) -> BTreeMap<String, u32> {
    let mut out = BTreeMap::new();
    for reasons in verdicts.values() {
        let mut texts: Vec<String> = fit::first_filter_reasons(reasons).map(|r| r.scheduler_text()).collect();
        texts.sort();
        texts.dedup();
        for t in texts {
            *out.entry(t).or_default() += 1;
        }
    }
    out
}

/// Where kgpu parts from the scheduler on a pod it refused with `message`:
/// kgpu finds a node that fits, counts another histogram, or its pending
/// chain does not say it agrees; `None` when they agree.
fn refusal_problem(
    snap: &Snapshot,
    now: i64,
    (ns, name): (&str, &str),
    message: &str,
    verdicts: &BTreeMap<String, Vec<fit::NodeReason>>,
    nodes: usize,
) -> Option<String> {
    let fitting: Vec<&String> = verdicts.iter().filter(|(_, r)| r.is_empty()).map(|(n, _)| n).collect();
    let parsed = scheduler_msg::parse(message);
    let theirs: BTreeMap<String, u32> = parsed.reasons.iter().cloned().collect();
    let ours = kgpu_histogram(verdicts);
    let analysis = analysis::analyze(snap, now, &Thresholds::default());
    let item = analysis::pending::find(&analysis.pending, ns, name);
    if !fitting.is_empty() {
        Some(format!("refused ({message}); kgpu: fits on {fitting:?}"))
    } else if theirs != ours {
        Some(format!("refused ({message}); kgpu's histogram: {ours:?}"))
    } else if parsed.total_nodes != Some(nodes as u32) {
        Some(format!("the scheduler saw {:?} nodes of {nodes}", parsed.total_nodes))
    } else if item.is_none_or(|i| i.agrees_with_scheduler != Some(true)) {
        Some(format!("refused ({message}); kgpu's pending chain: {:?}", item.map(|i| (&i.summary, &i.disagreement))))
    } else {
        None
    }
}

/// A control plane with kgpu's live source on it, and the runtime that
/// drives both (kept together: dropping one stops the others).
struct Harness {
    rt: tokio::runtime::Runtime,
    client: kube::Client,
    snapshots: Snapshots,
    _tasks: Vec<tokio::task::JoinHandle<()>>,
    _cp: ControlPlane,
}

impl Harness {
    fn on(cp: ControlPlane) -> Harness {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let client = rt.block_on(support::kube::client(&cp));
        let (snapshots, _tasks) = rt.block_on(support::kube::source(&cp, &cp.kubeconfig));
        Harness { rt, client, snapshots, _tasks, _cp: cp }
    }
}

/// kgpu's live model of the cluster (its kube source and model task).
pub type Snapshots = tokio::sync::watch::Receiver<std::sync::Arc<Snapshot>>;

/// Waits until kgpu's model satisfies `ready` (30 s at most: Kueue's
/// reservations can take a while), and returns that snapshot.
async fn kgpu_sees(snapshots: &Snapshots, what: &str, ready: impl Fn(&Snapshot) -> bool) -> Result<Snapshot, String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        {
            let snap = snapshots.borrow();
            if ready(&snap) {
                return Ok((**snap).clone());
            }
        }
        if Instant::now() > deadline {
            return Err(format!("kgpu's model never showed {what}"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn run_cluster_case(
    client: &kube::Client,
    snapshots: &Snapshots,
    n: u32,
    case: &cases::ClusterCase,
) -> Result<u32, String> {
    let ns = format!("oracle-{n}");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns_obj: Namespace = serde_json::from_value(
        serde_json::json!({"metadata": {"name": ns, "labels": {"team": inter_pod::team_of(n)}}}),
    )
    .unwrap();
    namespaces.create(&PostParams::default(), &ns_obj).await.map_err(|e| format!("namespace: {e}"))?;
    let nodes: Api<Node> = Api::all(client.clone());
    let node_docs: Vec<Value> = case.nodes.iter().enumerate().map(|(i, node)| cases::node_json(n, i, node)).collect();
    for doc in &node_docs {
        let node: Node = serde_json::from_value(doc.clone()).map_err(|e| format!("node json: {e}"))?;
        nodes.create(&PostParams::default(), &node).await.map_err(|e| format!("create node: {e}"))?;
    }
    // Let the informers (kgpu's, and so most likely the scheduler's) see every node first.
    let names: Vec<String> = (0..case.nodes.len()).map(|i| cases::node_name(n, i)).collect();
    kgpu_sees(snapshots, "the case's nodes and namespace", |s| {
        names.iter().all(|name| s.nodes.contains_key(&kgpu::model::Sym::new(name)))
            && s.namespaces.contains_key(&kgpu::model::Sym::new(&ns))
    })
    .await?;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let mut report = Vec::new();
    let mut pod_docs = Vec::new();
    // Pods terminating before the pod being judged was created.
    let mut terminating: Vec<PodKey> = Vec::new();
    for (i, p) in case.pods.iter().enumerate() {
        let doc = cases::pod_json(n, &ns, i, p);
        pod_docs.push(doc.clone());
        let pod: Pod = serde_json::from_value(doc).map_err(|e| format!("pod json: {e}"))?;
        let name = format!("p{i}");
        if let Err(e) = pods.create(&PostParams::default(), &pod).await {
            // The API server refuses some generated shapes (kgpu never sees them).
            report.push(format!("{name}: refused by the API server: {e}"));
            continue;
        }
        let key = PodKey::new(&ns, &name);
        if let Some(scheduler) = p.scheduler_name {
            if let Some(problem) = judge_unanswered(&pods, snapshots, &key, scheduler).await? {
                report.push(format!("{name}: {problem}"));
            }
            continue;
        }
        let outcome = outcome(&pods, &name).await?;
        let settled = if case.pods.iter().any(|p| p.lingers) { nominations(&pods, &ns).await? } else { Vec::new() };
        let snap = kgpu_sees(snapshots, "the pod's outcome", |s| {
            let seen = s.pods.get(&key).is_some_and(|p| match &outcome {
                Outcome::Bound(_) => p.node.is_some(),
                Outcome::Refused(_) => p.unschedulable.is_some(),
            });
            seen && settled.iter().all(|(k, nominated, terminating)| {
                s.pods.get(k).is_some_and(|p| {
                    p.nominated.as_ref().map(|n| n.to_string()) == *nominated && p.terminating == *terminating
                })
            })
        })
        .await?;
        // The scheduler's message was written before its preemption took
        // effect: judge on the cluster as it was then, its victims not yet
        // terminating.
        let victims: Vec<&PodKey> =
            settled.iter().filter(|(k, _, t)| *t && !terminating.contains(k)).map(|(k, _, _)| k).collect();
        let snap = before_preemption(snap, &victims);
        terminating = settled.iter().filter(|(_, _, t)| *t).map(|(k, _, _)| k.clone()).collect();
        let now = snap.clock.max(kgpu::clock::wall_clock());
        let priority = snap.pods.get(&key).map_or(0, |p| p.priority);
        let verdicts = kgpu_verdicts(&snap, now, &key)?;
        if snap.pods.values().any(|p| p.nominated.is_some() && p.priority >= priority && p.key() != key) {
            NOMINATED_AHEAD.fetch_add(1, Ordering::SeqCst);
            let mut unnominated = snap.clone();
            let nominated: Vec<PodKey> =
                unnominated.pods.iter().filter(|(_, p)| p.nominated.is_some()).map(|(k, _)| k.clone()).collect();
            for k in &nominated {
                if let Some(pod) = unnominated.pods.get_mut(k) {
                    std::sync::Arc::make_mut(pod).nominated = None;
                }
            }
            if kgpu_verdicts(&unnominated, now, &key)? != verdicts {
                NOMINATION_DECIDED.fetch_add(1, Ordering::SeqCst);
            }
        }
        let fitting: Vec<&String> = verdicts.iter().filter(|(_, r)| r.is_empty()).map(|(n, _)| n).collect();
        let problem = match &outcome {
            Outcome::Bound(node) if !fitting.contains(&node) => {
                Some(format!("the scheduler bound it to {node}; kgpu: {node} does not fit ({:?})", verdicts.get(node)))
            }
            Outcome::Bound(_) => None,
            Outcome::Refused(message) => {
                if message.contains("affinity rules") || message.contains("topology spread") {
                    INTER_POD_REFUSALS.fetch_add(1, Ordering::SeqCst);
                }
                refusal_problem(&snap, now, (&ns, &name), message, &verdicts, case.nodes.len())
            }
        };
        if let Some(p) = problem {
            report.push(format!("{name}: {p}\n    per node: {verdicts:?}"));
        }
    }
    // Clean up: the next case must not see these nodes or pods.
    let _ = pods
        .delete_collection(
            &DeleteParams { grace_period_seconds: Some(0), ..Default::default() },
            &ListParams::default(),
        )
        .await;
    for i in 0..case.nodes.len() {
        let _ = nodes.delete(&cases::node_name(n, i), &DeleteParams::default()).await;
    }
    if report.is_empty() {
        Ok(case.pods.len() as u32)
    } else {
        Err(format!(
            "{}\nnodes:\n{}\npods:\n{}",
            report.join("\n"),
            node_docs.iter().map(|d| serde_json::to_string(d).unwrap()).collect::<Vec<_>>().join("\n"),
            pod_docs.iter().map(|d| serde_json::to_string(d).unwrap()).collect::<Vec<_>>().join("\n")
        ))
    }
}

/// One oracle campaign: `cases` generated cases (from `$cases_var`, or
/// `default`), seeded by `KGPU_ORACLE_SEED`, each run by `run` (its case
/// number, from `first`, and the case), which returns how many objects it
/// compared. Returns the cases asked for and the objects compared.
/// `describe` writes the summary line from the cases run, the
/// objects compared, the seconds taken and the seed; a disagreement panics
/// with the seed and the shrunk case.
fn campaign<S: proptest::strategy::Strategy>(
    cases_var: &str,
    default: u64,
    first: u32,
    strategy: &S,
    against: &str,
    run: impl Fn(u32, &S::Value) -> Result<u32, String>,
    describe: impl FnOnce(u32, u32, f64, u64) -> String,
) -> (u32, u32) {
    let cases = env_u64(cases_var, default) as u32;
    let seed = env_u64("KGPU_ORACLE_SEED", 20_261_201);
    let counter = AtomicU32::new(0);
    let objects = AtomicU32::new(0);
    let t0 = Instant::now();
    let result = runner(cases, seed).run(strategy, |case| {
        let n = first + counter.fetch_add(1, Ordering::SeqCst);
        let count = run(n, &case).map_err(TestCaseError::fail)?;
        objects.fetch_add(count, Ordering::SeqCst);
        Ok(())
    });
    eprintln!(
        "{}",
        describe(counter.load(Ordering::SeqCst), objects.load(Ordering::SeqCst), t0.elapsed().as_secs_f64(), seed)
    );
    if let Err(e) = result {
        panic!("kgpu disagrees with {against} (KGPU_ORACLE_SEED={seed}; the shrunk case below):\n{e}");
    }
    (cases, objects.load(Ordering::SeqCst))
}

#[test]
fn kgpu_predicts_what_the_real_scheduler_does() {
    if !ControlPlane::enabled() {
        return;
    }
    let cp = ControlPlane::start().unwrap();
    let h = Harness::on(cp);
    let (rt, client, snapshots) = (&h.rt, &h.client, &h.snapshots);
    rt.block_on(async {
        let rc: k8s_openapi::api::node::v1::RuntimeClass = serde_json::from_value(cases::runtime_class_json()).unwrap();
        Api::<k8s_openapi::api::node::v1::RuntimeClass>::all(client.clone())
            .create(&PostParams::default(), &rc)
            .await
            .unwrap();
    });
    let (cases, pods) = campaign(
        "KGPU_ORACLE_CASES",
        80,
        0,
        &cases::cluster(),
        "the real kube-scheduler",
        |n, case| rt.block_on(run_cluster_case(client, snapshots, n, case)),
        |run, count, secs, seed| {
            format!(
                "scheduler oracle: {run} cluster(s), {count} pod(s), {} refused with an inter-pod reason, {} for a scheduler that does not run, in {secs:.0}s (seed {seed})",
                INTER_POD_REFUSALS.load(Ordering::SeqCst),
                FOR_ABSENT_SCHEDULER.load(Ordering::SeqCst),
            )
        },
    );
    assert!(pods >= 200 || cases < 80, "the budget is at least 200 generated pods per run");
}

/// The same comparison on crowds of small pods with labels and rules about
/// each other, where InterPodAffinity and PodTopologySpread decide
/// (`KGPU_ORACLE_CROWD_CASES`, default 120: a mutation that ignores a running pod's anti-affinity fails within about 45).
#[test]
fn kgpu_predicts_where_pods_keep_each_other_away() {
    if !ControlPlane::enabled() {
        return;
    }
    let cp = ControlPlane::start().unwrap();
    let h = Harness::on(cp);
    let (rt, client, snapshots) = (&h.rt, &h.client, &h.snapshots);
    let before = INTER_POD_REFUSALS.load(Ordering::SeqCst);
    let (cases, _) = campaign(
        "KGPU_ORACLE_CROWD_CASES",
        120,
        10_000,
        &cases::crowd(),
        "the real kube-scheduler",
        |n, case| rt.block_on(run_cluster_case(client, snapshots, n, case)),
        |run, _, _, seed| {
            let refusals = INTER_POD_REFUSALS.load(Ordering::SeqCst) - before;
            format!("crowd oracle: {run} cluster(s), {refusals} refused with an inter-pod reason (seed {seed})")
        },
    );
    let refusals = INTER_POD_REFUSALS.load(Ordering::SeqCst) - before;
    assert!(
        refusals >= cases / 4 || cases < 40,
        "the crowds must make the scheduler refuse by these rules ({refusals})"
    );
}

/// Preemption (`preempt.rs`): full nodes, then pods of several priorities
/// with rules about each other; the scheduler preempts and nominates, and
/// kgpu must count each nominated pod where the scheduler does
/// (`KGPU_ORACLE_PREEMPT_CASES`, default 30).
#[test]
fn kgpu_predicts_around_nominated_preemptors() {
    if !ControlPlane::enabled() {
        return;
    }
    let cp = ControlPlane::start().unwrap();
    let h = Harness::on(cp);
    let (rt, client, snapshots) = (&h.rt, &h.client, &h.snapshots);
    rt.block_on(async {
        let classes: Api<k8s_openapi::api::scheduling::v1::PriorityClass> = Api::all(client.clone());
        for (name, value) in preempt::PRIORITY_CLASSES {
            let class = serde_json::from_value(preempt::priority_class_json(name, value)).unwrap();
            classes.create(&PostParams::default(), &class).await.unwrap();
        }
    });
    let (cases, _) = campaign(
        "KGPU_ORACLE_PREEMPT_CASES",
        30,
        20_000,
        &preempt::preempting(),
        "the real kube-scheduler",
        |n, case| rt.block_on(run_cluster_case(client, snapshots, n, case)),
        |run, count, secs, seed| {
            format!(
                "preemption oracle: {run} case(s), {count} pod(s), {} judged with a pod nominated ahead of them ({} of whose verdicts it changed), in {secs:.0}s (seed {seed})",
                NOMINATED_AHEAD.load(Ordering::SeqCst),
                NOMINATION_DECIDED.load(Ordering::SeqCst),
            )
        },
    );
    let (judged, decided) = (NOMINATED_AHEAD.load(Ordering::SeqCst), NOMINATION_DECIDED.load(Ordering::SeqCst));
    assert!(decided >= cases / 4 || cases < 10, "the nominated pods must decide verdicts ({judged}, {decided})");
}

/// The volume filters (`volumes.rs`): claims in every state the scheduler
/// reads, volumes with node affinity and zones, classes that bind at once,
/// wait for the first consumer or provision (`KGPU_ORACLE_STORAGE_CASES`,
/// default 40).
#[test]
fn kgpu_predicts_what_the_volume_filters_decide() {
    if !ControlPlane::enabled() {
        return;
    }
    let cp = ControlPlane::start().unwrap();
    let h = Harness::on(cp);
    let (rt, client, snapshots) = (&h.rt, &h.client, &h.snapshots);
    let (cases, _) = campaign(
        "KGPU_ORACLE_STORAGE_CASES",
        40,
        0,
        &volumes::storage_case(),
        "the real kube-scheduler",
        |n, case| rt.block_on(volumes::run_storage_case(client, snapshots, n, case)),
        |run, count, secs, seed| {
            format!(
                "volume oracle: {run} case(s), {count} pod(s), {} refused before any node, {} by a volume filter on some node, in {secs:.0}s (seed {seed})",
                volumes::REFUSALS_BEFORE_ANY_NODE.load(Ordering::SeqCst),
                volumes::VOLUME_NODE_REFUSALS.load(Ordering::SeqCst),
            )
        },
    );
    let before_any = volumes::REFUSALS_BEFORE_ANY_NODE.load(Ordering::SeqCst);
    let per_node = volumes::VOLUME_NODE_REFUSALS.load(Ordering::SeqCst);
    assert!(
        (before_any >= cases / 4 && per_node >= cases / 4) || cases < 20,
        "the cases must make the volume filters decide ({before_any} before any node, {per_node} per node)"
    );
}

/// DRA (`dra.rs`): generated slices, classes and claims against the
/// scheduler's DynamicResources plugin (`KGPU_ORACLE_DRA_CASES`, default 40).
#[test]
fn kgpu_predicts_what_the_dra_allocator_decides() {
    if !ControlPlane::enabled() {
        return;
    }
    let cp = ControlPlane::start().unwrap();
    let h = Harness::on(cp);
    let (rt, client, snapshots) = (&h.rt, &h.client, &h.snapshots);
    rt.block_on(dra::create_classes(client));
    rt.block_on(dra::a_claim_serving_256_pods_takes_no_more(client, snapshots)).unwrap();
    let (cases, _) = campaign(
        "KGPU_ORACLE_DRA_CASES",
        40,
        0,
        &dra::dra_case(),
        "the real kube-scheduler's DynamicResources plugin",
        |n, case| rt.block_on(dra::run_dra_case(client, snapshots, n, case)),
        |run, count, secs, seed| {
            format!(
                "DRA oracle: {run} case(s), {count} pod(s): {} bound ({} with partitions asked), {} refused ({} where each request had devices alone, {} by an allocator error), {} claim(s) the API server refused, in {secs:.0}s (seed {seed})",
                dra::BOUND.load(Ordering::SeqCst),
                dra::GOT_PARTITION.load(Ordering::SeqCst),
                dra::REFUSED.load(Ordering::SeqCst),
                dra::REFUSED_TOGETHER.load(Ordering::SeqCst),
                dra::ABORTED.load(Ordering::SeqCst),
                dra::API_REFUSED.load(Ordering::SeqCst),
            )
        },
    );
    let (bound, refused) = (dra::BOUND.load(Ordering::SeqCst), dra::REFUSED.load(Ordering::SeqCst));
    let together = dra::REFUSED_TOGETHER.load(Ordering::SeqCst);
    assert!(
        (bound >= cases && refused >= cases / 2 && together >= cases / 10) || cases < 20,
        "the cases must place, refuse, and refuse where each request has devices alone ({bound}, {refused}, {together})"
    );
}

#[test]
fn kgpu_predicts_what_the_real_kueue_admits() {
    if !ControlPlane::enabled() {
        return;
    }
    let cp = ControlPlane::start_with(|dir, bins| kgpu::lab::cluster::Options {
        kueue: true,
        crd_groups: vec!["kueue"],
        ..kgpu::lab::cluster::Options::control_plane(dir, bins)
    })
    .unwrap();
    let h = Harness::on(cp);
    let (rt, client, snapshots) = (&h.rt, &h.client, &h.snapshots);
    campaign(
        "KGPU_ORACLE_QUEUE_CASES",
        30,
        0,
        &queues::queue_case(),
        "the real Kueue manager",
        |n, case| rt.block_on(queues::run_queue_case(client, snapshots, n, case)),
        |run, count, secs, seed| {
            format!(
                "Kueue oracle: {run} case(s), {count} workload(s) ({} held behind a StrictFIFO head, {} by a stopped queue) in {secs:.0}s (seed {seed})",
                queues::HELD_BEHIND_HEAD.load(Ordering::SeqCst),
                queues::HELD_BY_STOP.load(Ordering::SeqCst),
            )
        },
    );
}
