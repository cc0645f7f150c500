//! The real binary in a real terminal (tmux): every pane renders at 80×24
//! and 200×60, `?` shows help, `:` and `/` take input, `q` exits, and the
//! terminal is restored — also when kgpu is killed with SIGTERM.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use support::tmux::{Tmux, exists};

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
    while !exists(&t.path("after")) {
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
fn a_stop_signal_from_outside_restores_the_terminal() {
    // SIGINT, SIGQUIT and SIGABRT from outside used to leave raw mode behind.
    for (i, signal) in ["TERM", "HUP", "INT", "QUIT", "ABRT"].iter().enumerate() {
        let t = Tmux::start(100, 30, &format!("sig{signal}"));
        let seed = format!("--seed {}", 4242 + i);
        start_cockpit(&t, &seed);
        std::thread::sleep(Duration::from_millis(500));
        let killed = Command::new("pkill")
            .args([format!("-{signal}"), "-f".into(), format!("kgpu demo {seed}")])
            .status()
            .unwrap();
        assert!(killed.success(), "SIG{signal}");
        assert_restored(&t);
    }
}

/// SIGTERM while an action runs (a repartition waits a minute for the
/// mig-manager): the cockpit cancels it, restores the terminal, then says
/// on it what the action did and left, with the undo, and exits 143, as a
/// shell reports a kill.
#[test]
fn a_signal_while_an_action_runs_says_what_it_left_and_exits_non_zero() {
    let t = Tmux::start(120, 30, "sigact");
    let demo = "--scenario mig-mismatch --seed 31";
    start_cockpit(&t, demo);
    t.keys(&["4"]);
    t.wait_for("MIG nodes");
    t.keys(&["m"]);
    t.wait_for("mig.config for mig-01");
    // The picker starts on the config that serves the pending slices (all-3g.40gb).
    t.wait_for("← serves 3 of 3 pending 3g.40gb");
    t.keys(&["Enter"]);
    t.wait_for("confirm repartition-mig");
    t.keys(&["y"]);
    t.wait_for("⟳");
    let killed = Command::new("pkill").args(["-TERM", "-f", &format!("kgpu demo {demo}")]).status().unwrap();
    assert!(killed.success());
    assert_restored(&t);
    let screen = t.screen().replace('\n', "");
    assert!(screen.contains("SIGTERM stopped the cockpit while 1 action(s) ran"), "{screen}");
    assert!(screen.contains("repartition-mig cancelled: node/mig-01 stays cordoned"), "{screen}");
    assert!(screen.contains("undo: kubectl uncordon mig-01"), "{screen}");
    assert!(screen.contains("EXIT=143"), "{screen}");
}

/// A paste longer than crossterm's 1 KB read buffer used to leave the rest
/// unread until the next key (edge-triggered polling), which it then
/// misread (Escape followed by a digit as Alt+digit): the keys looked dead.
/// 64 KB: each character a key (no bracketed paste), each cheap once the
/// line is at its bound (it pinned a core for minutes before).
#[test]
fn a_long_paste_into_the_filter_leaves_the_keys_working() {
    let t = Tmux::start(80, 24, "paste");
    start_cockpit(&t, "");
    t.wait_for("Nodes (64)");
    t.keys(&["/"]);
    t.wait_for("/ filter Fleet");
    std::fs::write(t.path("paste"), "g".repeat(65536)).unwrap();
    t.run(&["load-buffer", &t.path("paste")]);
    t.run(&["paste-buffer", "-t", "t"]);
    t.wait_for("Nodes (0)");
    t.keys(&["Escape"]);
    t.keys(&["Escape"]);
    t.wait_for("Nodes (64)");
    t.keys(&["2"]);
    t.wait_for("Pending (");
    t.keys(&["q"]);
    assert_restored(&t);
}

/// `ESC[200~` opens a bracketed paste; if its end never comes, a parser
/// waiting for it swallowed every later key, ctrl-c included.
#[test]
fn an_unterminated_bracketed_paste_does_not_swallow_the_keys() {
    let t = Tmux::start(80, 24, "unterminated");
    start_cockpit(&t, "");
    t.wait_for("Nodes (64)");
    t.literal("\u{1b}[200~");
    t.keys(&["2"]);
    t.wait_for("Pending (");
    t.keys(&["C-c"]);
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

#[test]
fn an_action_lands_in_the_events_pane_and_the_audit_log() {
    let t = Tmux::start(120, 30, "audit");
    // An earlier run's command-line dry run on the demo: about another
    // simulated cluster, so not in this cockpit's Events.
    std::fs::write(
        t.dir.path().join("audit.jsonl"),
        r#"{"time":"2026-12-01T00:00:00Z","context":"demo:default","user":"demo","action":"drain","targets":["node/gpu-earlier-run"],"dryRun":true,"result":"ok","detail":"dry run","run":{"host":"elsewhere","pid":1,"action":1}}
"#,
    )
    .unwrap();
    start_cockpit(&t, "--seed 77");
    t.wait_for("Nodes (64)");
    // Cordon the selected node: the result leads the status bar...
    t.keys(&["c"]);
    t.wait_for("cordon");
    t.keys(&["y"]);
    let s = t.wait_for("cordoned");
    assert!(s.lines().last().is_some_and(|l| l.contains("cordoned")), "{s}");
    // ...and is in the Events pane, from the audit log, at the top.
    t.keys(&["6"]);
    let s = t.wait_for("kgpu cordon");
    let audit = std::fs::read_to_string(t.dir.path().join("audit.jsonl")).unwrap();
    assert!(audit.contains("\"action\":\"cordon\"") && audit.contains("\"context\":\"demo:default\""), "{audit}");
    let first_row =
        s.lines().find(|l| l.contains("AGE")).and_then(|_| s.lines().skip_while(|l| !l.contains("AGE")).nth(1));
    assert!(first_row.is_some_and(|r| r.contains("kgpu cordon")), "{s}");
    assert!(!s.contains("gpu-earlier-run"), "{s}");
    t.keys(&["q"]);
    assert_restored(&t);
}

/// The terminal itself goes away (an SSH session dropped: the tmux server
/// killed, the tty gone, SIGHUP): kgpu stops cleanly, without a panic on
/// the way out. Before, ratatui's drop tried to show the cursor on the dead
/// tty and `eprintln!`ed the failure, which panicked.
#[test]
fn losing_the_terminal_is_a_clean_stop_not_a_panic() {
    let t = Tmux::start(100, 30, "hangup");
    start_cockpit(&t, "--seed 4343");
    std::thread::sleep(Duration::from_millis(500));
    t.run(&["kill-server"]);
    let log = t.path("kgpu.log");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("cockpit stopped") || text.contains("panic") {
            assert!(!text.contains("panic"), "{text}");
            break;
        }
        assert!(Instant::now() < deadline, "the cockpit never said it stopped:\n{text}");
        std::thread::sleep(Duration::from_millis(100));
    }
}
