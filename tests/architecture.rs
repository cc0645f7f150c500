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

/// A module: its path from the crate root (`["analysis", "fleet"]`).
type ModPath = Vec<String>;

/// The code of a file that goes into the build: comments cut, and the
/// `#[cfg(test)] mod tests` at its end left out (a test may reach anywhere).
fn built_code(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim() == "#[cfg(test)]" && lines.peek().is_some_and(|next| next.trim_start().starts_with("mod ")) {
            break;
        }
        out.push_str(code(line));
        out.push('\n');
    }
    out
}

/// The paths of a use tree: `a::{b::C, d::{E, F}}` → `a::b::C`, `a::d::E`, `a::d::F`.
fn use_paths(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else { return vec![tree.to_string()] };
    let prefix = &tree[..open];
    let (mut depth, mut part, mut parts) = (0, String::new(), Vec::new());
    for c in tree[open + 1..].chars() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut part));
                continue;
            }
            _ => {}
        }
        part.push(c);
    }
    parts.push(part);
    parts.iter().filter(|p| !p.trim().is_empty()).flat_map(|p| use_paths(p)).map(|p| format!("{prefix}{p}")).collect()
}

/// Which modules each module names, between modules of `src/` (any depth).
/// A path resolves to the deepest module it names (`crate::analysis::fleet::
/// IssueCode` → `analysis::fleet`); `super`, `self` and a child's name are
/// read from where the file sits.
fn module_graph(files: &[(ModPath, String)]) -> std::collections::BTreeMap<ModPath, BTreeSet<ModPath>> {
    let known: BTreeSet<&ModPath> = files.iter().map(|(m, _)| m).collect();
    let deepest = |path: &[String]| -> Option<ModPath> {
        (1..=path.len()).take_while(|n| known.contains(&path[..*n].to_vec())).last().map(|n| path[..n].to_vec())
    };
    let ident = |s: &str| s.trim().split(" as ").next().unwrap_or("").trim().to_string();
    let mut graph = std::collections::BTreeMap::new();
    for (module, text) in files {
        let code = built_code(text);
        let children: BTreeSet<String> = code
            .lines()
            .filter_map(|l| {
                let l = l
                    .trim()
                    .trim_start_matches("pub(crate) ")
                    .trim_start_matches("pub(super) ")
                    .trim_start_matches("pub ");
                l.strip_prefix("mod ")?.strip_suffix(';').map(|n| n.trim().to_string())
            })
            .collect();
        let resolve = |path: &str| -> Option<ModPath> {
            let segs: Vec<String> = path.split("::").map(ident).collect();
            let mut at = module.clone();
            let rest: &[String] = match segs.first().map(String::as_str) {
                Some("crate") => {
                    at.clear();
                    &segs[1..]
                }
                Some("self") => &segs[1..],
                Some("super") => {
                    let ups = segs.iter().take_while(|s| *s == "super").count();
                    at.truncate(at.len().saturating_sub(ups));
                    &segs[ups..]
                }
                Some(first) if children.contains(first) => &segs,
                _ => return None,
            };
            at.extend(rest.iter().cloned());
            deepest(&at)
        };
        let mut named = BTreeSet::new();
        let mut rest = code.as_str();
        while let Some(i) = rest.find("use ") {
            let before = rest[..i].chars().last();
            rest = &rest[i + 4..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let tree = rest.split(';').next().unwrap_or("");
            named.extend(use_paths(&tree.replace('\n', " ")).iter().filter_map(|p| resolve(p)));
        }
        // Paths written inline: `crate::x::f()`, `super::y::T`, `child::g()`.
        let words: Vec<&str> = code.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).collect();
        for w in words.iter().filter(|w| w.contains("::")) {
            named.extend(resolve(w.trim_start_matches(':')));
        }
        named.remove(module);
        graph.insert(module.clone(), named);
    }
    graph
}

/// The loops of `graph`, leaving out a module's edges to its own ancestors
/// and descendants (a folder's `mod.rs` declares and re-exports its files,
/// which take shared types from it): each as its members, sorted.
fn import_loops(graph: &std::collections::BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<Vec<String>> {
    let related = |a: &ModPath, b: &ModPath| a.starts_with(b) || b.starts_with(a);
    let next = |m: &ModPath| -> Vec<ModPath> {
        graph.get(m).map(|ts| ts.iter().filter(|t| !related(m, t)).cloned().collect()).unwrap_or_default()
    };
    // Two modules are in one loop when each reaches the other.
    let reach = |from: &ModPath| -> BTreeSet<ModPath> {
        let (mut seen, mut todo) = (BTreeSet::new(), next(from));
        while let Some(m) = todo.pop() {
            if seen.insert(m.clone()) {
                todo.extend(next(&m));
            }
        }
        seen
    };
    let reaches: std::collections::BTreeMap<&ModPath, BTreeSet<ModPath>> =
        graph.keys().map(|m| (m, reach(m))).collect();
    let mut loops: BTreeSet<Vec<String>> = BTreeSet::new();
    for (m, r) in &reaches {
        if !r.contains(*m) {
            continue;
        }
        let members: Vec<String> =
            r.iter().filter(|o| reaches.get(o).is_some_and(|back| back.contains(*m))).map(|o| o.join("::")).collect();
        loops.insert(members);
    }
    loops.into_iter().collect()
}

#[test]
fn no_import_loop_between_modules() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    rust_files(&src, &mut paths);
    let files: Vec<(ModPath, String)> = paths
        .iter()
        .map(|p| (module_path(&src, p), std::fs::read_to_string(p).unwrap()))
        .filter(|(m, _)| m != &["lib"] && m != &["main"])
        .collect();
    let loops = import_loops(&module_graph(&files));
    assert!(
        loops.is_empty(),
        "modules that import each other (cut out what they share, or pass it in):\n{}",
        loops.iter().map(|l| l.join(" ↔ ")).collect::<Vec<_>>().join("\n")
    );
}

/// The loop finder finds loops through every form of path, and leaves a
/// folder's hub alone.
#[test]
fn the_loop_finder_sees_loops_through_every_form_of_path() {
    let file = |m: &str, text: &str| (m.split("::").map(String::from).collect::<ModPath>(), text.to_string());
    let hub = file("a", "mod x;\nmod y;\npub use x::T;\npub struct Shared;");
    let loops = |files: Vec<(ModPath, String)>| import_loops(&module_graph(&files));
    // Through `super::`, a group and an inline `crate::` path.
    assert_eq!(
        loops(vec![
            hub.clone(),
            file("a::x", "use super::{y::U, Shared};\npub struct T;"),
            file("a::y", "pub struct U;\nfn f() { crate::a::x::T; }"),
        ]),
        [vec!["a::x".to_string(), "a::y".to_string()]]
    );
    // Across folders, with a rename.
    assert_eq!(
        loops(vec![
            hub.clone(),
            file("a::x", "use crate::b::z::{self as zed};\npub struct T;"),
            file("a::y", ""),
            file("b", "mod z;"),
            file("b::z", "use crate::a::x::T as Tee;"),
        ]),
        [vec!["a::x".to_string(), "b::z".to_string()]]
    );
    // A hub and its files, a comment and a test module: no loop.
    assert!(
        loops(vec![
            hub,
            file("a::x", "use super::Shared; // crate::a::y::U\npub struct T;"),
            file("a::y", "#[cfg(test)]\nmod tests {\n    use crate::a::x::T;\n}"),
        ])
        .is_empty()
    );
}
