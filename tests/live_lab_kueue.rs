//! The lab with the real Kueue manager (`kgpu lab up --kueue`): a scenario's
//! Workload over quota is held by Kueue itself, and kgpu's quota step reads
//! Kueue's verdict and its numbers.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

mod support;

use std::time::Duration;

use kgpu::analysis::{self, Thresholds};
use kgpu::lab::cluster::Options;
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use support::controlplane::ControlPlane;
use support::kube::{client, eventually};

#[tokio::test]
async fn kueue_holds_the_workload_over_quota_and_kgpu_says_so() {
    if !ControlPlane::enabled() {
        return;
    }
    let lab = ControlPlane::start_with(|dir, bins| Options::living(dir, bins, true)).unwrap();
    let client = client(&lab).await;
    kgpu::runtime::scenario::apply_now(&client, "quota-starvation", false, |_| {}).await.unwrap();
    let gvk = GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta2", "Workload");
    let workloads: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "team-a", &ApiResource::from_gvk_with_plural(&gvk, "workloads"));
    // `status.resourceRequests` is Kueue's own: the scenario does not write it.
    let message = eventually("Kueue's verdict on the pending workload", Duration::from_secs(60), || async {
        let w = workloads.get("job-finetune-xl-399ef").await.ok()?;
        w.data["status"]["resourceRequests"].as_array()?;
        let c = w.data["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == "QuotaReserved")?.clone();
        (c["status"] == "False").then(|| c["message"].as_str().unwrap_or("").to_string())
    })
    .await;
    assert!(
        message.contains("insufficient unused quota for nvidia.com/gpu in flavor h100, 16 more needed"),
        "{message}"
    );
    // The admitted ones stay admitted under Kueue's own accounting.
    let admitted = workloads.get("job-pretrain-7b-18093").await.unwrap();
    let conditions = admitted.data["status"]["conditions"].as_array().unwrap().clone();
    assert!(conditions.iter().any(|c| c["type"] == "Admitted" && c["status"] == "True"), "{conditions:?}");

    let target = kgpu::sources::kube::client::Target { kubeconfig: Some(lab.kubeconfig.clone()), context: None };
    let (snap, now) = kgpu::runtime::load::kube(&target, &Default::default()).await.unwrap();
    let a = analysis::analyze(&snap, now, &Thresholds::default());
    let item = a.pending.iter().find(|p| p.name == "job-finetune-xl-399ef").expect("pending in kgpu");
    assert_eq!(item.blocking_str(), "quota", "{}", item.summary);
    let quota = &item.steps[0];
    assert!(
        quota.details.iter().any(|d| d.contains("nominal 16, reserved 16, borrowing limit 0, available now 0")),
        "{:?}",
        quota.details
    );
    assert!(item.unblock.iter().any(|u| u.starts_with("16 more nvidia.com/gpu")), "{:?}", item.unblock);
}
