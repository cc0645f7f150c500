//! DRA on a server before 1.34: the real API server, started to serve only
//! DRA's betas (`resource.k8s.io/v1beta2` and `v1beta1`, as a 1.33 cluster
//! with the beta enabled), answers 404 for v1. kgpu reads v1beta2 instead,
//! says so in the feed's health, and holds the same devices, classes, claims
//! and templates as it reads from v1 (the DRA cluster captured from the real
//! scheduler, `tests/fixtures/verdicts/dra/`); the same objects listed at
//! v1beta1 — the server's own conversion, devices under `basic`, requests
//! without `exactly` — convert to the same records.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

mod support;

use std::collections::BTreeMap;
use std::process::Command;

use kgpu::lab::cluster::Options;
use kgpu::model::{Cluster, DraKey, DraObject, Feed, Object, SourceInfo, SourceKind};
use kgpu::sources::kinds::{self, Kind};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::controlplane::ControlPlane;
use support::kube::{client, namespace, source, until};

const CAPTURED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/verdicts/dra/cluster.yaml");

const DRA_KINDS: [&Kind; 4] =
    [&kinds::DEVICE_CLASS, &kinds::RESOURCE_SLICE, &kinds::RESOURCE_CLAIM_TEMPLATE, &kinds::RESOURCE_CLAIM];

/// The records compared: a claim's creation time is the server's, not the capture's.
fn comparable(dra: impl IntoIterator<Item = (DraKey, DraObject)>) -> BTreeMap<DraKey, DraObject> {
    dra.into_iter()
        .map(|(key, mut object)| {
            if let DraObject::Claim(c) = &mut object {
                c.created = 0;
            }
            (key, object)
        })
        .collect()
}

/// What kgpu reads of the captured cluster's DRA objects (`resource.k8s.io/v1`).
fn read_from_v1() -> BTreeMap<DraKey, DraObject> {
    let (events, _, _) = kgpu::sources::file::load(&[CAPTURED.into()]).unwrap();
    let mut cluster = Cluster::new(SourceInfo { kind: SourceKind::File, name: "dra".into() });
    cluster.apply_all(events);
    comparable(cluster.snapshot().dra.iter().map(|(k, o)| (k.clone(), (**o).clone())))
}

fn api(client: &kube::Client, kind: &Kind, version: &str, namespace: Option<&str>) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(kind.group, version, kind.kind), kind.plural);
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    }
}

/// Creates the captured DRA objects at v1beta2 (v1's shape), claims with
/// their status (allocations, reservedFor) as the scheduler wrote it.
async fn create_at_v1beta2(client: &kube::Client) -> usize {
    let text = std::fs::read_to_string(CAPTURED).unwrap();
    let objects = kgpu::sources::file::documents(std::path::Path::new(CAPTURED), &text).unwrap();
    let mut created = 0;
    for mut object in objects {
        let kind = object["kind"].as_str().unwrap_or_default().to_string();
        let Some(kind) = DRA_KINDS.into_iter().find(|k| k.kind == kind) else { continue };
        let meta = object["metadata"].as_object_mut().unwrap();
        for server_field in ["uid", "resourceVersion", "creationTimestamp", "generation", "managedFields"] {
            meta.remove(server_field);
        }
        let ns = meta.get("namespace").and_then(Value::as_str).map(str::to_string);
        let name = meta["name"].as_str().unwrap().to_string();
        object["apiVersion"] = kind.api_version_at("v1beta2").into();
        let status = object.as_object_mut().unwrap().remove("status");
        let api = api(client, kind, "v1beta2", ns.as_deref());
        api.create(&PostParams::default(), &serde_json::from_value(object).unwrap()).await.unwrap();
        if let Some(status) = status {
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(json!({"status": status}))).await.unwrap();
        }
        created += 1;
    }
    created
}

#[tokio::test]
async fn dra_is_read_from_a_server_that_serves_only_its_betas() {
    if !ControlPlane::enabled() {
        eprintln!("skipped: KGPU_SKIP_LIVE=1");
        return;
    }
    let betas_only =
        "--runtime-config=resource.k8s.io/v1=false,resource.k8s.io/v1beta2=true,resource.k8s.io/v1beta1=true";
    let cp = ControlPlane::start_with(|dir, binaries| Options {
        apiserver_flags: vec![betas_only.into()],
        // A 1.36 scheduler waits for DRA's v1 (a 1.33 one would not); nothing here is scheduled.
        scheduler: false,
        ..Options::control_plane(dir, binaries)
    })
    .unwrap();
    let client = client(&cp).await;
    // The server is what the test says it is: no v1, both betas.
    let (code, _) = support::controlplane::curl(&cp.server, &cp.tokens.admin, &[], "/apis/resource.k8s.io/v1").unwrap();
    assert_eq!(code, 404);
    for beta in ["v1beta2", "v1beta1"] {
        let path = format!("/apis/resource.k8s.io/{beta}");
        let (code, body) = support::controlplane::curl(&cp.server, &cp.tokens.admin, &[], &path).unwrap();
        assert_eq!(code, 200, "{beta}: {body}");
    }

    namespace(&client, "ml").await;
    let expected = read_from_v1();
    assert_eq!(create_at_v1beta2(&client).await, expected.len());
    assert!(expected.values().any(|o| matches!(o, DraObject::Claim(c) if !c.allocated.is_empty())));

    // The watchers fall back to v1beta2 and read what v1 would have given.
    let (snapshots, _tasks) = source(&cp, &cp.kubeconfig).await;
    until(&snapshots, "the DRA objects read at v1beta2", |s| {
        comparable(s.dra.iter().map(|(k, o)| (k.clone(), (**o).clone()))) == expected
    })
    .await;
    let dra_feeds = [Feed::DeviceClasses, Feed::ResourceSlices, Feed::ResourceClaimTemplates, Feed::ResourceClaims];
    for feed in dra_feeds {
        let older = snapshots.borrow().feed(feed).and_then(|f| f.older_api.clone());
        assert_eq!(older.as_ref().map(|v| v.as_str()), Some("resource.k8s.io/v1beta2"), "{feed:?}");
    }

    // Said in the snapshot, text and JSON.
    let snapshot = |format: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_kgpu"))
            .args(["snapshot", "-o", format, "--agents", "off", "--kubeconfig"])
            .arg(&cp.kubeconfig)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let text = snapshot("text");
    assert!(
        text.contains(
            "feeds dra resourceslices, dra deviceclasses, dra resourceclaims, dra resourceclaimtemplates: read as resource.k8s.io/v1beta2"
        ),
        "{text}"
    );
    let doc: Value = serde_json::from_str(&snapshot("json")).unwrap();
    assert_eq!(doc["feeds"]["dra resourceslices"]["apiVersion"], "resource.k8s.io/v1beta2", "{}", doc["feeds"]);
    assert!(doc["feeds"]["nodes"].get("apiVersion").is_none());

    // The same objects at v1beta1, in its own shape, convert to the same records.
    let mut at_v1beta1 = Vec::new();
    for kind in DRA_KINDS {
        for item in api(&client, kind, "v1beta1", None).list(&ListParams::default()).await.unwrap() {
            let mut v = serde_json::to_value(&item).unwrap();
            v.as_object_mut().unwrap().entry("apiVersion").or_insert_with(|| kind.api_version_at("v1beta1").into());
            at_v1beta1.push((kind.kind, v));
        }
    }
    let shape = |kind: &str| at_v1beta1.iter().find(|(k, _)| *k == kind).map(|(_, v)| v.clone()).unwrap();
    assert!(shape("ResourceSlice")["spec"]["devices"][0]["basic"]["attributes"].is_object(), "v1beta1's own shape");
    assert!(shape("ResourceClaim")["spec"]["devices"]["requests"][0]["deviceClassName"].is_string());
    let read: Vec<(DraKey, DraObject)> = at_v1beta1
        .iter()
        .map(|(kind, v)| match (kinds::find("resource.k8s.io", kind).unwrap().convert)(v) {
            Ok(Object::Dra(o)) => (o.key(), o),
            other => panic!("{kind}: {other:?}"),
        })
        .collect();
    assert_eq!(comparable(read), expected);
}
