//! A tool under measurement in its own tmux server: what it shows, and its
//! process's memory and CPU time from /proc.

use std::process::Command;
use std::time::{Duration, Instant};

pub struct Terminal {
    socket: String,
    pub pid: u32,
}

impl Terminal {
    /// Runs `command` (a shell line; `exec`ed so the pane's process is the
    /// tool itself) at `width`×`height`.
    pub fn start(tag: &str, width: u16, height: u16, command: &str) -> Terminal {
        let socket = format!("kgpu-bench-{tag}-{}", std::process::id());
        let _ = Command::new("tmux").args(["-L", &socket, "kill-server"]).output();
        let status = Command::new("tmux")
            .args(["-L", &socket, "-f", "/dev/null", "new-session", "-d", "-s", "b"])
            .args(["-x", &width.to_string(), "-y", &height.to_string()])
            .arg(format!("TERM=xterm-256color exec {command}"))
            .status()
            .expect("tmux runs (apt-get install tmux)");
        assert!(status.success(), "tmux could not start {command}");
        let mut t = Terminal { socket, pid: 0 };
        t.run(&["set-option", "-t", "b", "status", "off"]);
        t.pid = t.run(&["list-panes", "-t", "b", "-F", "#{pane_pid}"]).trim().parse().expect("a pane pid");
        t
    }

    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux").arg("-L").arg(&self.socket).args(args).output().expect("tmux runs");
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    pub fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "b"])
    }

    /// The screen with its colours and attributes (a moved cursor row shows).
    pub fn styled_screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-e", "-t", "b"])
    }

    pub fn keys(&self, keys: &str) {
        self.run(&["send-keys", "-t", "b", keys]);
    }

    /// How long until the screen satisfies `done` (polled every 20 ms), or
    /// `None` after `limit`.
    pub fn wait(&self, limit: Duration, done: impl Fn(&str) -> bool) -> Option<Duration> {
        let t0 = Instant::now();
        while t0.elapsed() < limit {
            if done(&self.screen()) {
                return Some(t0.elapsed());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    fn status_kib(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }

    /// Resident memory now, in MiB.
    pub fn rss_mib(&self) -> f64 {
        self.status_kib("VmRSS:") as f64 / 1024.0
    }

    /// The most it was resident, in MiB.
    pub fn peak_mib(&self) -> f64 {
        self.status_kib("VmHWM:") as f64 / 1024.0
    }

    /// CPU seconds used so far (user + system).
    pub fn cpu_seconds(&self) -> f64 {
        cpu_seconds(self.pid)
    }

    /// The share of one core it used over `window`.
    pub fn cpu_share(&self, window: Duration) -> f64 {
        let before = self.cpu_seconds();
        std::thread::sleep(window);
        (self.cpu_seconds() - before) / window.as_secs_f64()
    }
}

/// CPU seconds (user + system) process `pid` has used so far.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) in parentheses.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of stat; 12 and 13 after the name.
    (ticks(11) + ticks(12)) / 100.0
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = Command::new("tmux").args(["-L", &self.socket, "kill-server"]).output();
    }
}
