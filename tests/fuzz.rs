//! Property tests over the parsers that read what a cluster, a container
//! image or a file says: none of them panics on any input, and what they
//! accept they read right. Bounded case counts keep `cargo test` quick;
//! `PROPTEST_CASES=100000 cargo test --test fuzz` digs deeper.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

use kgpu::analysis::{compat, queue_msg};
use kgpu::model::{Uid, quantity};
use kgpu::sources::file;
use kgpu::sources::kube::{convert, lean, pages};
use kgpu::view_model::style::printable;
use proptest::prelude::*;

/// The cases to run: `default`, or `PROPTEST_CASES` when set.
fn budget(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Pieces real quantities are made of, in any order.
fn quantity_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        "[0-9]{1,25}",
        Just(".".to_string()),
        Just("-".to_string()),
        Just("+".to_string()),
        prop::sample::select(vec!["Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E"])
            .prop_map(String::from),
        "[eE][-+]?[0-9]{1,4}",
        "\\PC{0,3}",
    ];
    prop::collection::vec(piece, 0..5).prop_map(|p| p.concat())
}

/// Pieces of `NVIDIA_REQUIRE_CUDA` values, in any order.
fn require_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("cuda>=".to_string()),
        Just("cuda<".to_string()),
        Just("brand=".to_string()),
        Just("driver>=".to_string()),
        Just("arch=".to_string()),
        "[0-9]{1,4}(\\.[0-9]{1,4}){0,3}",
        prop::sample::select(vec!["tesla", "unknown", "nvidia", "geforce", " ", ",", "=", "<", ">"])
            .prop_map(String::from),
        "\\PC{0,4}",
    ];
    prop::collection::vec(piece, 0..12).prop_map(|p| p.concat())
}

/// JSON shaped like the objects kgpu reads, with arbitrary leaves.
fn object_json() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        quantity_text().prop_map(serde_json::Value::from),
        "\\PC{0,12}".prop_map(serde_json::Value::from),
        Just(serde_json::Value::from("2026-11-30T09:00:00Z")),
    ];
    let value = leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            prop::collection::btree_map(
                prop::sample::select(vec![
                    "metadata",
                    "name",
                    "namespace",
                    "labels",
                    "spec",
                    "status",
                    "containers",
                    "resources",
                    "limits",
                    "requests",
                    "allocatable",
                    "capacity",
                    "conditions",
                    "type",
                    "phase",
                    "nodeName",
                    "taints",
                    "tolerations",
                    "nvidia.com/gpu",
                    "podSets",
                    "admission",
                    "flavors",
                    "count",
                    "resourceGroups",
                    "nominalQuota",
                    "creationTimestamp",
                    "message",
                    "reason",
                    "ownerReferences",
                ])
                .prop_map(String::from),
                inner,
                0..5,
            )
            .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    });
    let kind = prop::sample::select(vec![
        ("v1", "Node"),
        ("v1", "Pod"),
        ("v1", "Event"),
        ("kueue.x-k8s.io/v1beta2", "Workload"),
        ("kueue.x-k8s.io/v1beta2", "ClusterQueue"),
        ("kueue.x-k8s.io/v1beta2", "LocalQueue"),
        ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"),
        ("scheduling.volcano.sh/v1beta1", "PodGroup"),
        ("scheduling.volcano.sh/v1beta1", "Queue"),
    ]);
    (kind, prop::collection::btree_map("metadata|spec|status|involvedObject|message", value, 0..4)).prop_map(
        |((api, kind), fields)| {
            let mut o: serde_json::Map<String, serde_json::Value> = fields.into_iter().collect();
            o.insert("apiVersion".into(), api.into());
            o.insert("kind".into(), kind.into());
            serde_json::Value::Object(o)
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(budget(1000)))]

    #[test]
    fn quantities_never_panic(text in quantity_text()) {
        for resource in ["cpu", "memory", "nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "pods"] {
            let _ = quantity::parse(resource, &text);
        }
    }

    /// A pod's uid prints back exactly as the API server wrote it (the
    /// eviction precondition compares strings); any other text is not a uid.
    #[test]
    fn uids_print_back_exactly(text in "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", other in "\\PC{0,40}") {
        let uid = Uid::parse(&text);
        prop_assert_eq!(uid.map(|u| u.to_string()), Some(text.clone()));
        prop_assert_eq!(Uid::parse(&text.to_uppercase()).is_some(), text == text.to_uppercase());
        if let Some(u) = Uid::parse(&other) {
            prop_assert_eq!(u.to_string(), other);
        }
    }

    #[test]
    fn whole_device_counts_read_exactly(n in any::<u64>()) {
        // Up to kgpu's bound exactly; past it, refused (never wrapped).
        let read = quantity::parse("nvidia.com/gpu", &n.to_string());
        if n <= quantity::MAX_QUANTITY {
            prop_assert_eq!(read, Ok(n));
        } else {
            prop_assert!(matches!(read, Err(quantity::QuantityError::Overflow(_))));
        }
    }

    #[test]
    fn byte_counts_survive_formatting(n in 0u64..(1 << 50)) {
        prop_assert_eq!(quantity::parse("memory", &quantity::format("memory", n)).map(|v| v >= n), Ok(true));
    }

    #[test]
    fn cuda_requirements_never_panic(text in require_text()) {
        let set = compat::parse_require(&text);
        let _ = compat::derive_requirements(&[("NVIDIA_REQUIRE_CUDA", &text), ("NVIDIA_DISABLE_REQUIRE", "false")]);
        let _ = compat::guess_from_image(&text);
        let _ = set;
    }

    #[test]
    fn queue_messages_never_panic(text in "\\PC{0,200}") {
        let _ = queue_msg::parse_gang(&text);
        let _ = queue_msg::parse_quota(&text);
    }

    #[test]
    fn printable_text_has_no_control_characters(text in "(\\PC|[\\x00-\\x1f\\x7f\\u{80}-\\u{9f}]){0,64}") {
        prop_assert!(!printable(&text).chars().any(|c| c.is_control() && c != '\n'));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(budget(300)))]

    /// A dump of arbitrary objects of the kinds kgpu reads: loaded, each
    /// object read or skipped with a reason, never a panic.
    #[test]
    fn the_dump_loader_never_panics(objects in prop::collection::vec(object_json(), 0..6)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dump.json");
        let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": objects});
        std::fs::write(&path, list.to_string()).unwrap();
        if let Ok((events, _, stats)) = file::load(&[path]) {
            prop_assert_eq!(stats.objects + stats.skipped, objects.len());
            let mut cluster = kgpu::model::Cluster::new(kgpu::model::SourceInfo {
                kind: kgpu::model::SourceKind::File,
                name: String::new(),
            });
            cluster.apply_all(events);
            let snap = cluster.snapshot();
            let _ = kgpu::analysis::analyze(&snap, 1_796_029_200, &kgpu::analysis::Thresholds::default());
        }
    }
}

/// A pod the way the API server writes one, with arbitrary names, labels,
/// requests and priority.
fn pod_json() -> impl Strategy<Value = serde_json::Value> {
    let text = "\\PC{0,10}";
    (
        (text, text, prop::collection::btree_map(text, text, 0..5), prop::option::of(text)),
        (quantity_text(), quantity_text(), any::<i64>(), prop::sample::select(vec!["Pending", "Running", "Failed"])),
    )
        .prop_map(|((name, namespace, labels, node), (gpus, cpu, priority, phase))| {
            serde_json::json!({
                "metadata": {"name": name, "namespace": namespace, "uid": "0b1f7c4e-2d5a-4c1e-9f3a-7e6d5c4b3a29",
                    "creationTimestamp": "2026-11-30T09:00:00Z", "labels": labels},
                "spec": {"nodeName": node, "priority": priority,
                    "containers": [{"name": "main", "resources": {"requests": {"nvidia.com/gpu": gpus, "cpu": cpu}}}]},
                "status": {"phase": phase}
            })
        })
}

/// What the watch path reads (kube-rs decodes each event's object with serde_json).
fn watch_path<K: serde::de::DeserializeOwned>(
    items: &[serde_json::Value],
    convert: impl Fn(&K) -> Result<kgpu::model::Object, String>,
) -> Option<Vec<String>> {
    items
        .iter()
        .map(|item| serde_json::from_str::<K>(&item.to_string()).ok().map(|k| format!("{:?}", convert(&k))))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(budget(500)))]

    /// A page of the initial list (read with sonic-rs) and the same objects
    /// as watch events (serde_json) make the same model records, and fail
    /// alike: a pod must not read differently before and after its first change.
    #[test]
    fn the_list_and_the_watch_read_an_object_alike(
        pods in prop::collection::vec(pod_json(), 0..4),
        others in prop::collection::vec(object_json(), 0..3),
        pretty in any::<bool>(),
    ) {
        let items: Vec<serde_json::Value> = pods.into_iter().chain(others).collect();
        let page = serde_json::json!({"kind": "List", "metadata": {"resourceVersion": "7"}, "items": items});
        let body = if pretty { serde_json::to_vec_pretty(&page) } else { serde_json::to_vec(&page) }.unwrap();
        let debug = |reads: Vec<Result<kgpu::model::Object, String>>| reads.iter().map(|r| format!("{r:?}")).collect::<Vec<_>>();
        let pod = |p: &lean::Pod| convert::pod(p).map(kgpu::model::Object::Pod);
        prop_assert_eq!(pages::decode(&body, pod).ok().map(debug), watch_path(&items, pod));
        let node = |n: &lean::Node| convert::node(n).map(kgpu::model::Object::Node);
        prop_assert_eq!(pages::decode(&body, node).ok().map(debug), watch_path(&items, node));
        let event = |e: &k8s_openapi::api::core::v1::Event| convert::event(e).map(kgpu::model::Object::Event);
        prop_assert_eq!(pages::decode(&body, event).ok().map(debug), watch_path(&items, event));
        // Custom resources (Kueue, Volcano, GPU Operator) are read as JSON.
        let custom = |o: &kube::api::DynamicObject| serde_json::to_value(o).map_err(|e| e.to_string());
        prop_assert_eq!(
            pages::decode(&body, custom).ok(),
            items.iter().map(|i| serde_json::from_str::<kube::api::DynamicObject>(&i.to_string()).ok().map(|o| custom(&o))).collect::<Option<Vec<_>>>()
        );
    }
}
