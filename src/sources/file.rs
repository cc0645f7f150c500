//! Offline analysis of `kubectl get ... -o json|yaml` output: List objects,
//! single objects, multi-document YAML, several files or whole directories
//! (a support bundle). Unknown kinds are counted and ignored; a malformed
//! file is an error that names the file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use std::cell::Cell;

use serde::de::DeserializeSeed;
use serde_json::Value;
use thiserror::Error;

use crate::sources::bounded_value::{Bounded, budget_for};

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

/// Hands each object of one file to `item`, List items one by one, read as
/// they are parsed, so a 150 MB List never stands whole as a tree: JSON (one
/// value) or YAML (several documents). Either within a budget proportional
/// to the text (`bounded_value`: YAML aliases cannot blow it up).
fn each_object(path: &Path, text: &str, item: &mut dyn FnMut(Value)) -> Result<(), FileError> {
    let parse_err = |message: String| FileError::Parse { path: path.display().to_string(), message };
    let budget = budget_for(text.len());
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        let mut reader = serde_json::Deserializer::from_str(text);
        Objects { sink: item, budget: &budget }.deserialize(&mut reader).map_err(|e| parse_err(e.to_string()))?;
        return reader.end().map_err(|e| parse_err(e.to_string()));
    }
    let Some(items) = super::kubectl_yaml::list_items(text) else {
        // Parsed whole, a document holds some 16 times its text: past the
        // bound, say how to get a file that is read item by item.
        let largest = largest_yaml_document(text);
        if largest > YAML_DOCUMENT_MAX {
            return Err(parse_err(format!(
                "a YAML document of {} MiB not laid out as kubectl writes a List is parsed whole (about 16 times \
                 its size in memory); kgpu reads such documents up to {} MiB: dump with `kubectl get ... -o json` \
                 or `-o yaml`, which are read item by item at any size",
                largest >> 20,
                YAML_DOCUMENT_MAX >> 20
            )));
        }
        return super::kube::apply::each_yaml_document(text, |doc| {
            Objects { sink: &mut *item, budget: &budget }.deserialize(doc)
        })
        .map_err(|e| parse_err(e.to_string()));
    };
    // kubectl's List, one item at a time (its lines are an item each).
    super::kube::apply::check_depth(text).map_err(|e| parse_err(e.to_string()))?;
    for (line, text) in items {
        for doc in serde_yaml::Deserializer::from_str(text) {
            Objects { sink: &mut *item, budget: &budget }
                .deserialize(doc)
                .map_err(|e| parse_err(format!("the item at line {line}: {e} (lines counted from the item)")))?;
        }
    }
    Ok(())
}

/// The largest YAML document a file parsed whole may hold (some 1 GiB
/// while parsed); JSON and kubectl's YAML Lists are read item by item.
pub const YAML_DOCUMENT_MAX: usize = 64 << 20;

/// The length of the longest document of a YAML stream (documents start at
/// a `---` line).
fn largest_yaml_document(text: &str) -> usize {
    let mut largest = 0;
    let mut start = 0;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if line.starts_with("---") && line[3..].chars().next().is_none_or(char::is_whitespace) {
            largest = largest.max(at - start);
            start = at;
        }
        at += line.len();
    }
    largest.max(at - start)
}

/// A document as objects: an array's elements and an object's `items` go to
/// the sink one at a time (kubectl writes `items` before `kind`, so an
/// object with an `items` array is read as a List, as `kubectl` makes them).
struct Objects<'a, 'b> {
    sink: &'a mut dyn FnMut(Value),
    budget: &'b Cell<u64>,
}

impl<'de> DeserializeSeed<'de> for Objects<'_, '_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Objects<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a Kubernetes object, a List of them, or an array of them")
    }
    /// An empty YAML document.
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }
    // A YAML document that is a scalar is no object: counted as one with no kind.
    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<(), E> {
        let v = Bounded(self.budget).visit_bool(v)?;
        self.scalar(v)
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<(), E> {
        let v = Bounded(self.budget).visit_i64(v)?;
        self.scalar(v)
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<(), E> {
        let v = Bounded(self.budget).visit_u64(v)?;
        self.scalar(v)
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<(), E> {
        let v = Bounded(self.budget).visit_f64(v)?;
        self.scalar(v)
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<(), E> {
        let v = Bounded(self.budget).visit_str(v)?;
        self.scalar(v)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(v) = seq.next_element_seed(Bounded(self.budget))? {
            flatten(v, &mut *self.sink);
        }
        Ok(())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut fields = serde_json::Map::new();
        let mut list = false;
        while let Some(key) = map.next_key::<String>()? {
            if key == "items" && !list {
                list = true;
                map.next_value_seed(Items { sink: &mut *self.sink, budget: self.budget })?;
            } else {
                let v = map.next_value_seed(Bounded(self.budget))?;
                fields.insert(key, v);
            }
        }
        if !list {
            (self.sink)(Value::Object(fields));
        }
        Ok(())
    }
}

impl Objects<'_, '_> {
    fn scalar<E>(self, v: Value) -> Result<(), E> {
        (self.sink)(v);
        Ok(())
    }
}

/// A List's `items`: each handed on as it is parsed (`null`: none).
struct Items<'a, 'b> {
    sink: &'a mut dyn FnMut(Value),
    budget: &'b Cell<u64>,
}

impl<'de> DeserializeSeed<'de> for Items<'_, '_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Items<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a List's items (an array)")
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
        Objects { sink: self.sink, budget: self.budget }.visit_seq(seq)
    }
}

/// Hands on `v`, or a List's items one by one (Lists in Lists too).
fn flatten(mut v: Value, sink: &mut dyn FnMut(Value)) {
    let is_list =
        v.get("kind").and_then(|k| k.as_str()).is_some_and(|k| k.ends_with("List")) && v.get("items").is_some();
    if is_list {
        if let Some(Value::Array(items)) = v.get_mut("items").map(Value::take) {
            items.into_iter().for_each(|i| flatten(i, sink));
        }
    } else if !v.is_null() {
        sink(v);
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

    #[test]
    fn a_yaml_document_parsed_whole_is_bounded_and_the_error_says_how_to_dump() {
        let pod = "  - kind: Pod\n    metadata: {name: p}\n";
        // Not kubectl's layout (its items are not indented), over the bound.
        let big = format!("kind: List\nitems:\n{}", pod.repeat(YAML_DOCUMENT_MAX / pod.len() + 1));
        match each_object(Path::new("big.yaml"), &big, &mut |_| {}) {
            Err(FileError::Parse { message, .. }) => {
                assert!(message.contains("a YAML document of 64 MiB not laid out as kubectl writes"), "{message}");
                assert!(message.contains("-o json"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        // The same objects in documents of their own are read.
        let docs = "---\nkind: Pod\nmetadata: {name: p}\n".repeat(YAML_DOCUMENT_MAX / 30 + 1);
        assert!(largest_yaml_document(&docs) < 64);
        assert_eq!(largest_yaml_document("a: 1\n---\nb: 22\n--- # c\n"), 10);
        assert_eq!(largest_yaml_document("a: '---x'\n"), 10);
    }

    #[test]
    fn a_kubectl_yaml_list_read_item_by_item_equals_the_whole_document_read() {
        let list = "apiVersion: v1\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a\n  data:\n    script: |\n      echo 'x\n\n      [[[\n- apiVersion: v1\n  kind: List\n  items:\n  - kind: Pod\n    metadata: {name: b}\n- kind: Node\n  metadata:\n    name: \"n\"\nkind: List\nmetadata:\n  resourceVersion: \"\"\n";
        assert!(super::super::kubectl_yaml::list_items(list).is_some());
        let path = Path::new("t.yaml");
        let cut = documents(path, list).unwrap();
        let mut whole = Vec::new();
        for v in super::super::kube::apply::parse_yaml(list).unwrap() {
            flatten(v, &mut |o| whole.push(o));
        }
        assert_eq!(cut, whole);
        assert_eq!(cut.len(), 3);
        assert_eq!(cut[0]["data"]["script"], "echo 'x\n\n[[[\n");
        // An error names the item's line.
        let broken = list.replace("kind: Node", "kind: [Node");
        let Err(FileError::Parse { message, .. }) = documents(path, &broken) else { panic!("parsed") };
        assert!(message.starts_with("the item at line 17:"), "{message}");
    }
}
