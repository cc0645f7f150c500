//! What a cluster, an agent or a file sends cannot crash the cockpit:
//! absurd counts and placements are drawn as numbers, within the screen.
//! (Issue 20's probes, kept so that they stay fixed.)

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use kgpu::analysis::Thresholds;
use kgpu::app::{App, Msg, Pane};
use kgpu::model::build::{node, pod};
use kgpu::model::{Cluster, ModelEvent, Object, SourceInfo, SourceKind, Sym};
use kgpu::ui::{self, Context, Theme};
use kgpu::view_model::panes::{MAX_CELLS, MigGpuRow, Views};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

const NOW: i64 = 1_796_029_200;

fn screen(app: &mut App, views: &Views, w: u16, h: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
    let mut shown = Default::default();
    terminal.draw(|f| shown = ui::draw(f, app, views, &Theme::builtin("dark"), &Context::default())).unwrap();
    app.update(Msg::Viewport(shown), views);
    format!("{}", terminal.backend())
}

/// Quantities past kgpu's bound (2^53) are refused with the reason, and
/// nodes right at it, summed over a fleet, saturate: never an overflow
/// panic (a debug build) or a wrapped total (a release one).
#[test]
fn absurd_quantities_are_refused_and_sums_at_the_bound_never_overflow() {
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("overflow.json");
    let node = |name: &str, gpus: &str| {
        format!(
            r#"{{"apiVersion": "v1", "kind": "Node", "metadata": {{"name": "{name}"}}, "status": {{"capacity": {{"nvidia.com/gpu": "{gpus}"}}, "allocatable": {{"nvidia.com/gpu": "{gpus}"}}, "conditions": [{{"type": "Ready", "status": "True"}}]}}}}"#
        )
    };
    let mut items =
        vec![node("max-a", "18446744073709551615"), node("max-b", "18446744073709551615"), node("ei", "1Ei")];
    // 2,100 nodes of 2^53 GPUs each: 2^64 and more in total.
    items.extend((0..2100).map(|i| node(&format!("at-bound-{i}"), "9007199254740992")));
    std::fs::write(&dump, format!(r#"{{"apiVersion": "v1", "kind": "List", "items": [{}]}}"#, items.join(",")))
        .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kgpu"))
        .args(["snapshot", "-o", "json", "--file"])
        .arg(&dump)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(!said.contains("panicked") && said.contains("is too large (kgpu takes at most 2^53)"), "{said}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["fleet"]["totals"]["gpus"], u64::MAX, "saturated, not wrapped");
    // The text output and the cockpit's panes (pools, every table) too.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kgpu"))
        .args(["snapshot", "--file"])
        .arg(&dump)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (snap, now) = kgpu::runtime::load::once(&kgpu::runtime::source::Source::File(vec![dump])).unwrap();
    let views = Views::build(Arc::new(snap), now, &Thresholds::default(), None);
    let mut app = App::new(true, "dark", false);
    for pane in Pane::ALL {
        app.pane = pane;
        screen(&mut app, &views, 200, 60);
    }
}

#[test]
fn a_node_that_claims_a_trillion_gpus_is_a_number_not_a_trillion_cells() {
    let mut cluster = Cluster::new(SourceInfo { kind: SourceKind::File, name: "hostile".into() });
    cluster.apply_all([
        ModelEvent::Clock(NOW),
        ModelEvent::Upsert(Object::Node(node("huge").gpus(1_000_000_000_000).build())),
        ModelEvent::Upsert(Object::Node(node("normal").gpus(8).build())),
        ModelEvent::Upsert(Object::Pod(pod("train").gpus(4).on("normal").running().transitioned(NOW - 60).build())),
    ]);
    let views = Views::build(Arc::new(cluster.snapshot()), NOW, &Thresholds::default(), None);
    let huge = views.nodes.iter().find(|r| r.name.as_str() == "huge").unwrap();
    assert!(huge.cells.len() <= MAX_CELLS, "{} cells", huge.cells.len());
    assert_eq!(huge.allocatable, 1_000_000_000_000);
    // Counted in 64 bits everywhere: 10¹² + 8 GPUs, not 10¹² + 8 mod 2³².
    assert_eq!(views.analysis.totals.gpus, 1_000_000_000_008);
    assert_eq!(views.pools.iter().map(|p| p.gpus).sum::<u64>(), 1_000_000_000_008);
    let mut app = App::new(true, "dark", false);
    for (w, h) in [(80, 24), (200, 60)] {
        let s = screen(&mut app, &views, w, h);
        assert!(s.contains("huge"), "{s}");
    }
    // The pools view, the node detail and every other pane draw too.
    for code in [KeyCode::Char('a'), KeyCode::Char('a'), KeyCode::Enter] {
        app.update(Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)), &views);
        screen(&mut app, &views, 80, 24);
    }
    app.update(Msg::Key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE)), &views);
    for pane in Pane::ALL {
        app.pane = pane;
        screen(&mut app, &views, 200, 60);
    }
}

#[test]
fn a_mig_bar_skips_placements_no_gpu_can_have() {
    let theme = Theme::builtin("dark");
    let p = Sym::new("1g.10gb");
    let gpu = MigGpuRow {
        index: 0,
        enabled: true,
        healthy: true,
        held_whole: false,
        instances: vec![
            (p.clone(), 0, 0, true),
            (p.clone(), 7, 2, false),
            (p.clone(), 250, 10, true),
            (p.clone(), 2, 1, true),
            (p, 2, 1, false),
        ],
    };
    let bar = ui::panes::mig::slice_bar(&gpu, &theme);
    let text: String = bar.spans.iter().map(|s| s.content.as_ref()).collect();
    // GPU label, then 8 slices of 3 columns between brackets: never wider.
    assert!(text.chars().count() <= 5 + 2 + 8 * 3, "{text}");
    assert_eq!(text.matches("1g").count(), 1, "only the valid instance is drawn: {text}");
}

/// A dump whose names and messages carry escape sequences: one retitles the
/// terminal (OSC 0), one clears the screen (CSI 2J), one is a C1 CSI.
const HOSTILE_DUMP: &str = r#"{"apiVersion": "v1", "kind": "List", "items": [
 {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-1", "creationTimestamp": "2026-11-30T08:00:00Z",
   "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3\u001b[2J"}},
  "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "96", "memory": "1Ti"},
             "capacity": {"nvidia.com/gpu": "8", "cpu": "96", "memory": "1Ti"},
             "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-30T08:00:00Z"}]}},
 {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train-0", "namespace": "ml", "creationTimestamp": "2026-11-30T08:50:00Z"},
  "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "16"}}}]},
  "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
    "message": "0/1 nodes are available: \u001b]0;pwned\u0007 1 Insufficient nvidia.com/gpu.", "lastTransitionTime": "2026-11-30T08:50:00Z"}]}},
 {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "train-0.1", "namespace": "ml"},
  "involvedObject": {"kind": "Pod", "name": "train-0", "namespace": "ml"}, "reason": "FailedScheduling", "type": "Warning",
  "message": "\u001b]0;pwned\u0007\u009b2J0/1 nodes are available \u202ecod.sh\u2067x\u2069 gpu-1\u200b\ufeff\u2028", "lastTimestamp": "2026-11-30T09:00:00Z"}
]}"#;

/// A control, bidi or invisible character (what may not reach a terminal).
fn has_control(s: &str) -> bool {
    s.chars().any(|c| c != '\n' && kgpu::view_model::style::unsafe_on_screen(c))
}

#[test]
fn escape_sequences_from_the_cluster_reach_neither_the_screen_nor_the_text() {
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("hostile.json");
    std::fs::write(&dump, HOSTILE_DUMP).unwrap();
    let bin = env!("CARGO_BIN_EXE_kgpu");
    for args in [vec!["snapshot"], vec!["why", "ml/train-0"]] {
        let out = std::process::Command::new(bin).args(&args).arg("--file").arg(&dump).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(text.contains("pwned"), "the text is shown, defused: {text}");
        assert!(!has_control(&text), "{args:?} printed a control character:\n{text:?}");
    }
    // The cockpit: every pane, the drilldown, the node detail.
    let (snap, now) = kgpu::runtime::load::once(&kgpu::runtime::source::Source::File(vec![dump])).unwrap();
    let views = Views::build(Arc::new(snap), now, &Thresholds::default(), None);
    let mut app = App::new(true, "dark", false);
    let mut shown = String::new();
    for pane in Pane::ALL {
        app.pane = pane;
        shown.push_str(&screen(&mut app, &views, 200, 60));
        app.update(Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)), &views);
        shown.push_str(&screen(&mut app, &views, 200, 60));
        app.update(Msg::Key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE)), &views);
    }
    assert!(shown.contains("pwned"), "the event is on screen");
    assert!(!has_control(&shown), "a control character reached the screen");
}

/// `kgpu agent` with `args`: its exit code and what it said.
fn agent_refuses(args: &[&str], token: Option<(&str, u32)>) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    let (text, mode) = token.unwrap_or(("c0ffee-5eed-4b1d-9a7e-0123456789ab\n", 0o600));
    std::fs::write(&token_file, text).unwrap();
    std::fs::set_permissions(&token_file, std::os::unix::fs::PermissionsExt::from_mode(mode)).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kgpu"))
        .args(["agent", "--listen", "127.0.0.1:0", "--node-name", "n1", "--backend", "fake:/nonexistent"])
        .arg("--token-file")
        .arg(&token_file)
        .args(args)
        .output()
        .unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn agent_flags_that_would_panic_are_usage_errors() {
    for (flag, value) in [
        ("--interval", "0"),
        ("--interval", "18446744073709551615"),
        ("--max-streams", "0"),
        ("--max-streams", "18446744073709551615"),
        ("--max-requests-per-second", "0"),
        ("--max-requests-per-second", "4294967295"),
    ] {
        let (code, said) = agent_refuses(&[flag, value], None);
        assert_eq!(code, 2, "{flag} {value}: {said}");
        assert!(said.contains(flag) && !said.contains("panicked"), "{flag} {value}: {said}");
    }
}

/// The node name is logged, served and hashed into the node's token: a
/// name Kubernetes would refuse (control characters, escapes) is refused.
#[test]
fn a_node_name_kubernetes_would_refuse_is_a_usage_error() {
    for name in ["gpu-01\u{1b}[2J", "gpu\n01", "GPU-01", "-gpu", "a..b", &"a".repeat(254)] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_kgpu"))
            .args(["agent", "--listen", "127.0.0.1:0", "--token-file", "/nonexistent"])
            .arg(format!("--node-name={name}"))
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name:?}: {said}");
        assert!(said.contains("is not a node name"), "{name:?}: {said}");
        assert!(!said.contains('\u{1b}'), "an escape reached the terminal: {said:?}");
    }
}

#[test]
fn weak_shared_or_multi_line_token_files_are_refused_with_a_reason() {
    for (token, mode, reason) in [
        ("c0ffee-5eed-4b1d-9a7e-0123456789ab\n", 0o644, "readable by every user"),
        ("c0ffee-5eed-4b1d-9a7e-0123456789ab\n", 0o640, "readable by its group"),
        ("c0ffee-5eed-4b1d-9a7e-0123456789ab\nsecond-line\n", 0o600, "more than one word or line"),
        ("aaaaaaaaaaaaaaaaaaaaaaaa\n", 0o600, "weak"),
        ("short\n", 0o600, "weak"),
    ] {
        let (code, said) = agent_refuses(&[], Some((token, mode)));
        assert_eq!(code, 2, "{token:?} {mode:o}: {said}");
        assert!(said.contains(reason), "{token:?} {mode:o}: {said}");
    }
}

#[tokio::test]
async fn an_agent_that_sends_without_end_costs_the_cockpit_a_bounded_read() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = sent.clone();
    tokio::spawn(async move {
        let (mut conn, _) = listener.accept().await.unwrap();
        let mut request = [0u8; 1024];
        let _ = conn.read(&mut request).await;
        let _ = conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n").await;
        // No length, no end: a body that never stops.
        let chunk = vec![b' '; 64 << 10];
        while conn.write_all(&chunk).await.is_ok() {
            counter.fetch_add(chunk.len(), std::sync::atomic::Ordering::Relaxed);
        }
    });
    let got = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        kgpu::sources::agents::direct_get("127.0.0.1", port, "/v1/snapshot", Some("t")),
    )
    .await
    .expect("the read ends by itself");
    let why = got.unwrap_err();
    assert!(why.contains("more than 8 MiB"), "{why}");
    // It stopped reading near the limit (socket buffers aside), not after gigabytes.
    assert!(sent.load(std::sync::atomic::Ordering::Relaxed) < 64 << 20);
}

#[test]
fn an_agent_is_filed_under_the_node_its_pod_runs_on_not_the_one_it_claims() {
    let text = std::fs::read_to_string(format!(
        "{}/tests/fixtures/agent/h100-mig-all-balanced.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let snap: kgpu::agent::wire::AgentSnapshot = serde_json::from_str(&text).unwrap();
    let honest = kgpu::sources::agents::of_node(&snap.node, "kgpu-agent-a", &snap, NOW);
    assert!(!honest.gpus.is_empty());
    let lying = kgpu::sources::agents::of_node("gpu-07", "kgpu-agent-b", &snap, NOW);
    assert_eq!(lying.node.as_str(), "gpu-07", "filed under the pod's node");
    assert!(lying.gpus.is_empty(), "what it claims about another node is not used");
    assert!(
        matches!(&lying.status, kgpu::model::AgentStatus::Unavailable(why) if why.contains("reports node")),
        "{:?}",
        lying.status
    );
}

#[test]
fn a_dump_cannot_hang_loop_or_skew_the_loader() {
    use kgpu::sources::file;
    let dir = tempfile::tempdir().unwrap();
    let node = |name: &str, time: &str| {
        serde_json::json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "creationTimestamp": time},
            "status": {"allocatable": {"nvidia.com/gpu": "8"}, "capacity": {"nvidia.com/gpu": "8"},
                       "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": time}]}})
    };
    let pod = |gpus: &str| {
        serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "half", "namespace": "ml", "creationTimestamp": "2026-11-30T08:00:00Z"},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]},
            "status": {"phase": "Pending"}})
    };
    let list = |items: Vec<serde_json::Value>| serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    std::fs::write(
        dir.path().join("a.json"),
        // One node's clock says 2100: "now" must not follow it.
        list(vec![node("gpu-1", "2026-11-30T09:00:00Z"), node("skewed", "2100-01-01T00:00:00Z"), pod("1.5")])
            .to_string(),
    )
    .unwrap();
    std::fs::write(dir.path().join("b.json"), list(vec![node("gpu-1", "2026-11-30T09:00:00Z")]).to_string()).unwrap();
    std::fs::write(dir.path().join("empty.yaml"), "").unwrap();
    // A symlink back to the directory: walked once.
    std::os::unix::fs::symlink(dir.path(), dir.path().join("loop")).unwrap();
    let (_, now, stats) = file::load(&[dir.path().to_path_buf()]).unwrap();
    assert_eq!(now, kgpu::model::time::parse_rfc3339("2026-11-30T09:00:00Z").unwrap(), "the skewed clock is not 'now'");
    assert_eq!(stats.files, 3, "a.json, b.json and empty.yaml, once each: {stats:?}");
    assert!(stats.skewed >= 1);
    assert_eq!(stats.duplicates, ["Node /gpu-1"]);
    assert_eq!(stats.skipped, 1, "1.5 GPUs is refused, not rounded to 2");
    assert_eq!(stats.empty.len(), 1);
    let warnings = stats.warnings().join("\n");
    assert!(warnings.contains("more than once") && warnings.contains("future") && warnings.contains("no objects"));

    // A FIFO would block a reader for ever; a huge file would exhaust memory.
    let fifo = dir.path().join("pipe.json");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let err = file::load(std::slice::from_ref(&fifo)).unwrap_err().to_string();
    assert!(err.contains("not a regular file"), "{err}");
    let huge = dir.path().join("huge.json");
    std::fs::File::create(&huge).unwrap().set_len(file::MAX_FILE_BYTES + 1).unwrap();
    let err = file::load(&[huge]).unwrap_err().to_string();
    assert!(err.contains("at most"), "{err}");
}

/// A kubeconfig or token file that never ends (`/dev/zero`, a FIFO nobody
/// writes) or is a directory is refused at once with the reason, not read.
#[test]
fn kubeconfigs_and_token_files_that_are_not_bounded_regular_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(std::process::Command::new("mkfifo").args(["-m", "600"]).arg(&fifo).status().unwrap().success());
    let bin = env!("CARGO_BIN_EXE_kgpu");
    for kubeconfig in [std::path::Path::new("/dev/zero"), &fifo, dir.path()] {
        let out = std::process::Command::new(bin)
            .arg("snapshot")
            .env("KUBECONFIG", kubeconfig)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{kubeconfig:?}: {said}");
        assert!(said.contains("not a regular file") || said.contains("a directory"), "{kubeconfig:?}: {said}");
    }
    // The files a kubeconfig names (token file, client certificate and key,
    // CA) are bounded too: kube-rs would read /dev/zero until memory ran out.
    for (user, cluster) in [
        ("tokenFile: /dev/zero", ""),
        ("client-certificate: /dev/zero", ""),
        ("client-key: FIFO", ""),
        ("token: t", "certificate-authority: /dev/zero"),
    ] {
        let user = user.replace("FIFO", &fifo.display().to_string());
        let kubeconfig = dir.path().join("names-files");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: \"https://127.0.0.1:1\", {cluster}}}\nusers:\n- name: u\n  user: {{{user}}}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n"
            ),
        )
        .unwrap();
        let out = std::process::Command::new(bin)
            .arg("snapshot")
            .env("KUBECONFIG", &kubeconfig)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{user} {cluster}: {said}");
        assert!(said.contains("context 'x'") && said.contains("not a regular file"), "{user} {cluster}: {said}");
    }
    // A kubeconfig that is not YAML: where, never an excerpt with the credentials.
    let broken = dir.path().join("broken");
    std::fs::write(
        &broken,
        "apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user: {token: \"SECRET-TOKEN-1234\", client-key-data: LS0tSECRET }}\n",
    )
    .unwrap();
    let out = std::process::Command::new(bin).arg("snapshot").env("KUBECONFIG", &broken).output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("line 5") && !said.contains("SECRET"), "{said}");
    // A 0600 FIFO as the agent's token file: refused, not waited on.
    let out = std::process::Command::new(bin)
        .args(["agent", "--listen", "127.0.0.1:0", "--node-name", "n1", "--backend", "fake:/nonexistent"])
        .arg("--token-file")
        .arg(&fifo)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("not a regular file"), "{said}");
}

/// The API server stores no object without a name: one in a dump is skipped
/// with the reason, not drawn as a nameless row.
#[test]
fn objects_without_a_name_are_skipped_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("nameless.json");
    let node =
        r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":""},"status":{"allocatable":{"nvidia.com/gpu":"8"}}}"#;
    let pod = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"","namespace":"a"},"spec":{"containers":[]}}"#;
    std::fs::write(&dump, format!(r#"{{"kind":"List","items":[{node},{pod}]}}"#)).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kgpu"))
        .args(["snapshot", "--pane", "fleet", "--file"])
        .arg(&dump)
        .output()
        .unwrap();
    let (said, text) = (String::from_utf8_lossy(&out.stderr), String::from_utf8_lossy(&out.stdout));
    assert!(said.contains("node without metadata.name") && said.contains("pod without metadata.name"), "{said}");
    assert!(text.contains("FLEET  0 GPUs"), "{text}");
}

/// `--advance` runs the simulator second by second: a day at most, refused past it.
#[test]
fn advancing_the_demo_past_a_day_is_a_usage_error() {
    for seconds in ["86401", "4294967296", "18446744073709551615"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_kgpu"))
            .args(["snapshot", "--scenario", "default", "--advance", seconds])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{seconds}: {said}");
        assert!(said.contains("not in 0..=86400"), "{seconds}: {said}");
    }
}

/// An action whose report cannot be written (a full disk behind `>`) still
/// runs to its end, then exits 1 saying so, not 0 with a report nobody got.
#[test]
fn an_action_whose_report_is_lost_says_so_and_fails() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else { return };
    let data = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kgpu"))
        .args(["cordon", "gpu-01", "-s", "fragmented", "--dry-run"])
        .env("KGPU_DATA_DIR", data.path())
        .stdout(full)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("the report could not be written"), "{said}");
    let audit = std::fs::read_to_string(data.path().join("audit.jsonl")).unwrap();
    assert!(audit.contains("\"dryRun\":true"), "the action ran and was audited: {audit}");
}

/// The agent's log goes where the container's logs go (`kubectl logs`,
/// journald): no colour escapes there, only on a terminal.
#[test]
fn the_agents_log_has_no_colour_escapes_off_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "c0ffee-5eed-4b1d-9a7e-0123456789ab\n").unwrap();
    std::fs::set_permissions(&token_file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/agent/h200-nvml-recorded.json");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_kgpu"))
        .args(["agent", "--listen", "127.0.0.1:0", "--node-name", "n1", "--backend", &format!("fake:{fixture}")])
        .arg("--token-file")
        .arg(&token_file)
        .env_remove("NO_COLOR")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut stderr, &mut first).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(first.contains("serving on"), "{first:?}");
    assert!(!first.contains('\u{1b}'), "colour escapes in a piped log: {first:?}");
}
