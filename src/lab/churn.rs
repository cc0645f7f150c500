//! `kgpu lab up --churn`: a seeded stream of GPU Jobs of realistic shapes
//! arriving and finishing, so the cockpit shows a cluster that moves.
//!
//! The shapes follow what GPU fleets run: many 1- and 2-GPU jobs
//! (notebooks, evaluation, inference tests), fewer 4- and 8-GPU jobs, the
//! odd 2×8 or 4×8 distributed job. KWOK finishes each pod after its run
//! time; finished Jobs are removed by their TTL. An arrival that would
//! take the unfinished churn Jobs past a quarter of the cluster's GPUs
//! does not come, so the scenario's own story stays readable under the
//! churn and the stream never stalls behind one big job.

use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

use crate::model::keys;
use crate::sources::kube::manifest::COMPLETE_AFTER;
use crate::sources::sim::rng::Rng;

/// The namespace churn Jobs live in.
pub const NAMESPACE: &str = "churn";
/// Every churn Job carries it.
pub const LABEL: &str = "kgpu.dev/churn";

/// Churn asks for at most this share (numerator, denominator) of the
/// cluster's allocatable GPUs at once.
pub const GPU_SHARE: (u64, u64) = (1, 4);

/// (pods, GPUs per pod, weight): the mix of shapes.
const SHAPES: [(u32, u32, u32); 7] = [(1, 1, 30), (1, 2, 20), (1, 4, 18), (1, 8, 14), (2, 4, 8), (2, 8, 7), (4, 8, 3)];

/// One arriving Job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arrival {
    pub name: String,
    pub pods: u32,
    pub gpus_per_pod: u32,
    /// How long each pod works, seconds.
    pub runs_for: u32,
}

/// The seeded sequence of arrivals.
pub struct Generator {
    rng: Rng,
    n: u64,
}

impl Generator {
    pub fn new(seed: u64) -> Generator {
        Generator { rng: Rng::new(seed), n: 0 }
    }

    pub fn next_arrival(&mut self) -> Arrival {
        self.n += 1;
        let total: u32 = SHAPES.iter().map(|s| s.2).sum();
        let mut draw = self.rng.range(0, i64::from(total) - 1) as u32;
        let (pods, gpus_per_pod, _) = SHAPES
            .iter()
            .copied()
            .find(|s| {
                if draw < s.2 {
                    true
                } else {
                    draw -= s.2;
                    false
                }
            })
            .unwrap_or(SHAPES[0]);
        // Bigger jobs run longer: 2 to 10 minutes per GPU of the pod, capped at an hour.
        let runs_for = (self.rng.range(120, 600) as u32 * gpus_per_pod).min(3600);
        let kind = match (pods, gpus_per_pod) {
            (1, 1 | 2) => "eval",
            (1, _) => "finetune",
            _ => "train",
        };
        Arrival { name: format!("{kind}-{:04}-{}", self.n, self.rng.suffix()), pods, gpus_per_pod, runs_for }
    }

    /// Seconds until the next arrival (mean `mean`, uniform ±50%).
    pub fn next_gap(&mut self, mean: u32) -> u64 {
        let mean = i64::from(mean.max(1));
        self.rng.range(mean / 2, mean + mean / 2).max(1) as u64
    }
}

impl Arrival {
    pub fn gpus(&self) -> u64 {
        u64::from(self.pods) * u64::from(self.gpus_per_pod)
    }
}

/// Whether `arrival` may be submitted while unfinished churn Jobs ask for
/// `churn_gpus` of the cluster's `cluster_gpus`.
pub fn has_room(arrival: &Arrival, churn_gpus: u64, cluster_gpus: u64) -> bool {
    churn_gpus + arrival.gpus() <= cluster_gpus * GPU_SHARE.0 / GPU_SHARE.1
}

/// The Job of an arrival: tolerates the GPU taint, finishes through KWOK,
/// removed a few minutes after it ends.
pub fn job(a: &Arrival) -> Value {
    let gpus = a.gpus_per_pod.to_string();
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": a.name, "namespace": NAMESPACE, "labels": {LABEL: "true"}},
        "spec": {
            "parallelism": a.pods,
            "completions": a.pods,
            "completionMode": if a.pods > 1 { "Indexed" } else { "NonIndexed" },
            "backoffLimit": 3,
            "ttlSecondsAfterFinished": 180,
            "template": {
                "metadata": {
                    "labels": {LABEL: "true"},
                    "annotations": {COMPLETE_AFTER: format!("{}s", a.runs_for)},
                },
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 0,
                    "tolerations": [{"key": keys::RESOURCE_GPU, "operator": "Exists", "effect": "NoSchedule"}],
                    "containers": [{
                        "name": "main",
                        "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                        "resources": {
                            "requests": {"cpu": format!("{}", 4 * a.gpus_per_pod), "memory": format!("{}Gi", 32 * a.gpus_per_pod)},
                            "limits": {keys::RESOURCE_GPU: gpus},
                        },
                    }],
                },
            },
        },
    })
}

fn jobs_api(client: &kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("batch", "v1", "Job");
    Api::namespaced_with(client.clone(), NAMESPACE, &ApiResource::from_gvk_with_plural(&gvk, "jobs"))
}

/// Submits Jobs until `stop` fires: one every `mean_gap` seconds on
/// average, less the arrivals without room ([`has_room`]). `said` hears
/// one line per Job submitted.
pub async fn run(
    client: kube::Client,
    seed: u64,
    mean_gap: u32,
    mut stop: tokio::sync::watch::Receiver<bool>,
    mut said: impl FnMut(String) + Send,
) {
    let namespaces: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "Namespace"), "namespaces"),
    );
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}});
    if let Err(e) = namespaces.patch(NAMESPACE, &PatchParams::apply("kgpu-lab"), &Patch::Apply(&ns)).await {
        said(format!("churn: cannot create namespace {NAMESPACE}: {e}"));
        return;
    }
    let nodes: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "Node"), "nodes"),
    );
    let jobs = jobs_api(&client);
    let mut generator = Generator::new(seed);
    loop {
        let next = generator.next_arrival();
        let churn_gpus = jobs
            .list(&ListParams::default().labels(&format!("{LABEL}=true")))
            .await
            .map(|list| list.items.iter().filter(|j| !finished(&j.data)).map(|j| job_gpus(&j.data)).sum::<u64>());
        let cluster_gpus = nodes.list(&ListParams::default()).await.map(|list| {
            list.items
                .iter()
                .filter_map(|n| n.data["status"]["allocatable"][keys::RESOURCE_GPU].as_str()?.parse::<u64>().ok())
                .sum::<u64>()
        });
        // On an API error the budget cannot be checked: no arrival.
        if let (Ok(churn_gpus), Ok(cluster_gpus)) = (churn_gpus, cluster_gpus)
            && has_room(&next, churn_gpus, cluster_gpus)
        {
            match jobs.patch(&next.name, &PatchParams::apply("kgpu-lab"), &Patch::Apply(job(&next))).await {
                Ok(_) => said(format!(
                    "churn: {} arrives ({}×{} GPU, {} min)",
                    next.name,
                    next.pods,
                    next.gpus_per_pod,
                    next.runs_for / 60
                )),
                Err(e) => said(format!("churn: cannot create {}: {e}", next.name)),
            }
        }
        let gap = Duration::from_secs(generator.next_gap(mean_gap));
        tokio::select! {
            _ = tokio::time::sleep(gap) => {}
            _ = stop.changed() => break,
        }
    }
}

/// Deletes every churn Job (and, through garbage collection, its pods).
pub async fn clean(client: &kube::Client) -> Result<(), kube::Error> {
    jobs_api(client)
        .delete_collection(&DeleteParams::background(), &ListParams::default().labels(&format!("{LABEL}=true")))
        .await
        .map(|_| ())
}

/// GPUs a churn Job asks for: parallelism × the pod's GPU limit.
fn job_gpus(job: &Value) -> u64 {
    let per_pod = job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"][keys::RESOURCE_GPU]
        .as_str()
        .and_then(|g| g.parse::<u64>().ok())
        .unwrap_or(0);
    job["spec"]["parallelism"].as_u64().unwrap_or(1) * per_pod
}

fn finished(job: &Value) -> bool {
    job["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter().any(|c| (c["type"] == "Complete" || c["type"] == "Failed") && c["status"] == "True")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_jobs() {
        let a: Vec<Arrival> = {
            let mut g = Generator::new(7);
            (0..20).map(|_| g.next_arrival()).collect()
        };
        let b: Vec<Arrival> = {
            let mut g = Generator::new(7);
            (0..20).map(|_| g.next_arrival()).collect()
        };
        assert_eq!(a, b);
        let c = Generator::new(8).next_arrival();
        assert_ne!(a[0], c);
    }

    #[test]
    fn shapes_are_realistic_and_every_one_occurs() {
        let mut g = Generator::new(1);
        let arrivals: Vec<Arrival> = (0..2000).map(|_| g.next_arrival()).collect();
        for (pods, gpus, _) in SHAPES {
            assert!(arrivals.iter().any(|a| a.pods == pods && a.gpus_per_pod == gpus), "{pods}×{gpus} never drawn");
        }
        let small = arrivals.iter().filter(|a| a.pods == 1 && a.gpus_per_pod <= 2).count();
        assert!(small > 800 && small < 1200, "about half are 1- and 2-GPU jobs: {small}");
        assert!(arrivals.iter().all(|a| (120..=3600).contains(&a.runs_for)));
    }

    #[test]
    fn a_job_asks_for_its_gpus_and_finishes_through_kwok() {
        let a = Arrival { name: "train-0001-abcde".into(), pods: 2, gpus_per_pod: 8, runs_for: 900 };
        let j = job(&a);
        assert_eq!(j["spec"]["parallelism"], 2);
        assert_eq!(j["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"][keys::RESOURCE_GPU], "8");
        assert_eq!(j["spec"]["template"]["metadata"]["annotations"][COMPLETE_AFTER], "900s");
        assert!(j["spec"]["ttlSecondsAfterFinished"].as_u64().is_some());
        let parsed: Result<k8s_openapi::api::batch::v1::Job, _> = serde_json::from_value(j);
        assert!(parsed.is_ok(), "{parsed:?}");
    }

    #[test]
    fn churn_keeps_to_a_quarter_of_the_gpus() {
        let a = Arrival { name: "train-0002-abcde".into(), pods: 2, gpus_per_pod: 8, runs_for: 900 };
        assert_eq!(job_gpus(&job(&a)), 16);
        assert!(has_room(&a, 0, 64), "16 of 64");
        assert!(!has_room(&a, 1, 64), "17 > 16");
        assert!(!has_room(&a, 0, 32), "a quarter of 32 is 8");
    }

    #[test]
    fn gaps_average_the_mean() {
        let mut g = Generator::new(3);
        let total: u64 = (0..1000).map(|_| g.next_gap(20)).sum();
        assert!((18_000..=22_000).contains(&total), "{total}");
    }
}
