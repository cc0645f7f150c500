//! The cockpit's own loop, end to end without a terminal: the demo source,
//! keys from a stream, frames into a `TestBackend`. A cordon goes from the
//! key through the confirmation, the executor and the simulator to the
//! screen and the audit log, as in a real session.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

use std::time::Duration;

use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
use futures::channel::mpsc;
use kgpu::config::Paths;
use kgpu::runtime::source::Source;
use kgpu::runtime::tui::{Cockpit, drive};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

fn key(c: char) -> std::io::Result<Event> {
    Ok(Event::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)))
}

/// The real loop on the `fragmented` demo, its audit log in a temporary
/// dir, driven by the keys sent on the returned channel; the task returns
/// the loop's result and its terminal.
struct Running {
    dir: tempfile::TempDir,
    snapshots: tokio::sync::watch::Receiver<std::sync::Arc<kgpu::model::Snapshot>>,
    keys: mpsc::UnboundedSender<std::io::Result<Event>>,
    task: tokio::task::JoinHandle<(anyhow::Result<kgpu::runtime::tui::Ending>, Terminal<TestBackend>)>,
}

async fn run_fragmented() -> Running {
    let dir = tempfile::tempdir().unwrap();
    let paths = Paths { config_dir: None, data_dir: Some(dir.path().to_path_buf()) };
    let from = Source::Demo { scenario: "fragmented".into(), seed: 1, advance: 0, hidden: false };
    let cockpit = Cockpit::start(&from, paths, "dark", false, false).await.unwrap();
    let snapshots = cockpit.session.snapshots.clone();
    let (keys, input) = mpsc::unbounded();
    let task = tokio::spawn(async move {
        let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
        let result = drive(&mut terminal, input, cockpit).await;
        (result, terminal)
    });
    Running { dir, snapshots, keys, task }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cordon_typed_into_the_loop_reaches_the_cluster_the_screen_and_the_audit_log() {
    let Running { dir, snapshots, keys, task: running } = run_fragmented().await;
    // The demo's first snapshot, then: the first node row, cordon, confirm.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for c in ['c', 'y'] {
        keys.unbounded_send(key(c)).unwrap();
    }
    let cordoned = async {
        loop {
            if snapshots.borrow().nodes.values().any(|n| n.unschedulable) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(20), cordoned).await.expect("the simulator saw the cordon");
    // The report and the next snapshot reach the screen.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    drop(keys);
    let (result, terminal) = running.await.unwrap();
    result.unwrap();
    let screen = format!("{}", terminal.backend());
    assert!(screen.contains("cordoned"), "the outcome is on the screen:\n{screen}");
    let audit = std::fs::read_to_string(dir.path().join("audit.jsonl")).unwrap();
    assert!(audit.contains("\"cordon\"") && audit.contains("\"ok\""), "{audit}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaving_while_a_plan_runs_stops_it_cleanly_and_records_where() {
    let Running { dir, keys, task: running, .. } = run_fragmented().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Run the defrag plan, then leave at once: q asks, y answers.
    for c in ['x', 'y', 'q', 'y'] {
        keys.unbounded_send(key(c)).unwrap();
    }
    let (left, _) =
        tokio::time::timeout(Duration::from_secs(40), running).await.expect("left within the grace").unwrap();
    let ending = left.unwrap();
    // What it stopped is said for the terminal, as the audit log has it; a
    // q is no signal, and the plan stopped in time: exit 0.
    let words = ending.words(Some(&dir.path().join("audit.jsonl"))).join("\n");
    assert!(words.contains("the cockpit was left while 1 action(s) ran"), "{words}");
    assert!(words.contains("  run-defrag-plan ") && words.contains("reservation released"), "{words}");
    assert!(words.contains("audit.jsonl"), "{words}");
    assert_eq!(ending.exit_code(), std::process::ExitCode::SUCCESS);
    let audit: Vec<serde_json::Value> = std::fs::read_to_string(dir.path().join("audit.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let results: Vec<&str> = audit.iter().map(|e| e["result"].as_str().unwrap()).collect();
    assert_eq!(results, ["started", "cancelled"], "its start and where it stopped: {audit:?}");
    // The plan released its nodes before the cockpit left (the simulator
    // has gone with the cockpit; its last word is in the record).
    let detail = audit[1]["detail"].as_str().unwrap();
    assert!(detail.contains("reservation released"), "{detail}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_has_no_executor_at_all() {
    let paths = Paths { config_dir: None, data_dir: None };
    let from = Source::Demo { scenario: "default".into(), seed: 1, advance: 0, hidden: false };
    let cockpit = Cockpit::start(&from, paths, "dark", false, true).await.unwrap();
    assert!(cockpit.session.executor.is_none(), "--read-only is enforced where actions run");
}

/// Keys as a terminal delivers them: like crossterm's event stream, this one
/// keeps the first waker it is given while nothing is typed, and wakes only
/// that one when a key comes.
#[derive(Clone, Default)]
struct Keyboard(std::sync::Arc<std::sync::Mutex<(std::collections::VecDeque<Event>, Option<std::task::Waker>)>>);

impl Keyboard {
    fn press(&self, c: char) {
        let waker = {
            let mut inner = self.0.lock().unwrap();
            inner.0.push_back(Event::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)));
            inner.1.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl futures::Stream for Keyboard {
    type Item = std::io::Result<Event>;
    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        let mut inner = self.0.lock().unwrap();
        if let Some(e) = inner.0.pop_front() {
            return std::task::Poll::Ready(Some(Ok(e)));
        }
        if inner.1.is_none() {
            inner.1 = Some(cx.waker().clone());
        }
        std::task::Poll::Pending
    }
}

/// On a source that never changes (files), nothing but the key can wake
/// the loop: each key must be handled when it comes, not on some later
/// event. Before, the loop polled the input with a no-op waker after each
/// batch of keys, and a key typed next waited for a tick that never came.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_key_wakes_the_loop_on_a_source_that_never_changes() {
    let dir = tempfile::tempdir().unwrap();
    let paths = Paths { config_dir: None, data_dir: Some(dir.path().to_path_buf()) };
    let dump =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/verdicts/hand-made/black-hole.yaml");
    let cockpit = Cockpit::start(&Source::File(vec![dump]), paths, "dark", false, true).await.unwrap();
    let keyboard = Keyboard::default();
    let input = keyboard.clone();
    let task = tokio::spawn(async move {
        let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
        let result = drive(&mut terminal, input, cockpit).await;
        (result, terminal)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Three keys one after another, each after the loop went idle: 2, 6, then q.
    for c in ['2', '6', 'q'] {
        keyboard.press(c);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let (result, terminal) = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("q was handled: the loop woke for each key")
        .unwrap();
    result.unwrap();
    assert!(format!("{}", terminal.backend()).contains("Events ("), "6 was handled before q");
}
