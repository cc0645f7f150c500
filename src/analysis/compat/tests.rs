//! Compatibility verdicts on real `NVIDIA_REQUIRE_CUDA` strings and nodes.

use super::*;
use crate::model::build::node;

const REQUIRE_12_4_1: &str = include_str!("../../../tests/fixtures/compat/nvidia-require-cuda-12.4.1.env");

fn need(require: &str) -> Need {
    need_of(&CudaNeed { require_cuda: Some(Sym::new(require)), ..CudaNeed::default() }).unwrap()
}

fn facts(product: &str, driver: &str, cuda: &str) -> NodeFacts {
    node_facts(&node("n").gpus(8).product(product).driver(driver, cuda).build())
}

fn real_12_4_1() -> String {
    REQUIRE_12_4_1.lines().find_map(|l| l.strip_prefix("NVIDIA_REQUIRE_CUDA=")).unwrap().to_string()
}

/// 2026-11-30, this session's date.
const NOW: Timestamp = 1_795_996_800;

#[test]
fn the_real_12_4_1_requirement_parses() {
    let n = need(&real_12_4_1());
    assert_eq!(n.cuda, CudaVersion::new(12, 4));
    let set = &n.sets[0];
    assert_eq!(set.clauses.len(), 31, "cuda>=12.4 plus 10 brands × 3 driver branches");
    assert_eq!(set.clauses[0], vec![Constraint::Cuda(Op::Ge, CudaVersion::new(12, 4))]);
    assert_eq!(
        set.clauses[1],
        vec![
            Constraint::Brand("tesla".into()),
            Constraint::Driver(Op::Ge, DriverVersion::parse("470").unwrap()),
            Constraint::Driver(Op::Lt, DriverVersion::parse("471").unwrap()),
        ]
    );
}

#[test]
fn the_runtime_refuses_r545_but_takes_r535_for_12_4_1() {
    // Fixture note: R470/R525/R535 pass via the driver clauses, R545 (CUDA 12.3) is refused.
    let n = need(&real_12_4_1());
    let r535 = facts("NVIDIA-A100-SXM4-80GB", "535.104.05", "12.2");
    let r545 = facts("NVIDIA-A100-SXM4-80GB", "545.23.08", "12.3");
    let r550 = facts("NVIDIA-H100-80GB-HBM3", "550.54.15", "12.4");
    assert_eq!(runtime_allows(&n, &r535), Some(true));
    assert_eq!(runtime_allows(&n, &r545), Some(false));
    assert_eq!(verdict(&n, &r545, NOW).0, Verdict::Incompatible);
    assert_eq!(verdict(&n, &r550, NOW).0, Verdict::Ok);
    // R535 runs 12.2 natively; 12.4 on it is minor-version compatibility
    // (minor-version-compat.tsv: "CUDA 12.x >= 525").
    assert_eq!(verdict(&n, &r535, NOW).0, Verdict::MinorCompat);
}

#[test]
fn cuda_12_8_on_a_550_driver_is_incompatible() {
    // Table 3 "CUDA 12.8 GA >=570.26"; the runtime enforces cuda>=12.8 against 12.4.
    let n = need("cuda>=12.8");
    let (v, why) = verdict(&n, &facts("NVIDIA-H100-80GB-HBM3", "550.54.15", "12.4"), NOW);
    assert_eq!(v, Verdict::Incompatible);
    assert!(why.contains("cuda>=12.8"), "{why}");
}

#[test]
fn an_unenforced_12_x_guess_on_an_older_12_driver_is_minor_compat() {
    // minor-version-compat.tsv: "CUDA 12.x >= 525"; driver 535 natively supports 12.2.
    let n = need_of(&CudaNeed {
        image: Some(Sym::new("pytorch/pytorch:2.6.0-cuda12.6-cudnn9-runtime")),
        ..CudaNeed::default()
    })
    .unwrap();
    assert_eq!(n.source, NeedSource::Guessed);
    assert_eq!(n.column(), "12.6 (guessed)");
    let (v, why) = verdict(&n, &facts("NVIDIA-A100-SXM4-80GB", "535.104.05", "12.2"), NOW);
    assert_eq!(v, Verdict::MinorCompat);
    assert!(why.contains("limited feature set"));
}

#[test]
fn forward_compat_only_on_data_center_gpus_and_supported_branches() {
    // datacenter-driver-branches.tsv: "R535 Long Term Support Branch June 2026 CUDA 12"
    let n = need_of(&CudaNeed { image: Some(Sym::new("nvidia/cuda:13.0.0-base-ubuntu24.04")), ..CudaNeed::default() })
        .unwrap();
    let before_eol = 1_767_225_600; // 2026-01-01
    let dc = facts("NVIDIA-H100-80GB-HBM3", "535.104.05", "12.2");
    assert_eq!(verdict(&n, &dc, before_eol).0, Verdict::ForwardCompat);
    let consumer = facts("NVIDIA-GeForce-RTX-4090", "535.104.05", "12.2");
    assert_eq!(verdict(&n, &consumer, before_eol).0, Verdict::Incompatible);
    // R535 reached end of life in June 2026
    assert_eq!(verdict(&n, &dc, NOW).0, Verdict::Incompatible);
    // R550 is no supported data-center branch in the table
    let r550 = facts("NVIDIA-H100-80GB-HBM3", "550.54.15", "12.4");
    assert_eq!(verdict(&n, &r550, before_eol).0, Verdict::Incompatible);
}

#[test]
fn every_case_of_the_toolkit_table() {
    let text = include_str!("../../../tests/fixtures/compat/nvidia-require-cases.tsv");
    let (_, rows) = crate::reference::tsv_rows(text);
    assert_eq!(rows.len(), 8);
    for row in rows {
        let env: Vec<(&str, &str)> = row[1].split(' ').filter_map(|kv| kv.split_once('=')).collect();
        let expected = if row[2] == "-" { String::new() } else { row[2].to_string() };
        assert_eq!(derive_requirements(&env).join(","), expected, "case: {}", row[0]);
    }
}

#[test]
fn image_tag_guesses() {
    assert_eq!(guess_from_image("nvidia/cuda:12.4.1-runtime-ubuntu22.04"), Some(CudaVersion::new(12, 4)));
    assert_eq!(guess_from_image("pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime"), Some(CudaVersion::new(12, 1)));
    assert_eq!(guess_from_image("ghcr.io/x/train:v3-cu124"), Some(CudaVersion::new(12, 4)));
    assert_eq!(guess_from_image("ghcr.io/x/torch-cu118:latest"), Some(CudaVersion::new(11, 8)));
    assert_eq!(guess_from_image("nvcr.io/nvidia/pytorch:24.01-py3"), None);
    assert_eq!(guess_from_image("docker.io/library/busybox:1.36"), None);
}

#[test]
fn eol_dates() {
    use crate::model::time::days_from_civil;
    assert_eq!(end_of_life("June 2026"), Some(days_from_civil(2026, 7, 1) * 86_400));
    assert_eq!(days_from_civil(1970, 1, 1), 0);
    assert_eq!(days_from_civil(2026, 11, 30) * 86_400, NOW);
}
