//! The executor: runs a request through the steps its action's module
//! defines (`cordon`, `drain`, `requeue`, `repartition`, `defrag`) over the
//! backend's primitive operations, reports progress, honours cancels, and
//! ends every action — dry runs too — in the audit log. The watchers stay the only source of truth: the executor
//! changes the cluster, the snapshot shows the result.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use crate::model::{PodKey, Snapshot};

use super::audit::{AuditLog, Entry};
use super::backend::{ActionError, Backend, Eviction};
use super::{Action, ActionId, ActionRequest, Progress};
use crate::model::time::rfc3339;

#[derive(Clone)]
pub struct Executor {
    pub backend: Backend,
    pub snapshots: watch::Receiver<Arc<Snapshot>>,
    pub reports: mpsc::Sender<Progress>,
    pub audit: Option<AuditLog>,
    pub context: String,
    pub user: String,
    /// How long to wait for the mig-manager before calling it a wedge.
    pub mig_timeout: Duration,
    /// How long a drain keeps retrying evictions a PDB refuses.
    pub drain_timeout: Duration,
    /// How long the defrag plan waits for its target to be placed.
    pub place_timeout: Duration,
    /// The run this executor carries out (set on the clone for each run).
    pub id: ActionId,
    /// The runs the app cancelled: this one stops at its next step when its id is there.
    pub cancel: watch::Receiver<BTreeSet<ActionId>>,
}

impl Executor {
    pub(super) async fn say(&self, text: impl Into<String>, error: bool, done: bool) {
        let _ = self.reports.send(Progress { id: self.id, text: text.into(), error, done }).await;
    }

    pub(super) fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshots.borrow().clone()
    }

    /// Runs one request to the end, reports it, and audits it.
    pub async fn run(&self, request: ActionRequest) {
        // Nothing changes without a record that it started: an action leaves
        // one even if kgpu dies before its end.
        if !request.dry_run {
            let entry = self.entry(&request, crate::model::audit::STARTED, String::new());
            let written = match &self.audit {
                Some(log) => log
                    .append(&entry)
                    .map_err(|e| format!("the audit log {} cannot be written ({e})", log.path.display())),
                None => Err("there is no audit log (no data dir: set KGPU_DATA_DIR)".to_string()),
            };
            if let Err(why) = written {
                tracing::warn!("{} not started: {why}", request.action.verb());
                self.say(format!("{} not started: {why}", request.action.verb()), true, true).await;
                return;
            }
        }
        let result = self.execute(&request).await;
        let (result_word, detail) = match &result {
            Ok(d) => ("ok", d.clone()),
            Err(ActionError::Cancelled) => ("cancelled", format!("{} cancelled", request.action.verb())),
            Err(ActionError::CancelledAfter(what)) => {
                ("cancelled", format!("{} cancelled: {what}", request.action.verb()))
            }
            Err(e) => ("error", e.to_string()),
        };
        let entry = self.entry(&request, result_word, detail.clone());
        let audit_note = match &self.audit {
            Some(log) => match log.append(&entry) {
                Ok(()) => String::new(),
                Err(e) => format!(" (audit log not written: {e})"),
            },
            None => " (no audit log: no data dir)".into(),
        };
        tracing::info!("action {} {:?}: {result_word}: {detail}", request.action.verb(), request.action.targets());
        self.say(format!("{detail}{audit_note}"), result.is_err(), true).await;
    }

    fn entry(&self, request: &ActionRequest, result: &str, detail: String) -> Entry {
        Entry {
            time: rfc3339(crate::clock::wall_clock().max(self.snapshot().clock)),
            context: self.context.clone(),
            user: self.user.clone(),
            action: request.action.verb().to_string(),
            targets: request.action.targets(),
            dry_run: request.dry_run,
            result: result.into(),
            detail,
            run: Some(super::audit::this_run(self.id)),
        }
    }

    pub(super) fn check_cancel(&self) -> Result<(), ActionError> {
        if self.cancel.borrow().contains(&self.id) { Err(ActionError::Cancelled) } else { Ok(()) }
    }

    async fn execute(&self, req: &ActionRequest) -> Result<String, ActionError> {
        let snap = self.snapshot();
        let dry = req.dry_run;
        match &req.action {
            Action::Cordon { node } => self.cordon(&snap, node.clone(), true, dry).await,
            Action::Uncordon { node } => self.cordon(&snap, node.clone(), false, dry).await,
            Action::Drain { node, gpu_only, force } => self.drain(&snap, node.clone(), *gpu_only, *force, dry).await,
            Action::Requeue { gang } => self.requeue(&snap, gang, dry).await,
            Action::RepartitionMig { node, config } => self.repartition(&snap, node.clone(), config, dry).await,
            Action::RunPlan { target, label, evictions, planned, reserve } => {
                self.run_plan(target, label, (evictions, planned), reserve, dry).await
            }
            Action::Release { nodes, abandoned } => self.release_leftovers(&snap, nodes, abandoned, dry).await,
        }
    }

    /// Says why an eviction waits, waits `delay`, and doubles it (to 30 s at
    /// most) for the next try.
    async fn retry_after(&self, why: String, delay: &mut Duration) {
        self.say(format!("{why}, retrying in {}s", delay.as_secs()), true, false).await;
        tokio::time::sleep(*delay).await;
        *delay = (*delay * 2).min(Duration::from_secs(30));
    }

    /// Evicts each pod, retrying PDB refusals with backoff until the drain
    /// timeout. Each eviction is bound to the pod's uid in `seen` (what the
    /// action was decided on), so a pod recreated under the same name meanwhile
    /// is left alone. `done` says which went and why the others did not,
    /// as it goes: cancelled half-way, the caller still knows exactly which
    /// evictions the API server took (its watch may not show them yet).
    pub(super) async fn evict_all(
        &self,
        seen: &Snapshot,
        pods: &[PodKey],
        dry: bool,
        what: &str,
        done: &mut Evictions,
    ) -> Result<(), ActionError> {
        let deadline = tokio::time::Instant::now() + self.drain_timeout;
        for (i, pod) in pods.iter().enumerate() {
            let mut delay = Duration::from_secs(2);
            loop {
                self.check_cancel()?;
                let uid = seen.pods.get(pod).and_then(|p| p.uid);
                let outcome = match self.backend.evict(pod, uid, dry).await {
                    // An API server restarting or overloaded: the drain goes on
                    // once it answers, within the same deadline.
                    Err(ActionError::Unanswered(why)) if tokio::time::Instant::now() + delay <= deadline => {
                        let text = format!("{what}: {pod}: the API server did not answer ({why})");
                        self.retry_after(text, &mut delay).await;
                        continue;
                    }
                    other => other?,
                };
                match outcome {
                    Eviction::Evicted | Eviction::Gone => {
                        done.evicted.push(pod.clone());
                        let verb = if dry { "dry run: would evict" } else { "evicted" };
                        self.say(format!("{what}: {verb} {}/{} ({pod})", i + 1, pods.len()), false, false).await;
                        break;
                    }
                    Eviction::Replaced => {
                        done.evicted.push(pod.clone());
                        self.say(
                            format!(
                                "{what}: {}/{} ({pod}) was already replaced by a new pod of that name; left alone",
                                i + 1,
                                pods.len()
                            ),
                            false,
                            false,
                        )
                        .await;
                        break;
                    }
                    Eviction::Blocked(why) => {
                        if tokio::time::Instant::now() + delay > deadline {
                            done.blocked.push(format!("pod {pod} blocked by a PodDisruptionBudget ({why})"));
                            self.say(
                                format!(
                                    "{what}: {} on {pod} after {}s: PDB",
                                    if dry { "dry run: would give up" } else { "gave up" },
                                    self.drain_timeout.as_secs()
                                ),
                                true,
                                false,
                            )
                            .await;
                            break;
                        }
                        let text = format!("{what}: {pod}: PodDisruptionBudget refuses (429)");
                        self.retry_after(text, &mut delay).await;
                    }
                }
            }
        }
        Ok(())
    }
}

/// What an eviction pass did so far.
#[derive(Default)]
pub(super) struct Evictions {
    /// Pods whose eviction the API server took (or that were already gone
    /// or replaced), in order.
    pub evicted: Vec<PodKey>,
    /// Why each pod that stayed did.
    pub blocked: Vec<String>,
}

/// Waits for the next snapshot, or a second, whichever comes first: a step
/// that waits for its goal checks for a cancel either way. A feed that
/// ended is waited out a second at a time, not spun on.
pub(super) async fn next_snapshot(snapshots: &mut watch::Receiver<Arc<Snapshot>>) {
    if let Ok(Err(_)) = tokio::time::timeout(Duration::from_secs(1), snapshots.changed()).await {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The controllers of some pods, to know their replacements by: a pod is
/// one when a controller of the same namespace made it.
pub(super) struct Controllers(Vec<(crate::model::Sym, crate::model::Owner)>);

impl Controllers {
    pub(super) fn of(snap: &Snapshot, pods: &[PodKey]) -> Controllers {
        Controllers(
            pods.iter()
                .filter_map(|k| snap.pods.get(k).and_then(|p| Some((p.namespace.clone(), p.owner.clone()?))))
                .collect(),
        )
    }

    pub(super) fn made(&self, pod: &crate::model::Pod) -> bool {
        pod.owner.as_ref().is_some_and(|o| self.0.iter().any(|(ns, x)| *ns == pod.namespace && x == o))
    }
}
