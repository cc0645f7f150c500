//! A real terminal for tests: a private tmux server with one window.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

pub struct Tmux {
    socket: String,
    pub dir: tempfile::TempDir,
}

impl Tmux {
    pub fn start(width: u16, height: u16, tag: &str) -> Tmux {
        assert!(
            Command::new("tmux").arg("-V").output().is_ok_and(|o| o.status.success()),
            "tmux is required for the terminal tests (apt-get install tmux; .ci/run installs it)"
        );
        let dir = tempfile::tempdir().unwrap();
        let socket = format!("kgpu-test-{tag}-{}", std::process::id());
        let status = Command::new("tmux")
            .args([
                "-L",
                &socket,
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-s",
                "t",
                "-x",
                &width.to_string(),
                "-y",
                &height.to_string(),
            ])
            .args(["env", "-i", &format!("PATH={}", std::env::var("PATH").unwrap_or_default()), "TERM=xterm-256color"])
            .arg(format!("KGPU_DATA_DIR={}", dir.path().display()))
            .arg(format!("KGPU_CONFIG_DIR={}", dir.path().join("config").display()))
            .args(["bash", "--norc", "--noprofile"])
            .status()
            .unwrap();
        assert!(status.success());
        let t = Tmux { socket, dir };
        t.run(&["set-option", "-t", "t", "status", "off"]);
        t
    }

    pub fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux").arg("-L").arg(&self.socket).args(args).output().unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    pub fn keys(&self, keys: &[&str]) {
        for k in keys {
            self.run(&["send-keys", "-t", "t", k]);
            std::thread::sleep(Duration::from_millis(150));
        }
    }

    pub fn literal(&self, text: &str) {
        self.run(&["send-keys", "-t", "t", "-l", text]);
        std::thread::sleep(Duration::from_millis(150));
    }

    pub fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "t"])
    }

    pub fn wait_for(&self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let s = self.screen();
            if s.contains(needle) {
                return s;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {needle:?}; screen:\n{s}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux").args(["-L", &self.socket, "kill-server"]).status();
    }
}

/// Whether `path` exists yet.
pub fn exists(path: &str) -> bool {
    Path::new(path).exists()
}
