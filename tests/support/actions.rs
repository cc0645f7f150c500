//! The action executor the cockpit uses, wired to a live cluster for tests:
//! kgpu's own watchers feed it snapshots, its reports are collected, and its
//! audit log goes to a temporary file.

use std::sync::Arc;
use std::time::Duration;

use kgpu::actions::Progress;
use kgpu::actions::audit::AuditLog;
use kgpu::actions::backend::Backend;
use kgpu::actions::exec::Executor;
use kgpu::model::Snapshot;
use serde_json::Value;
use tokio::sync::{mpsc, watch};

use super::controlplane::ControlPlane;
use super::kube::source;

pub struct Harness {
    pub executor: Executor,
    pub reports: mpsc::Receiver<Progress>,
    pub snapshots: watch::Receiver<Arc<Snapshot>>,
    /// Insert the executor's id (1) to cancel its run.
    pub cancel: watch::Sender<std::collections::BTreeSet<u64>>,
    _tasks: Vec<tokio::task::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

pub async fn harness(cp: &ControlPlane) -> Harness {
    harness_as(cp, &cp.kubeconfig).await
}

/// Acting with the credentials of `kubeconfig` (watching as admin).
pub async fn harness_as(cp: &ControlPlane, kubeconfig: &std::path::Path) -> Harness {
    let (snapshots, tasks) = source(cp, &cp.kubeconfig).await;
    let target = kgpu::sources::kube::client::Target { kubeconfig: Some(kubeconfig.to_path_buf()), context: None };
    let actions = kgpu::sources::kube::client::action_client(&target).await.unwrap();
    let (reports_tx, reports) = mpsc::channel(256);
    let (cancel, cancel_rx) = watch::channel(Default::default());
    let dir = tempfile::tempdir().unwrap();
    let executor = Executor {
        backend: Backend::Kube(actions),
        snapshots: snapshots.clone(),
        reports: reports_tx,
        audit: Some(AuditLog { path: dir.path().join("audit.jsonl") }),
        context: "test".into(),
        user: "admin".into(),
        mig_timeout: Duration::from_secs(6),
        drain_timeout: Duration::from_secs(5),
        place_timeout: Duration::from_secs(60),
        id: 1,
        cancel: cancel_rx,
    };
    Harness { executor, reports, snapshots, cancel, _tasks: tasks, _dir: dir }
}

impl Harness {
    /// Every report of the last run, and its final one.
    pub fn reports(&mut self) -> (Vec<String>, String, bool) {
        let mut all = Vec::new();
        let mut last = None;
        while let Ok(Progress { text, error, done, .. }) = self.reports.try_recv() {
            all.push(text.clone());
            if done {
                last = Some((text, error));
            }
        }
        let (text, error) = last.expect("a final report");
        (all, text, error)
    }

    pub fn audit(&self) -> Vec<Value> {
        let path = &self.executor.audit.as_ref().unwrap().path;
        std::fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }
}
