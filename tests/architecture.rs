//! The purity line of DESIGN.md: model, analysis and view models import no
//! kube, ratatui, tokio or NVML, and never read the clock. Time is an
//! argument; the terminal and the network live elsewhere.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

use std::path::Path;

const FORBIDDEN: [&str; 9] = [
    "use kube",
    "kube::",
    "use ratatui",
    "use tokio",
    "tokio::",
    "use k8s_openapi",
    "use nvml_wrapper",
    "SystemTime::now",
    "Utc::now",
];

fn check(dir: &Path, offences: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            check(&path, offences);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            for (n, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                for f in FORBIDDEN {
                    if code.contains(f) || code.contains("Instant::now") {
                        offences.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                    }
                }
            }
        }
    }
}

#[test]
fn model_analysis_and_view_models_stay_pure() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut offences = Vec::new();
    for layer in ["model", "analysis", "view_model", "reference"] {
        check(&root.join(layer), &mut offences);
    }
    assert!(offences.is_empty(), "impure imports or clock reads:\n{}", offences.join("\n"));
}
