//! Applying and deleting manifests on a real cluster (`kgpu scenario
//! apply|delete`): server-side apply of each object, then its status through
//! the status subresource (nodes need capacity; objects whose controllers do
//! not run here need their status written). Re-applying is harmless.

use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams};
use serde::de::DeserializeSeed;
use serde_json::{Value, json};
use thiserror::Error;

use super::client::short_error;
use super::manifest::SCENARIO_LABEL;
use crate::sources::bounded_value::{Bounded, budget_for};

pub const FIELD_MANAGER: &str = "kgpu-scenario";

#[derive(Debug, Error)]
pub enum ApplyError {
    #[error("RBAC: cannot '{verb}' {resource}: {message}; grant it or use a more privileged context")]
    Forbidden { verb: String, resource: String, message: String },
    #[error("{kind} {name}: {message}")]
    Api { kind: String, name: String, message: String },
    #[error("object without {0}")]
    Malformed(&'static str),
}

/// The API resource of a manifest's kind (no discovery needed for ours).
pub fn resource(api_version: &str, kind: &str) -> Option<(ApiResource, bool)> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let (plural, namespaced) = match (group, kind) {
        ("", "Namespace") => ("namespaces", false),
        ("batch", "Job") => ("jobs", true),
        ("apps", "ReplicaSet") => ("replicasets", true),
        ("apps", "StatefulSet") => ("statefulsets", true),
        ("kwok.x-k8s.io", "Stage") => ("stages", false),
        ("scheduling.k8s.io", "PriorityClass") => ("priorityclasses", false),
        // The kinds kgpu reads (nodes, pods, Kueue, Volcano).
        _ => crate::sources::kinds::find(group, kind).map(|k| (k.plural, k.namespaced))?,
    };
    Some((ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural), namespaced))
}

/// The kinds kgpu writes itself are known; any other kind in your own
/// manifests (a RuntimeClass, a PriorityClass) is looked up by discovery.
async fn resolve(client: &Client, api_version: &str, kind: &str) -> Option<(ApiResource, bool)> {
    if let Some(known) = resource(api_version, kind) {
        return Some(known);
    }
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (ar, caps) = kube::discovery::pinned_kind(client, &gvk).await.ok()?;
    Some((ar, caps.scope == kube::discovery::Scope::Namespaced))
}

fn api(client: &Client, ar: &ApiResource, namespaced: bool, namespace: Option<&str>) -> Api<DynamicObject> {
    match (namespaced, namespace) {
        (true, Some(ns)) => Api::namespaced_with(client.clone(), ns, ar),
        _ => Api::all_with(client.clone(), ar),
    }
}

#[derive(Debug, Default)]
pub struct Summary {
    pub applied: usize,
    /// Kinds skipped because their CRDs are not installed.
    pub missing: Vec<String>,
}

fn group_of(api_version: &str) -> &str {
    api_version.split_once('/').map_or("", |(g, _)| g)
}

/// Applies `docs` in order. `dry_run` uses server-side dry run.
pub async fn apply(
    client: &Client,
    docs: &[Value],
    dry_run: bool,
    mut progress: impl FnMut(&str),
) -> Result<Summary, ApplyError> {
    let mut summary = Summary::default();
    let mut missing_groups: Vec<String> = Vec::new();
    let mut params = PatchParams::apply(FIELD_MANAGER).force();
    params.dry_run = dry_run;
    for doc in docs {
        let api_version = doc["apiVersion"].as_str().ok_or(ApplyError::Malformed("apiVersion"))?;
        let kind = doc["kind"].as_str().ok_or(ApplyError::Malformed("kind"))?;
        let name = doc["metadata"]["name"].as_str().ok_or(ApplyError::Malformed("metadata.name"))?;
        let namespace = doc["metadata"]["namespace"].as_str();
        let group = group_of(api_version).to_string();
        if missing_groups.contains(&group) {
            continue;
        }
        let Some((ar, namespaced)) = resolve(client, api_version, kind).await else {
            return Err(ApplyError::Api {
                kind: kind.into(),
                name: name.into(),
                message: format!("the cluster serves no kind {kind} in {api_version}"),
            });
        };
        let api = api(client, &ar, namespaced, namespace);
        let mut object = doc.clone();
        let status = object.as_object_mut().and_then(|m| m.remove("status"));
        match api.patch(name, &params, &Patch::Apply(&object)).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 && !group.is_empty() => {
                progress(&format!("skipping {group} objects: the CRDs are not installed in this cluster"));
                summary.missing.push(group.clone());
                missing_groups.push(group);
                continue;
            }
            Err(kube::Error::Api(s)) if s.code == 403 => {
                return Err(ApplyError::Forbidden {
                    verb: "patch".into(),
                    resource: format!("{}.{}", ar.plural, ar.group),
                    message: s.message.clone(),
                });
            }
            Err(e) => return Err(ApplyError::Api { kind: kind.into(), name: name.into(), message: short_error(&e) }),
        }
        if let Some(status) = status {
            let patch = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}, "status": status});
            match api.patch_status(name, &params, &Patch::Apply(&patch)).await {
                Ok(_) => {}
                // No status subresource (Volcano's PodGroup CRD): status is part of the object.
                Err(kube::Error::Api(s)) if s.code == 404 => {
                    if let Err(e) = api.patch(name, &params, &Patch::Apply(doc)).await {
                        return Err(ApplyError::Api {
                            kind: kind.into(),
                            name: name.into(),
                            message: format!("status: {}", short_error(&e)),
                        });
                    }
                }
                Err(e) => {
                    return Err(ApplyError::Api {
                        kind: kind.into(),
                        name: name.into(),
                        message: format!("status: {}", short_error(&e)),
                    });
                }
            }
        }
        summary.applied += 1;
        progress(&format!("{} {kind}/{name}", if dry_run { "would apply" } else { "applied" }));
    }
    Ok(summary)
}

/// Kinds whose objects own pods: deleted first, so their controllers (where
/// a controller manager runs) do not recreate the pods deleted after them.
const OWNER_KINDS: [&str; 3] = ["Job", "ReplicaSet", "StatefulSet"];

/// Deletes what `docs` created: the pods' controllers, then the pods at once
/// (no grace period, finalizers lifted: there may be no kubelet or
/// controller to let them go), then the rest. Namespaces stay: without a
/// namespace controller they would hang in Terminating. Returns how many
/// objects were deleted.
pub async fn delete(
    client: &Client,
    docs: &[Value],
    scenario: &str,
    mut progress: impl FnMut(&str),
) -> Result<usize, ApplyError> {
    let mut deleted = 0;
    let params = DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() };
    let owners = docs.iter().filter(|d| d["kind"].as_str().is_some_and(|k| OWNER_KINDS.contains(&k)));
    for doc in owners {
        deleted += delete_one(client, doc, &DeleteParams::background(), &mut progress).await?;
    }
    // Then pods (and any pod carrying the scenario label), then the rest in reverse.
    if let Some((ar, _)) = resource("v1", "Pod") {
        let pods: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        let lp = ListParams::default().labels(&format!("{SCENARIO_LABEL}={scenario}"));
        match pods.list(&lp).await {
            Ok(list) => {
                for p in list.items {
                    let (Some(name), Some(ns)) = (p.metadata.name.clone(), p.metadata.namespace.clone()) else {
                        continue;
                    };
                    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
                    if p.metadata.finalizers.as_ref().is_some_and(|f| !f.is_empty()) {
                        let lift = json!({"metadata": {"finalizers": null}});
                        let _ = api.patch(&name, &PatchParams::default(), &Patch::Merge(&lift)).await;
                    }
                    if api.delete(&name, &params).await.is_ok() {
                        deleted += 1;
                        progress(&format!("deleted Pod/{name}"));
                    }
                }
            }
            Err(kube::Error::Api(s)) if s.code == 403 => {
                return Err(ApplyError::Forbidden {
                    verb: "list".into(),
                    resource: "pods".into(),
                    message: s.message.clone(),
                });
            }
            Err(e) => return Err(ApplyError::Api { kind: "Pod".into(), name: "*".into(), message: short_error(&e) }),
        }
    }
    for doc in docs.iter().rev() {
        if doc["kind"].as_str().is_some_and(|k| matches!(k, "Namespace" | "Pod") || OWNER_KINDS.contains(&k)) {
            continue;
        }
        deleted += delete_one(client, doc, &params, &mut progress).await?;
    }
    Ok(deleted)
}

/// Deletes the object a manifest describes: 1 if it was there, 0 if not.
async fn delete_one(
    client: &Client,
    doc: &Value,
    params: &DeleteParams,
    progress: &mut impl FnMut(&str),
) -> Result<usize, ApplyError> {
    let (Some(api_version), Some(kind), Some(name)) =
        (doc["apiVersion"].as_str(), doc["kind"].as_str(), doc["metadata"]["name"].as_str())
    else {
        return Ok(0);
    };
    let Some((ar, namespaced)) = resolve(client, api_version, kind).await else { return Ok(0) };
    let api = api(client, &ar, namespaced, doc["metadata"]["namespace"].as_str());
    match api.delete(name, params).await {
        Ok(_) => {
            progress(&format!("deleted {kind}/{name}"));
            Ok(1)
        }
        // Gone already, or its CRD is not installed.
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(0),
        Err(kube::Error::Api(s)) if s.code == 403 => Err(ApplyError::Forbidden {
            verb: "delete".into(),
            resource: format!("{}.{}", ar.plural, ar.group),
            message: s.message.clone(),
        }),
        Err(e) => Err(ApplyError::Api { kind: kind.into(), name: name.into(), message: short_error(&e) }),
    }
}

#[derive(Debug, Error)]
pub enum YamlError {
    #[error(
        "flow collections ([ or {{) nested {depth} deep by line {line}; kgpu reads at most {MAX_FLOW_DEPTH} (Kubernetes objects nest a few)"
    )]
    TooDeep { depth: usize, line: usize },
    #[error(transparent)]
    Parse(#[from] serde_yaml::Error),
}

/// How deep `[`/`{` may nest. The YAML scanner's work per token grows with
/// the depth (a 400 KB `[[[…` took minutes), so deeper text is refused
/// before it is parsed; its own recursion limit catches block nesting.
pub const MAX_FLOW_DEPTH: usize = 256;

/// The first place where flow collections may nest deeper than `max`, in
/// one pass. Every `[`/`{` counts, in quoted scalars and comments too, and a
/// `]`/`}` in one only closes what opened inside it, so a quote the scan
/// takes for one YAML does not (a block scalar's `'`) cannot hide nesting.
/// A quote opens a quoted scalar only where YAML starts a scalar (a line's
/// start, after `[`, `{`, `,`, an indicator and a space, or a node's anchor
/// or tag): inside a plain scalar (`x-'b`, `it's`, `foo 'bar`) it is text,
/// and a `]` in a real string is never taken for a real one. A string of
/// JSON with balanced brackets costs nothing; only hundreds of unmatched
/// brackets in strings are refused.
fn flow_too_deep(text: &str, max: usize) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    let (mut depth, mut line) = (0usize, 1usize);
    // The quoted scalar or comment being read, and the depth it began at.
    let mut quote: Option<u8> = None;
    let mut comment = false;
    let mut floor = 0usize;
    let mut scalar_start = true;
    let mut previous = b'\n';
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let next = bytes.get(i + 1).copied();
        let in_text = quote.is_some() || comment;
        match b {
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return Some((depth, line));
                }
            }
            b']' | b'}' if !in_text || depth > floor => depth = depth.saturating_sub(1),
            _ => {}
        }
        let space_after = next.is_none_or(|n| n.is_ascii_whitespace());
        if b == b'\n' {
            line += 1;
            comment = false;
            scalar_start |= quote.is_none();
        } else if comment {
        } else if let Some(q) = quote {
            if q == b'"' && b == b'\\' && next.is_some_and(|n| n != b'\n') {
                // `\"` inside "…": the escaped byte is text (not a line's end).
                i += 1;
            } else if q == b'\'' && b == q && next == Some(b'\'') {
                // `''` inside '…' is one quote.
                i += 1;
            } else if b == q {
                quote = None;
                scalar_start = false;
            }
        } else {
            match b {
                b' ' | b'\t' | b'\r' => {}
                b'#' if previous.is_ascii_whitespace() => {
                    comment = true;
                    floor = depth;
                }
                b'"' | b'\'' if scalar_start => {
                    quote = Some(b);
                    floor = depth;
                }
                b'[' | b'{' => scalar_start = true,
                // In a flow collection, after `,` or `:` a scalar may start.
                b',' => scalar_start = depth > 0,
                b':' => scalar_start = space_after || depth > 0,
                b'-' | b'?' => scalar_start = space_after,
                // A node's anchor, tag or alias: the scalar starts after it.
                b'&' | b'!' | b'*' if scalar_start => {
                    while bytes.get(i + 1).is_some_and(|n| !b" \t\r\n,[]{}".contains(n)) {
                        i += 1;
                    }
                }
                _ => scalar_start = false,
            }
        }
        previous = b;
        i += 1;
    }
    None
}

/// Parses multi-document YAML into JSON values (empty documents skipped),
/// within a budget proportional to the text (`bounded_value`).
pub fn parse_yaml(text: &str) -> Result<Vec<Value>, YamlError> {
    let budget = budget_for(text.len());
    let mut out = Vec::new();
    each_yaml_document(text, |doc| {
        let v = Bounded(&budget).deserialize(doc)?;
        if !v.is_null() {
            out.push(v);
        }
        Ok(())
    })?;
    Ok(out)
}

/// Refuses text whose flow collections nest too deep for the parser.
pub fn check_depth(text: &str) -> Result<(), YamlError> {
    match flow_too_deep(text, MAX_FLOW_DEPTH) {
        Some((depth, line)) => Err(YamlError::TooDeep { depth, line }),
        None => Ok(()),
    }
}

/// Hands each document of multi-document YAML to `read`, once the text is
/// known not to nest too deep for the parser.
pub fn each_yaml_document(
    text: &str,
    mut read: impl FnMut(serde_yaml::Deserializer<'_>) -> Result<(), serde_yaml::Error>,
) -> Result<(), YamlError> {
    check_depth(text)?;
    for doc in serde_yaml::Deserializer::from_str(text) {
        read(doc)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_flow_nesting_is_refused_before_parsing_and_strings_may_hold_brackets() {
        let deep = format!("items: {}{}\n", "[".repeat(200_000), "]".repeat(200_000));
        match parse_yaml(&deep) {
            Err(YamlError::TooDeep { depth, line }) => assert_eq!((depth, line), (MAX_FLOW_DEPTH + 1, 1)),
            other => panic!("{other:?}"),
        }
        // Unmatched brackets in strings and comments count, a few dozen are fine.
        let brackets = "[".repeat(MAX_FLOW_DEPTH / 4);
        let harmless = format!(
            "kind: ConfigMap\nmetadata: {{name: x, labels: {{a: b}}}}\ndata:\n  q: \"{brackets}\"\n  s: '{brackets}'\n  it's: fine # {brackets}\n"
        );
        let docs = parse_yaml(&harmless).unwrap();
        assert_eq!(docs[0]["data"]["q"], Value::String(brackets.clone()));
        assert_eq!(docs[0]["metadata"]["labels"]["a"], "b");
        assert_eq!(flow_too_deep("a: [[1], {b: 2}]\n# [x] {y}\n", 2), None);
        assert_eq!(flow_too_deep("a: [[1], {b: 2}]\n# [[[[\n", 2), Some((3, 2)), "left open in a comment, counted");
        assert_eq!(flow_too_deep("a: [[1], {b: 2}]\nc: [[[3]]]\n", 2), Some((3, 2)));
    }

    /// A review's attack: brackets, a plain scalar holding a quote, a real
    /// string of `]`, then more brackets than the limit.
    fn phased(plain: &str) -> String {
        let half = "[".repeat(200);
        format!("y: {half}{plain}, '{}', 'z', {half}q{}\n", "]".repeat(210), "]".repeat(400))
    }

    #[test]
    fn nesting_cannot_hide_behind_what_the_scan_takes_for_quotes_or_comments() {
        let deep = "[".repeat(MAX_FLOW_DEPTH + 1);
        for (what, text) in [
            ("a quote in a plain scalar", format!("x: a-'\ny: {deep}\n")),
            ("a quote after a space in a plain scalar", format!("x: foo 'bar\ny: {deep}\n")),
            ("a quote in a block scalar", format!("a: |\n  'x\nb: {deep}\n")),
            ("closing brackets in strings", format!("y: {}\n", "[ \"]\", ".repeat(MAX_FLOW_DEPTH + 1))),
            ("an escaped quote", format!("y: {}\n", "[ \"\\\"]\", ".repeat(MAX_FLOW_DEPTH + 1))),
            ("closing brackets in comments", format!("y: {}\n", "[ # ]\n".repeat(MAX_FLOW_DEPTH + 1))),
            // A quote inside a plain scalar is text: the real string after it hides nothing.
            ("a plain scalar's quote, then a real string of closers", phased("x-'b")),
            ("a plain scalar's quote after a space", phased("a 'b")),
            ("an escape at a line's end", format!("a: \"x\\\n\"\nb: {deep}\n")),
            ("an anchored string of closers", format!("y: [{}]\n", "&a ']]', [".repeat(MAX_FLOW_DEPTH + 1))),
        ] {
            assert!(matches!(parse_yaml(&text), Err(YamlError::TooDeep { .. })), "{what}");
        }
        // JSON in an annotation, as kubectl's last-applied-configuration: balanced, free.
        let annotation = r#"{\"spec\":{\"containers\":[{\"resources\":{\"limits\":{}}}]}}"#;
        let many = format!("items:\n{}", format!("- metadata: {{annotations: {{a: \"{annotation}\"}}}}\n").repeat(500));
        assert_eq!(parse_yaml(&many).unwrap()[0]["items"].as_array().unwrap().len(), 500);
    }
}
