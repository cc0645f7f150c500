//! The audit log: one JSON line when an action starts and one when it ends
//! (dry runs: when they end), in the data dir, so an SRE can answer "who
//! drained gpu-07, when, and what happened". The file is the user's alone
//! (0600), and each record is one `write` to a file opened for appending,
//! so two cockpits never interleave their lines.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::PathBuf;

pub use crate::model::audit::AuditEntry as Entry;
use crate::model::audit::RunMark;

#[derive(Clone, Debug)]
pub struct AuditLog {
    pub path: PathBuf,
}

impl AuditLog {
    pub fn append(&self, entry: &Entry) -> std::io::Result<()> {
        if let Some(dir) = self.path.parent() {
            // The data dir (the log, this audit log): the owner's alone.
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
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

    /// Actions started in kube context `context` whose kgpu ended before
    /// they did (killed, or its machine rebooted): a start with no end,
    /// written on this host by a process that is no longer a kgpu. Starts
    /// from another host are left out (nothing here can tell whether they run).
    pub fn abandoned(&self, context: &str) -> Vec<Entry> {
        let Ok(text) = std::fs::read_to_string(&self.path) else { return Vec::new() };
        let entries =
            text.lines().filter_map(|l| serde_json::from_str::<Entry>(l).ok()).filter(|e| e.context == context);
        let host = host_name();
        crate::model::audit::open_runs(entries)
            .into_iter()
            .filter(|e| e.run.as_ref().is_some_and(|r| r.host == host && !still_running(e, r)))
            .collect()
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

/// Whether this process wrote `entry` (a demo's cluster lives and dies with
/// the kgpu that simulates it: another run's entries are about another one).
pub fn written_here(entry: &Entry) -> bool {
    entry.run.as_ref().is_some_and(|r| r.pid == std::process::id() && r.host == host_name())
}

/// The mark of this process's action `action`.
pub fn this_run(action: u64) -> RunMark {
    RunMark { host: host_name(), pid: std::process::id(), action }
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or_default()
}

/// Whether the process that wrote `start` still runs: its pid is alive and
/// is a kgpu, or was already running when the line was written. A pid the
/// kernel gave since to another program is not the kgpu that wrote it.
fn still_running(start: &Entry, run: &RunMark) -> bool {
    if run.pid == std::process::id() {
        return true;
    }
    let Ok(cmdline) = std::fs::read(format!("/proc/{}/cmdline", run.pid)) else { return false };
    let program = cmdline.split(|b| *b == 0).next().unwrap_or_default();
    let name = program.rsplit(|b| *b == b'/').next().unwrap_or_default();
    let written = crate::model::time::parse_rfc3339(&start.time);
    name.starts_with(b"kgpu") || process_start(run.pid).zip(written).is_none_or(|(began, at)| began <= at + 1)
}

/// When process `pid` started, in seconds since the epoch (Linux: boot
/// time plus its start in clock ticks, at the usual 100 a second).
fn process_start(pid: u32) -> Option<i64> {
    let boot: i64 = std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime ").and_then(|v| v.trim().parse().ok()))?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    // starttime is field 22 of stat: the 20th after the command name.
    let ticks: i64 = rest.split_whitespace().nth(19)?.parse().ok()?;
    Some(boot + ticks / 100)
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
            run: None,
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
        let made = std::fs::metadata(dir.path().join("sub")).unwrap().permissions().mode();
        assert_eq!(made & 0o777, 0o700, "the data dir it made too, whatever the umask");
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
                            run: None,
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
