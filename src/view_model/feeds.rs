//! Feed health, said one way everywhere: the status bar, the empty panes,
//! `kgpu snapshot` text and its JSON read the same states.

use crate::model::time::age;
use crate::model::{Coverage, Feed, FeedProblem, FeedState, FeedStatus, Listing, Snapshot, SourceKind, Sym, Timestamp};

use super::style::Role;

/// One feed's state as people and scripts read it.
#[derive(Clone, Debug, PartialEq)]
pub struct FeedHealth {
    pub feed: Feed,
    /// `syncing`, `live`, `reconnecting`, or the problem's label (`missing`, `forbidden`…).
    pub state: &'static str,
    /// Why it cannot deliver (the problem, or the last error while reconnecting).
    pub reason: Option<String>,
    /// How old its data may be, in seconds, if it has any: 0 for a live
    /// watch (a stalled one turns reconnecting within the stall timeout),
    /// the last round's age for the polled agents, and the time since it
    /// was last known current while reconnecting.
    pub age: Option<i64>,
    /// Reconnecting since then: its data may be behind the cluster.
    pub stale_since: Option<Timestamp>,
    /// Whether it cannot deliver data at all.
    pub unavailable: bool,
    /// Unavailable because its API is not served (a CRD not installed).
    pub not_installed: bool,
    /// Whether it never delivered a complete list (still syncing, or lost
    /// before its first list): a view without it is partial.
    pub incomplete: bool,
    /// Objects it could not convert: how many, and why the last one.
    pub skipped: Option<(u64, String)>,
    /// A polled feed's reporters and how current their readings are.
    pub coverage: Option<Coverage>,
    /// How a watched feed took its whole collection from the API server.
    pub listed: Option<Listing>,
    /// The older API version it is read at, where the server lacks the preferred one.
    pub older_api: Option<Sym>,
}

impl FeedHealth {
    pub fn stale(&self) -> bool {
        self.stale_since.is_some()
    }

    /// The short problem for the status bar (`pods: reconnecting 2m`,
    /// `pods: 3 skipped`), if any.
    pub fn problem(&self, now: Timestamp) -> Option<String> {
        let name = self.feed.name();
        if self.unavailable {
            Some(format!("{name}: {}", self.state))
        } else if let Some(since) = self.stale_since {
            Some(format!("{name}: reconnecting {}", age(now - since)))
        } else {
            self.skipped.as_ref().map(|(n, _)| format!("{name}: {n} skipped"))
        }
    }

    /// Whether some of a polled feed's reporters have not been read yet
    /// (its budget reaches them in turn).
    pub fn partly_read(&self) -> bool {
        self.coverage.as_ref().is_some_and(|c| c.read < c.reporters)
    }

    /// What a polled feed has read, and at what cost to the API server:
    /// `node agents: 16 of 2,000 reporters read so far; budget 0.5 requests/s through the API server`.
    pub fn coverage_line(&self, now: Timestamp) -> Option<String> {
        let c = self.coverage.clone()?;
        if let Some(via) = c.via {
            // One query for the whole fleet: the nodes it had series for.
            return Some(format!("feed {}: {} node(s) read from {via}", self.feed.name(), c.read));
        }
        let read = if c.read < c.reporters {
            format!("{} of {} reporters read so far", c.read, c.reporters)
        } else {
            format!("{} reporters read", c.reporters)
        };
        let oldest = c.oldest_reading.map_or(String::new(), |t| format!(", the oldest reading {} ago", age(now - t)));
        let budget = c.budget.map_or(" (directly, not through the API server)".to_string(), |b| {
            format!("; budget {b} requests/s through the API server (--api-budget)")
        });
        Some(format!("feed {}: {read}{oldest}{budget}", self.feed.name()))
    }

    /// `stream` or `pages`, and the server's refusal of a stream if it refused one.
    pub fn listed_by(&self) -> Option<(&'static str, Option<&str>)> {
        Some(match self.listed.as_ref()? {
            Listing::Stream => ("stream", None),
            Listing::Pages { refused } => ("pages", refused.as_deref()),
        })
    }

    /// The line `snapshot` text and stderr give a feed's skipped objects.
    pub fn skipped_line(&self) -> Option<String> {
        self.skipped
            .as_ref()
            .map(|(n, why)| format!("feed {}: {n} object(s) skipped as malformed; the last: {why}", self.feed.name()))
    }
}

/// A state as a word (`syncing`, `live`, `reconnecting`, or the problem's
/// label) and why it cannot deliver, if it cannot.
pub fn said(state: &FeedState) -> (&'static str, Option<String>) {
    match state {
        FeedState::Syncing => ("syncing", None),
        FeedState::Live => ("live", None),
        FeedState::Unavailable(p) => (p.label(), Some(p.describe().to_string())),
        FeedState::Reconnecting { error, .. } => ("reconnecting", Some(error.clone())),
    }
}

/// Every feed the source has, in `Feed::ALL` order.
pub fn health(snap: &Snapshot, now: Timestamp) -> Vec<FeedHealth> {
    Feed::ALL
        .iter()
        .filter_map(|f| {
            let status = snap.feed(*f)?;
            let (state, reason) = said(&status.state);
            let stale_since = match status.state {
                FeedState::Reconnecting { since, .. } => Some(since),
                _ => None,
            };
            Some(FeedHealth {
                feed: *f,
                state,
                reason,
                age: data_age(*f, status, now, snap.source.kind),
                stale_since,
                unavailable: matches!(status.state, FeedState::Unavailable(_)),
                not_installed: matches!(status.state, FeedState::Unavailable(FeedProblem::Missing(_))),
                incomplete: match &status.state {
                    FeedState::Syncing => true,
                    FeedState::Reconnecting { .. } => status.last_data.is_none(),
                    // Refused or failing: what it holds is not there. A CRD
                    // not installed is not partial data: there is none.
                    FeedState::Unavailable(p) => !matches!(p, FeedProblem::Missing(_)),
                    FeedState::Live => false,
                },
                skipped: snap.skipped.get(f).cloned(),
                coverage: status.coverage.clone(),
                listed: status.listed.clone(),
                older_api: status.older_api.clone(),
            })
        })
        .collect()
}

fn data_age(feed: Feed, status: &FeedStatus, now: Timestamp, source: SourceKind) -> Option<i64> {
    let last_data = status.last_data?;
    let current_at = match &status.state {
        // An unavailable feed is named as a problem of its own instead.
        FeedState::Syncing | FeedState::Unavailable(_) => return None,
        // Real agents and exporters are asked every few seconds: their data
        // is as old as the last answer. The demo's simulated ones are current.
        _ if matches!(feed, Feed::Agents | Feed::DcgmExporter) && source == SourceKind::Kube => last_data,
        FeedState::Live => now,
        FeedState::Reconnecting { since, .. } => *since,
    };
    Some((now - current_at).max(0))
}

/// The lines `snapshot` text gives the feeds read at an older API version
/// than kgpu prefers, one per version: `feeds resourceslices, deviceclasses:
/// read as resource.k8s.io/v1beta1 (this server does not serve a newer one)`.
pub fn older_api_lines(feeds: &[FeedHealth]) -> Vec<String> {
    lines_by(
        feeds,
        |h| h.older_api.as_ref().map(|v| v.as_str()),
        |version| format!("read as {version} (this server does not serve a newer one)"),
    )
}

/// The lines `snapshot` text gives the feeds listed by pages because the
/// server refused to stream them, one per refusal (a server that cannot
/// stream refuses every feed alike).
pub fn pages_lines(feeds: &[FeedHealth]) -> Vec<String> {
    lines_by(
        feeds,
        |h| h.listed_by().and_then(|(_, why)| why),
        |why| format!("listed by pages (the API server refused a streamed list: {why})"),
    )
}

/// One line per value `of` gives some feed, naming the feeds that share it:
/// `feeds nodes, pods: {said(value)}`.
fn lines_by<'a>(
    feeds: &'a [FeedHealth],
    of: impl Fn(&'a FeedHealth) -> Option<&'a str>,
    said: impl Fn(&str) -> String,
) -> Vec<String> {
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    for h in feeds {
        if let Some(value) = of(h) {
            match groups.iter_mut().find(|(v, _)| *v == value) {
                Some((_, names)) => names.push(h.feed.name()),
                None => groups.push((value, vec![h.feed.name()])),
            }
        }
    }
    groups
        .into_iter()
        .map(|(value, names)| {
            let which = if names.len() == 1 { "feed" } else { "feeds" };
            format!("{which} {}: {}", names.join(", "), said(value))
        })
        .collect()
}

/// Feeds that never delivered a complete list (see [`FeedHealth::incomplete`]).
pub fn incomplete(snap: &Snapshot) -> Vec<Feed> {
    health(snap, snap.clock).into_iter().filter(|h| h.incomplete).map(|h| h.feed).collect()
}

/// The status bar's data line: the age of the oldest feed's data (the
/// screen is only as current as that), then every feed that is unavailable
/// or reconnecting; red while any data may be stale.
pub fn summary(snap: &Snapshot, now: Timestamp) -> (String, Role) {
    let feeds = health(snap, now);
    let stale: Vec<&FeedHealth> = feeds.iter().filter(|h| h.stale()).collect();
    let mut problems: Vec<String> = Vec::new();
    // An API server that stops answering stalls every feed at once: one
    // item says so, rather than a line cut off after the third feed.
    if stale.len() >= 3 {
        let since = stale.iter().filter_map(|h| h.stale_since).min().unwrap_or(now);
        problems.push(format!("{} feeds reconnecting {}", stale.len(), age(now - since)));
    }
    // A CRD not installed is how the cluster is (no Kueue, no Volcano), not
    // a fault: counted in one item, where several would fill the bar.
    let not_installed = |h: &&FeedHealth| h.not_installed;
    let missing = feeds.iter().filter(not_installed).count();
    problems.extend(
        feeds
            .iter()
            .filter(|h| stale.len() < 3 || !h.stale())
            .filter(|h| missing < 2 || !not_installed(h))
            .filter_map(|h| h.problem(now)),
    );
    let faults = problems.len() - usize::from(missing == 1);
    if missing >= 2 {
        problems.push(format!("{missing} feeds not installed"));
    }
    // A budget that has not reached every reporter yet: said, not hidden.
    let partial: Vec<String> = feeds
        .iter()
        .filter(|h| h.partly_read() && !h.unavailable)
        .filter_map(|h| {
            h.coverage.as_ref().map(|c| format!("{}: {}/{} nodes read", h.feed.name(), c.read, c.reporters))
        })
        .collect();
    let oldest = feeds.iter().filter_map(|h| h.age).max();
    let data = oldest.map_or_else(|| "no data yet".to_string(), |a| format!("data {}", age(a)));
    if problems.is_empty() && partial.is_empty() {
        (data, Role::Dim)
    } else if problems.is_empty() {
        (format!("{data} · {}", partial.join(" · ")), Role::Dim)
    } else {
        let role = if feeds.iter().any(FeedHealth::stale) {
            Role::Error
        } else if faults > 0 {
            Role::Warn
        } else {
            Role::Dim
        };
        (format!("{data} · {}", problems.join(" · ")), role)
    }
}

/// How old the screen's numbers may be while some feed is reconnecting
/// (seconds since the stalest was last known current), else `None`: the
/// headline says so beside its totals, not only the status bar.
pub fn stale_for(snap: &Snapshot, now: Timestamp) -> Option<i64> {
    health(snap, now).iter().filter_map(|h| h.stale_since).min().map(|since| (now - since).max(0))
}

/// Why a pane over these feeds shows nothing: not installed, forbidden…
fn note(snap: &Snapshot, feeds: &[Feed]) -> Option<String> {
    let notes: Vec<String> = feeds
        .iter()
        .filter_map(|f| snap.feed_problem(*f).map(|p| format!("{}: {} — {}", f.name(), p.label(), p.describe())))
        .collect();
    (!notes.is_empty()).then(|| notes.join("; "))
}

/// The empty Gangs table's note.
pub fn gangs_note(snap: &Snapshot) -> Option<String> {
    note(snap, &[Feed::Workloads, Feed::PodGroups])
}

/// The empty Queues table's note.
pub fn queues_note(snap: &Snapshot) -> Option<String> {
    note(snap, &[Feed::ClusterQueues, Feed::LocalQueues, Feed::VolcanoQueues])
}

/// A line per DRA feature the cluster uses that kgpu does not model: the
/// verdicts that depend on it defer to the scheduler's word.
pub fn dra_unmodelled_lines(a: &crate::analysis::Analysis) -> Vec<String> {
    a.dra_unmodelled
        .iter()
        .map(|(feature, at)| {
            let more = at.len().saturating_sub(3);
            let mut named = at.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
            if more > 0 {
                named.push_str(&format!(" and {more} more"));
            }
            format!(
                "dra: kgpu does not model {}, in use by {named}: where a verdict depends on it, the scheduler's word counts",
                feature.name()
            )
        })
        .collect()
}
