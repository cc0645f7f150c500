//! `kgpu lab`: a living local cluster on loopback — a real API server,
//! scheduler and controller manager, KWOK's fake kubelets keeping the GPU
//! nodes Ready and running their pods, optionally the real Kueue manager and
//! a seeded stream of GPU Jobs. For trainees and interviewers, and for the
//! live tests that need controllers.
//!
//! One lab runs per cache root: `up` holds a lock for its whole life and
//! writes what it runs to a state file that `status` and `down` read.

pub mod binaries;
pub mod churn;
pub mod cluster;
pub mod http;
pub mod kind;
pub mod kwok;
pub mod pki;

use std::fs::File;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum LabError {
    #[error("{0}")]
    Build(String),
    #[error("{component}: {message}")]
    Start { component: String, message: String },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{0}")]
    Api(String),
    #[error(
        "a lab is already running (pid {pid}, since {since}); its KUBECONFIG is {kubeconfig}. `kgpu lab status` shows it, `kgpu lab down` stops it"
    )]
    AlreadyRunning { pid: u32, since: String, kubeconfig: String },
}

/// What a running lab wrote about itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabState {
    pub pid: u32,
    /// Unix seconds.
    pub started: i64,
    pub server: String,
    pub kubeconfig: PathBuf,
    pub run_dir: PathBuf,
    pub scenario: Option<String>,
    pub kueue: bool,
    pub churn: bool,
    /// Component binary → process id.
    pub processes: Vec<(String, u32)>,
}

/// The lab's files under a cache root.
#[derive(Clone, Debug)]
pub struct Lab {
    dir: PathBuf,
}

/// Held while a lab runs; dropping it lets the next `up` start.
pub struct LabLock {
    _file: File,
    state: PathBuf,
}

impl Drop for LabLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.state);
    }
}

impl Lab {
    pub fn at(cache_root: &Path) -> Lab {
        Lab { dir: cache_root.join("lab") }
    }

    /// A stable path: the export line of one `up` stays right for the next.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    /// Where the components keep their logs and data while the lab runs.
    pub fn run_dir(&self) -> PathBuf {
        self.dir.join("run")
    }

    fn state_file(&self) -> PathBuf {
        self.dir.join("state.json")
    }

    fn lock_file(&self) -> Result<File, LabError> {
        std::fs::create_dir_all(&self.dir).map_err(|source| LabError::Io { path: self.dir.clone(), source })?;
        let path = self.dir.join("lock");
        File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|source| LabError::Io { path, source })
    }

    /// Takes the lab's lock, or says which lab holds it.
    pub fn lock(&self) -> Result<LabLock, LabError> {
        let file = self.lock_file()?;
        match file.try_lock() {
            Ok(()) => Ok(LabLock { _file: file, state: self.state_file() }),
            Err(std::fs::TryLockError::WouldBlock) => {
                let state = self.read_state();
                Err(LabError::AlreadyRunning {
                    pid: state.as_ref().map_or(0, |s| s.pid),
                    since: state.as_ref().map_or_else(|| "starting".into(), |s| crate::model::time::rfc3339(s.started)),
                    kubeconfig: self.kubeconfig().display().to_string(),
                })
            }
            Err(std::fs::TryLockError::Error(source)) => Err(LabError::Io { path: self.dir.join("lock"), source }),
        }
    }

    /// Whether a lab holds the lock now.
    pub fn is_running(&self) -> bool {
        match self.lock_file() {
            Ok(file) => match file.try_lock() {
                Ok(()) => false,
                Err(std::fs::TryLockError::WouldBlock) => true,
                Err(std::fs::TryLockError::Error(_)) => false,
            },
            Err(_) => false,
        }
    }

    /// The running lab's state (`None` when none runs, or it is still starting).
    pub fn state(&self) -> Option<LabState> {
        if !self.is_running() {
            return None;
        }
        self.read_state()
    }

    fn read_state(&self) -> Option<LabState> {
        let text = std::fs::read_to_string(self.state_file()).ok()?;
        serde_json::from_str(&text).ok()
    }

    pub fn write_state(&self, state: &LabState) -> Result<(), LabError> {
        let text = serde_json::to_string_pretty(state).map_err(|e| LabError::Api(e.to_string()))?;
        let tmp = self.dir.join("state.json.tmp");
        pki::write(&tmp, &text)?;
        std::fs::rename(&tmp, self.state_file()).map_err(|source| LabError::Io { path: self.state_file(), source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_lab_at_a_time_and_the_state_goes_with_the_lock() {
        let root = tempfile::tempdir().unwrap();
        let lab = Lab::at(root.path());
        assert!(!lab.is_running());
        let lock = lab.lock().unwrap();
        assert!(lab.is_running());
        let state = LabState {
            pid: 42,
            started: 1_796_029_200,
            server: "https://127.0.0.1:1".into(),
            kubeconfig: lab.kubeconfig(),
            run_dir: lab.run_dir(),
            scenario: Some("fragmented".into()),
            kueue: false,
            churn: true,
            processes: vec![("etcd".into(), 7)],
        };
        lab.write_state(&state).unwrap();
        assert_eq!(lab.state(), Some(state));
        match Lab::at(root.path()).lock() {
            Err(LabError::AlreadyRunning { pid, since, .. }) => {
                assert_eq!(pid, 42);
                assert_eq!(since, "2026-11-30T09:00:00Z");
            }
            other => panic!("expected AlreadyRunning, got {:?}", other.map(|_| ())),
        }
        drop(lock);
        assert!(!lab.is_running());
        assert_eq!(lab.state(), None);
        assert!(!root.path().join("lab/state.json").exists());
    }
}
