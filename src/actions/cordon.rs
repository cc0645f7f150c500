//! Cordon and uncordon: `spec.unschedulable`, nothing running moves.

use std::time::Duration;

use crate::model::{Snapshot, Sym};

use super::backend::ActionError;
use super::exec::{Executor, next_snapshot};
use super::impact::Impact;

pub(super) fn question(node: Sym, cordon: bool) -> String {
    format!("{} node {node}?", if cordon { "Cordon" } else { "Uncordon" })
}

pub(super) fn impact(node: Sym, cordon: bool, impact: &mut Impact) {
    impact.kubectl.push(format!("kubectl {} {node}", if cordon { "cordon" } else { "uncordon" }));
}

impl Executor {
    pub(super) async fn cordon(
        &self,
        snap: &Snapshot,
        node: Sym,
        cordon: bool,
        dry: bool,
    ) -> Result<String, ActionError> {
        let word = if cordon { "cordoned" } else { "uncordoned" };
        let Some(n) = snap.nodes.get(&node) else {
            return Err(ActionError::NotFound(format!("node {node}")));
        };
        if n.unschedulable == cordon {
            return Ok(format!("node/{node} already {word}"));
        }
        self.backend.set_unschedulable(node.clone(), cordon, dry).await?;
        if dry {
            return Ok(format!("dry run: node/{node} would be {word}"));
        }
        self.until_seen(node.clone(), cordon).await?;
        Ok(format!("node/{node} {word}"))
    }

    /// Done when the watch shows the node's new state, as the cockpit will
    /// show it, not when the PATCH returned: an autoscaler or the lab's
    /// controller may undo it, and a stalled watch would show the old state.
    async fn until_seen(&self, node: Sym, cordon: bool) -> Result<(), ActionError> {
        let deadline = tokio::time::Instant::now() + SEEN_WITHIN;
        let mut snapshots = self.snapshots.clone();
        loop {
            self.check_cancel()?;
            match self.snapshot().nodes.get(&node) {
                Some(n) if n.unschedulable == cordon => return Ok(()),
                Some(_) => {}
                None => return Err(ActionError::Failed(format!("node/{node} is gone"))),
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(ActionError::Failed(format!(
                    "node/{node}: the API server took the change, but after {}s the watch still shows it {}; \
                     something undid it or the feed is stalled (kubectl get node {node} -o jsonpath='{{.spec.unschedulable}}')",
                    SEEN_WITHIN.as_secs(),
                    if cordon { "schedulable" } else { "cordoned" }
                )));
            }
            next_snapshot(&mut snapshots).await;
        }
    }
}

/// How long a cordon waits for the watch to show it (a watch event takes
/// milliseconds; seconds mean a stalled feed or a controller fighting it).
const SEEN_WITHIN: Duration = Duration::from_secs(15);
