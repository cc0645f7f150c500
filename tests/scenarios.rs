//! Every demo scenario shows the signal it is built for, read the way a
//! script would: through `kgpu snapshot -o json` of the real binary.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

use std::process::Command;

use serde_json::Value;

fn snapshot(scenario: &str, extra: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_kgpu"))
        .args(["snapshot", "--scenario", scenario, "-o", "json"])
        .args(extra)
        .output()
        .expect("run kgpu");
    assert!(out.status.success(), "kgpu snapshot failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

fn node<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["fleet"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == name)
        .unwrap_or_else(|| panic!("node {name}"))
}

fn issues(n: &Value) -> Vec<&str> {
    n["issues"].as_array().unwrap().iter().map(|i| i.as_str().unwrap()).collect()
}

fn pending<'a>(doc: &'a Value, name_prefix: &str) -> &'a Value {
    doc["pending"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"].as_str().unwrap().starts_with(name_prefix))
        .unwrap_or_else(|| panic!("pending {name_prefix}"))
}

#[test]
fn the_contract_has_every_section() {
    let doc = snapshot("default", &[]);
    assert_eq!(doc["kgpuSnapshot"], 1);
    assert_eq!(doc["source"]["kind"], "demo");
    assert_eq!(doc["source"]["name"], "default");
    for section in ["fleet", "fragmentation", "pending", "gangs", "queues", "drivers"] {
        assert!(!doc[section].is_null(), "{section} missing");
    }
    let totals = &doc["fleet"]["totals"];
    for f in ["gpus", "allocated", "free", "stranded"] {
        assert!(totals[f].is_u64(), "totals.{f}");
    }
    assert_eq!(doc["fleet"]["nodes"].as_array().unwrap().len(), 64, "a mixed 64-node fleet");
    let only = snapshot("default", &["--pane", "queues"]);
    assert!(only["fleet"].is_null() && only["queues"].is_array(), "--pane limits the output");
}

#[test]
fn default_has_a_bit_of_everything() {
    let doc = snapshot("default", &[]);
    let nodes = doc["fleet"]["nodes"].as_array().unwrap();
    assert!(nodes.iter().any(|n| issues(n).contains(&"xid-errors")), "an Xid 48 GPU");
    assert!(nodes.iter().any(|n| issues(n).contains(&"cordoned")));
    assert!(nodes.iter().any(|n| !n["mig"].as_object().unwrap().is_empty()), "MIG nodes");
    let p = doc["pending"].as_array().unwrap();
    assert!(p.iter().any(|x| x["nodeReasons"].as_object().unwrap().keys().any(|k| k == "insufficient-mig:2g.20gb")));
    assert!(p.iter().any(|x| x["kind"] == "PodGroup"), "a Volcano gang waits");
    assert!(doc["drivers"]["upgrades"].as_array().unwrap().iter().any(|u| u["state"] == "validation-required"));
    // The ClusterPolicy asks for 550.54.15: an A100 labelled upgrade-done on
    // 535 is not done, an H100 on 550 is.
    let upgrade =
        |node: &str| doc["drivers"]["upgrades"].as_array().unwrap().iter().find(|u| u["node"] == node).unwrap().clone();
    assert_eq!(
        (upgrade("a100-01")["state"].as_str(), upgrade("a100-01")["doneOffTarget"].as_bool()),
        (Some("upgrade-done"), Some(true))
    );
    assert_eq!(upgrade("h100-01")["doneOffTarget"], false);
}

#[test]
fn fragmented_free_gpus_are_stranded_and_the_plan_frees_two_nodes() {
    // By hand (FRAGMENTED_LAYOUT): used 5+4+3+5+4+6+3+6 = 36 of 64, so 28 free;
    // the most free on one node is 5 (gpu-03, gpu-07), so a 8-GPU pod fits
    // nowhere: usable 0, stranded 28 for the 2×8 gang.
    let doc = snapshot("fragmented", &[]);
    let t = &doc["fleet"]["totals"];
    assert_eq!(
        (t["gpus"].as_u64(), t["allocated"].as_u64(), t["free"].as_u64(), t["stranded"].as_u64()),
        (Some(64), Some(36), Some(28), Some(28))
    );
    let gang = doc["fragmentation"]["shapes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["source"].as_str().unwrap().starts_with("Workload research/job-llm-sft"))
        .unwrap();
    assert_eq!((gang["gpusPerPod"].as_u64(), gang["pods"].as_u64()), (Some(8), Some(2)));
    assert_eq!(gang["fitsNow"], false);
    assert_eq!(gang["usableFree"], 0);
    assert_eq!(gang["strandedFree"], 28);
    // The plan loses the least work (busy time since start + a 10-minute
    // restart each): gpu-07's three young 1-GPU pods (2.6 GPU-h), then
    // gpu-03's 2-GPU pod of 1 h and 1-GPU pod of 2 h (2.3 + 2.2 GPU-h). gpu-05
    // (two 2-GPU pods of 3 h and 2 h: 10.7 GPU-h) is one move fewer but dearer.
    let summary = &doc["fragmentation"]["planSummary"];
    assert_eq!(summary["status"], "found");
    assert_eq!(summary["evictions"], 5);
    assert_eq!(summary["gpuHoursDisrupted"], 7.083);
    assert_eq!(summary["nodesFreed"], serde_json::json!(["gpu-07", "gpu-03"]));
    assert_eq!(summary["nodesReserved"], serde_json::json!(["gpu-07", "gpu-03"]));
    for step in doc["fragmentation"]["plan"].as_array().unwrap() {
        assert_eq!(step["action"], "move");
        assert_ne!(step["fromNode"], step["toNode"]);
        assert!(
            !["gpu-07", "gpu-03"].contains(&step["toNode"].as_str().unwrap()),
            "never moved onto a node being freed"
        );
    }
}

#[test]
fn plugin_crash_flags_the_silent_node_and_blocks_at_the_device_plugin() {
    let doc = snapshot("plugin-crash", &[]);
    let n = node(&doc, "gpu-07");
    assert_eq!(n["gpu"]["hardware"], 8);
    assert_eq!(n["gpu"]["allocatable"], 0);
    assert!(issues(n).contains(&"device-plugin-not-advertising"));
    let p = pending(&doc, "job-bert-large");
    assert_eq!(p["blockingStep"], "device-plugin");
}

#[test]
fn gang_deadlock_names_both_gangs_and_their_idle_gpus() {
    let doc = snapshot("gang-deadlock", &[]);
    let gangs = doc["gangs"].as_array().unwrap();
    assert_eq!(gangs.len(), 2);
    for g in gangs {
        assert_eq!((g["placed"].as_u64(), g["required"].as_u64()), (Some(4), Some(5)));
        assert_eq!(g["gpusHeldIdle"], 32);
        assert_eq!(g["state"], "deadlocked");
        let other = if g["name"].as_str().unwrap().contains("gpt-a") { "gpt-b" } else { "gpt-a" };
        assert!(g["deadlockedWith"][0].as_str().unwrap().contains(other));
    }
    assert!(doc["pending"].as_array().unwrap().iter().all(|p| p["blockingStep"] == "gang"));
}

#[test]
fn quota_starvation_waits_at_quota_while_gpus_idle() {
    let doc = snapshot("quota-starvation", &[]);
    let p = pending(&doc, "job-finetune-xl");
    assert_eq!(p["blockingStep"], "quota");
    let quota = &p["steps"][0];
    let details =
        quota["details"].as_array().unwrap().iter().map(|d| d.as_str().unwrap()).collect::<Vec<_>>().join("\n");
    assert!(
        details.contains("insufficient unused quota for nvidia.com/gpu in flavor h100, 16 more needed"),
        "{details}"
    );
    assert!(
        details.contains(
            "needs 16 nvidia.com/gpu in flavor h100: nominal 16, reserved 16, borrowing limit 0, available now 0"
        ),
        "{details}"
    );
    assert_eq!(doc["fleet"]["totals"]["free"], 80);
}

#[test]
fn taint_mismatch_shows_the_taint_and_the_selector_mistake() {
    let doc = snapshot("taint-mismatch", &[]);
    let p = pending(&doc, "resnet-train");
    assert_eq!(p["blockingStep"], "fit");
    assert_eq!(p["nodeReasons"]["untolerated-taint:nvidia.com/gpu"], 8);
    assert_eq!(p["agreesWithScheduler"], true);
    let p = pending(&doc, "bert-infer");
    assert!(p["hints"][0].as_str().unwrap().starts_with("gpu-count-in-node-selector"));
    assert_eq!(p["nodeReasons"]["selector-mismatch"], 12);
}

#[test]
fn mig_mismatch_needs_a_profile_nobody_offers() {
    let doc = snapshot("mig-mismatch", &[]);
    let p = pending(&doc, "llm-70b");
    assert_eq!(p["nodeReasons"]["insufficient-mig:3g.40gb"], 8);
    assert!(p["hints"].as_array().unwrap().iter().any(|h| h.as_str().unwrap().starts_with("mig-profile-not-offered")));
    let n = node(&doc, "mig-08");
    assert!(issues(n).contains(&"mig-config-pending"), "{n}");
    assert!(n["issueDetails"].to_string().contains("wedged"));
}

#[test]
fn driver_skew_shows_the_incompatible_cell_and_the_stuck_node_first() {
    let doc = snapshot("driver-skew", &[]);
    let cell = doc["drivers"]["matrix"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["driver"] == "550.54.15" && c["cuda"] == "12.8")
        .unwrap();
    assert_eq!(cell["verdict"], "incompatible");
    assert_eq!(cell["placed"], 3, "three CUDA 12.8 pods landed on 550 nodes");
    let first = &doc["drivers"]["upgrades"][0];
    assert_eq!(
        (first["node"].as_str(), first["state"].as_str(), first["stuck"].as_bool()),
        (Some("h100-09"), Some("validation-required"), Some(true))
    );
    assert_eq!(first["sinceSeconds"], 3 * 3600);
}

/// driver-skew's three 8-GPU pods were placed and cannot start: in use,
/// serving nothing, and the header says so in every view.
#[test]
fn gpus_held_by_pods_that_do_not_start_are_said_in_the_header() {
    let doc = snapshot("driver-skew", &[]);
    assert_eq!(doc["fleet"]["totals"]["heldNotStarted"], 24, "{}", doc["fleet"]["totals"]);
    let out =
        Command::new(env!("CARGO_BIN_EXE_kgpu")).args(["snapshot", "--scenario", "driver-skew"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("89 in use (24 held by pods that do not start)"), "{text}");
}

#[test]
fn black_hole_node_is_flagged() {
    let doc = snapshot("black-hole", &[]);
    assert!(issues(node(&doc, "gpu-03")).contains(&"black-hole"));
    assert!(!issues(node(&doc, "gpu-04")).contains(&"black-hole"));
    // The ReplicaSet's GPU demand is not served: its newest pod, refused at
    // admission, is pending at the device-plugin step with what to do.
    let pending = doc["pending"].as_array().unwrap();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0]["blockingStep"], "device-plugin");
    assert!(pending[0]["summary"].as_str().unwrap().contains("gpu-03's kubelet refused it at admission"));
    assert!(pending[0]["unblock"][0].as_str().unwrap().starts_with("cordon gpu-03"), "{}", pending[0]["unblock"]);
}

#[test]
fn topology_split_is_flagged() {
    let doc = snapshot("topology-split", &[]);
    let g = doc["gangs"].as_array().unwrap().iter().find(|g| g["name"].as_str().unwrap().contains("tp-llama")).unwrap();
    assert_eq!(g["issues"], serde_json::json!(["topology-split"]));
    assert_eq!(g["nodes"], serde_json::json!({"gpu-03": 4, "gpu-11": 4}));
}

#[test]
fn the_demo_keeps_running() {
    // Ten simulated minutes later the default fleet has moved on.
    let before = snapshot("default", &["--pane", "events"]);
    let after = snapshot("default", &["--pane", "events", "--advance", "600"]);
    assert!(after["at"].as_i64().unwrap() - before["at"].as_i64().unwrap() == 600);
    assert_ne!(before["events"], after["events"]);
}

#[test]
fn bad_input_names_the_valid_choices_and_exits_2() {
    let out = Command::new(env!("CARGO_BIN_EXE_kgpu")).args(["snapshot", "--scenario", "nope"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown scenario 'nope'") && err.contains("gang-deadlock"), "{err}");
    let out = Command::new(env!("CARGO_BIN_EXE_kgpu")).args(["snapshot", "--pane", "nope"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("valid panes: fleet"));
    let out = Command::new(env!("CARGO_BIN_EXE_kgpu")).args(["demo", "--scenario", "nope"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    // Wave bounds no upgrade could have.
    for (flag, value, says) in [
        ("--target-driver", "999.1", "no NVIDIA driver branch R999 is known to kgpu"),
        ("--max-unavailable", "200%", "a percentage up to 100%"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_kgpu"))
            .args(["snapshot", "--scenario", "driver-skew", "--pane", "drivers", flag, value])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{flag} {value}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(says), "{flag} {value}");
    }
    // A theme typo too, before any terminal is needed.
    let out = Command::new(env!("CARGO_BIN_EXE_kgpu")).args(["demo", "--theme", "nope"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown theme 'nope'; valid themes: dark, light, high-contrast, mono"), "{err}");
    let out = Command::new(env!("CARGO_BIN_EXE_kgpu")).args(["demo", "--list"]).output().unwrap();
    assert!(out.status.success());
    let list = String::from_utf8_lossy(&out.stdout);
    // Wrapped under the name column (100 columns into a pipe), not 300-column lines.
    assert!(list.lines().all(|l| l.chars().count() <= 100), "{list}");
    for s in [
        "default",
        "fragmented",
        "plugin-crash",
        "gang-deadlock",
        "quota-starvation",
        "taint-mismatch",
        "mig-mismatch",
        "driver-skew",
        "black-hole",
        "topology-split",
    ] {
        assert!(list.contains(s), "{s} not listed");
    }
}

#[test]
fn a_reader_that_goes_away_is_not_a_crash() {
    // `kgpu snapshot | head` or `kgpu scenario export NAME | less` quit early:
    // the write fails with EPIPE, and kgpu must stop quietly, not panic.
    for args in [
        &["snapshot", "--demo", "-o", "json"][..],
        &["scenario", "export", "default"],
        &["demo", "--list"],
        &["lab", "status"],
        &["lab", "up", "--kind", "--print"],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kgpu"))
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        // `lab status` exits 1 when no lab runs; what matters is no panic (101).
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(matches!(out.status.code(), Some(0 | 1)), "{args:?}: {:?} {stderr}", out.status.code());
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn why_prints_the_chain() {
    let out = Command::new(env!("CARGO_BIN_EXE_kgpu"))
        .args(["why", "vision/resnet-train-0-k9xq2", "--scenario", "taint-mismatch"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("blocked at: fit"), "{text}");
    assert!(text.contains("$ kubectl describe pod -n vision resnet-train-0-k9xq2"), "{text}");
    let out = Command::new(env!("CARGO_BIN_EXE_kgpu"))
        .args(["why", "vision/nothing", "--scenario", "taint-mismatch"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn committed_manifests_match_the_demo() {
    // assets/scenarios/*/scenario.yaml are what `kgpu scenario export` prints;
    // regenerate them with `kgpu scenario export NAME > assets/scenarios/NAME/scenario.yaml`.
    for name in kgpu::sources::sim::scenarios::names() {
        let out = Command::new(env!("CARGO_BIN_EXE_kgpu")).args(["scenario", "export", name]).output().unwrap();
        assert!(out.status.success());
        let committed =
            std::fs::read_to_string(format!("{}/assets/scenarios/{name}/scenario.yaml", env!("CARGO_MANIFEST_DIR")))
                .unwrap();
        assert!(String::from_utf8_lossy(&out.stdout) == committed, "assets/scenarios/{name}/scenario.yaml is stale");
    }
}

#[test]
fn every_gpu_is_in_one_bucket_and_every_view_counts_the_same() {
    for name in kgpu::sources::sim::scenarios::names() {
        let doc = snapshot(name, &["--advance", "300"]);
        let t = &doc["fleet"]["totals"];
        let n = |k: &str| t[k].as_u64().unwrap_or_else(|| panic!("{name}: totals.{k}"));
        assert_eq!(
            n("gpus"),
            n("allocated") + n("free") + n("unavailable") + n("unadvertised") + n("unhealthy"),
            "{name}: {t}"
        );
        assert!(n("stranded") <= n("free"), "{name}: {t}");
        // The cockpit's views of the same moment: header and status bar read the
        // totals; the pools view adds its pools up to the same numbers.
        let (snap, now) = kgpu::runtime::load::demo(name, 1, 300).unwrap();
        let views = kgpu::view_model::panes::Views::build(
            std::sync::Arc::new(snap),
            now,
            &kgpu::analysis::Thresholds::default(),
            None,
        );
        let totals = &views.analysis.totals;
        assert_eq!((totals.gpus, totals.allocated, totals.free), (n("gpus"), n("allocated"), n("free")), "{name}");
        let pools = |f: fn(&kgpu::view_model::panes::PoolRow) -> u64| views.pools.iter().map(f).sum::<u64>();
        assert_eq!(pools(|p| p.gpus), totals.gpus, "{name}: pools' GPUs");
        assert_eq!(pools(|p| p.used), totals.allocated, "{name}: pools' used");
        assert_eq!(pools(|p| p.free), totals.free, "{name}: pools' free");
        // Every GPU the hardware has is in some bucket (MIG and unhealthy ones too).
        for node in &views.nodes {
            if let Some(hw) = node.hardware {
                assert!(node.buckets.total() >= hw, "{name}/{}: {:?} of {hw}", node.name, node.buckets);
            }
        }
    }
    // MIG GPUs are GPUs: the MIG scenario's slices sit on counted GPUs.
    let doc = snapshot("mig-mismatch", &[]);
    assert!(doc["fleet"]["totals"]["migGpus"].as_u64().unwrap() > 0, "{}", doc["fleet"]["totals"]);
}

#[test]
fn the_mig_views_list_the_same_nodes() {
    // The MIG pane, `snapshot --pane mig -o json` and the text section use
    // one predicate for "MIG node": whole-GPU H100s that merely could run
    // MIG are in none of them.
    for scenario in ["default", "mig-mismatch", "driver-skew"] {
        let (snap, now) = kgpu::runtime::load::demo(scenario, 1, 0).unwrap();
        let views = kgpu::view_model::panes::Views::build(
            std::sync::Arc::new(snap),
            now,
            &kgpu::analysis::Thresholds::default(),
            None,
        );
        let pane: Vec<String> = views.mig.iter().map(|m| m.node.to_string()).collect();
        let doc = snapshot(scenario, &["--pane", "mig"]);
        let json: Vec<String> =
            doc["mig"].as_array().unwrap().iter().map(|n| n["node"].as_str().unwrap().to_string()).collect();
        let mut json_sorted = json.clone();
        json_sorted.sort();
        let mut pane_sorted = pane.clone();
        pane_sorted.sort();
        assert_eq!(pane_sorted, json_sorted, "{scenario}");
        let text = Command::new(env!("CARGO_BIN_EXE_kgpu"))
            .args(["snapshot", "--scenario", scenario, "--pane", "mig"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&text.stdout);
        assert!(text.contains(&format!("MIG  {} node(s)", pane.len())), "{scenario}: {text}");
        for n in &pane {
            assert!(text.lines().any(|l| l.starts_with(n.as_str())), "{scenario}: {n} missing from\n{text}");
        }
    }
}

#[test]
fn idle_holders_fill_a_node_that_reclaiming_frees() {
    let doc = snapshot("idle-holders", &[]);
    let u = &doc["utilization"];
    // gpu-05: 1+1+1+1+2+2 GPUs of idle notebooks; gpu-06: notebook-gus (1) and the debug pod (2).
    assert_eq!(u["gpusIdle"].as_f64().unwrap().round() as u64, 11, "{u}");
    let holders = u["pods"].as_array().unwrap();
    let idle_on = |node: &str| -> f64 {
        holders
            .iter()
            .filter(|h| h["node"] == node && h["idleSeconds"].is_i64())
            .map(|h| h["gpus"].as_f64().unwrap())
            .sum()
    };
    assert_eq!(idle_on("gpu-05"), 8.0);
    assert_eq!(doc["fleet"]["totals"]["free"], 0, "every GPU is allocated");
    assert!(pending(&doc, "finetune-8x-")["blockingStep"] == "fit");
}

#[test]
fn driver_canary_halts_the_wave_and_names_the_rollback() {
    let doc = snapshot("driver-canary", &[]);
    let waves = &doc["drivers"]["waves"];
    assert_eq!(waves["source"], "ClusterPolicy gpu-cluster-policy");
    assert_eq!(waves["halted"]["failed"], serde_json::json!(["h100-01"]));
    assert_eq!(waves["halted"]["rollbackTo"], "550.54.15");
    let upgrades = doc["drivers"]["upgrades"].as_array().unwrap();
    assert_eq!(upgrades[0]["node"], "h100-01");
    assert_eq!(upgrades[0]["state"], "upgrade-failed");
    assert_eq!(upgrades.iter().filter(|u| u["skip"] == true).count(), 11);
    assert!(issues(node(&doc, "h100-01")).contains(&"upgrade-failed"));
}

#[test]
fn fair_share_names_the_borrower_and_its_share() {
    let doc = snapshot("fair-share", &[]);
    let gpu_row = |name: &str| {
        doc["queues"]
            .as_array()
            .unwrap()
            .iter()
            .find(|q| q["name"] == name && q["resource"] == "nvidia.com/gpu")
            .unwrap()
            .clone()
    };
    // By hand: team-b holds 56 on 32 nominal = 24 borrowed of the 80 the cohort lends: 300.
    assert_eq!(gpu_row("team-b")["borrowed"], 24);
    assert_eq!(gpu_row("team-b")["fairShare"], 300);
    assert_eq!(gpu_row("team-a")["used"], 8);
    assert_eq!(gpu_row("team-a")["fairShare"], 0);
    let p = pending(&doc, "job-llama-sft-");
    assert_eq!(p["blockingStep"], "quota");
    let details = p["steps"].to_string();
    assert!(details.contains("team-b 300 (24 of the 80 nvidia.com/gpu the cohort lends, weight 1)"), "{details}");
    assert!(details.contains("reclaimWithinCohort is Never"), "{details}");
    // The advice says what the detail says: take the lent quota back, not "raise nominalQuota".
    let unblock = p["unblock"].to_string();
    assert!(
        unblock.contains("set spec.preemption.reclaimWithinCohort: Any (or LowerPriority) on ClusterQueue team-a")
            && unblock.contains("lends to ClusterQueue team-b"),
        "{unblock}"
    );
    assert!(!unblock.contains("raise nominalQuota"), "{unblock}");
}

#[test]
fn preemption_cost_prices_the_schedulers_pick_and_the_cheapest_node() {
    let doc = snapshot("preemption-cost", &[]);
    let p = pending(&doc, "release-eval-0-");
    let c = &p["preemption"];
    // kube-scheduler: equal priorities and counts everywhere, so the node whose
    // victim started last: gpu-07's finetune-c (200 min, no checkpoint):
    // 8 GPUs × (200 min + 10 min default restart) = 28.0 GPU-hours.
    assert_eq!(c["node"], "gpu-07");
    assert_eq!(c["gpuHours"], 28.0);
    assert_eq!(c["victims"][0]["checkpointKnown"], false);
    // gpu-08's finetune-d checkpointed 20 min ago, restarts in 5: 8 × 25 min = 3.3.
    assert_eq!(c["cheapestNode"], "gpu-08");
    assert!((c["cheapestGpuHours"].as_f64().unwrap() - 3.333).abs() < 0.01, "{c}");
    assert_eq!(c["policyNever"], true);
    // The defrag plan counts work lost from the same checkpoints: it frees gpu-08 too.
    assert!(p["unblock"].to_string().contains("frees gpu-08"), "{}", p["unblock"]);
    assert!(
        p["schedulerMessage"].as_str().unwrap().ends_with("preemption: not eligible due to preemptionPolicy=Never.")
    );
}

#[test]
fn spot_breakeven_works_the_loss_out_per_job() {
    let doc = snapshot("spot-breakeven", &["--pane", "gangs"]);
    let s = &doc["spot"];
    // By hand: spot nodes aged 2, 5, 11, 20, 72 and 96 h: 4 created within
    // 24 h over 2+5+11+20+24+24 = 86 node-hours: 4/86 = 0.0465 per node-hour.
    assert_eq!(s["nodes"], 6);
    assert_eq!(s["replacedLast24h"], 4);
    assert_eq!(s["exposureHours"], 86.0);
    let rate = 4.0 / 86.0;
    let jobs = s["jobs"].as_array().unwrap();
    let gang = jobs.iter().find(|j| j["gang"] == true).unwrap();
    // 4 spot nodes × rate × (4h ÷ 2 + 20 min) = 0.434.
    assert_eq!(gang["spotNodes"], 4);
    assert!((gang["breakEvenDiscount"].as_f64().unwrap() - 4.0 * rate * (2.0 + 1.0 / 3.0)).abs() < 0.001, "{gang}");
    let single = jobs.iter().find(|j| j["gang"] == false).unwrap();
    assert!((single["breakEvenDiscount"].as_f64().unwrap() - rate * (0.25 + 5.0 / 60.0)).abs() < 0.001, "{single}");
    // The largest loss first.
    assert_eq!(jobs[0]["gang"], true);
}

#[test]
fn mig_vs_timeslicing_flags_the_shared_memory_and_counts_physical_gpus() {
    let doc = snapshot("mig-vs-timeslicing", &[]);
    let ts = node(&doc, "ts-01");
    assert_eq!(issues(ts), ["shared-gpu-memory-full"]);
    // 8 physical GPUs behind 32 replicas; 24 replicas fill 6 GPUs.
    let t = &doc["fleet"]["totals"];
    assert_eq!(t["gpus"], 16, "8 time-sliced + 8 MIG GPUs, not 32 replicas: {t}");
    let mig = &node(&doc, "mig-01")["mig"]["1g.10gb"];
    assert_eq!((mig["allocated"].as_u64(), mig["allocatable"].as_u64()), (Some(42), Some(56)));
    assert!(issues(node(&doc, "mig-01")).is_empty());
}

#[test]
fn dra_claims_counts_published_gpus_and_blocks_the_h200_claim() {
    let doc = snapshot("dra-claims", &[]);
    let t = &doc["fleet"]["totals"];
    // 16 device-plugin GPUs (8 in use) and 24 published through DRA (14 allocated).
    assert_eq!((t["gpus"].as_u64(), t["allocated"].as_u64(), t["free"].as_u64()), (Some(40), Some(22), Some(18)));
    let dra = node(&doc, "h100-dra-02");
    assert_eq!(dra["gpu"]["dra"], serde_json::json!({"published": 8, "allocated": 4, "tainted": 0}));
    assert_eq!(dra["product"], "NVIDIA-H100-80GB-HBM3");
    assert!(issues(dra).is_empty(), "a DRA node is not a silent device plugin: {dra}");
    let p = pending(&doc, "llm-serve-");
    assert_eq!(p["blockingStep"], "claims");
    assert_eq!(p["agreesWithScheduler"], true, "{p}");
    assert!(p["summary"].as_str().unwrap().contains("no published device matches"), "{p}");
    assert_eq!(doc["pending"].as_array().unwrap().len(), 2, "the placed claim pods are not pending");
    let finetune = pending(&doc, "finetune-70b-");
    assert_eq!(finetune["blockingStep"], "claims");
    assert_eq!(finetune["agreesWithScheduler"], true, "{finetune}");
    // Its way out is the plan, as for a pod short of device-plugin GPUs.
    let unblock = finetune["unblock"][0].as_str().unwrap_or_default();
    assert!(
        unblock.starts_with("run the defragmentation plan") && unblock.ends_with("frees h100-dra-03"),
        "{finetune}"
    );
    // The fragmentation section's 1-GPU what-if shape can use every free GPU, DRA's included.
    let shapes = doc["fragmentation"]["shapes"].as_array().unwrap();
    let one = shapes
        .iter()
        .find(|s| s["gpusPerPod"] == 1 && s["pods"] == 1 && s["source"] == "canonical")
        .unwrap_or_else(|| panic!("{}", doc["fragmentation"]));
    assert_eq!(one["usableFree"], 18, "{one}");
    // Each pending pod is a shape of its own, through DRA. The H200 claim
    // matches no device, free or held: nothing is usable or stranded for it.
    let shape = |pod: &str| {
        shapes
            .iter()
            .find(|s| s["dra"] == true && s["source"].as_str().is_some_and(|f| f.contains(pod)))
            .unwrap_or_else(|| panic!("{pod}: {}", doc["fragmentation"]))
    };
    let serve = shape("llm-serve-");
    assert_eq!((serve["fitsNow"].as_bool(), serve["usableFree"].as_u64()), (Some(false), Some(0)), "{serve}");
    assert_eq!(serve["strandedFree"], 0, "{serve}");
    // The eight-H100 claim: the DRA nodes' 10 free GPUs are stranded for
    // it, and the plan frees h100-dra-03 by moving its two embed pods.
    let eight = shape("finetune-70b-");
    assert_eq!((eight["fitsNow"].as_bool(), eight["strandedFree"].as_u64()), (Some(false), Some(10)), "{eight}");
    let plan = &doc["fragmentation"]["planSummary"];
    assert_eq!(plan["status"], "found", "{plan}");
    assert_eq!((plan["evictions"].as_u64(), plan["nodesFreed"].clone()), (Some(2), serde_json::json!(["h100-dra-03"])));
    // Usage finds who holds the DRA GPUs in the claims (the agent's kubelet
    // view names no pod for them): 22 held, as the header's 22 in use.
    let u = &doc["utilization"];
    assert_eq!(u["gpusHeld"], 22.0, "{u}");
    let pretrain =
        u["pods"].as_array().unwrap().iter().find(|p| p["name"] == "pretrain-7b-0").unwrap_or_else(|| panic!("{u}"));
    assert_eq!(pretrain["gpus"], 8.0, "{pretrain}");
    // The Drivers pane lists the DRA nodes' driver, from their agent and slices.
    let rows = doc["drivers"]["matrix"].as_array().unwrap();
    let dra =
        rows.iter().find(|r| r["driver"] == "550.90.07" && r["placed"] == 7).unwrap_or_else(|| panic!("{rows:?}"));
    assert_eq!(dra["nodes"], 3, "{dra}");
}

#[test]
fn a_node_mid_repartition_advertises_no_slices_not_zero_of_zero() {
    let out = Command::new(env!("CARGO_BIN_EXE_kgpu"))
        .args(["snapshot", "--scenario", "mig-mismatch", "--pane", "mig"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let row = text.lines().find(|l| l.starts_with("mig-08")).expect("mig-08 listed");
    assert!(row.contains("none advertised: reconfiguring"), "{row}");
    assert!(!text.contains(" 0/0"), "{text}");
}

#[test]
fn a_mig_shortage_names_the_repartition_that_serves_it_and_its_cost() {
    let out = Command::new(env!("CARGO_BIN_EXE_kgpu"))
        .args(["why", "inference/llm-70b-7f6c5-1", "--scenario", "mig-mismatch"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let advice = text.lines().find(|l| l.contains("  - repartition ")).unwrap_or_else(|| panic!("{text}"));
    // mig-08 is already being cut to all-3g.40gb: another node, with what it evicts.
    assert!(advice.contains("to all-3g.40gb") && !advice.contains("mig-08"), "{advice}");
    assert!(advice.contains("16× 3g.40gb (enough)") && advice.contains("GPU-hours of work"), "{advice}");
    // Not "no node can ever hold it": a profile is a partitioning, not a size.
    assert!(!text.contains("no node can ever hold it"), "{text}");
}
