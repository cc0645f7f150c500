//! The signals that stop kgpu from outside, caught so that it ends
//! cleanly: the cockpit restores the terminal, a command-line action
//! cancels at its next step, releases what it holds and says what it left.

use tokio::signal::unix::{Signal, SignalKind, signal};

/// SIGTERM, SIGHUP (an SSH session that drops), SIGINT, SIGQUIT and SIGABRT.
pub struct StopSignals(Vec<(&'static str, i32, Signal)>);

impl StopSignals {
    pub fn new() -> std::io::Result<StopSignals> {
        const SIGABRT: i32 = 6;
        let kinds = [
            ("SIGTERM", SignalKind::terminate()),
            ("SIGHUP", SignalKind::hangup()),
            ("SIGINT", SignalKind::interrupt()),
            ("SIGQUIT", SignalKind::quit()),
            ("SIGABRT", SignalKind::from_raw(SIGABRT)),
        ];
        kinds
            .into_iter()
            .map(|(name, kind)| Ok((name, kind.as_raw_value(), signal(kind)?)))
            .collect::<std::io::Result<_>>()
            .map(StopSignals)
    }

    /// The name and number of the next signal that arrives.
    pub async fn recv(&mut self) -> (&'static str, i32) {
        let waits = self.0.iter_mut().map(|(name, number, s)| {
            let (name, number) = (*name, *number);
            Box::pin(async move {
                s.recv().await;
                (name, number)
            })
        });
        futures::future::select_all(waits).await.0
    }
}
