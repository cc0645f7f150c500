//! The primitive operations an action is made of, against the simulator or
//! a real API server. The flows (drain, repartition, ...) in `exec` are the
//! same for both.

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::Eviction as EvictionRequest;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, ObjectMeta, Preconditions};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use serde_json::json;
use thiserror::Error;

use crate::model::{GangKey, PodKey, Sym, Taint, Toleration, TolerationOperator, Uid, keys};
use crate::sources::kube::client::short_error;
use crate::sources::sim::Command;
use crate::sources::sim::driver::SimHandle;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum ActionError {
    #[error("RBAC: cannot '{verb}' {resource}: grant it (kubectl auth can-i {verb} {resource}) or use another context")]
    Forbidden { verb: String, resource: String },
    #[error("{0} not found")]
    NotFound(String),
    #[error("{0}")]
    Refused(String),
    #[error("cancelled")]
    Cancelled,
    /// Cancelled, with what was done and undone by then.
    #[error("cancelled: {0}")]
    CancelledAfter(String),
    #[error("{0}")]
    Failed(String),
    /// The API server did not answer, or answered 5xx: worth another try.
    #[error("{0}")]
    Unanswered(String),
}

/// What became of one eviction.
#[derive(Debug, Clone, PartialEq)]
pub enum Eviction {
    Evicted,
    /// Already gone: repeating an action is harmless.
    Gone,
    /// A PodDisruptionBudget said no (HTTP 429).
    Blocked(String),
    /// The pod of that name is another one now (its uid differs: a
    /// StatefulSet recreated it): left alone, the one meant is gone.
    Replaced,
}

#[derive(Clone)]
pub enum Backend {
    Sim(SimHandle),
    Kube(Client),
}

fn api_error(e: kube::Error, verb: &str, resource: &str, what: &str) -> ActionError {
    match e {
        kube::Error::Api(s) if s.code == 403 => ActionError::Forbidden { verb: verb.into(), resource: resource.into() },
        kube::Error::Api(s) if s.code == 404 => ActionError::NotFound(what.into()),
        kube::Error::Api(s) if s.code == 422 || s.code == 409 => ActionError::Refused(format!("{what}: {}", s.message)),
        kube::Error::Api(s) if s.code < 500 => ActionError::Failed(format!("{what}: HTTP {}: {}", s.code, s.message)),
        other => ActionError::Unanswered(format!("{what}: {}", short_error(&other))),
    }
}

fn patch_params(dry_run: bool) -> PatchParams {
    PatchParams { dry_run, ..PatchParams::default() }
}

fn workloads(client: &Client, ns: &str) -> Api<DynamicObject> {
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta2", "Workload"), "workloads");
    Api::namespaced_with(client.clone(), ns, &ar)
}

/// A merge patch of one node (cordon, MIG config label).
async fn patch_node(client: &Client, node: Sym, dry_run: bool, patch: serde_json::Value) -> Result<(), ActionError> {
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .patch(node.as_str(), &patch_params(dry_run), &Patch::Merge(patch))
        .await
        .map(|_| ())
        .map_err(|e| api_error(e, "patch", "nodes", &format!("node {node}")))
}

/// A command to the simulator; a dry run sends nothing (the simulator
/// has no server-side dry run to ask).
async fn sim(h: &SimHandle, dry_run: bool, command: Command) -> Result<(), ActionError> {
    if dry_run {
        return Ok(());
    }
    h.apply(command).await.map(|_| ()).map_err(ActionError::Failed)
}

/// Optimistic read-modify-write attempts before a conflict is an error.
const CONFLICT_RETRIES: usize = 5;

fn toleration_json(t: &Toleration) -> serde_json::Value {
    let mut v = json!({"operator": match t.operator { TolerationOperator::Equal => "Equal", TolerationOperator::Exists => "Exists" }});
    if let Some(key) = t.key.clone() {
        v["key"] = json!(key.as_str());
    }
    if t.operator == TolerationOperator::Equal {
        v["value"] = json!(t.value.as_str());
    }
    if let Some(effect) = t.effect {
        v["effect"] = json!(effect.as_str());
    }
    v
}

/// Rewrites a list field of one object with `edit` under its
/// resourceVersion (a merge patch replaces lists whole), retrying when
/// someone else wrote in between. `edit` returns `None` when nothing needs
/// to change.
async fn edit_list<K>(
    api: &Api<K>,
    name: &str,
    dry_run: bool,
    path: [&str; 2],
    resource: &str,
    edit: impl Fn(Vec<serde_json::Value>) -> Option<Vec<serde_json::Value>>,
) -> Result<(), ActionError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    for _ in 0..CONFLICT_RETRIES {
        let current = api.get(name).await.map_err(|e| api_error(e, "get", resource, name))?;
        let value = serde_json::to_value(&current).map_err(|e| ActionError::Failed(e.to_string()))?;
        let list = value[path[0]][path[1]].as_array().cloned().unwrap_or_default();
        let Some(list) = edit(list) else { return Ok(()) };
        let patch = json!({
            "metadata": {"resourceVersion": value["metadata"]["resourceVersion"]},
            (path[0]): {(path[1]): list},
        });
        match api.patch(name, &patch_params(dry_run), &Patch::Merge(patch)).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => return Err(api_error(e, "patch", resource, name)),
        }
    }
    Err(ActionError::Failed(format!("{resource} {name}: changed by others {CONFLICT_RETRIES} times in a row")))
}

impl Backend {
    /// Adds `taint` to the node (replacing one with its key and effect).
    pub async fn add_taint(&self, node: Sym, taint: &Taint, dry_run: bool) -> Result<(), ActionError> {
        match self {
            Backend::Sim(h) => sim(h, dry_run, Command::Taint(node, taint.clone())).await,
            Backend::Kube(c) => {
                let nodes: Api<Node> = Api::all(c.clone());
                let ours =
                    json!({"key": taint.key.as_str(), "value": taint.value.as_str(), "effect": taint.effect.as_str()});
                edit_list(&nodes, node.as_str(), dry_run, ["spec", "taints"], "nodes", |mut taints| {
                    if taints.contains(&ours) {
                        return None;
                    }
                    taints.retain(|t| !(t["key"] == ours["key"] && t["effect"] == ours["effect"]));
                    taints.push(ours.clone());
                    Some(taints)
                })
                .await
            }
        }
    }

    /// Removes the node's taints with this key.
    pub async fn remove_taint(&self, node: Sym, key: Sym, dry_run: bool) -> Result<(), ActionError> {
        match self {
            Backend::Sim(h) => sim(h, dry_run, Command::Untaint(node, key)).await,
            Backend::Kube(c) => {
                let nodes: Api<Node> = Api::all(c.clone());
                edit_list(&nodes, node.as_str(), dry_run, ["spec", "taints"], "nodes", |taints| {
                    let kept: Vec<_> = taints.iter().filter(|t| t["key"] != key.as_str()).cloned().collect();
                    (kept.len() != taints.len()).then_some(kept)
                })
                .await
            }
        }
    }

    /// Adds a toleration to a pod: tolerations may be added to a running
    /// or pending pod (an update may not change or remove them).
    pub async fn add_toleration(
        &self,
        pod: &PodKey,
        toleration: &Toleration,
        dry_run: bool,
    ) -> Result<(), ActionError> {
        match self {
            Backend::Sim(h) => sim(h, dry_run, Command::Tolerate(pod.clone(), toleration.clone())).await,
            Backend::Kube(c) => {
                let pods: Api<Pod> = Api::namespaced(c.clone(), pod.namespace.as_str());
                let ours = toleration_json(toleration);
                edit_list(&pods, &pod.name, dry_run, ["spec", "tolerations"], "pods", |mut tolerations| {
                    if tolerations.contains(&ours) {
                        return None;
                    }
                    tolerations.push(ours.clone());
                    Some(tolerations)
                })
                .await
            }
        }
    }

    pub async fn set_unschedulable(&self, node: Sym, value: bool, dry_run: bool) -> Result<(), ActionError> {
        match self {
            Backend::Sim(h) => {
                sim(h, dry_run, if value { Command::Cordon(node) } else { Command::Uncordon(node) }).await
            }
            Backend::Kube(c) => patch_node(c, node, dry_run, json!({"spec": {"unschedulable": value}})).await,
        }
    }

    /// Evicts `pod`; with its `uid`, only that very pod (the API server
    /// answers 409 when the name now belongs to another).
    pub async fn evict(&self, pod: &PodKey, uid: Option<Uid>, dry_run: bool) -> Result<Eviction, ActionError> {
        match self {
            Backend::Sim(h) => {
                if dry_run {
                    return Ok(Eviction::Evicted);
                }
                match h.apply(Command::Evict(pod.clone())).await {
                    Ok(_) => Ok(Eviction::Evicted),
                    Err(e) if e.contains("not found") => Ok(Eviction::Gone),
                    Err(e) => Err(ActionError::Failed(e)),
                }
            }
            Backend::Kube(c) => {
                let pods: Api<Pod> = Api::namespaced(c.clone(), pod.namespace.as_str());
                // Built here rather than with kube's `EvictParams`, which
                // sends its delete options as `delete_options`: the API server
                // ignores that field, and with it the uid precondition (found
                // on the control plane: the recreated pod was evicted).
                let eviction = EvictionRequest {
                    metadata: ObjectMeta {
                        name: Some(pod.name.to_string()),
                        namespace: Some(pod.namespace.to_string()),
                        ..ObjectMeta::default()
                    },
                    delete_options: uid.map(|uid| DeleteOptions {
                        preconditions: Some(Preconditions { uid: Some(uid.to_string()), resource_version: None }),
                        ..DeleteOptions::default()
                    }),
                };
                let params = PostParams { dry_run, ..PostParams::default() };
                match pods.create_subresource::<_, serde_json::Value>("eviction", &pod.name, &params, &eviction).await {
                    Ok(_) => Ok(Eviction::Evicted),
                    Err(kube::Error::Api(s)) if s.code == 404 => Ok(Eviction::Gone),
                    Err(kube::Error::Api(s)) if s.code == 409 && uid.is_some() && s.message.contains("UID") => {
                        Ok(Eviction::Replaced)
                    }
                    Err(kube::Error::Api(s)) if s.code == 429 => Ok(Eviction::Blocked(s.message.clone())),
                    Err(e) => Err(api_error(e, "create", "pods/eviction", &format!("pod {pod}"))),
                }
            }
        }
    }

    /// Kueue: `spec.active` of a Workload.
    pub async fn set_active(&self, gang: &GangKey, active: bool, dry_run: bool) -> Result<(), ActionError> {
        match self {
            Backend::Sim(h) => sim(h, dry_run, Command::SetActive(gang.clone(), active)).await,
            Backend::Kube(c) => workloads(c, gang.namespace.as_str())
                .patch(&gang.name, &patch_params(dry_run), &Patch::Merge(json!({"spec": {"active": active}})))
                .await
                .map(|_| ())
                .map_err(|e| {
                    api_error(
                        e,
                        "patch",
                        "workloads.kueue.x-k8s.io",
                        &format!("workload {}/{}", gang.namespace, gang.name),
                    )
                }),
        }
    }

    /// Volcano: abort and resume the job that owns the PodGroup (bus Commands).
    pub async fn volcano_command(
        &self,
        gang: &GangKey,
        job: &str,
        action: &str,
        dry_run: bool,
    ) -> Result<(), ActionError> {
        let Backend::Kube(c) = self else {
            return Ok(());
        };
        let ar = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("bus.volcano.sh", "v1alpha1", "Command"),
            "commands",
        );
        let api: Api<DynamicObject> = Api::namespaced_with(c.clone(), gang.namespace.as_str(), &ar);
        let jobs =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("batch.volcano.sh", "v1alpha1", "Job"), "jobs");
        let job_api: Api<DynamicObject> = Api::namespaced_with(c.clone(), gang.namespace.as_str(), &jobs);
        let uid = job_api
            .get(job)
            .await
            .map_err(|e| {
                api_error(e, "get", "jobs.batch.volcano.sh", &format!("volcano job {}/{job}", gang.namespace))
            })?
            .metadata
            .uid
            .unwrap_or_default();
        let cmd: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "bus.volcano.sh/v1alpha1",
            "kind": "Command",
            "metadata": {"generateName": format!("{job}-{}-", action.to_ascii_lowercase()), "namespace": gang.namespace.as_str(),
                "ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": job, "uid": uid, "controller": true}]},
            "action": action,
            "target": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": job, "uid": uid},
        }))
        .map_err(|e| ActionError::Failed(e.to_string()))?;
        api.create(&PostParams { dry_run, ..PostParams::default() }, &cmd)
            .await
            .map(|_| ())
            .map_err(|e| api_error(e, "create", "commands.bus.volcano.sh", &format!("{action} for {job}")))
    }

    pub async fn set_mig_config(&self, node: Sym, config: &str, dry_run: bool) -> Result<(), ActionError> {
        match self {
            Backend::Sim(h) => {
                if dry_run {
                    return Ok(());
                }
                h.apply(Command::SetMigConfig(node, config.to_string())).await.map(|_| ()).map_err(ActionError::Refused)
            }
            Backend::Kube(c) => {
                patch_node(c, node, dry_run, json!({"metadata": {"labels": {keys::MIG_CONFIG: config}}})).await
            }
        }
    }
}
