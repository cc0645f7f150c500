//! The real binary in a real terminal (tmux): every pane renders at 80×24
//! and 200×60, `?` shows help, `:` and `/` take input, `q` exits, and the
//! terminal is restored — also when kgpu is killed with SIGTERM.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

struct Tmux {
    socket: String,
    dir: tempfile::TempDir,
}

impl Tmux {
    fn start(width: u16, height: u16, tag: &str) -> Tmux {
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

    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux").arg("-L").arg(&self.socket).args(args).output().unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    fn keys(&self, keys: &[&str]) {
        for k in keys {
            self.run(&["send-keys", "-t", "t", k]);
            std::thread::sleep(Duration::from_millis(150));
        }
    }

    fn literal(&self, text: &str) {
        self.run(&["send-keys", "-t", "t", "-l", text]);
        std::thread::sleep(Duration::from_millis(150));
    }

    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "t"])
    }

    fn wait_for(&self, needle: &str) -> String {
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

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux").args(["-L", &self.socket, "kill-server"]).status();
    }
}

fn start_cockpit(t: &Tmux, extra: &str) {
    let bin = env!("CARGO_BIN_EXE_kgpu");
    t.literal(&format!(
        "stty -g > {}; {bin} demo {extra}; echo EXIT=$?; stty -g > {}",
        t.path("before"),
        t.path("after")
    ));
    t.keys(&["Enter"]);
    t.wait_for("1 Fleet");
}

fn assert_restored(t: &Tmux) {
    t.wait_for("EXIT=");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !Path::new(&t.path("after")).exists() {
        assert!(Instant::now() < deadline, "stty after never written");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(200));
    let before = std::fs::read_to_string(t.path("before")).unwrap();
    let after = std::fs::read_to_string(t.path("after")).unwrap();
    assert_eq!(before, after, "terminal modes restored");
    assert_eq!(t.run(&["display", "-p", "-t", "t", "#{alternate_on}"]).trim(), "0", "alternate screen left");
}

fn walk_every_pane(width: u16, height: u16) {
    let t = Tmux::start(width, height, &format!("{width}x{height}"));
    start_cockpit(&t, "");
    let s = t.wait_for("Nodes (64)");
    assert!(s.contains("Fragmentation"), "{s}");
    for (key, marker) in [
        ("2", "Pending ("),
        ("3", "Gangs ("),
        ("4", "MIG nodes"),
        ("5", "Driver × CUDA"),
        ("6", "Events ("),
        ("1", "Nodes (64)"),
    ] {
        t.keys(&[key]);
        t.wait_for(marker);
    }
    // help
    t.keys(&["?"]);
    t.wait_for("Help · esc close");
    t.keys(&["Escape"]);
    t.wait_for("Nodes (64)");
    // command palette
    t.keys(&[":"]);
    t.wait_for("command (enter run");
    t.literal("pending");
    t.keys(&["Enter"]);
    t.wait_for("Pending (");
    // filter
    t.keys(&["1", "/"]);
    t.wait_for("/ filter Fleet");
    t.literal("h100-mig");
    t.keys(&["Enter"]);
    t.wait_for("Nodes (8)");
    t.keys(&["Escape"]);
    t.wait_for("Nodes (64)");
    // quit
    t.keys(&["q"]);
    assert_restored(&t);
    assert!(t.screen().contains("EXIT=0"), "{}", t.screen());
}

#[test]
fn every_pane_at_80x24() {
    walk_every_pane(80, 24);
}

#[test]
fn every_pane_at_200x60() {
    walk_every_pane(200, 60);
}

#[test]
fn sigterm_restores_the_terminal() {
    let t = Tmux::start(100, 30, "term");
    start_cockpit(&t, "--seed 4242");
    std::thread::sleep(Duration::from_millis(500));
    let killed = Command::new("pkill").args(["-TERM", "-f", "kgpu demo --seed 4242"]).status().unwrap();
    assert!(killed.success());
    assert_restored(&t);
}

#[test]
fn too_small_a_terminal_says_so() {
    let t = Tmux::start(50, 12, "small");
    let bin = env!("CARGO_BIN_EXE_kgpu");
    t.literal(&format!("{bin} demo; echo EXIT=$?"));
    t.keys(&["Enter"]);
    t.wait_for("terminal too small");
    t.keys(&["q"]);
    t.wait_for("EXIT=0");
}
