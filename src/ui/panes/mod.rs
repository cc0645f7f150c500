//! One module per pane.

pub mod drivers;
pub mod events;
pub mod fleet;
pub mod gangs;
pub mod mig;
pub mod pending;
pub mod usage;
