//! Runs a `SimCluster` as a source: one tokio task that owns the cluster,
//! advances its clock in real time, applies commands from the cockpit's
//! actions, and sends every change as `ModelEvent`s.

use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::model::ModelEvent;

use super::{Command, SimCluster};

type Request = (Command, oneshot::Sender<Result<String, String>>);

/// Talks to the running simulator.
#[derive(Clone)]
pub struct SimHandle {
    commands: mpsc::Sender<Request>,
}

impl SimHandle {
    /// Applies a command as the API server would; `Err` carries its refusal.
    pub async fn apply(&self, command: Command) -> Result<String, String> {
        let (tx, rx) = oneshot::channel();
        self.commands.send((command, tx)).await.map_err(|_| "the simulator has stopped".to_string())?;
        rx.await.map_err(|_| "the simulator has stopped".to_string())?
    }
}

/// Starts the simulator; it sends a full resync first, then changes every `tick`.
pub fn spawn(
    mut sim: SimCluster,
    events: mpsc::Sender<Vec<ModelEvent>>,
    tick: Duration,
) -> (SimHandle, JoinHandle<()>) {
    let (tx, mut rx) = mpsc::channel::<Request>(16);
    let task = tokio::spawn(async move {
        if events.send(sim.initial_events()).await.is_err() {
            return;
        }
        let mut interval = tokio::time::interval(tick);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        interval.tick().await;
        loop {
            let batch = tokio::select! {
                _ = interval.tick() => sim.step(tick.as_secs().max(1) as i64),
                request = rx.recv() => {
                    let Some((command, reply)) = request else { break };
                    let result = sim.apply(command);
                    let _ = reply.send(result);
                    // Show the consequence now rather than at the next tick.
                    sim.step(0)
                }
            };
            if events.send(batch).await.is_err() {
                break;
            }
        }
    });
    (SimHandle { commands: tx }, task)
}
