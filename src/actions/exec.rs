//! The one place actions are carried out: the flows (drain, requeue,
//! repartition, defragment) over the backend's primitive operations. Each
//! step reports progress to the app; every action — dry runs too — ends in
//! the audit log. The watchers stay the only source of truth: the executor
//! changes the cluster, the snapshot shows the result.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::impact;
use crate::analysis::index::Index;
use crate::model::{GangKey, GangKind, PodKey, Snapshot, Sym};

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
        // A long action leaves a record even if kgpu dies before its end.
        if request.action.is_disruptive() && !request.dry_run {
            let entry = self.entry(&request, "started", String::new());
            if let Some(Err(e)) = self.audit.as_ref().map(|log| log.append(&entry)) {
                tracing::warn!("audit log not written: {e}");
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
        }
    }

    pub(super) fn check_cancel(&self) -> Result<(), ActionError> {
        if self.cancel.borrow().contains(&self.id) { Err(ActionError::Cancelled) } else { Ok(()) }
    }

    async fn execute(&self, req: &ActionRequest) -> Result<String, ActionError> {
        let snap = self.snapshot();
        let dry = req.dry_run;
        let prefix = if dry { "dry run: " } else { "" };
        match &req.action {
            Action::Cordon { node } | Action::Uncordon { node } => {
                let cordon = matches!(req.action, Action::Cordon { .. });
                let word = if cordon { "cordoned" } else { "uncordoned" };
                let Some(n) = snap.nodes.get(node) else {
                    return Err(ActionError::NotFound(format!("node {node}")));
                };
                if n.unschedulable == cordon {
                    return Ok(format!("node/{node} already {word}"));
                }
                self.backend.set_unschedulable(*node, cordon, dry).await?;
                Ok(format!("{prefix}node/{node} {}{word}", if dry { "would be " } else { "" }))
            }
            Action::Drain { node, gpu_only } => self.drain(&snap, *node, *gpu_only, dry).await,
            Action::Requeue { gang } => self.requeue(&snap, gang, dry).await,
            Action::RepartitionMig { node, config } => self.repartition(&snap, *node, config, dry).await,
            Action::RunPlan { target, label, evictions, reserve } => {
                self.run_plan(target, label, evictions, reserve, dry).await
            }
        }
    }

    /// Evicts each pod, retrying PDB refusals with backoff until the drain
    /// timeout. Returns how many went and why the others did not.
    pub(super) async fn evict_all(
        &self,
        pods: &[PodKey],
        dry: bool,
        what: &str,
    ) -> Result<(usize, Vec<String>), ActionError> {
        let deadline = tokio::time::Instant::now() + self.drain_timeout;
        let mut evicted = 0;
        let mut blocked = Vec::new();
        for (i, pod) in pods.iter().enumerate() {
            let mut delay = Duration::from_secs(2);
            loop {
                self.check_cancel()?;
                match self.backend.evict(pod, dry).await? {
                    Eviction::Evicted | Eviction::Gone => {
                        evicted += 1;
                        self.say(format!("{what}: evicted {}/{} ({pod})", i + 1, pods.len()), false, false).await;
                        break;
                    }
                    Eviction::Blocked(why) => {
                        if tokio::time::Instant::now() + delay > deadline {
                            blocked.push(format!("pod {pod} blocked by a PodDisruptionBudget ({why})"));
                            self.say(
                                format!("{what}: gave up on {pod} after {}s: PDB", self.drain_timeout.as_secs()),
                                true,
                                false,
                            )
                            .await;
                            break;
                        }
                        self.say(
                            format!(
                                "{what}: {pod}: PodDisruptionBudget refuses (429), retrying in {}s",
                                delay.as_secs()
                            ),
                            true,
                            false,
                        )
                        .await;
                        tokio::time::sleep(delay).await;
                        delay = (delay * 2).min(Duration::from_secs(30));
                    }
                }
            }
        }
        Ok((evicted, blocked))
    }

    async fn drain(&self, snap: &Snapshot, node: Sym, gpu_only: bool, dry: bool) -> Result<String, ActionError> {
        if !snap.nodes.contains_key(&node) {
            return Err(ActionError::NotFound(format!("node {node}")));
        }
        let index = Index::build(snap, snap.clock);
        let victims: Vec<PodKey> = impact::drain_victims(&index, node, gpu_only).iter().map(|p| p.key()).collect();
        if !snap.nodes.get(&node).is_some_and(|n| n.unschedulable) {
            self.backend.set_unschedulable(node, true, dry).await?;
        }
        let (evicted, blocked) = self.evict_all(&victims, dry, &format!("drain {node}")).await?;
        let prefix = if dry { "dry run: " } else { "" };
        if blocked.is_empty() {
            Ok(format!(
                "{prefix}node/{node} drained: cordoned, {evicted} pod(s) evicted{}",
                if gpu_only { " (GPU pods only)" } else { "" }
            ))
        } else {
            Err(ActionError::Failed(format!(
                "drain {node}: cordoned, {evicted} of {} pod(s) evicted; {}",
                victims.len(),
                blocked.join("; ")
            )))
        }
    }

    async fn requeue(&self, snap: &Snapshot, gang: &GangKey, dry: bool) -> Result<String, ActionError> {
        let Some(g) = snap.gangs.get(gang) else {
            return Err(ActionError::NotFound(format!("{} {}/{}", gang.kind.kind_name(), gang.namespace, gang.name)));
        };
        let prefix = if dry { "dry run: " } else { "" };
        let queue = g.queue.map_or("?".to_string(), |q| q.to_string());
        let index = Index::build(snap, snap.clock);
        let members: Vec<PodKey> =
            index.members(gang).iter().filter(|p| !p.phase.is_terminal()).map(|p| p.key()).collect();
        match gang.kind {
            GangKind::KueueWorkload => {
                self.backend.set_active(gang, false, dry).await?;
                self.say(
                    format!("{prefix}workload {} deactivated (spec.active=false); reactivating", gang.name),
                    false,
                    false,
                )
                .await;
                self.backend.set_active(gang, true, dry).await?;
                Ok(format!(
                    "{prefix}workload {}/{} requeued: deactivated and reactivated; it re-enters LocalQueue {queue} and waits for admission",
                    gang.namespace, gang.name
                ))
            }
            GangKind::VolcanoPodGroup => {
                let job = g.owner.as_ref().filter(|o| o.kind.as_str() == "Job").map(|o| o.name.to_string());
                match (&self.backend, job) {
                    (Backend::Kube(_), Some(job)) => {
                        self.backend.volcano_command(gang, &job, "AbortJob", dry).await?;
                        self.backend.volcano_command(gang, &job, "ResumeJob", dry).await?;
                        Ok(format!(
                            "{prefix}volcano job {}/{job} aborted and resumed; its PodGroup re-enters queue {queue}",
                            gang.namespace
                        ))
                    }
                    _ => {
                        let n = self.backend.delete_members(gang, &members, dry).await?;
                        Ok(format!(
                            "{prefix}{n} pod(s) of {}/{} deleted; their controller recreates them and the PodGroup re-enters queue {queue}",
                            gang.namespace, gang.name
                        ))
                    }
                }
            }
        }
    }

    async fn repartition(&self, snap: &Snapshot, node: Sym, config: &str, dry: bool) -> Result<String, ActionError> {
        let Some(n) = snap.nodes.get(&node) else {
            return Err(ActionError::NotFound(format!("node {node}")));
        };
        let was_cordoned = n.unschedulable;
        if n.operator.mig_config.is_some_and(|c| c.as_str() == config)
            && n.operator.mig_config_state.is_some_and(|s| s.as_str() == "success")
        {
            return Ok(format!("node/{node} already runs {config}"));
        }
        let old_config = n.operator.mig_config.map(|c| c.to_string());
        let uncordon = if was_cordoned { String::new() } else { format!("; undo: kubectl uncordon {node}") };
        self.drain(snap, node, true, dry).await.map_err(|e| match e {
            ActionError::Cancelled => ActionError::CancelledAfter(format!(
                "node/{node} {}, part of its GPU pods evicted, nvidia.com/mig.config not changed{uncordon}",
                if was_cordoned { "was cordoned already" } else { "cordoned" }
            )),
            e => e,
        })?;
        self.backend.set_mig_config(node, config, dry).await?;
        if dry {
            return Ok(format!(
                "dry run: node/{node} would be cordoned, its GPU pods evicted and labelled nvidia.com/mig.config={config}"
            ));
        }
        self.say(format!("{node}: nvidia.com/mig.config={config}; waiting for the mig-manager"), false, false).await;
        let mut rx = self.snapshots.clone();
        let deadline = tokio::time::Instant::now() + self.mig_timeout;
        let mut seen_pending = false;
        loop {
            if let Err(ActionError::Cancelled) = self.check_cancel() {
                let state =
                    rx.borrow().nodes.get(&node).and_then(|n| n.operator.mig_config_state).map(|s| s.to_string());
                let back = old_config.as_deref().map_or_else(
                    || format!("kubectl label node {node} nvidia.com/mig.config-"),
                    |c| format!("kubectl label node {node} nvidia.com/mig.config={c} --overwrite"),
                );
                return Err(ActionError::CancelledAfter(format!(
                    "node/{node} {}, its GPU pods evicted, nvidia.com/mig.config={config} set; the mig-manager may still be applying it (mig.config.state {}); undo: {back}, wait for mig.config.state=success{uncordon}",
                    if was_cordoned { "was cordoned already" } else { "stays cordoned" },
                    state.as_deref().unwrap_or("unset"),
                )));
            }
            let (state, paused, current) = {
                let s = rx.borrow_and_update();
                let n = s.nodes.get(&node);
                (
                    n.and_then(|n| n.operator.mig_config_state).map(|s| s.to_string()),
                    n.is_some_and(|n| n.operator.paused_for_mig_change),
                    n.and_then(|n| n.operator.mig_config).map(|c| c.to_string()),
                )
            };
            seen_pending |= state.as_deref() == Some("pending");
            let ours = current.as_deref() == Some(config);
            match state.as_deref() {
                // Success counts once the mig-manager has taken the new config up.
                Some("success") if ours && !paused && seen_pending => {
                    if !was_cordoned {
                        self.backend.set_unschedulable(node, false, false).await?;
                    }
                    return Ok(format!(
                        "node/{node} repartitioned to {config}{}",
                        if was_cordoned { " (left cordoned, as it was)" } else { " and uncordoned" }
                    ));
                }
                Some("failed") if ours => {
                    return Err(ActionError::Failed(format!(
                        "node/{node}: mig-manager reports nvidia.com/mig.config.state=failed for {config}; the node stays cordoned"
                    )));
                }
                _ => {}
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(ActionError::Failed(format!(
                    "node/{node}: nvidia.com/mig.config.state still '{}' after {}s{} — the mig-manager looks wedged (restart it or reboot the node); the node stays cordoned",
                    state.as_deref().unwrap_or("unset"),
                    self.mig_timeout.as_secs(),
                    if paused { ", GPU operands still paused-for-mig-change" } else { "" }
                )));
            }
            tokio::select! {
                changed = rx.changed() => if changed.is_err() { return Err(ActionError::Failed("the source stopped".into())) },
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            }
        }
    }
}
