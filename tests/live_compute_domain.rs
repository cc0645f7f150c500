//! NVIDIA's ComputeDomains on the real API server, with the driver's own CRD
//! (`tests/fixtures/dra-driver/`): before the CRD is installed the feed is
//! "not installed" and nothing else breaks; once it is, the GB200 rack of
//! `tests/fixtures/verdicts/hand-made/compute-domain.yaml` created on the
//! server (the domain's uid the server's, written into its claims and node
//! labels as the driver does) gives the same pending verdicts read live as
//! read from the dump. Only the API server runs: nothing may start, delete
//! or relabel these objects meanwhile.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

mod support;

use std::process::Command;

use kgpu::lab::cluster::Options;
use serde_json::Value;
use support::controlplane::ControlPlane;
use support::kube::{client, namespace};

const RACK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/verdicts/hand-made/compute-domain.yaml");
const CRD: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/dra-driver/resource.nvidia.com_computedomains.yaml");
/// The fixture's uid of ml/nccl-cd, replaced by the server's.
const FIXTURE_UID: &str = "5e0c5a4e-8d0b-4d8e-9a31-7f0a2c9b6e01";

fn snapshot(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_kgpu")).args(["snapshot", "-o", "json"]).args(args).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// What a pending item says, times aside.
fn verdicts(doc: &Value) -> Vec<(String, String, String, String)> {
    let mut out: Vec<_> = doc["pending"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let s = |k: &str| p[k].as_str().unwrap_or_default().to_string();
            (format!("{}/{}", s("namespace"), s("name")), s("blockingStep"), s("summary"), p["unblock"].to_string())
        })
        .collect();
    out.sort();
    out
}

/// The fixture's objects as the server takes them: no server-set metadata.
fn objects(text: &str) -> Vec<Value> {
    let mut docs = kgpu::sources::file::documents(std::path::Path::new(RACK), text).unwrap();
    for d in &mut docs {
        let meta = d["metadata"].as_object_mut().unwrap();
        for server_field in ["uid", "resourceVersion", "creationTimestamp"] {
            meta.remove(server_field);
        }
    }
    docs
}

#[tokio::test]
async fn compute_domains_are_read_live_as_from_the_dump() {
    if !ControlPlane::enabled() {
        eprintln!("skipped: KGPU_SKIP_LIVE=1");
        return;
    }
    let cp = ControlPlane::start_with(|dir, binaries| Options {
        scheduler: false,
        controllers: false,
        kwok: false,
        ..Options::control_plane(dir, binaries)
    })
    .unwrap();
    let kubeconfig = cp.kubeconfig.to_str().unwrap().to_string();
    let live = || snapshot(&["--agents", "off", "--kubeconfig", &kubeconfig]);

    // Without NVIDIA's CRD: said, not an error.
    let doc = live();
    assert_eq!(doc["feeds"]["dra computedomains"]["state"], "not installed", "{}", doc["feeds"]);

    cp.install_crds(&[CRD.into()]).unwrap();
    let client = client(&cp).await;
    for ns in ["ml", "infer", "nvidia-dra-driver-gpu"] {
        namespace(&client, ns).await;
    }
    // The domain first: its claims and the nodes' labels name it by the uid the server gives it.
    let text = std::fs::read_to_string(RACK).unwrap();
    let (domains, _): (Vec<Value>, Vec<Value>) = objects(&text).into_iter().partition(|d| d["kind"] == "ComputeDomain");
    kgpu::sources::kube::apply::apply(&client, &domains, false, |_| {}).await.unwrap();
    let api = kube::Api::<kube::api::DynamicObject>::namespaced_with(
        client.clone(),
        "ml",
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("resource.nvidia.com", "v1beta1", "ComputeDomain"),
            "computedomains",
        ),
    );
    let uid = api.get("nccl-cd").await.unwrap().metadata.uid.unwrap();
    let rest: Vec<Value> =
        objects(&text.replace(FIXTURE_UID, &uid)).into_iter().filter(|d| d["kind"] != "ComputeDomain").collect();
    kgpu::sources::kube::apply::apply(&client, &rest, false, |_| {}).await.unwrap();

    // The server kept the status the controller writes (its status subresource).
    let stored = api.get("nccl-cd").await.unwrap();
    assert_eq!(stored.data["status"]["nodes"][1]["status"], "NotReady", "{:?}", stored.data);

    let doc = live();
    assert_eq!(doc["feeds"]["dra computedomains"]["state"], "live", "{}", doc["feeds"]);
    let read_live = verdicts(&doc);
    let from_dump = verdicts(&snapshot(&["--file", RACK]));
    assert_eq!(read_live.len(), 4, "{read_live:#?}");
    assert_eq!(read_live, from_dump);
}
