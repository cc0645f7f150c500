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
    #[error("'{path}' is not a regular file (a device, a FIFO or a socket); give kubectl dumps")]
    NotAFile { path: String },
    #[error("'{path}' is {size} MiB; kgpu reads dumps of at most {limit} MiB")]
    TooLarge { path: String, size: u64, limit: u64 },
}

/// The largest dump file kgpu reads (a 100,000-pod `kubectl get -o json`
/// is about 1 GiB).
pub const MAX_FILE_BYTES: u64 = 2 << 30;

/// How far past the moment of reading a dump's timestamps may lie before
/// they are taken for skew rather than for the time of the dump.
const CLOCK_SLACK: Timestamp = 3600;

/// What a load found, for the status line and `--file` diagnostics.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub files: usize,
    pub objects: usize,
    /// Kinds kgpu does not use, with counts.
    pub unknown: BTreeMap<String, usize>,
    /// Objects of known kinds that could not be converted.
    pub skipped: usize,
    /// Files with no object in them.
    pub empty: Vec<String>,
    /// Objects found more than once (the last one read is kept), by `kind ns/name`.
    pub duplicates: Vec<String>,
    /// Timestamps later than the moment of reading (clock skew), not taken for "now".
    pub skewed: usize,
}

impl Stats {
    /// What a reader of the dump should know, one line each.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.empty.is_empty() {
            out.push(format!("{} file(s) with no objects: {}", self.empty.len(), self.empty.join(", ")));
        }
        if !self.duplicates.is_empty() {
            let first: Vec<&str> = self.duplicates.iter().take(5).map(String::as_str).collect();
            out.push(format!(
                "{} object(s) appear more than once (the last read is kept): {}{}",
                self.duplicates.len(),
                first.join(", "),
                if self.duplicates.len() > 5 { ", …" } else { "" }
            ));
        }
        if self.skewed > 0 {
            out.push(format!(
                "{} timestamp(s) lie in the future (clock skew); ages count from the newest time before now",
                self.skewed
            ));
        }
        out
    }
}

/// The dump files under `path`: a directory is walked (each directory once,
/// however many symlinks lead to it), anything else must be a regular file.
fn collect(
    path: &Path,
    out: &mut Vec<PathBuf>,
    seen: &mut std::collections::HashSet<PathBuf>,
) -> Result<(), FileError> {
    let shown = || path.display().to_string();
    let meta = std::fs::metadata(path).map_err(|e| FileError::Read { path: shown(), message: e.to_string() })?;
    if meta.is_dir() {
        let real =
            std::fs::canonicalize(path).map_err(|e| FileError::Read { path: shown(), message: e.to_string() })?;
        if !seen.insert(real) {
            return Ok(());
        }
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| FileError::Read { path: path.display().to_string(), message: e.to_string() })?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for e in entries {
            let is_data = e.extension().is_some_and(|x| matches!(x.to_str(), Some("json" | "yaml" | "yml")));
            if e.is_dir() || is_data {
                collect(&e, out, seen)?;
            }
        }
    } else if !meta.is_file() {
        return Err(FileError::NotAFile { path: shown() });
    } else if meta.len() > MAX_FILE_BYTES {
        return Err(FileError::TooLarge { path: shown(), size: meta.len() >> 20, limit: MAX_FILE_BYTES >> 20 });
    } else {
        out.push(path.to_path_buf());
    }
    Ok(())
}

/// The objects of one file, List items included one by one.
pub fn documents(path: &Path, text: &str) -> Result<Vec<Value>, FileError> {
    let mut out = Vec::new();
    each_object(path, text, &mut |v| out.push(v))?;
    Ok(out)
}

/// Hands each object of one file to `item`, List items one by one: JSON
/// (one value, read as it is parsed, so a 150 MB List never stands whole as
/// a tree) or YAML (several documents).
fn each_object(path: &Path, text: &str, item: &mut dyn FnMut(Value)) -> Result<(), FileError> {
    let parse_err = |message: String| FileError::Parse { path: path.display().to_string(), message };
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        let mut reader = serde_json::Deserializer::from_str(text);
        serde::de::DeserializeSeed::deserialize(Objects(item), &mut reader).map_err(|e| parse_err(e.to_string()))?;
        return reader.end().map_err(|e| parse_err(e.to_string()));
    }
    let docs = super::kube::apply::parse_yaml(text).map_err(|e| parse_err(e.to_string()))?;
    let mut out = Vec::new();
    flatten(docs, &mut out);
    out.into_iter().for_each(item);
    Ok(())
}

/// A JSON document as objects: an array's elements and an object's `items`
/// go to the sink one at a time (kubectl writes `items` before `kind`, so an
/// object with an `items` array is read as a List, as `kubectl` makes them).
struct Objects<'a>(&'a mut dyn FnMut(Value));

impl<'de> serde::de::DeserializeSeed<'de> for Objects<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Objects<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a Kubernetes object, a List of them, or an array of them")
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(v) = seq.next_element::<Value>()? {
            let mut out = Vec::new();
            flatten(vec![v], &mut out);
            out.into_iter().for_each(&mut *self.0);
        }
        Ok(())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut fields = serde_json::Map::new();
        let mut list = false;
        while let Some(key) = map.next_key::<String>()? {
            if key == "items" && !list {
                list = true;
                map.next_value_seed(Items(&mut *self.0))?;
            } else {
                fields.insert(key, map.next_value()?);
            }
        }
        if !list {
            (self.0)(Value::Object(fields));
        }
        Ok(())
    }
}

/// A List's `items`: each handed on as it is parsed (`null`: none).
struct Items<'a>(&'a mut dyn FnMut(Value));

impl<'de> serde::de::DeserializeSeed<'de> for Items<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Items<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a List's items (an array)")
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
        Objects(self.0).visit_seq(seq)
    }
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

/// The newest timestamp in `v` no later than `limit` (later ones are
/// counted as skewed: one object from 2100 must not age everything by 74 years).
fn newest_time(v: &Value, newest: &mut Timestamp, limit: Timestamp, skewed: &mut usize) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if let (true, Value::String(s)) =
                    (k.ends_with("Timestamp") || k.ends_with("Time") || k == "startedAt" || k == "finishedAt", x)
                {
                    match parse_rfc3339(s) {
                        Some(t) if t > limit => *skewed += 1,
                        Some(t) => *newest = (*newest).max(t),
                        None => {}
                    }
                } else {
                    newest_time(x, newest, limit, skewed);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| newest_time(x, newest, limit, skewed)),
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
/// the data describe (the newest timestamp found that is not in the future),
/// and what was found.
pub fn load(paths: &[PathBuf]) -> Result<(Vec<ModelEvent>, Timestamp, Stats), FileError> {
    let mut files = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for p in paths {
        collect(p, &mut files, &mut seen)?;
    }
    let limit = crate::clock::wall_clock() + CLOCK_SLACK;
    let mut keys = std::collections::HashSet::new();
    if files.is_empty() {
        return Err(FileError::Empty(paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")));
    }
    let mut stats = Stats { files: files.len(), ..Stats::default() };
    let mut objects: BTreeMap<Feed, Vec<Object>> = BTreeMap::new();
    let mut skipped = Vec::new();
    let mut newest = 0;
    for f in &files {
        let text = crate::inputs::read_text(f, crate::inputs::DUMP_MAX, "the file")
            .map_err(|message| FileError::Read { path: f.display().to_string(), message })?;
        let mut found = 0usize;
        each_object(f, &text, &mut |item| {
            found += 1;
            newest_time(&item, &mut newest, limit, &mut stats.skewed);
            let key = ["/kind", "/metadata/namespace", "/metadata/name"]
                .map(|p| item.pointer(p).and_then(|v| v.as_str()).unwrap_or("").to_string());
            if !key[2].is_empty() {
                if keys.contains(&key) {
                    stats.duplicates.push(format!("{} {}/{}", key[0], key[1], key[2]));
                } else {
                    keys.insert(key);
                }
            }
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
        })?;
        if found == 0 {
            stats.empty.push(f.display().to_string());
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

#[cfg(test)]
mod tests {
    use super::*;

    fn objects(text: &str) -> Result<Vec<String>, FileError> {
        let docs = documents(Path::new("t.json"), text)?;
        Ok(docs.iter().map(|d| d.get("kind").and_then(|k| k.as_str()).unwrap_or("-").to_string()).collect())
    }

    #[test]
    fn json_lists_are_read_item_by_item_as_kubectl_writes_them() {
        // kubectl sorts keys: items come before kind.
        let list = r#"{"apiVersion":"v1","items":[{"kind":"Node"},{"kind":"List","items":[{"kind":"Pod"}]},{"kind":"Pod"}],"kind":"List","metadata":{}}"#;
        assert_eq!(objects(list).unwrap(), ["Node", "Pod", "Pod"], "nested Lists flattened");
        assert_eq!(objects(r#"[{"kind":"Node"},{"kind":"Pod"}]"#).unwrap(), ["Node", "Pod"]);
        assert_eq!(objects(r#"{"kind":"Node","metadata":{"name":"a"}}"#).unwrap(), ["Node"]);
        assert_eq!(objects(r#"{"kind":"List","items":null}"#).unwrap(), Vec::<String>::new());
        assert_eq!(objects("{}").unwrap(), ["-"], "an object without a kind is still one, counted unknown");
        for broken in
            [r#"{"items":[{"kind":"Node"}]} trailing"#, r#"{"items":[{"kind":"Node"},"#, r#"{"items":{"a":1}}"#]
        {
            assert!(matches!(objects(broken), Err(FileError::Parse { .. })), "{broken}");
        }
    }
}
