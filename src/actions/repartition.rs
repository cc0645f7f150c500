//! Repartition MIG: cordon → evict the GPU pods → set
//! `nvidia.com/mig.config` → wait for the mig-manager's
//! `mig.config.state=success` → uncordon (unless it was cordoned before).

use std::time::Duration;

use crate::analysis::index::Index;
use crate::model::{Snapshot, Sym};

use super::backend::ActionError;
use super::exec::Executor;
use super::impact::{Impact, add_pods, drain_victims, eviction_command};

pub(super) fn question(node: Sym, config: &str) -> String {
    format!("Repartition MIG on {node} to {config}?")
}

pub(super) fn impact(index: &Index<'_>, node: Sym, config: &str, impact: &mut Impact) {
    let victims = drain_victims(index, node.clone(), true);
    add_pods(index, &victims, impact);
    impact.kubectl.push(format!("kubectl cordon {node}"));
    impact.kubectl.extend(victims.iter().map(|p| eviction_command(p)));
    impact.kubectl.push(format!("kubectl label node {node} nvidia.com/mig.config={config} --overwrite"));
    impact.kubectl.push(format!("kubectl get node {node} -L nvidia.com/mig.config.state -w"));
    impact.kubectl.push(format!("kubectl uncordon {node}"));
}

impl Executor {
    pub(super) async fn repartition(
        &self,
        snap: &Snapshot,
        node: Sym,
        config: &str,
        dry: bool,
    ) -> Result<String, ActionError> {
        let Some(n) = snap.nodes.get(&node) else {
            return Err(ActionError::NotFound(format!("node {node}")));
        };
        let was_cordoned = n.unschedulable;
        if n.operator.mig_config.as_ref().is_some_and(|c| c.as_str() == config)
            && n.operator.mig_config_state.as_ref().is_some_and(|s| s.as_str() == "success")
        {
            return Ok(format!("node/{node} already runs {config}"));
        }
        let old_config = n.operator.mig_config.as_ref().map(|c| c.to_string());
        let uncordon = if was_cordoned { String::new() } else { format!("; undo: kubectl uncordon {node}") };
        self.drain(snap, node.clone(), true, false, dry).await.map_err(|e| match e {
            ActionError::Cancelled => ActionError::CancelledAfter(format!(
                "node/{node} {}, part of its GPU pods evicted, nvidia.com/mig.config not changed{uncordon}",
                if was_cordoned { "was cordoned already" } else { "cordoned" }
            )),
            e => e,
        })?;
        self.backend.set_mig_config(node.clone(), config, dry).await?;
        if dry {
            return Ok(format!(
                "dry run: node/{node} would be cordoned, its GPU pods evicted and labelled nvidia.com/mig.config={config}"
            ));
        }
        self.say(format!("{node}: nvidia.com/mig.config={config}; waiting for the mig-manager"), false, false).await;
        let mut rx = self.snapshots.clone();
        let deadline = tokio::time::Instant::now() + self.mig_timeout;
        let mut seen_pending = false;
        let started = tokio::time::Instant::now();
        let mut last_state: Option<String> = None;
        let mut last_said = 0u64;
        loop {
            if let Err(ActionError::Cancelled) = self.check_cancel() {
                let state = rx
                    .borrow()
                    .nodes
                    .get(&node)
                    .and_then(|n| n.operator.mig_config_state.clone())
                    .map(|s| s.to_string());
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
                    n.and_then(|n| n.operator.mig_config_state.clone()).map(|s| s.to_string()),
                    n.is_some_and(|n| n.operator.paused_for_mig_change),
                    n.and_then(|n| n.operator.mig_config.clone()).map(|c| c.to_string()),
                )
            };
            seen_pending |= state.as_deref() == Some("pending");
            // Each step of the mig-manager's, as it reports it, with the time
            // so far, and every 15 s while a step lasts: a long wait is not a
            // frozen screen. Before it takes the new config up, the state it
            // shows is the old config's.
            let elapsed = started.elapsed().as_secs();
            let taken_up = seen_pending || current.as_deref() == Some(config) && state.as_deref() != Some("success");
            if state != last_state || elapsed >= last_said + 15 {
                let step = match state.as_deref() {
                    Some(s) if taken_up => format!("mig.config.state {s}"),
                    Some(s) => format!("waiting for the mig-manager to take it up (mig.config.state still {s})"),
                    None => "mig.config.state unset".to_string(),
                };
                let how_long =
                    if state == last_state { format!(", {elapsed}s so far") } else { format!(" after {elapsed}s") };
                self.say(
                    format!("{node}: {step}{how_long} (gives up at {}s)", self.mig_timeout.as_secs()),
                    false,
                    false,
                )
                .await;
                last_state.clone_from(&state);
                last_said = elapsed;
            }
            let ours = current.as_deref() == Some(config);
            match state.as_deref() {
                // Success counts once the mig-manager has taken the new config up.
                Some("success") if ours && !paused && seen_pending => {
                    if !was_cordoned {
                        self.backend.set_unschedulable(node.clone(), false, false).await?;
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
