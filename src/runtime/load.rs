//! One-shot loads of a whole snapshot, for `kgpu snapshot` and `kgpu why`.

use crate::model::{Cluster, Snapshot, SourceInfo, SourceKind, Timestamp};
use crate::sources::sim::scenarios;

/// The demo cluster after `advance` seconds of simulated time.
pub fn demo(scenario: &str, seed: u64, advance: u64) -> Result<(Snapshot, Timestamp), scenarios::UnknownScenario> {
    let mut sim = scenarios::build(scenario, seed)?;
    let mut cluster = Cluster::new(SourceInfo { kind: SourceKind::Demo, name: scenario.to_string() });
    cluster.apply_all(sim.initial_events());
    let mut left = advance as i64;
    while left > 0 {
        let dt = left.min(5);
        cluster.apply_all(sim.step(dt));
        left -= dt;
    }
    Ok((cluster.snapshot(), sim.now))
}
