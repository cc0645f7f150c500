//! The one place actions are carried out. Each step reports progress to
//! the app; every action (and dry run) ends in the audit log. The
//! watchers stay the only source of truth: the executor changes the
//! cluster, the snapshot shows the result.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use crate::analysis::impact;
use crate::analysis::index::Index;
use crate::app::Msg;
use crate::model::{GangKind, Snapshot, Sym};
use crate::sources::sim::Command;
use crate::sources::sim::driver::SimHandle;

use super::audit::{AuditLog, Entry, rfc3339};
use super::{Action, ActionRequest};

#[derive(Clone)]
pub enum Backend {
    Sim(SimHandle),
}

#[derive(Clone)]
pub struct Executor {
    pub backend: Backend,
    pub snapshots: watch::Receiver<Arc<Snapshot>>,
    pub reports: mpsc::Sender<Msg>,
    pub audit: Option<AuditLog>,
    pub context: String,
    pub user: String,
    /// How long to wait for mig-manager before calling it a wedge.
    pub mig_timeout: Duration,
}

impl Executor {
    async fn say(&self, text: impl Into<String>, error: bool, done: bool) {
        let _ = self.reports.send(Msg::ActionReport { text: text.into(), error, done }).await;
    }

    fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshots.borrow().clone()
    }

    async fn sim(&self, command: Command) -> Result<String, String> {
        match &self.backend {
            Backend::Sim(h) => h.apply(command).await,
        }
    }

    /// Runs one request to the end, reports it, and audits it.
    pub async fn run(&self, request: ActionRequest) {
        let result = self.execute(&request).await;
        let (ok, detail) = match &result {
            Ok(d) => (true, d.clone()),
            Err(d) => (false, d.clone()),
        };
        let now = self.snapshot().clock;
        let entry = Entry {
            time: rfc3339(now),
            context: self.context.clone(),
            user: self.user.clone(),
            action: request.action.verb().to_string(),
            targets: request.action.targets(),
            dry_run: request.dry_run,
            result: if ok { "ok".into() } else { "error".into() },
            detail: detail.clone(),
        };
        let audit_note = match &self.audit {
            Some(log) => match log.append(&entry) {
                Ok(()) => String::new(),
                Err(e) => format!(" (audit log not written: {e})"),
            },
            None => " (no audit log: no data dir)".into(),
        };
        self.say(format!("{detail}{audit_note}"), !ok, true).await;
    }

    async fn execute(&self, req: &ActionRequest) -> Result<String, String> {
        let snap = self.snapshot();
        let dry = if req.dry_run { "dry run: " } else { "" };
        match &req.action {
            Action::Cordon { node } | Action::Uncordon { node } => {
                if !snap.nodes.contains_key(node) {
                    return Err(format!("nodes \"{node}\" not found"));
                }
                let cordon = matches!(req.action, Action::Cordon { .. });
                let already = snap.nodes.get(node).is_some_and(|n| n.unschedulable == cordon);
                if req.dry_run {
                    return Ok(format!("{dry}node/{node} would be {}", if cordon { "cordoned" } else { "uncordoned" }));
                }
                if already {
                    return Ok(format!("node/{node} already {}", if cordon { "cordoned" } else { "uncordoned" }));
                }
                self.sim(if cordon { Command::Cordon(*node) } else { Command::Uncordon(*node) }).await
            }
            Action::Drain { node, gpu_only } => self.drain(&snap, *node, *gpu_only, req.dry_run).await,
            Action::Requeue { gang } => {
                if !snap.gangs.contains_key(gang) {
                    return Err(format!("{} {}/{} not found", gang.kind.kind_name(), gang.namespace, gang.name));
                }
                if req.dry_run {
                    return Ok(match gang.kind {
                        GangKind::KueueWorkload => {
                            format!("{dry}workload {} would be deactivated and reactivated (spec.active)", gang.name)
                        }
                        GangKind::VolcanoPodGroup => {
                            format!("{dry}podgroup {} would be aborted and resumed", gang.name)
                        }
                    });
                }
                match gang.kind {
                    GangKind::KueueWorkload => {
                        self.sim(Command::SetActive(gang.clone(), false)).await?;
                        self.say(format!("workload {} deactivated; reactivating", gang.name), false, false).await;
                        self.sim(Command::SetActive(gang.clone(), true)).await?;
                        Ok(format!(
                            "workload {}/{} requeued: it re-enters LocalQueue {} and waits for admission",
                            gang.namespace,
                            gang.name,
                            snap.gangs.get(gang).and_then(|g| g.queue).map_or("?".into(), |q| q.to_string())
                        ))
                    }
                    GangKind::VolcanoPodGroup => {
                        let r = self.sim(Command::DeleteGangPods(gang.clone())).await?;
                        Ok(format!(
                            "{r}; the job controller recreates them and the PodGroup re-enters queue {}",
                            snap.gangs.get(gang).and_then(|g| g.queue).map_or("?".into(), |q| q.to_string())
                        ))
                    }
                }
            }
            Action::RepartitionMig { node, config } => self.repartition(&snap, *node, config, req.dry_run).await,
            Action::RunPlan { evictions, target } => {
                if req.dry_run {
                    return Ok(format!("{dry}{} pod(s) would be evicted to make room for {target}", evictions.len()));
                }
                let mut done = 0;
                for (i, key) in evictions.iter().enumerate() {
                    match self.sim(Command::Evict(key.clone())).await {
                        Ok(_) => done += 1,
                        Err(e) => self.say(format!("evict {}/{}: {e}", key.namespace, key.name), true, false).await,
                    }
                    self.say(format!("defrag: evicted {}/{}", i + 1, evictions.len()), false, false).await;
                }
                if done == evictions.len() {
                    Ok(format!(
                        "defrag plan for {target}: {done} pod(s) evicted; their controllers recreate them elsewhere"
                    ))
                } else {
                    Err(format!("defrag plan for {target}: {done} of {} evicted", evictions.len()))
                }
            }
        }
    }

    async fn drain(&self, snap: &Snapshot, node: Sym, gpu_only: bool, dry_run: bool) -> Result<String, String> {
        if !snap.nodes.contains_key(&node) {
            return Err(format!("nodes \"{node}\" not found"));
        }
        let index = Index::build(snap, snap.clock);
        let victims: Vec<_> = impact::drain_victims(&index, node, gpu_only).iter().map(|p| p.key()).collect();
        if dry_run {
            return Ok(format!("dry run: node/{node} would be cordoned and {} pod(s) evicted", victims.len()));
        }
        self.sim(Command::Cordon(node)).await?;
        let total = victims.len();
        for (i, key) in victims.into_iter().enumerate() {
            if let Err(e) = self.sim(Command::Evict(key.clone())).await {
                self.say(format!("evict {}/{}: {e}", key.namespace, key.name), true, false).await;
            }
            self.say(format!("drain {node}: evicted {}/{total}", i + 1), false, false).await;
        }
        Ok(format!("node/{node} drained: cordoned, {total} pod(s) evicted"))
    }

    async fn repartition(&self, snap: &Snapshot, node: Sym, config: &str, dry_run: bool) -> Result<String, String> {
        if !snap.nodes.contains_key(&node) {
            return Err(format!("nodes \"{node}\" not found"));
        }
        if dry_run {
            let index = Index::build(snap, snap.clock);
            let n = impact::drain_victims(&index, node, true).len();
            return Ok(format!(
                "dry run: node/{node} would be cordoned, {n} GPU pod(s) evicted, nvidia.com/mig.config={config} set"
            ));
        }
        let was_cordoned = snap.nodes.get(&node).is_some_and(|n| n.unschedulable);
        self.drain(snap, node, true, false).await?;
        self.sim(Command::SetMigConfig(node, config.to_string())).await?;
        self.say(format!("{node}: nvidia.com/mig.config={config}; waiting for mig-manager"), false, false).await;
        let mut rx = self.snapshots.clone();
        let deadline = tokio::time::Instant::now() + self.mig_timeout;
        loop {
            let (state, paused) = {
                let s = rx.borrow_and_update();
                let n = s.nodes.get(&node);
                (
                    n.and_then(|n| n.operator.mig_config_state).map(|s| s.as_str().to_string()),
                    n.is_some_and(|n| n.operator.paused_for_mig_change),
                )
            };
            let config_now =
                self.snapshot().nodes.get(&node).and_then(|n| n.operator.mig_config).map(|c| c.to_string());
            match state.as_deref() {
                Some("success") if config_now.as_deref() == Some(config) && !paused => {
                    if !was_cordoned {
                        self.sim(Command::Uncordon(node)).await?;
                    }
                    return Ok(format!(
                        "node/{node} repartitioned to {config}{}",
                        if was_cordoned { " (left cordoned, as it was)" } else { " and uncordoned" }
                    ));
                }
                Some("failed") => {
                    return Err(format!(
                        "node/{node}: mig-manager reports mig.config.state=failed for {config}; the node stays cordoned"
                    ));
                }
                _ => {}
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(format!(
                    "node/{node}: mig.config.state still {} after {}s{} — looks wedged (mig-manager restart or node reboot needed); the node stays cordoned",
                    state.as_deref().unwrap_or("unset"),
                    self.mig_timeout.as_secs(),
                    if paused { ", GPU operands still paused-for-mig-change" } else { "" }
                ));
            }
            tokio::select! {
                changed = rx.changed() => if changed.is_err() { return Err("the source stopped".into()) },
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
    }
}
