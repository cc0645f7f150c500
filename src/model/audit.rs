//! One line of kgpu's audit log: who did what to which objects, when, and
//! how it ended. Written by the action runner, shown in the Events pane.

use serde::{Deserialize, Serialize};

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
    /// `started` (a disruptive action, before its first step), then `ok`,
    /// `error` or `cancelled`.
    pub result: String,
    pub detail: String,
}
