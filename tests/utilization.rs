//! Who holds GPUs idle: dcgm-exporter's real output read into the model,
//! the agents' reading, the analysis on hand-made clusters around the rule
//! (MIG slices, shared GPUs, finished pods, a GPU idle before its pod), and
//! the demo's idle holders read the way a script reads them.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

use std::process::Command;

use kgpu::agent::wire::{AgentSnapshot, GpuReport, PodRef};
use kgpu::analysis::usage;
use kgpu::model::build::pod;
use kgpu::model::{
    Cluster, DeviceReading, Feed, ModelEvent, NodeUsage, Object, PodKey, PodPhase, SourceInfo, SourceKind, Sym,
    UsageSource,
};
use kgpu::sources::dcgm;
use serde_json::Value;

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!("{}/tests/fixtures/dcgm-exporter/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn holders(r: &DeviceReading) -> Vec<String> {
    r.holders.iter().map(|k| k.to_string()).collect()
}

#[test]
fn dcgm_exporter_mig_output_gives_each_slice_its_pod_and_engine_activity() {
    let u = dcgm::parse("gsrh100-074", &fixture("h100-mig-kserve.prom"), 1000).unwrap();
    assert_eq!(u.source, UsageSource::DcgmExporter);
    assert_eq!(u.node.as_str(), "gsrh100-074");
    let slices: Vec<(u32, &str, Vec<String>, Option<f32>)> = u
        .devices
        .iter()
        .map(|d| {
            let s = d.slice.as_ref().unwrap();
            (s.id, s.profile.as_str(), holders(d), d.busy_pct)
        })
        .collect();
    assert_eq!(
        slices,
        [
            (
                7,
                "1g.10gb",
                vec!["model-playground-stg/text-embedding-predictor-00008-deployment-57946f6c67-vdtjl".into()],
                Some(0.0)
            ),
            (8, "1g.10gb", vec![], Some(0.0)),
            (
                9,
                "1g.10gb",
                vec!["model-playground-stg/tts-predictor-00011-deployment-5554f75554-8j8pl".into()],
                Some(0.0)
            ),
        ]
    );
    assert!(u.devices.iter().all(|d| d.gpu.as_str() == "GPU-58e8f5ea-13cc-013a-d88f-2bcf5ae8bc77" && d.index == 0));
}

#[test]
fn a_gpu_shared_by_two_pods_is_one_device_with_both_holders() {
    let u = dcgm::parse("n", &fixture("a100-mps-two-pods.prom"), 0).unwrap();
    assert_eq!(u.devices.len(), 1);
    let d = &u.devices[0];
    assert_eq!(
        holders(d),
        ["default/gpu-burn-deployment-1-85dc8ff699-clvh5", "vllm-inference/vllm-medgemma-4b-it-d599b4c99-f95nk"]
    );
    assert_eq!((d.memory_used_mib, d.busy_pct), (Some(15866), None));
}

#[test]
fn exporter_variants_in_the_wild_are_read() {
    // Pod mapping off: a busy GPU with no pod.
    let u = dcgm::parse("n", &fixture("gpu-util-no-pod.prom"), 0).unwrap();
    assert_eq!(u.devices.len(), 1);
    assert_eq!((u.devices[0].busy_pct, u.devices[0].holders.len()), (Some(44.0), 0));
    // Lower-case names, `uuid`, `pod_name`/`pod_namespace` (empty here).
    let u = dcgm::parse("n", &fixture("a100-legacy-pod-labels.prom"), 0).unwrap();
    let ids: Vec<(&str, u32)> = u.devices.iter().map(|d| (d.gpu.as_str(), d.slice.as_ref().unwrap().id)).collect();
    assert_eq!(
        ids,
        [
            ("GPU-6043e4b2-feaa-8010-34c7-61d1a01576bb", 1),
            ("GPU-ed1353d6-52ba-8793-7230-4d5d3eb68167", 1),
            ("GPU-ed1353d6-52ba-8793-7230-4d5d3eb68167", 2)
        ]
    );
    // The README's `{gpu="0", UUID=…}` (a space after the comma) and a
    // page without any utilization metric: said, not guessed.
    let err = dcgm::parse("n", &fixture("readme-no-pod-mapping.prom"), 0).unwrap_err();
    assert!(err.contains("none of its 3 samples"), "{err}");
    let err = dcgm::parse("n", &fixture("t4-dcgmproftester.prom"), 0).unwrap_err();
    assert!(err.contains("DCGM_FI_DEV_GPU_UTIL"), "{err}");
}

#[test]
fn the_readme_spacing_does_not_hide_the_uuid() {
    let text = fixture("readme-no-pod-mapping.prom").replace("DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_GPU_UTIL");
    let u = dcgm::parse("n", &text, 0).unwrap();
    assert_eq!(u.devices[0].gpu.as_str(), "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52");
}

fn cluster() -> Cluster {
    Cluster::new(SourceInfo { kind: SourceKind::Kube, name: "test".into() })
}

fn reading(gpu: &str, slice: Option<(&str, u32)>, pods: &[&str], busy: f32) -> DeviceReading {
    DeviceReading {
        gpu: Sym::new(gpu),
        index: 0,
        slice: slice.map(|(p, id)| kgpu::model::MigSlice { profile: Sym::new(p), id }),
        holders: pods.iter().map(|p| PodKey::new("ml", p)).collect(),
        busy_pct: Some(busy),
        memory_used_mib: Some(1000),
        idle_since: None,
    }
}

fn usage(node: &str, source: UsageSource, at: i64, devices: Vec<DeviceReading>) -> ModelEvent {
    ModelEvent::Upsert(Object::Usage(NodeUsage {
        problem: None,
        node: Sym::new(node),
        source,
        at,
        devices: devices.into(),
    }))
}

#[test]
fn idle_holders_are_ranked_by_idle_gpu_hours_with_mig_and_shared_gpus_weighed() {
    let mut c = cluster();
    for (name, start) in [("nb", 0), ("embed", 0), ("burn", 0), ("vllm", 0), ("train", 0), ("done", 0)] {
        let p = pod(name).ns("ml").on("n1").running().created(start);
        c.apply(ModelEvent::Upsert(Object::Pod(p.build())));
    }
    c.apply(ModelEvent::Upsert(Object::Pod(pod("done").ns("ml").on("n1").phase(PodPhase::Succeeded).build())));
    for t in [0, 3600, 7200] {
        c.apply(ModelEvent::Clock(t));
        c.apply(usage(
            "n1",
            UsageSource::DcgmExporter,
            t,
            vec![
                reading("GPU-a", None, &["nb"], 1.0),
                reading("GPU-b", Some(("3g.40gb", 1)), &["embed"], 0.0),
                reading("GPU-c", None, &["burn", "vllm"], 0.5),
                reading("GPU-d", None, &["train"], 97.0),
                reading("GPU-e", None, &["done"], 0.0),
            ],
        ));
    }
    let u = usage::analyze(&c.snapshot(), 7200);
    let ranked: Vec<(&str, f64, Option<i64>)> = u
        .holders
        .iter()
        .map(|h| (&*h.pod.name, (h.idle_gpu_hours * 1000.0).round() / 1000.0, h.idle_seconds))
        .collect();
    assert_eq!(
        ranked,
        [
            // 1 GPU × 2 h; a shared GPU is half each; a 3g slice is 3/7.
            ("nb", 2.0, Some(7200)),
            ("burn", 1.0, Some(7200)),
            ("vllm", 1.0, Some(7200)),
            ("embed", 0.857, Some(7200)),
            ("train", 0.0, None),
        ],
        "a finished pod holds nothing; the busy one comes last"
    );
    assert!(
        u.holders.iter().filter(|h| h.is_idle()).all(|h| h.idle_at_least),
        "idle at the first reading, never seen busy, the pods' start unknown: at least that long"
    );
    assert!((u.gpus_held - (1.0 + 3.0 / 7.0 + 1.0 + 1.0)).abs() < 1e-9);
    assert_eq!(u.nodes_by_source.get(&UsageSource::DcgmExporter), Some(&1));
}

#[test]
fn dcgm_exporter_is_believed_over_the_agent_for_a_node_it_reports() {
    let mut c = cluster();
    c.apply(ModelEvent::Upsert(Object::Pod(pod("p").ns("ml").on("n1").running().build())));
    c.apply(usage("n1", UsageSource::Agent, 10, vec![reading("GPU-a", None, &["p"], 80.0)]));
    c.apply(usage("n1", UsageSource::DcgmExporter, 10, vec![reading("GPU-a", None, &["p"], 0.0)]));
    let u = usage::analyze(&c.snapshot(), 10);
    assert_eq!(u.holders[0].source, UsageSource::DcgmExporter);
    assert_eq!(u.source_label(), "dcgm-exporter");
    assert_eq!(u.nodes_by_source.len(), 1, "one source per node");
}

#[test]
fn a_pod_given_a_gpu_idle_before_it_started_is_idle_only_since_it_started() {
    let mut c = cluster();
    c.apply(ModelEvent::Upsert(Object::Pod(pod("late").ns("ml").on("n1").running().created(5000).build())));
    // The agent's clock is per GPU: idle since long before this pod.
    let mut r = reading("GPU-a", None, &["late"], 0.0);
    r.idle_since = Some(100);
    c.apply(usage("n1", UsageSource::Agent, 6000, vec![r]));
    let h = &usage::analyze(&c.snapshot(), 6000).holders[0];
    assert_eq!((h.idle_seconds, h.idle_at_least), (Some(1000), false), "idle since it started: known");
}

#[test]
fn usage_history_survives_the_agents_resync_and_a_node_dropped_from_it_is_forgotten() {
    let mut c = cluster();
    let agents = |t: i64, nodes: &[&str]| ModelEvent::Resync {
        feed: Feed::Agents,
        objects: nodes
            .iter()
            .map(|n| {
                Object::Usage(NodeUsage {
                    problem: None,
                    node: Sym::new(n),
                    source: UsageSource::Agent,
                    at: t,
                    devices: vec![reading(&format!("GPU-{n}"), None, &["p"], 0.0)].into(),
                })
            })
            .collect(),
    };
    c.apply(agents(100, &["a", "b"]));
    c.apply(agents(400, &["a", "b"]));
    c.apply(agents(700, &["a"]));
    let snap = c.snapshot();
    assert_eq!(snap.usage.len(), 1);
    let a = &snap.usage[&(UsageSource::Agent, Sym::new("a"))];
    assert_eq!(a.devices[0].idle_seconds(), Some(600), "each poll is a resync; the history goes on");
}

#[test]
fn an_agents_snapshot_names_the_holders_of_whole_gpus_and_mig_instances() {
    let text = std::fs::read_to_string(format!(
        "{}/tests/fixtures/agent/h100-mig-all-balanced.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let fake: Value = serde_json::from_str(&text).unwrap();
    // The fixture is the fake backend's input; build the snapshot an agent would serve.
    let mig_uuid = fake["gpus"][0]["mig"]["instances"][0]["uuid"].as_str().map(str::to_string);
    let mut snap: AgentSnapshot = serde_json::from_value(serde_json::json!({
        "version": 1, "node": "n1", "collectedAt": 500, "backend": "fake",
        "nvml": {"available": true}, "podResources": {"available": true}
    }))
    .unwrap();
    let mut mig: GpuReport = serde_json::from_value(fake["gpus"][0].clone()).unwrap();
    mig.pods = vec![PodRef {
        namespace: "inference".into(),
        name: "embed-0".into(),
        container: "server".into(),
        device: mig_uuid.clone().unwrap_or_default(),
    }];
    let whole = GpuReport {
        index: 1,
        uuid: "GPU-whole".into(),
        utilization_pct: Some(2),
        memory_used_mib: 30_000,
        idle_since: Some(120),
        pods: vec![PodRef {
            namespace: "nb".into(),
            name: "nb-0".into(),
            container: "c".into(),
            device: "GPU-whole".into(),
        }],
        ..GpuReport::default()
    };
    snap.gpus = vec![mig, whole];
    let u = kgpu::sources::agents::usage_of(&snap, 0);
    assert_eq!(u.at, 500);
    let first = &u.devices[0];
    assert!(first.slice.is_some() && first.busy_pct.is_none(), "NVML does not measure a MIG instance");
    assert_eq!(holders(first), ["inference/embed-0"]);
    let last = u.devices.last().unwrap();
    assert_eq!((holders(last), last.busy_pct, last.idle_since), (vec!["nb/nb-0".to_string()], Some(2.0), Some(120)));
}

fn snapshot_json(scenario: &str) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_kgpu"))
        .args(["snapshot", "--scenario", scenario, "-o", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_demo_shows_its_idle_holders_and_the_numbers_agree_with_the_fleet() {
    let doc = snapshot_json("default");
    let u = &doc["utilization"];
    assert_eq!(u["source"], "agent+dcgm-exporter", "the MIG nodes are read by dcgm-exporter, the rest by agents");
    let idle: Vec<&str> = u["pods"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["idleSeconds"].is_i64())
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        idle,
        ["notebooks-0", "notebooks-1", "notebooks-2", "notebooks-3", "embed-1g.10gb-11", "embed-1g.10gb-3"],
        "the scenario's idle holders, most idle GPU-hours first"
    );
    // Views agree: the whole GPUs the pods hold are what the fleet's pods request on reporting nodes.
    let whole: f64 = u["pods"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["devices"].as_array().unwrap().iter().all(|d| d["profile"].is_null()))
        .map(|p| p["gpus"].as_f64().unwrap())
        .sum();
    let requested: u64 = doc["fleet"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["mig"].as_object().is_none_or(|m| m.is_empty()))
        .map(|n| n["gpu"]["allocated"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(whole as u64, requested, "{}", doc["fleet"]["totals"]);
    let idle_hours: f64 = u["pods"].as_array().unwrap().iter().map(|p| p["idleGpuHours"].as_f64().unwrap()).sum();
    assert!((idle_hours - u["idleGpuHours"].as_f64().unwrap()).abs() < 0.01);
    // The text says the same as the JSON.
    let out = Command::new(env!("CARGO_BIN_EXE_kgpu"))
        .args(["snapshot", "--scenario", "default", "--pane", "utilization"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let summary = format!(
        "{} of {} GPUs held are idle",
        kgpu::view_model::usage::gpus(u["gpusIdle"].as_f64().unwrap()),
        kgpu::view_model::usage::gpus(u["gpusHeld"].as_f64().unwrap())
    );
    assert!(text.contains(&summary), "{summary} not in\n{text}");
    // Per workload: the pods add up, and the text's IDLE BY WORKLOAD lists the JSON's idle workloads.
    let workloads = u["workloads"].as_array().unwrap();
    let pods: u64 = workloads.iter().map(|w| w["pods"].as_u64().unwrap()).sum();
    assert_eq!(pods as usize, u["pods"].as_array().unwrap().len());
    let notebooks = &workloads[0];
    assert_eq!(notebooks["workload"]["name"], "notebooks");
    assert_eq!((notebooks["idlePods"].as_u64(), notebooks["idleGpus"].as_f64()), (Some(4), Some(4.0)));
    let idle_text = text.split("IDLE BY WORKLOAD").nth(1).expect("an IDLE BY WORKLOAD table");
    for w in workloads.iter().filter(|w| w["idlePods"].as_u64() > Some(0)) {
        let name = format!(
            "{} {}/{}",
            w["workload"]["kind"].as_str().unwrap(),
            w["workload"]["namespace"].as_str().unwrap(),
            w["workload"]["name"].as_str().unwrap()
        );
        assert!(idle_text.contains(&name), "{name} not in\n{idle_text}");
    }
}

#[test]
fn without_a_source_the_view_says_what_to_install() {
    // A file source has neither agents nor an exporter.
    let doc = snapshot_json("taint-mismatch");
    let scenario_source = doc["utilization"]["source"].as_str().unwrap().to_string();
    assert_eq!(scenario_source, "agent", "the demo's simulated agents report in every scenario");
    let snap = kgpu::model::Snapshot::empty(SourceInfo { kind: SourceKind::File, name: "dump".into() });
    let u = usage::analyze(&snap, 0);
    let notes = kgpu::view_model::usage::notes(&u, &snap).join(" ");
    assert!(notes.contains("kubectl apply -f assets/agent/") && notes.contains("dcgmExporter.enabled=true"), "{notes}");
}

#[test]
fn a_partly_placed_gangs_members_are_idle_holders_as_the_gangs_view_says() {
    let doc = snapshot_json("gang-deadlock");
    let held_idle: f64 = doc["gangs"].as_array().unwrap().iter().map(|g| g["gpusHeldIdle"].as_f64().unwrap()).sum();
    let u = &doc["utilization"];
    assert_eq!(held_idle, 64.0);
    assert_eq!(u["gpusIdle"].as_f64().unwrap(), held_idle, "the gangs view and the usage view agree");
}

#[test]
fn an_exporter_that_does_not_answer_keeps_its_history_and_its_node_falls_back_to_the_agent() {
    let mut c = cluster();
    c.apply(ModelEvent::Upsert(Object::Pod(pod("p").ns("ml").on("n1").running().build())));
    c.apply(usage("n1", UsageSource::DcgmExporter, 100, vec![reading("GPU-a", None, &["p"], 0.0)]));
    c.apply(usage("n1", UsageSource::Agent, 100, vec![reading("GPU-a", None, &["p"], 30.0)]));
    c.apply(ModelEvent::Upsert(Object::Usage(NodeUsage {
        node: Sym::new("n1"),
        source: UsageSource::DcgmExporter,
        at: 110,
        devices: Box::new([]),
        problem: Some("gpu-operator/nvidia-dcgm-exporter-x: did not answer within 5s".into()),
    })));
    let snap = c.snapshot();
    let kept = &snap.usage[&(UsageSource::DcgmExporter, Sym::new("n1"))];
    assert_eq!(kept.devices.len(), 1, "the history is kept for when it answers again");
    let u = usage::analyze(&snap, 110);
    assert_eq!(u.holders[0].source, UsageSource::Agent, "the node falls back to its agent");
    let notes = kgpu::view_model::usage::notes(&u, &snap).join("\n");
    assert!(
        notes.contains("dcgm-exporter on n1 was not read: gpu-operator/nvidia-dcgm-exporter-x: did not answer"),
        "{notes}"
    );
}
