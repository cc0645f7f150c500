//! The demo's scripted failure scenarios. Each builds a cluster at
//! [`EPOCH`](super::EPOCH) with a story and the signal it is built to show;
//! `tests/scenarios.rs` asserts every signal through `kgpu snapshot`.

use thiserror::Error;

use crate::model::ScenarioInfo;

use super::SimCluster;

mod black_hole;
mod blocks;
mod default;
mod dra_claims;
mod driver_canary;
mod driver_skew;
mod fair_share;
mod fragmented;
mod gang_deadlock;
mod idle_holders;
mod mig_mismatch;
mod mig_vs_timeslicing;
mod plugin_crash;
mod preemption_cost;
mod quota_starvation;
mod spot_breakeven;
mod taint_mismatch;
mod topology_split;

pub use blocks::{IMAGE_CUDA_12_4, IMAGE_CUDA_12_8, require_12_4};
pub(super) use default::arrival;
pub use fragmented::FRAGMENTED_LAYOUT;

pub struct Scenario {
    pub name: &'static str,
    pub title: &'static str,
    pub story: &'static str,
    pub signal: &'static str,
    /// Its manifests for a real cluster (`assets/scenarios/<name>/`, as
    /// `kgpu scenario export` writes them).
    pub manifests: &'static str,
    build: fn(&mut SimCluster),
}

pub const SCENARIOS: &[Scenario] = &[
    default::SCENARIO,
    fragmented::SCENARIO,
    plugin_crash::SCENARIO,
    gang_deadlock::SCENARIO,
    quota_starvation::SCENARIO,
    taint_mismatch::SCENARIO,
    mig_mismatch::SCENARIO,
    driver_skew::SCENARIO,
    black_hole::SCENARIO,
    topology_split::SCENARIO,
    idle_holders::SCENARIO,
    driver_canary::SCENARIO,
    fair_share::SCENARIO,
    preemption_cost::SCENARIO,
    spot_breakeven::SCENARIO,
    mig_vs_timeslicing::SCENARIO,
    dra_claims::SCENARIO,
];

#[derive(Debug, Error)]
#[error("unknown scenario '{name}'; valid scenarios: {}", valid.join(", "))]
pub struct UnknownScenario {
    pub name: String,
    pub valid: Vec<&'static str>,
}

pub fn names() -> Vec<&'static str> {
    SCENARIOS.iter().map(|s| s.name).collect()
}

pub fn find(name: &str) -> Result<&'static Scenario, UnknownScenario> {
    SCENARIOS.iter().find(|s| s.name == name).ok_or_else(|| UnknownScenario { name: name.to_string(), valid: names() })
}

/// Builds a scenario's cluster and settles it (admission and scheduling
/// done, clock not moved).
pub fn build(name: &str, seed: u64) -> Result<SimCluster, UnknownScenario> {
    let scenario = find(name)?;
    let info = ScenarioInfo {
        name: scenario.name.into(),
        title: scenario.title.into(),
        story: scenario.story.into(),
        signal: scenario.signal.into(),
    };
    let mut sim = SimCluster::new(info, seed);
    (scenario.build)(&mut sim);
    sim.settle();
    Ok(sim)
}
