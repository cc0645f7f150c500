//! The lab's fake kubelets: KWOK, reading its stages from Stage objects
//! (`assets/lab/kwok-stages.yaml`), so scenarios can add stages of their own.

/// The stages `kgpu lab up` applies.
pub const STAGES: &str = include_str!("../../assets/lab/kwok-stages.yaml");

/// KWOK manages the nodes that carry this annotation (value `fake`); nodes
/// without it get no heartbeat and go NotReady, as a dead kubelet's would.
pub use crate::sources::kube::manifest::KWOK_ANNOTATION as NODE_ANNOTATION;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stages_parse_and_cover_a_pods_life() {
        let docs = crate::sources::kube::apply::parse_yaml(STAGES).unwrap();
        let names: Vec<&str> = docs.iter().filter_map(|d| d["metadata"]["name"].as_str()).collect();
        assert_eq!(
            names,
            ["kgpu-node-initialize", "kgpu-node-heartbeat", "kgpu-pod-ready", "kgpu-pod-complete", "kgpu-pod-delete"]
        );
        for d in &docs {
            assert_eq!(d["apiVersion"], "kwok.x-k8s.io/v1alpha1");
            assert_eq!(d["kind"], "Stage");
        }
    }
}
