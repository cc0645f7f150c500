//! Table rows as the panes show them: the words, the numbers and their
//! roles, decided here rather than in the widgets. Built for the visible
//! rows only (a table of 20,000 pending pods formats a screenful per frame),
//! from the analysis rows the app filters and selects.

use crate::analysis::gangs::GangSummary;
use crate::analysis::pending::PendingItem;
use crate::model::time::age;

use super::docs::{blocking_role, gang_role};
use super::style::Role;

/// A pending pod, Workload or PodGroup.
#[derive(Clone, Debug, PartialEq)]
pub struct PendingRow {
    /// The step that blocks it (`quota`, `fit`…), in its role.
    pub blocked: (&'static str, Role),
    pub kind: &'static str,
    pub name: String,
    pub age: String,
    pub shape: String,
    pub queue: String,
    /// Why, without the step's name (the BLOCKED column says it).
    pub why: String,
}

pub fn pending_row(p: &PendingItem) -> PendingRow {
    PendingRow {
        blocked: (p.blocking_str(), blocking_role(p.blocking)),
        kind: p.kind.as_str(),
        name: p.display_name(),
        age: age(p.age),
        shape: p.shape.clone(),
        queue: p.queue.as_ref().map_or("-".into(), |q| q.to_string()),
        why: p.summary.split_once(": ").map_or(p.summary.as_str(), |(_, w)| w).to_string(),
    }
}

/// A gang: how much of it is placed, the GPUs it holds idle, its state.
#[derive(Clone, Debug, PartialEq)]
pub struct GangRow {
    /// `Workload`/`PodGroup`, and `WL`/`PG` for narrow columns.
    pub kind: (&'static str, &'static str),
    pub name: String,
    /// `placed/required`.
    pub placed: String,
    pub idle: (String, Role),
    pub state: (&'static str, Role),
    pub age: String,
    pub queue: String,
    /// Deadlocks and topology splits.
    pub notes: String,
}

pub fn gang_row(g: &GangSummary) -> GangRow {
    let deadlocked = !g.deadlocked_with.is_empty();
    let mut notes = Vec::new();
    if deadlocked {
        notes.push(format!("deadlocked with {}", g.deadlocked_with.join(", ")));
    }
    if let Some(note) = g.topology_note().filter(|_| g.topology_split) {
        notes.push(note);
    }
    GangRow {
        kind: (g.key.kind.kind_name(), g.key.kind.abbreviation()),
        name: g.display_name(),
        placed: format!("{}/{}", g.placed, g.required),
        idle: if g.gpus_held_idle > 0 { (g.gpus_held_idle.to_string(), Role::Warn) } else { ("-".into(), Role::Dim) },
        state: (if deadlocked { "deadlocked" } else { g.state.as_str() }, gang_role(g.state, deadlocked)),
        age: age(g.age),
        queue: g.queue.as_ref().map_or("-".into(), |q| q.to_string()),
        notes: notes.join("; "),
    }
}
