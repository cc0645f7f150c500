//! The upgrade board's target comes from the GPU Operator, as the operator
//! reads its objects: the ClusterPolicy's `spec.driver.version`, or, when it
//! says `useNvidiaDriverCRD: true`, the NVIDIADrivers'. The real samples
//! (tests/fixtures/gpu-operator, with their sources) and hand-made variants
//! of them; the same target in the cockpit, the text and the JSON.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use kgpu::analysis::Thresholds;
use kgpu::app::{App, Pane};
use kgpu::runtime::{load, source::Source};
use kgpu::ui::{self, Context, Theme};
use kgpu::view_model::panes::Views;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

fn fixtures(policy: &str) -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    vec![
        root.join("verdicts/hand-made/operator-states.yaml"),
        root.join(format!("gpu-operator/{policy}.yaml")),
        root.join("gpu-operator/nvidiadriver-sample.yaml"),
    ]
}

fn json(policy: &str) -> serde_json::Value {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kgpu"));
    cmd.args(["snapshot", "--pane", "drivers", "-o", "json"]);
    for f in fixtures(policy) {
        cmd.arg("--file").arg(f);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn board_title(policy: &str) -> String {
    let (snap, now) = load::once(&Source::File(fixtures(policy))).unwrap();
    let views = Views::build(Arc::new(snap), now, &Thresholds::default(), None);
    let mut app = App::new(false, "dark", false);
    app.pane = Pane::Drivers;
    let mut terminal = Terminal::new(TestBackend::new(200, 60)).unwrap();
    let context = Context { source: "files".into(), subtitle: String::new(), production: false };
    terminal.draw(|f| _ = ui::draw(f, &app, &views, &Theme::builtin("dark"), &context)).unwrap();
    let screen = format!("{}", terminal.backend());
    screen.lines().find(|l| l.contains("Upgrade waves:")).unwrap_or("").to_string()
}

#[test]
fn the_clusterpolicys_driver_version_is_the_target() {
    let doc = json("clusterpolicy-with-version");
    let waves = &doc["drivers"]["waves"];
    assert_eq!(waves["target"], "570.124.06");
    assert_eq!(waves["source"], "ClusterPolicy gpu-cluster-policy");
    assert!(
        board_title("clusterpolicy-with-version").contains("target 570.124.06 from ClusterPolicy gpu-cluster-policy")
    );
}

#[test]
fn with_use_nvidia_driver_crd_the_nvidiadriver_is_the_target() {
    let doc = json("clusterpolicy-defers-to-nvidiadriver");
    assert_eq!(doc["drivers"]["waves"]["target"], "595.91.07");
    assert_eq!(doc["drivers"]["waves"]["source"], "NVIDIADriver nvidiadriver-sample");
    assert!(board_title("clusterpolicy-defers-to-nvidiadriver").contains("target 595.91.07 from NVIDIADriver"));
}

#[test]
fn the_real_sample_sets_no_version_so_there_is_no_target() {
    // The verbatim sample leaves spec.driver.version to the chart: the
    // NVIDIADriver beside it does not count while useNvidiaDriverCRD is false.
    let doc = json("clusterpolicy-sample");
    assert!(doc["drivers"]["waves"].is_null(), "{}", doc["drivers"]["waves"]);
    assert!(board_title("clusterpolicy-sample").contains("no target"));
    // An explicit --target-driver is said to be one.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kgpu"));
    cmd.args(["snapshot", "--pane", "drivers", "--target-driver", "570.124.06"]);
    for f in fixtures("clusterpolicy-sample") {
        cmd.arg("--file").arg(f);
    }
    let text = String::from_utf8(cmd.output().unwrap().stdout).unwrap();
    assert!(text.contains("WAVES to driver 570.124.06 (from --target-driver)"), "{text}");
}
