//! The feeds a source delivers, each with its own health.

use super::Timestamp;

/// One stream of objects from a source. Each can be healthy or not on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Feed {
    Nodes,
    Pods,
    Events,
    Workloads,
    ClusterQueues,
    LocalQueues,
    ResourceFlavors,
    PodGroups,
    VolcanoQueues,
    ClusterPolicies,
    NvidiaDrivers,
    ResourceSlices,
    DeviceClasses,
    ResourceClaims,
    ResourceClaimTemplates,
    ComputeDomains,
    PersistentVolumeClaims,
    PersistentVolumes,
    StorageClasses,
    Namespaces,
    DcgmExporter,
    Agents,
}

impl Feed {
    pub const ALL: [Feed; 22] = [
        Feed::Nodes,
        Feed::Pods,
        Feed::Events,
        Feed::Workloads,
        Feed::ClusterQueues,
        Feed::LocalQueues,
        Feed::ResourceFlavors,
        Feed::PodGroups,
        Feed::VolcanoQueues,
        Feed::ClusterPolicies,
        Feed::NvidiaDrivers,
        Feed::ResourceSlices,
        Feed::DeviceClasses,
        Feed::ResourceClaims,
        Feed::ResourceClaimTemplates,
        Feed::ComputeDomains,
        Feed::PersistentVolumeClaims,
        Feed::PersistentVolumes,
        Feed::StorageClasses,
        Feed::Namespaces,
        Feed::DcgmExporter,
        Feed::Agents,
    ];

    /// The feeds the scheduler's volume filters read.
    pub const STORAGE: [Feed; 3] = [Feed::PersistentVolumeClaims, Feed::PersistentVolumes, Feed::StorageClasses];

    pub fn name(self) -> &'static str {
        match self {
            Feed::Nodes => "nodes",
            Feed::Pods => "pods",
            Feed::Events => "events",
            Feed::Workloads => "kueue workloads",
            Feed::ClusterQueues => "kueue clusterqueues",
            Feed::LocalQueues => "kueue localqueues",
            Feed::ResourceFlavors => "kueue resourceflavors",
            Feed::PodGroups => "volcano podgroups",
            Feed::VolcanoQueues => "volcano queues",
            Feed::ClusterPolicies => "gpu operator clusterpolicies",
            Feed::NvidiaDrivers => "gpu operator nvidiadrivers",
            Feed::ResourceSlices => "dra resourceslices",
            Feed::DeviceClasses => "dra deviceclasses",
            Feed::ResourceClaims => "dra resourceclaims",
            Feed::ResourceClaimTemplates => "dra resourceclaimtemplates",
            Feed::ComputeDomains => "dra computedomains",
            Feed::PersistentVolumeClaims => "persistentvolumeclaims",
            Feed::PersistentVolumes => "persistentvolumes",
            Feed::StorageClasses => "storageclasses",
            Feed::Namespaces => "namespaces",
            Feed::Agents => "node agents",
            Feed::DcgmExporter => "dcgm-exporter",
        }
    }
}

/// Why a feed has no data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FeedProblem {
    /// The CRD is not installed (404 on the resource).
    Missing(String),
    /// RBAC said no (403).
    Forbidden(String),
    /// Anything else, with the error text.
    Error(String),
}

impl FeedProblem {
    pub fn describe(&self) -> &str {
        match self {
            FeedProblem::Missing(s) | FeedProblem::Forbidden(s) | FeedProblem::Error(s) => s,
        }
    }
    pub fn label(&self) -> &'static str {
        match self {
            FeedProblem::Missing(_) => "not installed",
            FeedProblem::Forbidden(_) => "forbidden",
            FeedProblem::Error(_) => "error",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FeedState {
    /// Listing for the first time.
    Syncing,
    /// Watching; data is current.
    Live,
    /// Cannot be read at all; the rest of kgpu carries on.
    Unavailable(FeedProblem),
    /// Was live, lost the connection at `since`; data is stale and shown with its age.
    Reconnecting { since: Timestamp, error: String },
}

#[derive(Clone, Debug, PartialEq)]
pub struct FeedStatus {
    pub state: FeedState,
    /// When this feed last delivered data.
    pub last_data: Option<Timestamp>,
    /// A polled feed's reach (the agents, dcgm-exporter): how many
    /// reporters there are and how current their readings are.
    pub coverage: Option<Coverage>,
    /// How a watched feed took its last full state from the API server.
    pub listed: Option<Listing>,
    /// The older API version the feed is read at, where the server does not
    /// serve the one kgpu prefers (DRA's `resource.k8s.io/v1beta1` on 1.32).
    pub older_api: Option<super::Sym>,
}

impl FeedStatus {
    /// A feed in `state` that has delivered nothing yet.
    pub fn new(state: FeedState) -> FeedStatus {
        FeedStatus { state, last_data: None, coverage: None, listed: None, older_api: None }
    }
}

/// How a watched feed reads the whole of its collection (at start, and
/// again after any error): streamed over a watch where the server offers it
/// (KEP-3157 WatchList, `sendInitialEvents`), else page by page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listing {
    Stream,
    /// Pages, and why not a stream: the server's refusal, if it refused one.
    Pages {
        refused: Option<String>,
    },
}

/// What a polled feed has read of its reporters, within its request budget.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Coverage {
    /// Reporter pods found (one per node at most).
    pub reporters: u32,
    /// Of those, read at least once.
    pub read: u32,
    /// When the least recently read of them was read (none before every one was).
    pub oldest_reading: Option<Timestamp>,
    /// Requests a second the feed may send the API server; none when it
    /// reaches the pods directly.
    pub budget: Option<f64>,
    /// Read all at once from this (`Prometheus at http://…`), not reporter by reporter.
    pub via: Option<super::Sym>,
}
