//! The rows each pane shows, after its filter and sort: one function used
//! by both the key handler (to move the selection) and the widgets (to
//! draw), so they never disagree.

use crate::analysis::fleet::IssueCode;
use crate::analysis::gangs::GangSummary;
use crate::analysis::pending::PendingItem;
use crate::analysis::queues::QueueRow;
use crate::view_model::panes::{EventRow, MigNodeRow, NodeRow, PoolRow, Views};
use crate::view_model::usage::{UsageRow, WorkloadRow};

use super::sort::Sort;

use super::filter::Filter;

/// The labels of node `name`, where `f` is a label selector: a lookup in
/// the snapshot per row, which every frame paid for every node without one
/// (half of the Drivers pane's 4.4 ms at 10,000 nodes).
fn node_labels<'a>(views: &'a Views, f: &Filter, name: &crate::model::Sym) -> Option<&'a crate::model::NodeLabels> {
    if f.is_label_selector() { views.snap.nodes.get(name).map(|n| &n.labels) } else { None }
}

/// Sorts `rows` stably by `key`'s natural order, or reversed.
fn sorted<T, K: Ord>(rows: &mut [T], sort: Sort, key: impl Fn(&T) -> K) {
    rows.sort_by(|a, b| sort.apply(key(a).cmp(&key(b))));
}

pub fn nodes<'a>(views: &'a Views, filter: &str, sort: Option<Sort>) -> Vec<&'a NodeRow> {
    let f = Filter::parse(filter);
    // Every key press filters every node (10,000 and more) twice, to move
    // the selection and to draw: nothing is built for a row that needs none.
    let mut rows: Vec<&NodeRow> = if f.is_everything() {
        views.nodes.iter().collect()
    } else {
        let labels = |r: &NodeRow| node_labels(views, &f, &r.name);
        views
            .nodes
            .iter()
            .filter(|r| {
                let used = r.used_text();
                let mut columns = vec![r.name.as_str(), &r.product, &r.driver, r.pool.as_str(), &r.mig, &used];
                columns.extend(r.issues.iter().flat_map(|i| [i.as_str(), issue_short(*i)]));
                f.matches(&columns, labels(r))
            })
            .collect()
    };
    let Some(sort) = sort else { return rows };
    let faults = |r: &NodeRow| {
        (std::cmp::Reverse(r.issues.iter().filter(|i| i.is_fault()).count()), std::cmp::Reverse(r.issues.len()))
    };
    match sort.letter {
        // Free as the totals count it: a cordoned node's GPUs are unavailable.
        'F' => sorted(&mut rows, sort, |r| (std::cmp::Reverse(r.buckets.free), r.name.clone())),
        'P' => sorted(&mut rows, sort, |r| (faults(r), r.name.clone())),
        'U' => sorted(&mut rows, sort, |r| (std::cmp::Reverse(r.used_of().0), r.name.clone())),
        'D' => sorted(&mut rows, sort, |r| (r.driver.clone(), r.name.clone())),
        _ => sorted(&mut rows, sort, |r| r.name.clone()),
    }
    rows
}

pub fn pools<'a>(views: &'a Views, filter: &str, sort: Option<Sort>) -> Vec<&'a PoolRow> {
    let f = Filter::parse(filter);
    let mut rows: Vec<&PoolRow> = views.pools.iter().filter(|p| f.matches(&[&p.name], None)).collect();
    match sort {
        Some(s) if s.letter == 'F' => sorted(&mut rows, s, |p| (std::cmp::Reverse(p.free), p.name.clone())),
        Some(s) if s.letter == 'U' => sorted(&mut rows, s, |p| (std::cmp::Reverse(p.used), p.name.clone())),
        Some(s) => sorted(&mut rows, s, |p| p.name.clone()),
        None => {}
    }
    rows
}

pub fn pending<'a>(views: &'a Views, filter: &str, sort: Option<Sort>) -> Vec<&'a PendingItem> {
    let f = Filter::parse(filter);
    let mut rows: Vec<&PendingItem> = views
        .analysis
        .pending
        .iter()
        .filter(|p| {
            let name = p.display_name();
            let queue = p.queue.as_ref().map_or("", |q| q.as_str());
            f.matches(&[&name, p.blocking_str(), p.kind.as_str(), &p.shape, queue, &p.summary], None)
        })
        .collect();
    match sort {
        Some(s) if s.letter == 'A' => sorted(&mut rows, s, |p| (std::cmp::Reverse(p.age), p.display_name())),
        Some(s) if s.letter == 'S' => sorted(&mut rows, s, |p| (std::cmp::Reverse(p.gpus), p.display_name())),
        Some(s) if s.letter == 'Q' => sorted(&mut rows, s, |p| (p.queue.clone(), p.display_name())),
        Some(s) if s.letter == 'B' => sorted(&mut rows, s, |p| (p.blocking, p.display_name())),
        Some(s) => sorted(&mut rows, s, |p| p.display_name()),
        None => {}
    }
    rows
}

pub fn gangs<'a>(views: &'a Views, filter: &str, sort: Option<Sort>) -> Vec<&'a GangSummary> {
    let f = Filter::parse(filter);
    let mut rows: Vec<&GangSummary> = views
        .analysis
        .gangs
        .iter()
        .filter(|g| {
            let name = g.display_name();
            let queue = g.queue.as_ref().map_or("", |q| q.as_str());
            f.matches(&[&name, g.state.as_str(), g.key.kind.kind_name(), g.key.kind.abbreviation(), queue], None)
        })
        .collect();
    match sort {
        Some(s) if s.letter == 'A' => sorted(&mut rows, s, |g| (g.age, g.display_name())),
        Some(s) if s.letter == 'S' => sorted(&mut rows, s, |g| (g.state.as_str(), g.display_name())),
        Some(s) if s.letter == 'Q' => sorted(&mut rows, s, |g| (g.queue.clone(), g.display_name())),
        Some(s) => sorted(&mut rows, s, |g| g.display_name()),
        None => {}
    }
    rows
}

pub fn queues<'a>(views: &'a Views, filter: &str, sort: Option<Sort>) -> Vec<&'a QueueRow> {
    let f = Filter::parse(filter);
    let mut rows: Vec<&QueueRow> = views
        .analysis
        .queues
        .iter()
        .filter(|q| {
            let columns = [
                q.name.as_str(),
                q.namespace.as_ref().map_or("", |n| n.as_str()),
                q.cohort.as_ref().map_or("", |c| c.as_str()),
                q.flavor.as_ref().map_or("", |c| c.as_str()),
                q.resource.as_str(),
            ];
            f.matches(&columns, None)
        })
        .collect();
    match sort {
        Some(s) if s.letter == 'U' => sorted(&mut rows, s, |q| (std::cmp::Reverse(q.used), q.name.clone())),
        Some(s) if s.letter == 'P' => sorted(&mut rows, s, |q| (std::cmp::Reverse(q.pending), q.name.clone())),
        Some(s) if s.letter == 'C' => sorted(&mut rows, s, |q| (q.cohort.clone(), q.name.clone())),
        Some(s) => sorted(&mut rows, s, |q| (q.name.clone(), q.namespace.clone())),
        None => {}
    }
    rows
}

pub fn mig<'a>(views: &'a Views, filter: &str, sort: Option<Sort>) -> Vec<&'a MigNodeRow> {
    let f = Filter::parse(filter);
    let mut rows: Vec<&MigNodeRow> = views
        .mig
        .iter()
        .filter(|m| {
            f.matches(&[m.node.as_str(), &m.product, &m.config, &m.state, &m.summary], node_labels(views, &f, &m.node))
        })
        .collect();
    match sort {
        Some(s) if s.letter == 'C' => sorted(&mut rows, s, |m| (m.config.clone(), m.node.clone())),
        Some(s) if s.letter == 'S' => sorted(&mut rows, s, |m| (m.state.clone(), m.node.clone())),
        Some(s) => sorted(&mut rows, s, |m| m.node.clone()),
        None => {}
    }
    rows
}

pub fn events<'a>(views: &'a Views, filter: &str, sort: Option<Sort>) -> Vec<&'a EventRow> {
    let f = Filter::parse(filter);
    let mut rows: Vec<&EventRow> = views
        .events
        .iter()
        .filter(|e| {
            let kind = if e.warning { "Warning" } else { "Normal" };
            f.matches(&[&e.age, kind, &e.reason, &e.object, &e.message, &e.source], None)
        })
        .collect();
    // The rows come newest first: their index is the age order.
    let mut indexed: Vec<(usize, &EventRow)> = rows.drain(..).enumerate().collect();
    match sort {
        Some(s) if s.letter == 'T' => sorted(&mut indexed, s, |(i, e)| (!e.warning, *i)),
        Some(s) if s.letter == 'E' => sorted(&mut indexed, s, |(i, e)| (e.reason.clone(), *i)),
        Some(s) if s.letter == 'O' => sorted(&mut indexed, s, |(i, e)| (e.object.clone(), *i)),
        Some(s) if s.letter == 'C' => sorted(&mut indexed, s, |(i, e)| (std::cmp::Reverse(e.count), *i)),
        Some(s) => sorted(&mut indexed, s, |(i, _)| *i),
        None => {}
    }
    indexed.into_iter().map(|(_, e)| e).collect()
}

pub fn usage<'a>(views: &'a Views, filter: &str, sort: Option<Sort>) -> Vec<&'a UsageRow> {
    let f = Filter::parse(filter);
    // The rows and the analysis's holders are in the same order: the
    // numbers sort, the text is what the filter sees.
    let mut rows: Vec<(usize, &UsageRow)> = views
        .usage
        .iter()
        .enumerate()
        .filter(|(_, r)| {
            f.matches(&[&r.pod, &r.node, &r.held, &r.idle, &r.workload, &r.workload_key, &r.queue, r.source], None)
        })
        .collect();
    let holder = |i: usize| views.analysis.utilization.holders.get(i);
    let milli = |x: Option<f64>| (x.unwrap_or(0.0) * 1000.0) as i64;
    match sort {
        Some(s) if s.letter == 'N' => sorted(&mut rows, s, |(_, r)| r.pod.clone()),
        Some(s) if s.letter == 'M' => {
            sorted(&mut rows, s, |(i, _)| (milli(holder(*i).and_then(|h| h.mean_pct.map(f64::from))), *i))
        }
        Some(s) if s.letter == 'S' => sorted(&mut rows, s, |(i, _)| (-milli(holder(*i).map(|h| h.gpus)), *i)),
        Some(s) if s.letter == 'W' => sorted(&mut rows, s, |(i, r)| (r.workload.clone(), *i)),
        Some(s) if s.letter == 'O' => sorted(&mut rows, s, |(i, r)| (r.node.clone(), *i)),
        Some(s) => sorted(&mut rows, s, |(i, _)| *i),
        None => {}
    }
    rows.into_iter().map(|(_, r)| r).collect()
}

pub fn usage_workloads<'a>(views: &'a Views, filter: &str, sort: Option<Sort>) -> Vec<&'a WorkloadRow> {
    let f = Filter::parse(filter);
    let mut rows: Vec<(usize, &WorkloadRow)> = views
        .usage_workloads
        .iter()
        .enumerate()
        .filter(|(_, r)| f.matches(&[&r.name, &r.idle_pods, &r.idle], None))
        .collect();
    let workload = |i: usize| views.analysis.utilization.workloads.get(i);
    let milli = |x: Option<f64>| (x.unwrap_or(0.0) * 1000.0) as i64;
    match sort {
        Some(s) if s.letter == 'N' => sorted(&mut rows, s, |(_, r)| r.name.clone()),
        Some(s) if s.letter == 'M' => {
            sorted(&mut rows, s, |(i, _)| (milli(workload(*i).and_then(|w| w.mean_pct.map(f64::from))), *i))
        }
        Some(s) if s.letter == 'S' => sorted(&mut rows, s, |(i, _)| (-milli(workload(*i).map(|w| w.gpus)), *i)),
        Some(s) => sorted(&mut rows, s, |(i, _)| *i),
        None => {}
    }
    rows.into_iter().map(|(_, r)| r).collect()
}

pub fn upgrades<'a>(views: &'a Views, filter: &str, sort: Option<Sort>) -> Vec<&'a crate::analysis::waves::UpgradeRow> {
    let f = Filter::parse(filter);
    let mut rows: Vec<&crate::analysis::waves::UpgradeRow> = views
        .analysis
        .upgrades
        .iter()
        .filter(|u| {
            if f.is_everything() {
                return true;
            }
            let driver = u.driver.as_ref().map(|d| d.to_string()).unwrap_or_default();
            let flags = if u.stuck {
                "STUCK"
            } else if u.skip {
                "skip"
            } else {
                ""
            };
            f.matches(&[u.node.as_str(), u.state_str(), &driver, flags], node_labels(views, &f, &u.node))
        })
        .collect();
    match sort {
        Some(s) if s.letter == 'S' => sorted(&mut rows, s, |u| (u.state_str(), u.node.clone())),
        Some(s) if s.letter == 'F' => sorted(&mut rows, s, |u| (std::cmp::Reverse(u.seconds_in_state), u.node.clone())),
        Some(s) if s.letter == 'D' => sorted(&mut rows, s, |u| (u.driver.clone(), u.node.clone())),
        Some(s) => sorted(&mut rows, s, |u| u.node.clone()),
        None => {}
    }
    rows
}

/// Issue codes for people: short words for narrow columns.
pub fn issue_short(code: IssueCode) -> &'static str {
    match code {
        IssueCode::DevicePluginNotAdvertising => "plugin",
        IssueCode::NotReady => "notready",
        IssueCode::Cordoned => "cordon",
        IssueCode::BlackHole => "black-hole",
        IssueCode::MigConfigPending => "mig-pend",
        IssueCode::MigConfigFailed => "mig-fail",
        IssueCode::UpgradeStuck => "upg-stuck",
        IssueCode::UpgradeFailed => "upg-fail",
        IssueCode::XidErrors => "xid",
        IssueCode::AgentUnavailable => "agent?",
        IssueCode::MigInvalid => "mig-invalid",
        IssueCode::SharedMemoryFull => "shared-mem",
        IssueCode::DefragReserved => "reserved",
        IssueCode::DevicePluginUnhealthy => "unhealthy",
        IssueCode::DeviceTainted => "dev-taint",
        IssueCode::GpuStack => "gpu-stack",
        IssueCode::ComputeDomainNotReady => "imex",
    }
}
