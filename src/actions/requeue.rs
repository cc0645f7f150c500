//! Requeue a gang: Kueue deactivates and reactivates the Workload; Volcano
//! aborts and resumes the Job (or, without a Job, its pods are deleted for
//! their controller to recreate).

use crate::analysis::index::Index;
use crate::model::{GangKey, GangKind, Pod, PodKey, Snapshot};

use super::backend::{ActionError, Backend};
use super::exec::{Evictions, Executor};
use super::impact::{Impact, add_pods};
use crate::sources::sim::Command;

pub(super) fn question(gang: &GangKey) -> String {
    format!("Requeue {} {}/{}?", gang.kind.kind_name(), gang.namespace, gang.name)
}

pub(super) fn impact(index: &Index<'_>, gang: &GangKey, impact: &mut Impact) {
    let members: Vec<&Pod> = index.members(gang).iter().copied().filter(|p| !p.phase.is_terminal()).collect();
    add_pods(index, &members, impact);
    impact.gangs.retain(|g| !g.ends_with(&format!("{}/{}", gang.namespace, gang.name)));
    match gang.kind {
        GangKind::KueueWorkload => {
            for active in [false, true] {
                impact.kubectl.push(format!(
                    "kubectl patch workload -n {} {} --type=merge -p '{{\"spec\":{{\"active\":{active}}}}}'",
                    gang.namespace, gang.name
                ));
            }
        }
        GangKind::VolcanoPodGroup => {
            impact.kubectl.push(format!("vcctl job suspend -n {} -N {}", gang.namespace, gang.name));
            impact.kubectl.push(format!("vcctl job resume -n {} -N {}", gang.namespace, gang.name));
        }
    }
}

impl Executor {
    pub(super) async fn requeue(&self, snap: &Snapshot, gang: &GangKey, dry: bool) -> Result<String, ActionError> {
        let Some(g) = snap.gangs.get(gang) else {
            return Err(ActionError::NotFound(format!("{} {}/{}", gang.kind.kind_name(), gang.namespace, gang.name)));
        };
        let prefix = if dry { "dry run: " } else { "" };
        let would = if dry { "would be " } else { "" };
        let (deactivated, requeued) =
            if dry { ("would be deactivated", "would be requeued") } else { ("deactivated", "requeued") };
        let queue = g.queue.as_ref().map_or("?".to_string(), |q| q.to_string());
        let index = Index::build(snap, snap.clock);
        let members: Vec<PodKey> =
            index.members(gang).iter().filter(|p| !p.phase.is_terminal()).map(|p| p.key()).collect();
        match gang.kind {
            GangKind::KueueWorkload => {
                self.backend.set_active(gang, false, dry).await?;
                self.say(
                    format!("{prefix}workload {} {deactivated} (spec.active=false); reactivating", gang.name),
                    false,
                    false,
                )
                .await;
                self.backend.set_active(gang, true, dry).await?;
                Ok(format!(
                    "{prefix}workload {}/{} {requeued}: deactivated and reactivated; it re-enters LocalQueue {queue} and waits for admission",
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
                            "{prefix}volcano job {}/{job} {would}aborted and resumed; its PodGroup re-enters queue {queue}",
                            gang.namespace
                        ))
                    }
                    (Backend::Kube(_), None) => {
                        // No Volcano Job to abort: the members go through the
                        // Eviction API (PDBs honoured), never a plain delete.
                        let mut done = Evictions::default();
                        let what = format!("requeue {}", gang.name);
                        match self.evict_all(snap, &members, dry, &what, &mut done).await {
                            Err(ActionError::Cancelled) => {
                                return Err(ActionError::CancelledAfter(format!(
                                    "{prefix}{} of {} pod(s) of {}/{} {would}evicted before the cancel",
                                    done.evicted.len(),
                                    members.len(),
                                    gang.namespace,
                                    gang.name
                                )));
                            }
                            other => other?,
                        }
                        let (evicted, blocked) = (done.evicted.len(), done.blocked);
                        if !blocked.is_empty() {
                            return Err(ActionError::Failed(format!(
                                "requeue {}/{}: {evicted} of {} pod(s) evicted; {}",
                                gang.namespace,
                                gang.name,
                                members.len(),
                                blocked.join("; ")
                            )));
                        }
                        Ok(format!(
                            "{prefix}{evicted} pod(s) of {}/{} {would}evicted; their controller recreates them and the PodGroup re-enters queue {queue}",
                            gang.namespace, gang.name
                        ))
                    }
                    (Backend::Sim(sim), _) => {
                        // The simulator's Volcano: the PodGroup's pods are replaced at once.
                        if !dry {
                            sim.apply(Command::DeleteGangPods(gang.clone())).await.map_err(ActionError::Failed)?;
                        }
                        let n = members.len();
                        Ok(format!(
                            "{prefix}{n} pod(s) of {}/{} {would}deleted; their controller recreates them and the PodGroup re-enters queue {queue}",
                            gang.namespace, gang.name
                        ))
                    }
                }
            }
        }
    }
}
