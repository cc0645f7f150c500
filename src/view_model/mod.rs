//! View models: what the screens and `kgpu snapshot` show, computed from a
//! snapshot and its analysis. No terminal here, no kube, no clock.

pub mod json;
pub mod panes;
pub mod text;

use std::fmt;
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
}

impl Section {
    pub const ALL: [Section; 8] = [
        Section::Fleet,
        Section::Fragmentation,
        Section::Pending,
        Section::Gangs,
        Section::Queues,
        Section::Drivers,
        Section::Mig,
        Section::Events,
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
        }
    }
}

impl fmt::Display for Section {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, thiserror::Error)]
#[error("unknown pane '{0}'; valid panes: fleet, fragmentation, pending, gangs, queues, drivers, mig, events")]
pub struct UnknownSection(pub String);

impl FromStr for Section {
    type Err = UnknownSection;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Section::ALL.into_iter().find(|x| x.name() == s).ok_or_else(|| UnknownSection(s.to_string()))
    }
}
