//! One line of kgpu's audit log: who did what to which objects, when, and
//! how it ended. Written by the action runner, shown in the Events pane.

use serde::{Deserialize, Serialize};

/// The result of an action's first line, written before it changes anything.
pub const STARTED: &str = "started";
/// The result written for an action whose kgpu ended without finishing it
/// (killed, or its machine went down), when a later kgpu closes it.
pub const ABANDONED: &str = "abandoned";

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    /// RFC 3339, UTC.
    pub time: String,
    pub context: String,
    pub user: String,
    pub action: String,
    pub targets: Vec<String>,
    pub dry_run: bool,
    /// `started` (before the first step), then `ok`, `error`, `cancelled`,
    /// or `abandoned` (closed by a later kgpu: this one never ended it).
    pub result: String,
    pub detail: String,
    /// The process and action that wrote it: a start and its end share it.
    /// Absent in logs written before kgpu recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunMark>,
}

/// Which kgpu process (host and pid) ran an action, and which of its actions.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunMark {
    pub host: String,
    pub pid: u32,
    pub action: u64,
}

/// The starts in `entries` (oldest first) that no later line ends: actions
/// still running, or whose kgpu ended before they did. Entries without a
/// run mark cannot be matched and are left out.
pub fn open_runs(entries: impl IntoIterator<Item = AuditEntry>) -> Vec<AuditEntry> {
    let mut open: Vec<AuditEntry> = Vec::new();
    for e in entries {
        let Some(mark) = &e.run else { continue };
        if e.result == STARTED {
            open.push(e);
        } else {
            open.retain(|s| s.run.as_ref() != Some(mark));
        }
    }
    open
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(result: &str, pid: u32, action: u64) -> AuditEntry {
        AuditEntry {
            time: "2026-12-05T08:00:00Z".into(),
            context: "prod".into(),
            user: "sre".into(),
            action: "drain".into(),
            targets: vec!["node/gpu-07".into()],
            dry_run: false,
            result: result.into(),
            detail: String::new(),
            run: Some(RunMark { host: "jump-1".into(), pid, action }),
        }
    }

    #[test]
    fn a_start_stays_open_until_a_line_of_the_same_run_ends_it() {
        let old = AuditEntry { run: None, ..line(STARTED, 1, 1) };
        let entries = vec![
            old,
            line(STARTED, 100, 1),
            line(STARTED, 100, 2),
            line("ok", 100, 1),
            line(STARTED, 200, 1),
            line(ABANDONED, 200, 1),
            line(STARTED, 300, 1),
        ];
        let open: Vec<(u32, u64)> =
            open_runs(entries).iter().filter_map(|e| e.run.as_ref().map(|r| (r.pid, r.action))).collect();
        assert_eq!(open, [(100, 2), (300, 1)], "ended or closed runs and unmarked lines are not open");
    }
}
