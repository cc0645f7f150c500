//! The gang step: how many members are placed, idle GPUs held, deadlocks.

use std::sync::Arc;

use crate::model::{Gang, GangKind, keys};

use super::super::gangs::{GangState, GangSummary};
use super::super::index::Index;
use super::{Step, StepReport, Verdict, ns_flag};

pub(super) fn gang_step(index: &Index<'_>, gang: &Gang, summary: &GangSummary, all: &[GangSummary]) -> StepReport {
    let ns = ns_flag(&gang.namespace);
    let selector = match (gang.kind, &gang.owner) {
        (_, Some(o)) if o.kind.as_str() == "Job" => format!("-l batch.kubernetes.io/job-name={}", o.name),
        (GangKind::VolcanoPodGroup, _) => format!("-l volcano.sh/job-name={}", gang.name),
        _ => format!("-l {}={}", keys::KUEUE_POD_GROUP_NAME, gang.name),
    };
    let commands = vec![format!("kubectl get pods {ns} {selector} -o wide")];
    let mut details = vec![format!(
        "{} of {} member(s) placed, {} running{}",
        summary.placed,
        summary.required,
        summary.running,
        if summary.gpus_per_pod > 0 { format!(", {} GPU(s) per member", summary.gpus_per_pod) } else { String::new() }
    )];
    if !summary.nodes.is_empty() {
        details.push(format!(
            "placed on: {}",
            summary.nodes.iter().map(|(n, g)| format!("{n} ({g} GPU)")).collect::<Vec<_>>().join(", ")
        ));
    }
    if summary.state == GangState::Admitted && index.members(&summary.key).is_empty() {
        return no_pods_yet(index, gang, details, commands);
    }
    match summary.state {
        GangState::PartiallyPlaced => {
            // Partial placement is a symptom: the missing members' own step
            // says why. Only a deadlock blocks at this step.
            let mut s = StepReport {
                step: Step::Gang,
                verdict: Verdict::Warn,
                summary: format!(
                    "partially placed: {}/{} members, holding {} GPU(s) idle",
                    summary.placed, summary.required, summary.gpus_held_idle
                )
                .into(),
                details: Arc::default(),
                commands,
                said_by: None,
            };
            if !summary.deadlocked_with.is_empty() {
                let others: Vec<String> = summary
                    .deadlocked_with
                    .iter()
                    .map(|o| {
                        let held = all.iter().find(|g| o.ends_with(&g.display_name())).map_or(0, |g| g.gpus_held_idle);
                        format!("{o} (holding {held} GPU(s))")
                    })
                    .collect();
                s.verdict = Verdict::Block;
                s.summary = format!(
                    "deadlock: holds {} GPU(s) with {}/{} members placed; can only complete if {} lets go",
                    summary.gpus_held_idle,
                    summary.placed,
                    summary.required,
                    others.join(", ")
                )
                .into();
                details.push(format!("deadlocked with {}", others.join(", ")));
                details.push(
                    "unblock: requeue one of the deadlocked gangs (R) so the other can complete; gang scheduling (Kueue waitForPodsReady or Volcano) prevents this".into(),
                );
            }
            s.details = details.into();
            s
        }
        GangState::Queued | GangState::Inactive => StepReport {
            step: Step::Gang,
            verdict: Verdict::NotApplicable,
            summary: "no members created yet (waiting for admission)".into(),
            details: details.into(),
            commands,
            said_by: None,
        },
        _ => StepReport {
            step: Step::Gang,
            verdict: Verdict::Pass,
            summary: format!("{}/{} members placed", summary.placed, summary.required).into(),
            details: details.into(),
            commands,
            said_by: None,
        },
    }
}

/// How long after admission a controller may take to create its pods
/// before kgpu calls it stuck (operators take seconds).
const POD_CREATION_GRACE_SECONDS: i64 = 60;

/// Admitted, and not one member pod exists: there is nothing for the
/// scheduler to place, so the controller that owns the workload is the
/// one to look at.
fn no_pods_yet(index: &Index<'_>, gang: &Gang, mut details: Vec<String>, commands: Vec<String>) -> StepReport {
    let since = gang.condition("Admitted").filter(|c| c.status).map(|c| index.now - c.since);
    let (verdict, summary) = match (&gang.owner, since) {
        (None, _) => {
            (Verdict::Block, "admitted, but no controller owns this Workload, so nothing creates its pods".to_string())
        }
        (Some(o), Some(age)) if age > POD_CREATION_GRACE_SECONDS => (
            Verdict::Block,
            format!(
                "admitted {} ago, yet {} {} has created none of its pods: is its controller (operator) running?",
                crate::model::time::age(age),
                o.kind,
                o.name
            ),
        ),
        (Some(o), _) => (Verdict::Warn, format!("admitted; waiting for {} {} to create its pods", o.kind, o.name)),
    };
    if verdict == Verdict::Block {
        details.push(match &gang.owner {
            Some(o) => format!("unblock: check the controller of {} {} (its logs, its RBAC)", o.kind, o.name),
            None => format!("unblock: create the job this Workload stands for, or delete workload {}", gang.name),
        });
    }
    StepReport { step: Step::Gang, verdict, summary: summary.into(), details: details.into(), commands, said_by: None }
}

/// The gang step of a pod that waits as itself though it belongs to a gang
/// past its minimum: an elastic gang's extra member (Volcano minMember
/// below the replicas, Kueue partial admission), or a replacement.
pub(super) fn member_step(gang: &Gang, summary: &GangSummary) -> StepReport {
    let kind = gang.kind.kind_name();
    StepReport {
        step: Step::Gang,
        verdict: Verdict::Pass,
        summary: format!(
            "member of {kind} {}/{}, which has its minimum ({}/{} placed, {} running): this member waits for room of its own",
            gang.namespace, gang.name, summary.placed, summary.required, summary.running
        )
        .into(),
        details: Arc::default(),
        commands: vec![format!("kubectl get {} {} {} -o yaml", kind.to_ascii_lowercase(), ns_flag(&gang.namespace), gang.name)],
        said_by: None,
    }
}
