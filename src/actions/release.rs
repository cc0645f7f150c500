//! Releasing what a kgpu that ended without finishing left behind: the
//! reservation taints of its defrag plans come off, and its open actions
//! are closed in the audit log as `abandoned`, with what they left. A
//! cordon a killed drain left stays (the drain's goal may still be wanted):
//! the blast radius names it with its undo.

use crate::analysis::leftovers::{self, Leftovers};
use crate::model::audit::{ABANDONED, AuditEntry};
use crate::model::{Snapshot, Sym, keys};

use super::backend::ActionError;
use super::defrag::join;
use super::exec::Executor;
use super::impact::Impact;

pub(super) fn question(nodes: &[Sym], abandoned: &[AuditEntry]) -> String {
    let mut parts = Vec::new();
    if !nodes.is_empty() {
        parts.push(format!("remove kgpu's reservation from {}", join(nodes)));
    }
    if !abandoned.is_empty() {
        parts.push(format!("close {} abandoned action(s) in the audit log", abandoned.len()));
    }
    let mut q = parts.join(" and ");
    if let Some(first) = q.get(..1) {
        q = format!("{}{}?", first.to_uppercase(), &q[1..]);
    }
    q
}

/// Who started an abandoned action, and which kgpu it was.
pub fn started_by(start: &AuditEntry) -> String {
    let run = start.run.as_ref().map_or(String::new(), |r| format!(", kgpu pid {} on {}, gone", r.pid, r.host));
    // A plan names every pod it evicts: the first few say which it was.
    let shown = start.targets.iter().take(3).cloned().collect::<Vec<_>>().join(" ");
    let more = match start.targets.len() {
        n if n > 3 => format!(" (+{} more)", n - 3),
        _ => String::new(),
    };
    format!("{} {shown}{more} (started {} by {}{run})", start.action, start.time, start.user)
}

pub(super) fn impact(snap: &Snapshot, nodes: &[Sym], abandoned: &[AuditEntry], impact: &mut Impact) {
    impact.kubectl.extend(nodes.iter().map(|n| format!("kubectl taint node {n} {}-", keys::DEFRAG_RESERVATION)));
    let left = leftovers::find(abandoned, snap);
    for a in &left.abandoned {
        let mut what = Vec::new();
        if !a.reserved.is_empty() {
            what.push(format!("{} reserved", join(&a.reserved)));
        }
        for node in &a.cordoned {
            what.push(format!("{node} cordoned (release leaves it so: kubectl uncordon {node} undoes it)"));
        }
        if what.is_empty() {
            what.push("nothing in the cluster now".into());
        }
        impact.warnings.push(format!("abandoned: {}; left {}", started_by(&a.start), what.join(", ")));
    }
    for (node, value) in left.unaccounted.iter().filter(|(n, _)| !nodes.contains(n)) {
        impact.warnings.push(format!(
            "{node} keeps kgpu's reservation for {value}: no abandoned action names it (a plan may be running); kgpu release {node} releases it"
        ));
    }
}

/// What to release when the user names no node: every reservation an
/// abandoned action still holds, and those actions.
pub fn of_leftovers(left: &Leftovers) -> (Vec<Sym>, Vec<AuditEntry>) {
    (left.reserved(), left.abandoned.iter().map(|a| a.start.clone()).collect())
}

impl Executor {
    pub(super) async fn release_leftovers(
        &self,
        snap: &Snapshot,
        nodes: &[Sym],
        abandoned: &[AuditEntry],
        dry: bool,
    ) -> Result<String, ActionError> {
        let held: Vec<Sym> = nodes
            .iter()
            .filter(|&n| snap.nodes.get(n).is_some_and(|n| n.defrag_reservation().is_some()))
            .cloned()
            .collect();
        self.release(&held, dry).await.map_err(ActionError::Failed)?;
        let would = if dry { "would be " } else { "" };
        let mut done = Vec::new();
        if !held.is_empty() {
            done.push(format!("reservation {would}released on {}", join(&held)));
        }
        let gone: Vec<Sym> = nodes.iter().filter(|&n| !held.contains(n)).cloned().collect();
        if !gone.is_empty() {
            done.push(format!("no reservation left on {}", join(&gone)));
        }
        if !abandoned.is_empty() {
            if !dry {
                self.close(snap, abandoned).map_err(ActionError::Failed)?;
            }
            done.push(format!("{} abandoned action(s) {would}closed in the audit log", abandoned.len()));
        }
        Ok(format!("{}{}", if dry { "dry run: " } else { "" }, done.join("; ")))
    }

    /// Ends each abandoned action's run in the audit log, saying what it left.
    fn close(&self, snap: &Snapshot, abandoned: &[AuditEntry]) -> Result<(), String> {
        let Some(log) = &self.audit else { return Err("there is no audit log to close them in".into()) };
        let left = leftovers::find(abandoned, snap);
        for a in &left.abandoned {
            let cordoned = if a.cordoned.is_empty() {
                String::new()
            } else {
                format!("; left cordoned: {} (kubectl uncordon to undo)", join(&a.cordoned))
            };
            let entry = AuditEntry {
                time: crate::model::time::rfc3339(crate::clock::wall_clock().max(snap.clock)),
                result: ABANDONED.into(),
                detail: format!(
                    "its kgpu ended without finishing it; closed by kgpu pid {} (release){cordoned}",
                    std::process::id()
                ),
                user: self.user.clone(),
                ..a.start.clone()
            };
            log.append(&entry).map_err(|e| format!("the audit log {} cannot be written ({e})", log.path.display()))?;
        }
        Ok(())
    }
}
