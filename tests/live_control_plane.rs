//! The test control plane itself: a real kube-scheduler answers a pod that
//! asks for more GPUs than any node has with a real FailedScheduling event,
//! read back with kube-rs; the Kueue and Volcano CRDs install.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use support::controlplane::ControlPlane;
use support::kube::{client, eventually, gpu_node, gpu_pod, namespace, unique};

#[tokio::test]
async fn real_scheduler_refuses_eight_gpus_on_four_gpu_nodes() {
    let Some(cp) = ControlPlane::shared_if_enabled() else { return };
    let client = client(cp).await;
    let pool = unique("four");
    for i in 0..3 {
        gpu_node(&client, &format!("{pool}-{i}"), 4, json!({"kgpu.test/pool": pool}), json!([])).await;
    }
    let ns = unique("sched");
    namespace(&client, &ns).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let selector = json!({"nodeSelector": {"kgpu.test/pool": pool}});
    pods.create(&PostParams::default(), &gpu_pod("two", 2, selector.clone())).await.unwrap();
    pods.create(&PostParams::default(), &gpu_pod("eight", 8, selector)).await.unwrap();

    // The 2-GPU pod is bound by the real scheduler.
    let node = eventually("the 2-GPU pod bound", Duration::from_secs(30), || {
        let pods = pods.clone();
        async move { pods.get("two").await.ok().and_then(|p| p.spec.and_then(|s| s.node_name)) }
    })
    .await;
    assert!(node.starts_with(&pool));

    // The 8-GPU pod gets a FailedScheduling event.
    let events: Api<Event> = Api::namespaced(client.clone(), &ns);
    let message = eventually("FailedScheduling for the 8-GPU pod", Duration::from_secs(30), || {
        let events = events.clone();
        async move {
            let list = events.list(&ListParams::default()).await.ok()?;
            list.items
                .into_iter()
                .find(|e| {
                    e.reason.as_deref() == Some("FailedScheduling")
                        && e.involved_object.name.as_deref() == Some("eight")
                })
                .and_then(|e| e.message)
        }
    })
    .await;
    eprintln!("real scheduler: {message}");
    assert!(message.starts_with("0/"), "{message}");
    assert!(message.contains(" nodes are available: "), "{message}");
    assert!(message.contains("3 Insufficient nvidia.com/gpu"), "{message}");
    // kgpu reads the real message and maps it to its own codes.
    let parsed = kgpu::analysis::scheduler_msg::parse(&message);
    assert!(parsed.recognised, "{parsed:?}");
    let codes: Vec<Option<String>> =
        parsed.reasons.iter().map(|(r, _)| kgpu::analysis::scheduler_msg::reason_code(r)).collect();
    assert!(codes.contains(&Some("insufficient-gpu".to_string())), "{codes:?}");
    assert!(!parsed.preemption.is_empty(), "the PostFilter part is read too: {parsed:?}");
}

#[tokio::test]
async fn kueue_and_volcano_crds_install() {
    let Some(cp) = ControlPlane::shared_if_enabled() else { return };
    let kueue = cp.kueue_crds();
    let volcano = cp.volcano_crds();
    assert!(kueue.len() >= 10, "{kueue:?}");
    assert_eq!(volcano.len(), 2, "{volcano:?}");
    cp.install_crds(&kueue).unwrap();
    cp.install_crds(&volcano).unwrap();
    let (code, body) =
        support::controlplane::curl(&cp.server, &cp.tokens.admin, &[], "/apis/kueue.x-k8s.io/v1beta2").unwrap();
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("\"workloads\""));
    let (code, _) =
        support::controlplane::curl(&cp.server, &cp.tokens.admin, &[], "/apis/scheduling.volcano.sh/v1beta1").unwrap();
    assert_eq!(code, 200);
}

/// A component that stops on its own (killed here) is named with its exit
/// and its log's last lines, which `kgpu lab up` prints once: the lab used
/// to go on without it and say nothing.
#[test]
fn a_component_that_dies_is_noticed_with_its_log() {
    if !ControlPlane::enabled() {
        return;
    }
    let cp = ControlPlane::start().unwrap();
    assert!(cp.stopped().is_empty(), "all running at first");
    let (_, pid) = cp
        .processes()
        .into_iter()
        .find(|(c, _)| *c == kgpu::lab::cluster::Component::Scheduler)
        .expect("the scheduler runs");
    assert!(std::process::Command::new("kill").args(["-9", &pid.to_string()]).status().unwrap().success());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let stopped = loop {
        let stopped = cp.stopped();
        if !stopped.is_empty() || std::time::Instant::now() > deadline {
            break stopped;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(stopped.len(), 1, "{stopped:?}");
    assert_eq!(stopped[0].0, kgpu::lab::cluster::Component::Scheduler);
    assert!(stopped[0].1.contains("SIGKILL") && stopped[0].1.contains("kube-scheduler.log"), "{}", stopped[0].1);
}

/// etcd holds every Secret of the lab: on loopback it still asks each client
/// for a certificate of the lab's own CA (files for the user alone), so
/// another local user cannot read it. With the certificate, it answers.
#[test]
fn etcd_answers_only_clients_with_the_labs_certificate() {
    let Some(cp) = ControlPlane::shared_if_enabled() else { return };
    let range = format!("{}/v3/kv/range", cp.etcd_url());
    let body = r#"{"key":"L3JlZ2lzdHJ5","range_end":"L3JlZ2lzdHJ6","count_only":true}"#;
    let ask = |with_cert: bool| {
        let mut curl = std::process::Command::new("curl");
        curl.args(["-s", "--max-time", "10", "-X", "POST", "-d", body]).arg("--cacert").arg(&cp.etcd_certs.ca);
        if with_cert {
            curl.arg("--cert").arg(&cp.etcd_certs.client_cert).arg("--key").arg(&cp.etcd_certs.client_key);
        }
        curl.arg(&range).output().unwrap()
    };
    let refused = ask(false);
    assert!(!refused.status.success(), "no certificate, no answer: {}", String::from_utf8_lossy(&refused.stdout));
    let plain = std::process::Command::new("curl")
        .args(["-s", "--max-time", "10", "-X", "POST", "-d", body])
        .arg(range.replace("https://", "http://"))
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&plain.stdout).contains("\"count\""),
        "no plain HTTP: {}",
        String::from_utf8_lossy(&plain.stdout)
    );
    let answered = ask(true);
    assert!(answered.status.success(), "{}", String::from_utf8_lossy(&answered.stderr));
    assert!(
        String::from_utf8_lossy(&answered.stdout).contains("\"count\""),
        "{}",
        String::from_utf8_lossy(&answered.stdout)
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&cp.etcd_certs.client_key).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the client key is the user's alone");
}
