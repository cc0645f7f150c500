//! The rows each pane shows, after its filter and sort: one function used
//! by both the key handler (to move the selection) and the widgets (to
//! draw), so they never disagree.

use crate::analysis::fleet::IssueCode;
use crate::analysis::gangs::GangSummary;
use crate::analysis::pending::PendingItem;
use crate::analysis::queues::QueueRow;
use crate::view_model::panes::{EventRow, MigNodeRow, NodeRow, PoolRow, Views};

use super::FleetSort;

fn contains(hay: &str, filter: &str) -> bool {
    filter.is_empty() || hay.to_ascii_lowercase().contains(&filter.to_ascii_lowercase())
}

pub fn nodes<'a>(views: &'a Views, filter: &str, sort: FleetSort) -> Vec<&'a NodeRow> {
    let mut rows: Vec<&NodeRow> = views.nodes.iter().filter(|r| r.matches(filter)).collect();
    match sort {
        FleetSort::Name => {}
        FleetSort::Free => rows.sort_by(|a, b| b.free.cmp(&a.free).then(a.name.cmp(&b.name))),
        FleetSort::Problems => rows.sort_by(|a, b| {
            let rank = |r: &NodeRow| {
                (std::cmp::Reverse(r.issues.iter().filter(|i| i.is_fault()).count()), std::cmp::Reverse(r.issues.len()))
            };
            rank(a).cmp(&rank(b)).then(a.name.cmp(&b.name))
        }),
    }
    rows
}

pub fn pools<'a>(views: &'a Views, filter: &str) -> Vec<&'a PoolRow> {
    views.pools.iter().filter(|p| contains(&p.name, filter)).collect()
}

pub fn pending<'a>(views: &'a Views, filter: &str) -> Vec<&'a PendingItem> {
    views
        .analysis
        .pending
        .iter()
        .filter(|p| {
            contains(&p.display_name(), filter)
                || contains(p.blocking_str(), filter)
                || p.queue.is_some_and(|q| contains(q.as_str(), filter))
        })
        .collect()
}

pub fn gangs<'a>(views: &'a Views, filter: &str) -> Vec<&'a GangSummary> {
    views
        .analysis
        .gangs
        .iter()
        .filter(|g| contains(&g.display_name(), filter) || contains(g.state.as_str(), filter))
        .collect()
}

pub fn queues<'a>(views: &'a Views, filter: &str) -> Vec<&'a QueueRow> {
    views
        .analysis
        .queues
        .iter()
        .filter(|q| contains(q.name.as_str(), filter) || q.cohort.is_some_and(|c| contains(c.as_str(), filter)))
        .collect()
}

pub fn mig<'a>(views: &'a Views, filter: &str) -> Vec<&'a MigNodeRow> {
    views
        .mig
        .iter()
        .filter(|m| contains(m.node.as_str(), filter) || contains(&m.config, filter) || contains(&m.state, filter))
        .collect()
}

pub fn events<'a>(views: &'a Views, filter: &str) -> Vec<&'a EventRow> {
    views
        .events
        .iter()
        .filter(|e| {
            contains(&e.object, filter)
                || contains(&e.reason, filter)
                || contains(&e.message, filter)
                || contains(if e.warning { "Warning" } else { "Normal" }, filter)
        })
        .collect()
}

pub fn upgrades<'a>(views: &'a Views, filter: &str) -> Vec<&'a crate::analysis::waves::UpgradeRow> {
    views
        .analysis
        .upgrades
        .iter()
        .filter(|u| contains(u.node.as_str(), filter) || contains(u.state_str(), filter))
        .collect()
}

/// Issue codes for people: short words for narrow columns.
pub fn issue_short(code: IssueCode) -> &'static str {
    match code {
        IssueCode::DevicePluginNotAdvertising => "plugin",
        IssueCode::NotReady => "notready",
        IssueCode::Cordoned => "cordon",
        IssueCode::BlackHole => "blackhole",
        IssueCode::MigConfigPending => "mig-pend",
        IssueCode::MigConfigFailed => "mig-fail",
        IssueCode::UpgradeStuck => "upg-stuck",
        IssueCode::UpgradeFailed => "upg-fail",
        IssueCode::XidErrors => "xid",
        IssueCode::AgentUnavailable => "agent?",
        IssueCode::MigInvalid => "mig-invalid",
    }
}
