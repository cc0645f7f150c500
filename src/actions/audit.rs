//! The audit log: one JSON line per action (and per dry run), in the data
//! dir, so an SRE can answer "who drained gpu-07, when, and what happened".

use std::io::Write;
use std::path::PathBuf;

use serde::Serialize;

#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// RFC 3339, UTC.
    pub time: String,
    pub context: String,
    pub user: String,
    pub action: String,
    pub targets: Vec<String>,
    pub dry_run: bool,
    /// `ok`, `error`, `cancelled`, `partial`.
    pub result: String,
    pub detail: String,
}

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

    /// The newest `n` entries, newest first (for the Events pane).
    pub fn tail(&self, n: usize) -> Vec<Entry> {
        let Ok(text) = std::fs::read_to_string(&self.path) else { return Vec::new() };
        text.lines()
            .rev()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|v| {
                Some(Entry {
                    time: v.get("time")?.as_str()?.to_string(),
                    context: v.get("context")?.as_str()?.to_string(),
                    user: v.get("user")?.as_str()?.to_string(),
                    action: v.get("action")?.as_str()?.to_string(),
                    targets: v
                        .get("targets")?
                        .as_array()?
                        .iter()
                        .filter_map(|t| t.as_str().map(str::to_string))
                        .collect(),
                    dry_run: v.get("dryRun")?.as_bool()?,
                    result: v.get("result")?.as_str()?.to_string(),
                    detail: v.get("detail")?.as_str()?.to_string(),
                })
            })
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
        let tail = log.tail(10);
        assert_eq!(tail.len(), 2);
        assert_eq!(tail[0].action, "drain", "newest first");
        assert_eq!(tail[1], e);
    }
}
