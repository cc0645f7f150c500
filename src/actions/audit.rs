//! The audit log: one JSON line per action (and per dry run), in the data
//! dir, so an SRE can answer "who drained gpu-07, when, and what happened".

use std::io::Write;
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
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&self.path)?;
        let line = serde_json::to_string(entry).map_err(std::io::Error::other)?;
        writeln!(f, "{line}")
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
    }
}
