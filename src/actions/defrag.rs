//! Running the defragmentation plan to its goal: the target placed, not
//! merely pods evicted.
//!
//! 1. Reserve the nodes the target will use: a `NoSchedule` taint of
//!    kgpu's own (`kgpu.dev/defrag=<target>`), so the evicted pods'
//!    replacements — and anything else — land elsewhere.
//! 2. Add the matching toleration to the target's pending pods (a pod's
//!    tolerations may grow after creation; nothing else of its placement
//!    may change), and to members its controller creates while the plan runs.
//! 3. Evict the pods in the way through the Eviction API (PDBs honoured).
//! 4. Wait until the target's pods are bound, reporting where each
//!    replacement went; give up after `place_timeout` or on cancel.
//! 5. Release the reservation whatever happened; if that fails, say which
//!    nodes keep the taint and the command that removes it.
//!
//! docs/actions.md says why a taint and not a cordon.

use std::collections::HashSet;
use std::sync::Arc;

use crate::analysis::index::Index;
use crate::model::{Pod, PodKey, Snapshot, Sym, Taint, TaintEffect, Toleration};

use super::PlanTarget;
use super::backend::ActionError;
use super::exec::{Controllers, Evictions, Executor, next_snapshot};
use super::impact::{Impact, add_pods, eviction_command};

pub(super) fn question(label: &str, evictions: &[PodKey], reserve: &[Sym]) -> String {
    format!(
        "Run the defragmentation plan for {label}: reserve {}, evict {} pod(s), wait until it is placed?",
        reserve.iter().map(|n| n.as_str()).collect::<Vec<_>>().join(" "),
        evictions.len()
    )
}

/// The pods it evicts, and the kubectl commands of every step by hand.
pub(super) fn impact(
    index: &Index<'_>,
    target: &PlanTarget,
    evictions: &[PodKey],
    reserve: &[Sym],
    impact: &mut Impact,
) {
    let victims: Vec<&Pod> = evictions.iter().filter_map(|k| index.snap.pods.get(k).map(|p| &**p)).collect();
    add_pods(index, &victims, impact);
    let value = reservation_value(target);
    let taint = RESERVATION_TAINT;
    impact.kubectl.extend(reserve.iter().map(|n| format!("kubectl taint node {n} {taint}={value}:NoSchedule")));
    impact.kubectl.push(format!(
        "# add to each pending pod of the target: tolerations: [{{key: {taint}, operator: Equal, value: {value}, effect: NoSchedule}}]"
    ));
    impact.kubectl.extend(victims.iter().map(|p| eviction_command(p)));
    impact.kubectl.push("# wait until the target's pods are bound, then:".into());
    impact.kubectl.extend(reserve.iter().map(|n| format!("kubectl taint node {n} {taint}-")));
}

/// The key of the reservation taint.
pub const RESERVATION_TAINT: &str = crate::model::keys::DEFRAG_RESERVATION;

/// The reservation taint's value for a target: `namespace.name`, cut to a
/// valid label value (63 characters, alphanumeric at both ends).
pub fn reservation_value(target: &PlanTarget) -> String {
    let (namespace, name) = match target {
        PlanTarget::Gang(g) => (g.namespace.clone(), &*g.name),
        PlanTarget::Pod(p) => (p.namespace.clone(), &*p.name),
    };
    let raw: String = format!("{namespace}.{name}")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '-' })
        .take(63)
        .collect();
    raw.trim_matches(|c: char| !c.is_ascii_alphanumeric()).to_string()
}

/// Where the target stands in one snapshot.
#[derive(Debug, PartialEq)]
pub enum Progress {
    /// Its object is gone (finished, deleted).
    Gone,
    Waiting {
        bound: usize,
        want: usize,
    },
    Placed {
        nodes: Vec<Sym>,
    },
}

/// The target's pods in `snap`, found as the analyses find them.
fn target_pods(index: &Index<'_>, target: &PlanTarget) -> Option<Vec<Arc<Pod>>> {
    match target {
        PlanTarget::Gang(g) => {
            index.snap.gangs.get(g)?;
            Some(index.members(g).iter().filter_map(|p| index.snap.pods.get(&p.key()).cloned()).collect())
        }
        PlanTarget::Pod(p) => index.snap.pods.get(p).map(|p| vec![p.clone()]),
    }
}

pub fn progress(snap: &Snapshot, target: &PlanTarget) -> Progress {
    look(snap, target).0
}

/// Where the target stands in `snap`, and its pods still waiting for a
/// node: one look at the cluster serves the wait and the tolerations.
fn look(snap: &Snapshot, target: &PlanTarget) -> (Progress, Vec<Arc<Pod>>) {
    let index = Index::build(snap, snap.clock);
    let Some(pods) = target_pods(&index, target) else { return (Progress::Gone, Vec::new()) };
    let want = match target {
        PlanTarget::Gang(g) => snap.gangs.get(g).map_or(1, |g| g.min_members.max(1) as usize),
        PlanTarget::Pod(_) => 1,
    };
    let live = || pods.iter().filter(|p| !p.phase.is_terminal());
    let waiting = live().filter(|p| p.node.is_none()).cloned().collect();
    let bound: Vec<Sym> = live().filter_map(|p| p.node.clone()).collect();
    let progress = if bound.len() >= want {
        let mut nodes = bound;
        nodes.sort();
        nodes.dedup();
        Progress::Placed { nodes }
    } else {
        Progress::Waiting { bound: bound.len(), want }
    };
    (progress, waiting)
}

/// Where the plan expected the replacements of each evicted pod's
/// controller to run: a replacement is known by its controller, not its name.
struct Expected(Vec<(Sym, crate::model::Owner, Option<Sym>)>);

impl Expected {
    fn of(snap: &Snapshot, evictions: &[PodKey], planned: &[Option<Sym>]) -> Expected {
        Expected(
            evictions
                .iter()
                .zip(planned.iter().cloned().chain(std::iter::repeat(None)))
                .filter_map(|(k, to)| snap.pods.get(k).and_then(|p| Some((p.namespace.clone(), p.owner.clone()?, to))))
                .collect(),
        )
    }

    /// Where the plan expected `pod`'s controller's replacement, when it
    /// runs on none of those nodes: `gpu-05`, or `no room` for one the plan
    /// expected to wait.
    fn elsewhere(&self, pod: &Pod, node: Sym) -> Option<String> {
        let planned: Vec<Option<Sym>> = self
            .0
            .iter()
            .filter(|(ns, owner, _)| *ns == pod.namespace && pod.owner.as_ref() == Some(owner))
            .map(|(_, _, to)| to.clone())
            .collect();
        if planned.is_empty() || planned.contains(&Some(node)) {
            return None;
        }
        let mut names: Vec<String> =
            planned.iter().map(|t| t.as_ref().map_or("no room".to_string(), |n| n.to_string())).collect();
        names.sort();
        names.dedup();
        Some(names.join(" or "))
    }
}

impl Executor {
    pub(super) async fn run_plan(
        &self,
        target: &PlanTarget,
        label: &str,
        (evictions, planned): (&[PodKey], &[Option<Sym>]),
        reserve: &[Sym],
        dry: bool,
    ) -> Result<String, ActionError> {
        if let Progress::Placed { nodes } = progress(&self.snapshot(), target) {
            return Ok(format!("{label} is already placed (on {}): nothing to do", join(&nodes)));
        }
        let value = reservation_value(target);
        let taint = Taint::new(RESERVATION_TAINT, &value, TaintEffect::NoSchedule);
        let mut reserved = Vec::new();
        let mut done = Evictions::default();
        let mut outcome = Ok(String::new());
        for node in reserve {
            if let Err(e) = self.backend.add_taint(node.clone(), &taint, dry).await {
                outcome = Err(ActionError::Failed(format!("defrag: could not reserve {node}: {e}; nothing evicted")));
                break;
            }
            reserved.push(node.clone());
        }
        if outcome.is_ok() {
            self.say(
                format!(
                    "defrag: {} {} for {label} (taint {RESERVATION_TAINT}={value}:NoSchedule)",
                    if dry { "dry run: would reserve" } else { "reserved" },
                    join(reserve)
                ),
                false,
                false,
            )
            .await;
            outcome = self.make_room(target, label, (evictions, planned), &value, dry, &mut done).await;
        }
        let release = self.release(&reserved, dry).await;
        match outcome {
            Ok(done) => match release {
                Ok(()) => Ok(done),
                Err(left) => Err(ActionError::Failed(format!("{done}; but {left}"))),
            },
            Err(e) => {
                let released = release.err().unwrap_or_else(|| format!("reservation released ({})", join(&reserved)));
                Err(match e {
                    ActionError::Cancelled => ActionError::CancelledAfter(format!(
                        "{} evicted before the cancel; {released}",
                        done.evicted.len()
                    )),
                    e => ActionError::Failed(format!("{e}; {released}")),
                })
            }
        }
    }

    /// Steps 2–4: tolerate, evict, wait for the target.
    async fn make_room(
        &self,
        target: &PlanTarget,
        label: &str,
        (evictions, planned): (&[PodKey], &[Option<Sym>]),
        value: &str,
        dry: bool,
        done: &mut Evictions,
    ) -> Result<String, ActionError> {
        let toleration = Toleration::equal(RESERVATION_TAINT, value, Some(TaintEffect::NoSchedule));
        let mut tolerated: HashSet<PodKey> = HashSet::new();
        let snap = self.snapshot();
        self.tolerate(&look(&snap, target).1, &toleration, dry, &mut tolerated).await?;
        let before: HashSet<PodKey> = snap.pods.keys().cloned().collect();
        let controllers = Controllers::of(&snap, evictions);
        let expected = Expected::of(&snap, evictions, planned);
        self.evict_all(&snap, evictions, dry, "defrag", done).await?;
        let (evicted, blocked) = (done.evicted.len(), &done.blocked);
        if !blocked.is_empty() {
            return Err(ActionError::Failed(format!(
                "defrag plan for {label}: {evicted} of {} evicted, {}; not enough room was made",
                evictions.len(),
                blocked.join("; ")
            )));
        }
        if dry {
            return Ok(format!(
                "dry run: defrag plan for {label}: would reserve the node(s) above, let {} pending pod(s) of it tolerate the reservation, evict {evicted} pod(s) and wait for it to be placed",
                tolerated.len()
            ));
        }
        let deadline = tokio::time::Instant::now() + self.place_timeout;
        let mut snapshots = self.snapshots.clone();
        let mut landed: Vec<String> = Vec::new();
        loop {
            self.check_cancel()?;
            let snap = self.snapshot();
            for p in snap.pods.values() {
                if before.contains(&p.key()) || !controllers.made(p) {
                    continue;
                }
                if let Some(node) = &p.node {
                    let line = match expected.elsewhere(p, node.clone()) {
                        Some(planned) => format!("{} on {node} (the plan expected {planned})", p.name),
                        None => format!("{} on {node}", p.name),
                    };
                    if !landed.contains(&line) {
                        self.say(format!("defrag: replacement {line}"), false, false).await;
                        landed.push(line);
                    }
                }
            }
            let (progress, waiting) = look(&snap, target);
            self.tolerate(&waiting, &toleration, dry, &mut tolerated).await?;
            match progress {
                Progress::Placed { nodes } => {
                    let elsewhere = landed.iter().filter(|l| l.contains("(the plan expected")).count();
                    return Ok(format!(
                        "defrag plan for {label}: placed on {}; {evicted} pod(s) evicted, replacements: {}{}",
                        join(&nodes),
                        if landed.is_empty() { "none yet".to_string() } else { landed.join(", ") },
                        match elsewhere {
                            0 => String::new(),
                            n => format!(" ({n} landed elsewhere than planned: the scheduler chose, not kgpu)"),
                        }
                    ));
                }
                Progress::Gone => {
                    return Err(ActionError::Failed(format!("defrag plan for {label}: the target is gone")));
                }
                Progress::Waiting { bound, want } => {
                    if tokio::time::Instant::now() >= deadline {
                        return Err(ActionError::Failed(format!(
                            "defrag plan for {label}: {bound} of {want} pod(s) placed after {}s ({evicted} evicted); see its drilldown for why",
                            self.place_timeout.as_secs()
                        )));
                    }
                }
            }
            next_snapshot(&mut snapshots).await;
        }
    }

    /// How many of the plan's pods are gone (evicted) in the latest snapshot.
    /// Adds the reservation's toleration to the target's `waiting` pods,
    /// once each.
    async fn tolerate(
        &self,
        waiting: &[Arc<Pod>],
        toleration: &Toleration,
        dry: bool,
        done: &mut HashSet<PodKey>,
    ) -> Result<(), ActionError> {
        let waiting: Vec<PodKey> = waiting
            .iter()
            .filter(|p| !p.tolerations.contains(toleration))
            .map(|p| p.key())
            .filter(|k| !done.contains(k))
            .collect();
        for key in waiting {
            match self.backend.add_toleration(&key, toleration, dry).await {
                // Bound or deleted in between: nothing to tolerate.
                Ok(()) | Err(ActionError::NotFound(_)) => {
                    done.insert(key);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Removes the reservation taint; `Err` names the nodes that keep it
    /// and the command that removes it by hand.
    pub(super) async fn release(&self, nodes: &[Sym], dry: bool) -> Result<(), String> {
        let mut left = Vec::new();
        for node in nodes {
            if let Err(e) = self.backend.remove_taint(node.clone(), Sym::new(RESERVATION_TAINT), dry).await {
                left.push(format!("{node} ({e})"));
            }
        }
        if left.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "the reservation is still on {}: kubectl taint node <node> {RESERVATION_TAINT}-",
                left.join(", ")
            ))
        }
    }
}

/// Node names, space-separated, for people.
pub(super) fn join(nodes: &[Sym]) -> String {
    nodes.iter().map(|n| n.as_str()).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{GangKey, GangKind};

    #[test]
    fn the_reservation_value_is_a_valid_label_value() {
        let gang = |ns: &str, name: &str| {
            PlanTarget::Gang(GangKey { kind: GangKind::KueueWorkload, namespace: Sym::new(ns), name: name.into() })
        };
        assert_eq!(reservation_value(&gang("research", "job-llm-sft-295a1")), "research.job-llm-sft-295a1");
        let long = reservation_value(&gang("ns", &"x".repeat(300)));
        assert_eq!(long.len(), 63);
        // Cut in the middle of a separator: trimmed to end alphanumeric.
        let cut = reservation_value(&gang("ns", &format!("{}-.-y", "a".repeat(58))));
        assert!(cut.ends_with('a') && cut.len() <= 63, "{cut}");
    }

    #[test]
    fn a_replacement_is_matched_to_its_planned_node_by_its_controller() {
        use crate::model::build::pod;
        use crate::model::{Cluster, ModelEvent, Object, SourceInfo, SourceKind};
        let mut c = Cluster::new(SourceInfo { kind: SourceKind::Demo, name: "t".into() });
        for p in [
            pod("a-1").gpus(2).on("n1").running().owner("Job", "a").build(),
            pod("b-1").gpus(2).on("n1").running().owner("Job", "b").build(),
        ] {
            c.apply(ModelEvent::Upsert(Object::Pod(p)));
        }
        let snap = c.snapshot();
        let evictions: Vec<PodKey> =
            ["a-1", "b-1"].map(|n| PodKey { namespace: Sym::new("default"), name: n.into() }).to_vec();
        let expected = Expected::of(&snap, &evictions, &[Some(Sym::new("n5")), None]);
        let replacement = |name: &str, job: &str| pod(name).owner("Job", job).build();
        assert_eq!(expected.elsewhere(&replacement("a-2", "a"), Sym::new("n5")), None, "where the plan said");
        assert_eq!(expected.elsewhere(&replacement("a-2", "a"), Sym::new("n7")).as_deref(), Some("n5"));
        assert_eq!(expected.elsewhere(&replacement("b-2", "b"), Sym::new("n7")).as_deref(), Some("no room"));
        assert_eq!(expected.elsewhere(&replacement("c-1", "c"), Sym::new("n7")), None, "not a replacement");
    }
}
