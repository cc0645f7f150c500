//! Offline analysis of `kubectl get ... -o json|yaml` output: List objects,
//! single objects, multi-document YAML, several files or whole directories
//! (a support bundle). Unknown kinds are counted and ignored; a malformed
//! file is an error that names the file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use thiserror::Error;

use crate::model::{Feed, FeedProblem, FeedState, ModelEvent, Object, SourceInfo, SourceKind, Timestamp};
use crate::sources::kinds::{self, Kind};

use crate::model::time::parse_rfc3339;

#[derive(Debug, Error)]
pub enum FileError {
    #[error("cannot read '{path}': {message}")]
    Read { path: String, message: String },
    #[error("'{path}' is not valid JSON or YAML: {message}")]
    Parse { path: String, message: String },
    #[error("no files to read under '{0}' (expected .json, .yaml or .yml)")]
    Empty(String),
}

/// What a load found, for the status line and `--file` diagnostics.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub files: usize,
    pub objects: usize,
    /// Kinds kgpu does not use, with counts.
    pub unknown: BTreeMap<String, usize>,
    /// Objects of known kinds that could not be converted.
    pub skipped: usize,
}

fn collect(path: &Path, out: &mut Vec<PathBuf>) -> Result<(), FileError> {
    let meta = std::fs::metadata(path)
        .map_err(|e| FileError::Read { path: path.display().to_string(), message: e.to_string() })?;
    if meta.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| FileError::Read { path: path.display().to_string(), message: e.to_string() })?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for e in entries {
            let is_data = e.extension().is_some_and(|x| matches!(x.to_str(), Some("json" | "yaml" | "yml")));
            if e.is_dir() || is_data {
                collect(&e, out)?;
            }
        }
    } else {
        out.push(path.to_path_buf());
    }
    Ok(())
}

/// The documents of one file: JSON (one value) or YAML (several).
pub fn documents(path: &Path, text: &str) -> Result<Vec<Value>, FileError> {
    let parse_err = |message: String| FileError::Parse { path: path.display().to_string(), message };
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        let v: Value = serde_json::from_str(text).map_err(|e| parse_err(e.to_string()))?;
        return Ok(match v {
            Value::Array(items) => items,
            other => vec![other],
        });
    }
    super::kube::apply::parse_yaml(text).map_err(|e| parse_err(e.to_string()))
}

/// Splits List objects into their items.
fn flatten(docs: Vec<Value>, out: &mut Vec<Value>) {
    for d in docs {
        let is_list =
            d.get("kind").and_then(|k| k.as_str()).is_some_and(|k| k.ends_with("List")) && d.get("items").is_some();
        if is_list {
            if let Some(Value::Array(items)) = d.get("items").cloned() {
                flatten(items, out);
            }
        } else if !d.is_null() {
            out.push(d);
        }
    }
}

fn newest_time(v: &Value, newest: &mut Timestamp) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if let (true, Value::String(s)) =
                    (k.ends_with("Timestamp") || k.ends_with("Time") || k == "startedAt" || k == "finishedAt", x)
                {
                    if let Some(t) = parse_rfc3339(s) {
                        *newest = (*newest).max(t);
                    }
                } else {
                    newest_time(x, newest);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| newest_time(x, newest)),
        _ => {}
    }
}

/// The kind of a dumped object, if kgpu reads that kind.
fn kind_of(v: &Value) -> Option<&'static Kind> {
    let kind = v.get("kind")?.as_str()?;
    let group =
        v.get("apiVersion").and_then(|a| a.as_str()).map(|a| a.split_once('/').map_or("", |(g, _)| g)).unwrap_or("");
    kinds::find(group, kind)
}

/// Reads every path; returns the model events (a resync per feed), the time
/// the data describe (the newest timestamp found), and what was found.
pub fn load(paths: &[PathBuf]) -> Result<(Vec<ModelEvent>, Timestamp, Stats), FileError> {
    let mut files = Vec::new();
    for p in paths {
        collect(p, &mut files)?;
    }
    if files.is_empty() {
        return Err(FileError::Empty(paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")));
    }
    let mut stats = Stats { files: files.len(), ..Stats::default() };
    let mut objects: BTreeMap<Feed, Vec<Object>> = BTreeMap::new();
    let mut skipped = Vec::new();
    let mut newest = 0;
    for f in &files {
        let text = std::fs::read_to_string(f)
            .map_err(|e| FileError::Read { path: f.display().to_string(), message: e.to_string() })?;
        let mut items = Vec::new();
        flatten(documents(f, &text)?, &mut items);
        for item in items {
            newest_time(&item, &mut newest);
            match kind_of(&item).map(|k| (k, (k.convert)(&item))) {
                Some((_, Ok(o))) => {
                    stats.objects += 1;
                    objects.entry(o.feed()).or_default().push(o);
                }
                Some((k, Err(reason))) => {
                    stats.skipped += 1;
                    let name = item.pointer("/metadata/name").and_then(|n| n.as_str()).unwrap_or("?");
                    skipped.push(ModelEvent::Skipped {
                        feed: k.feed,
                        reason: format!("{}: {} {name}: {reason}", f.display(), k.kind),
                    });
                }
                None => {
                    let kind = item.get("kind").and_then(|k| k.as_str()).unwrap_or("(no kind)").to_string();
                    *stats.unknown.entry(kind).or_default() += 1;
                }
            }
        }
    }
    let name = paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" ");
    let mut events = vec![ModelEvent::Source(SourceInfo { kind: SourceKind::File, name }), ModelEvent::Clock(newest)];
    for &feed in super::kube::watch::FEEDS {
        let list = objects.remove(&feed).unwrap_or_default();
        let is_crd = !matches!(feed, Feed::Nodes | Feed::Pods | Feed::Events);
        if list.is_empty() && is_crd {
            events.push(ModelEvent::Feed {
                feed,
                state: FeedState::Unavailable(FeedProblem::Missing("none in the files".into())),
            });
        } else {
            events.push(ModelEvent::Resync { feed, objects: list });
        }
    }
    events.extend(skipped);
    Ok((events, newest, stats))
}
