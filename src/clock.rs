//! The system clock, read in one place. Only the edges (runtime, sources,
//! actions, the agent) read it; the pure layers take time as an argument.

/// Seconds since the epoch, from the system clock.
pub fn wall_clock() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}
