//! The audit log: one JSON line when an action starts and one when it ends
//! (dry runs: when they end), in the data dir, so an SRE can answer "who
//! drained gpu-07, when, and what happened". The file is the user's alone
//! (0600), and each record is one `write` to a file opened for appending,
//! so two cockpits never interleave their lines.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::PathBuf;

pub use crate::model::audit::AuditEntry as Entry;

#[derive(Clone, Debug)]
pub struct AuditLog {
    pub path: PathBuf,
}

impl AuditLog {
    pub fn append(&self, entry: &Entry) -> std::io::Result<()> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut f = std::fs::OpenOptions::new().create(true).append(true).mode(0o600).open(&self.path)?;
        // A log made before kgpu kept it private is made private now.
        let mode = f.metadata()?.permissions().mode();
        if mode & 0o077 != 0 {
            f.set_permissions(std::fs::Permissions::from_mode(mode & 0o700))?;
        }
        let mut line = serde_json::to_vec(entry).map_err(std::io::Error::other)?;
        line.push(b'\n');
        // One write: an O_APPEND write lands whole at the end of the file.
        f.write_all(&line)
    }

    /// The newest `n` entries made in kube context `context`, newest first
    /// (for the Events pane). Lines that do not parse are skipped.
    pub fn tail(&self, n: usize, context: &str) -> Vec<Entry> {
        let Ok(text) = std::fs::read_to_string(&self.path) else { return Vec::new() };
        text.lines()
            .rev()
            .filter_map(|l| serde_json::from_str::<Entry>(l).ok())
            .filter(|e| e.context == context)
            .take(n)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::time::rfc3339;

    #[test]
    fn appends_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog { path: dir.path().join("sub/audit.jsonl") };
        let e = Entry {
            time: rfc3339(0),
            context: "demo".into(),
            user: "tester".into(),
            action: "cordon".into(),
            targets: vec!["node/gpu-01".into()],
            dry_run: false,
            result: "ok".into(),
            detail: "node/gpu-01 cordoned".into(),
        };
        log.append(&e).unwrap();
        log.append(&Entry { action: "drain".into(), ..e.clone() }).unwrap();
        log.append(&Entry { context: "prod".into(), ..e.clone() }).unwrap();
        std::fs::OpenOptions::new().append(true).open(&log.path).unwrap().write_all(b"{not json\n").unwrap();
        let tail = log.tail(10, "demo");
        assert_eq!(tail.len(), 2, "another context's entries and a broken line are left out");
        assert_eq!(tail[0].action, "drain", "newest first");
        assert_eq!(tail[1], e);
        assert_eq!(std::fs::metadata(&log.path).unwrap().permissions().mode() & 0o777, 0o600, "the user's alone");
    }

    #[test]
    fn concurrent_writers_never_interleave_a_record() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog { path: dir.path().join("audit.jsonl") };
        let long = "x".repeat(20_000);
        std::thread::scope(|s| {
            for w in 0..4 {
                let (log, long) = (&log, &long);
                s.spawn(move || {
                    for i in 0..50 {
                        let e = Entry {
                            time: rfc3339(i),
                            context: format!("writer-{w}"),
                            user: "t".into(),
                            action: "drain".into(),
                            targets: vec![],
                            dry_run: false,
                            result: "ok".into(),
                            detail: long.clone(),
                        };
                        log.append(&e).unwrap();
                    }
                });
            }
        });
        let text = std::fs::read_to_string(&log.path).unwrap();
        assert_eq!(text.lines().count(), 200);
        assert!(text.lines().all(|l| serde_json::from_str::<Entry>(l).is_ok()), "every line is one whole record");
    }
}
