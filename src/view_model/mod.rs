//! View models: what the screens and `kgpu snapshot` show, computed from a
//! snapshot and its analysis. No terminal here, no kube, no clock.

pub mod details;
pub mod docs;
pub mod feeds;
pub mod json;
pub mod lessons;
pub mod mig_picker;
pub mod panes;
pub mod rows;
pub mod style;
pub mod text;
pub mod usage;

use std::fmt;

/// Durations for people (`3h20m`), as every view writes them.
pub use crate::model::time::age;

use crate::model::{MigMode, Node, Snapshot};

/// A node the MIG views list (the MIG pane, `snapshot --pane mig`): MIG
/// slices advertised, a MIG config other than all-disabled, a
/// reconfiguration in flight or failed, or MIG on in the hardware (whatever
/// the node object advertises). Merely MIG-capable nodes running whole GPUs
/// are not MIG nodes.
pub fn is_mig_node(snap: &Snapshot, node: &Node) -> bool {
    node.allocatable.mig_total() > 0
        || node.operator.mig_config.as_ref().is_some_and(|c| c.as_str() != "all-disabled")
        || node.operator.mig_config_state.as_ref().is_some_and(|s| s.as_str() != "success")
        || snap.devices.get(&node.name).is_some_and(|d| d.gpus.iter().any(|g| g.mig_mode == MigMode::Enabled))
}
use std::str::FromStr;

/// A section of the snapshot / a pane's data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Section {
    Fleet,
    Fragmentation,
    Pending,
    Gangs,
    Queues,
    Drivers,
    Mig,
    Events,
    Utilization,
}

impl Section {
    pub const ALL: [Section; 9] = [
        Section::Fleet,
        Section::Fragmentation,
        Section::Pending,
        Section::Gangs,
        Section::Queues,
        Section::Drivers,
        Section::Mig,
        Section::Events,
        Section::Utilization,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Section::Fleet => "fleet",
            Section::Fragmentation => "fragmentation",
            Section::Pending => "pending",
            Section::Gangs => "gangs",
            Section::Queues => "queues",
            Section::Drivers => "drivers",
            Section::Mig => "mig",
            Section::Events => "events",
            Section::Utilization => "utilization",
        }
    }
}

impl fmt::Display for Section {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, thiserror::Error)]
#[error(
    "unknown pane '{0}'; valid panes: fleet, fragmentation, pending, gangs, queues, drivers, mig, events, utilization (or usage)"
)]
pub struct UnknownSection(pub String);

impl FromStr for Section {
    type Err = UnknownSection;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // `usage`: what the cockpit's pane is called.
        let s = if s == "usage" { "utilization" } else { s };
        Section::ALL.into_iter().find(|x| x.name() == s).ok_or_else(|| UnknownSection(s.to_string()))
    }
}
