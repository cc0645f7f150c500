//! The layers of DESIGN.md, checked. Model, reference, analysis and view
//! models are pure: no kube, ratatui, tokio or NVML, no files, environment
//! or network, and no clock (time is an argument). And no module imports one
//! above it: each top-level module may name only the modules in its row of
//! `ALLOWED`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

use std::collections::BTreeSet;
use std::path::Path;

/// Each top-level module of `src/` and the other top-level modules it may
/// import (`crate::x` or `super::…::x`). The order is the direction of flow:
/// sources feed the model, analyses read it, view models present them, the
/// app decides, the ui draws, and the runtime wires it all to the world.
const ALLOWED: &[(&str, &[&str])] = &[
    ("model", &[]),
    ("clock", &[]),
    ("inputs", &[]),
    ("reference", &["model"]),
    ("analysis", &["model", "reference"]),
    ("view_model", &["model", "reference", "analysis"]),
    // The node agent shares only the wire format and reference tables.
    ("agent", &["model", "reference", "clock", "inputs"]),
    // The simulator schedules with kgpu's own fit rules; the kube edge
    // turns objects into the model; agent feeds read the agent's wire format.
    ("sources", &["model", "reference", "analysis", "agent", "clock", "inputs"]),
    ("actions", &["model", "reference", "analysis", "sources", "clock"]),
    ("app", &["model", "reference", "analysis", "view_model", "actions"]),
    ("ui", &["view_model", "app"]),
    ("lab", &["model", "sources", "clock"]),
    ("cli", &["sources", "agent"]),
    ("config", &[]),
    (
        "runtime",
        &[
            "model",
            "clock",
            "reference",
            "analysis",
            "view_model",
            "agent",
            "sources",
            "actions",
            "app",
            "ui",
            "lab",
            "cli",
            "config",
            "inputs",
        ],
    ),
];

const PURE: [&str; 4] = ["model", "reference", "analysis", "view_model"];

const IMPURE: [&str; 14] = [
    "use kube",
    "kube::",
    "use ratatui",
    "use tokio",
    "tokio::",
    "use k8s_openapi",
    "use nvml_wrapper",
    "SystemTime::now",
    "Utc::now",
    "Instant::now",
    "std::fs",
    "std::env",
    "std::net",
    "crate::clock",
];

/// The code of a line, without its comment.
fn code(line: &str) -> &str {
    line.split("//").next().unwrap_or("")
}

/// Identifiers that start a path at `rest` (`x` or `{x, y::z}`).
fn heads(rest: &str) -> Vec<String> {
    let ident = |s: &str| s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>();
    match rest.strip_prefix('{') {
        Some(group) => group
            .split('}')
            .next()
            .unwrap_or("")
            .split(',')
            .map(|p| ident(p.trim()))
            .filter(|s| !s.is_empty())
            .collect(),
        None => vec![ident(rest)].into_iter().filter(|s| !s.is_empty()).collect(),
    }
}

/// The other top-level modules that the file at `module` (its path from the
/// crate root, e.g. `["analysis", "pending", "fit_step"]`) imports.
/// `super` chains that climb out of the top module count too; one that
/// climbs less (or from inside a `mod tests`) stays inside it.
fn imports(module: &[&str], text: &str) -> BTreeSet<String> {
    let tops: BTreeSet<&str> = ALLOWED.iter().map(|(m, _)| *m).collect();
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let line = code(line);
        for (i, _) in line.match_indices("crate::") {
            out.extend(heads(&line[i + "crate::".len()..]));
        }
        let mut rest = line;
        while let Some(i) = rest.find("super::") {
            let mut after = &rest[i..];
            let mut ups = 0;
            while let Some(r) = after.strip_prefix("super::") {
                ups += 1;
                after = r;
            }
            if ups >= module.len() {
                out.extend(heads(after));
            }
            rest = after;
        }
    }
    out.retain(|m| tops.contains(m.as_str()) && m != module[0]);
    out
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `src/a/b/mod.rs` → `[a, b]`, `src/a/b/c.rs` → `[a, b, c]`.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

#[test]
fn no_module_imports_a_layer_above_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut offences = Vec::new();
    for file in files {
        let module = module_path(&src, &file);
        if module == ["lib"] || module == ["main"] {
            continue;
        }
        let parts: Vec<&str> = module.iter().map(String::as_str).collect();
        let Some((_, allowed)) = ALLOWED.iter().find(|(m, _)| *m == parts[0]) else {
            offences.push(format!("{}: module `{}` has no row in ALLOWED", file.display(), parts[0]));
            continue;
        };
        let text = std::fs::read_to_string(&file).unwrap();
        for used in imports(&parts, &text) {
            if !allowed.contains(&used.as_str()) {
                offences.push(format!("{}: {} imports {used}", file.display(), parts[0]));
            }
        }
    }
    assert!(offences.is_empty(), "imports against the flow:\n{}", offences.join("\n"));
}

#[test]
fn the_pure_layers_stay_pure() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut offences = Vec::new();
    for layer in PURE {
        let mut files = Vec::new();
        rust_files(&src.join(layer), &mut files);
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for (n, line) in text.lines().enumerate() {
                if IMPURE.iter().any(|f| code(line).contains(f)) {
                    offences.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(offences.is_empty(), "impure code in a pure layer:\n{}", offences.join("\n"));
}

/// The checker itself finds what it should (a test that cannot fail is no test).
#[test]
fn the_checker_sees_every_form_of_import() {
    let file = ["analysis", "pending", "fit_step"];
    let found = |text: &str| imports(&file, text).into_iter().collect::<Vec<_>>();
    assert_eq!(found("use crate::actions::Action;"), ["actions"]);
    assert_eq!(found("use crate::{app::Msg, model::Pod};"), ["app", "model"]);
    assert_eq!(found("let t = crate::clock::wall_clock();"), ["clock"]);
    assert_eq!(found("use super::super::super::runtime::wall_clock;"), ["runtime"]);
    assert_eq!(found("use super::super::super::{ui, model};"), ["model", "ui"]);
    // Inside its own layer, or in a comment: nothing.
    assert!(found("use super::super::index::Index;").is_empty());
    assert!(found("use crate::analysis::fit;").is_empty());
    assert!(found("// see crate::ui::draw").is_empty());
    assert_eq!(module_path(Path::new("src"), Path::new("src/analysis/pending/mod.rs")), ["analysis", "pending"]);
}
