//! The rows each pane shows, after its filter and sort: one function used
//! by both the key handler (to move the selection) and the widgets (to
//! draw), so they never disagree.

use crate::analysis::fleet::IssueCode;
use crate::analysis::gangs::GangSummary;
use crate::analysis::pending::PendingItem;
use crate::analysis::queues::QueueRow;
use crate::view_model::panes::{EventRow, MigNodeRow, NodeRow, PoolRow, Views};

use super::FleetSort;

use super::filter::Filter;

/// The labels of node `name`, for a label selector.
fn node_labels<'a>(views: &'a Views, name: &crate::model::Sym) -> Option<&'a crate::model::Labels> {
    views.snap.nodes.get(name).map(|n| &n.labels)
}

pub fn nodes<'a>(views: &'a Views, filter: &str, sort: FleetSort) -> Vec<&'a NodeRow> {
    let f = Filter::parse(filter);
    let mut rows: Vec<&NodeRow> = views
        .nodes
        .iter()
        .filter(|r| {
            let used = format!("{}/{}", r.used, r.allocatable);
            let issues: Vec<&str> = r.issues.iter().flat_map(|i| [i.as_str(), issue_short(*i)]).collect();
            let mut columns = vec![r.name.as_str(), &r.product, &r.driver, &r.pool, &r.mig, &used];
            columns.extend(issues);
            f.matches(&columns, node_labels(views, &r.name))
        })
        .collect();
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
    let f = Filter::parse(filter);
    views.pools.iter().filter(|p| f.matches(&[&p.name], None)).collect()
}

pub fn pending<'a>(views: &'a Views, filter: &str) -> Vec<&'a PendingItem> {
    let f = Filter::parse(filter);
    views
        .analysis
        .pending
        .iter()
        .filter(|p| {
            let name = p.display_name();
            let queue = p.queue.map_or("", |q| q.as_str());
            f.matches(&[&name, p.blocking_str(), p.kind.as_str(), &p.shape, queue, &p.summary], None)
        })
        .collect()
}

pub fn gangs<'a>(views: &'a Views, filter: &str) -> Vec<&'a GangSummary> {
    let f = Filter::parse(filter);
    views
        .analysis
        .gangs
        .iter()
        .filter(|g| {
            let name = g.display_name();
            let queue = g.queue.map_or("", |q| q.as_str());
            f.matches(&[&name, g.state.as_str(), g.key.kind.kind_name(), g.key.kind.abbreviation(), queue], None)
        })
        .collect()
}

pub fn queues<'a>(views: &'a Views, filter: &str) -> Vec<&'a QueueRow> {
    let f = Filter::parse(filter);
    views
        .analysis
        .queues
        .iter()
        .filter(|q| {
            let columns = [
                q.name.as_str(),
                q.namespace.map_or("", |n| n.as_str()),
                q.cohort.map_or("", |c| c.as_str()),
                q.flavor.map_or("", |c| c.as_str()),
                q.resource.as_str(),
            ];
            f.matches(&columns, None)
        })
        .collect()
}

pub fn mig<'a>(views: &'a Views, filter: &str) -> Vec<&'a MigNodeRow> {
    let f = Filter::parse(filter);
    views
        .mig
        .iter()
        .filter(|m| {
            f.matches(&[m.node.as_str(), &m.product, &m.config, &m.state, &m.summary], node_labels(views, &m.node))
        })
        .collect()
}

pub fn events<'a>(views: &'a Views, filter: &str) -> Vec<&'a EventRow> {
    let f = Filter::parse(filter);
    views
        .events
        .iter()
        .filter(|e| {
            let kind = if e.warning { "Warning" } else { "Normal" };
            f.matches(&[&e.age, kind, &e.reason, &e.object, &e.message, &e.source], None)
        })
        .collect()
}

pub fn upgrades<'a>(views: &'a Views, filter: &str) -> Vec<&'a crate::analysis::waves::UpgradeRow> {
    let f = Filter::parse(filter);
    views
        .analysis
        .upgrades
        .iter()
        .filter(|u| {
            let driver = u.driver.as_ref().map(|d| d.to_string()).unwrap_or_default();
            let flags = if u.stuck {
                "STUCK"
            } else if u.skip {
                "skip"
            } else {
                ""
            };
            f.matches(&[u.node.as_str(), u.state_str(), &driver, flags], node_labels(views, &u.node))
        })
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
