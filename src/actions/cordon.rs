//! Cordon and uncordon: `spec.unschedulable`, nothing running moves.

use crate::model::{Snapshot, Sym};

use super::backend::ActionError;
use super::exec::Executor;
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
        self.backend.set_unschedulable(node, cordon, dry).await?;
        Ok(format!("{}node/{node} {}{word}", if dry { "dry run: " } else { "" }, if dry { "would be " } else { "" }))
    }
}
