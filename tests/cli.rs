//! kgpu installed like the tools around it: shell completions and a man
//! page from the same clap definitions, `kubectl gpu` as a kubectl plugin,
//! the agent's help with its own flags only, and the text snapshot with
//! every section a pane shows.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

use std::process::{Command, Output};

fn kgpu(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kgpu")).args(args).output().unwrap()
}

fn stdout(out: &Output) -> String {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn completions_know_every_subcommand_in_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let script = stdout(&kgpu(&["completions", shell]));
        for sub in ["demo", "snapshot", "why", "drain", "lab", "completions"] {
            assert!(script.contains(sub), "{shell} completions lack {sub}");
        }
    }
    let bad = kgpu(&["completions", "tcsh"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn the_man_page_is_roff_with_the_subcommands() {
    let page = stdout(&kgpu(&["man"]));
    assert!(page.starts_with(".ie") || page.contains(".TH kgpu"), "{}", &page[..page.len().min(200)]);
    for sub in ["snapshot", "drain", "agent"] {
        assert!(page.contains(sub), "the man page lacks {sub}");
    }
}

#[test]
fn as_kubectl_gpu_it_is_a_kubectl_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("kubectl-gpu");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_kgpu"), &link).unwrap();
    let help = Command::new(&link).arg("--help").output().unwrap();
    let text = stdout(&help);
    assert!(text.contains("Usage: kubectl gpu [OPTIONS] [COMMAND]"), "{text}");
    // And it works as kgpu does.
    let out = Command::new(&link).args(["snapshot", "--scenario", "fragmented", "--pane", "fleet"]).output().unwrap();
    assert!(stdout(&out).contains("FLEET"));
}

#[test]
fn the_agents_help_lists_only_the_agents_flags() {
    let help = stdout(&kgpu(&["agent", "--help"]));
    for own in ["--listen", "--token-file", "--node-name", "--backend", "--interval", "--log-level"] {
        assert!(help.contains(own), "agent help lacks {own}");
    }
    for cockpit in ["--kubeconfig", "--context", "--namespace", "--theme", "--read-only", "--agents ", "--file"] {
        assert!(!help.contains(cockpit), "agent help lists the cockpit's {cockpit}:\n{help}");
    }
    // The cockpit's help still has them.
    assert!(stdout(&kgpu(&["--help"])).contains("--kubeconfig"));
}

#[test]
fn the_text_snapshot_prints_every_section_a_pane_shows() {
    let mig = stdout(&kgpu(&["snapshot", "--scenario", "mig-mismatch", "--pane", "mig"]));
    assert!(mig.contains("MIG  8 node(s)") && mig.contains("mig-08"), "{mig}");
    let events = stdout(&kgpu(&["snapshot", "--scenario", "black-hole", "--pane", "events"]));
    assert!(events.contains("UnexpectedAdmissionError"), "{events}");
    // The waves of --target-driver, as the JSON has them.
    let args = ["snapshot", "--scenario", "driver-skew", "--pane", "drivers", "--target-driver", "570.124.06"];
    let text = stdout(&kgpu(&args));
    let json: serde_json::Value = serde_json::from_slice(&kgpu(&[&args[..], &["-o", "json"]].concat()).stdout).unwrap();
    let waves = json["drivers"]["waves"]["waves"].as_array().unwrap();
    assert!(!waves.is_empty());
    assert!(
        text.contains(&format!("WAVES to driver 570.124.06 (from --target-driver): {} wave(s)", waves.len())),
        "{text}"
    );
    for wave in waves {
        let first = wave["nodes"][0].as_str().unwrap();
        assert!(text.contains(first), "wave {} node {first} missing:\n{text}", wave["index"]);
    }
}
