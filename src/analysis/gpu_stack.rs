//! A node's GPU software stack as the GPU Operator builds it: driver,
//! container toolkit, device plugin, GPU Feature Discovery, dcgm-exporter,
//! validator — each waiting for the one before. The first layer that should
//! run on the node (its `nvidia.com/gpu.deploy.*` label says `true`) and does
//! not is why the node's GPUs are missing from Kubernetes, whatever the
//! layers above it say: a toolkit stuck in `Init:0/1` waits for a driver in
//! `CrashLoopBackOff`.

use crate::model::{Node, OperandLayer, Pod, PodPhase, Sym};

use super::index::Index;

/// The first layer of a node's stack that does not work.
#[derive(Clone, Debug, PartialEq)]
pub struct StackBreak {
    pub layer: OperandLayer,
    pub problem: Problem,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Problem {
    /// The node is labelled for it and no pod of it runs there, while its
    /// DaemonSet runs pods elsewhere: a taint it does not tolerate, a
    /// nodeSelector, or a pod that could not be created.
    NoPod,
    /// Its pod is there and not ready.
    NotReady {
        namespace: Sym,
        pod: String,
        /// The first container that does not run, and why.
        waiting: Option<(Sym, String)>,
        restarts: u32,
        /// Init containers done of all.
        init: Option<(u16, u16)>,
    },
}

/// Whether the operator deploys `layer` on `node`: `nvidia.com/gpu.deploy.*`
/// is `true` (not `false`, `pre-installed` or one of the operator's pauses).
fn deployed_here(node: &Node, layer: OperandLayer) -> bool {
    let key = format!("nvidia.com/gpu.deploy.{}", layer.deploy_label_suffix());
    node.labels.value(&key).is_some_and(|v| v.as_str() == "true")
}

/// The first broken layer of the GPU Operator's stack on `node`, if the
/// operator runs there and one is broken.
pub fn first_break(index: &Index<'_>, node: &Node) -> Option<StackBreak> {
    let on_node: Vec<&Pod> =
        index.pods_on(&node.name).iter().copied().filter(|p| p.operand.is_some() && !p.terminating).collect();
    for layer in OperandLayer::ALL {
        if !deployed_here(node, layer) {
            continue;
        }
        let pod = on_node.iter().find(|p| p.operand.as_ref().is_some_and(|o| o.layer == layer));
        let Some(pod) = pod else {
            if index.operand_runs(layer) {
                return Some(StackBreak { layer, problem: Problem::NoPod });
            }
            continue;
        };
        let Some(operand) = pod.operand.as_ref() else { continue };
        if operand.ready && pod.phase == PodPhase::Running {
            continue;
        }
        return Some(StackBreak {
            layer,
            problem: Problem::NotReady {
                namespace: pod.namespace.clone(),
                pod: pod.name.to_string(),
                waiting: operand.waiting.as_ref().map(|(r, m)| (r.clone(), m.to_string())),
                restarts: operand.restarts,
                init: operand.init,
            },
        });
    }
    None
}

impl StackBreak {
    /// What is broken, in words: the layer, its pod and state.
    pub fn text(&self) -> String {
        match &self.problem {
            Problem::NoPod => format!(
                "the GPU Operator's {} has no pod here though the node is labelled for it (nvidia.com/gpu.deploy.{}=true) and it runs elsewhere",
                self.layer.title(),
                self.layer.deploy_label_suffix()
            ),
            Problem::NotReady { namespace, pod, waiting, restarts, init } => {
                let mut state = match (waiting, init) {
                    (Some((reason, _)), _) => reason.to_string(),
                    (None, Some((done, all))) => format!("Init:{done}/{all}"),
                    (None, None) => "not ready".into(),
                };
                if *restarts > 0 {
                    state.push_str(&format!(", {restarts} restart(s)"));
                }
                let message = waiting
                    .as_ref()
                    .map(|(_, m)| m.trim())
                    .filter(|m| !m.is_empty())
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default();
                format!(
                    "the GPU Operator's {} is not ready here ({namespace}/{pod} {state}{message})",
                    self.layer.title()
                )
            }
        }
    }

    /// The command that shows what is wrong with it.
    pub fn command(&self, node: Sym) -> String {
        match &self.problem {
            Problem::NoPod => format!(
                "kubectl get ds -A -l app={} -o wide; kubectl describe node {node} | grep -A5 Taints",
                self.layer.app()
            ),
            Problem::NotReady { namespace, pod, .. } => {
                format!(
                    "kubectl logs -n {namespace} {pod} --all-containers --tail=50; kubectl describe pod -n {namespace} {pod}"
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::testing::{node, pod, snapshot};
    use crate::model::{Operand, Pod};

    fn operand(name: &str, on: &str, layer: OperandLayer, ready: bool) -> Pod {
        let mut p = pod(name).ns("gpu-operator").owner("DaemonSet", layer.app()).on(on).running().build();
        p.operand = Some(Box::new(Operand { layer, ready, restarts: 0, waiting: None, init: None }));
        p
    }

    /// A GPU node the operator deploys every layer on but those `off`.
    fn gpu_node_without(name: &str, off: &[OperandLayer]) -> crate::model::Node {
        let mut b = node(name).hardware(8).label("nvidia.com/gpu.present", "true");
        for layer in OperandLayer::ALL {
            let value = if off.contains(&layer) { "false" } else { "true" };
            b = b.label(&format!("nvidia.com/gpu.deploy.{}", layer.deploy_label_suffix()), value);
        }
        b.build()
    }

    fn gpu_node(name: &str) -> crate::model::Node {
        gpu_node_without(name, &[])
    }

    #[test]
    fn the_first_broken_layer_is_named_not_the_ones_waiting_for_it() {
        let mut pods: Vec<Pod> =
            OperandLayer::ALL.iter().map(|l| operand(&format!("{}-a", l.app()), "a", *l, true)).collect();
        let mut driver = operand("nvidia-driver-daemonset-q45bl", "b", OperandLayer::Driver, false);
        driver.operand.as_mut().unwrap().waiting = Some((Sym::new("CrashLoopBackOff"), "back-off 5m0s".into()));
        driver.operand.as_mut().unwrap().restarts = 7;
        let mut toolkit =
            operand("nvidia-container-toolkit-daemonset-srf6l", "b", OperandLayer::ContainerToolkit, false);
        toolkit.operand.as_mut().unwrap().init = Some((0, 1));
        pods.extend([driver, toolkit]);
        let snap = snapshot(vec![gpu_node("a"), gpu_node("b")], pods, vec![], 0);
        let index = Index::build(&snap, 0);
        assert_eq!(first_break(&index, &snap.nodes[&Sym::new("a")]), None);
        let broken = first_break(&index, &snap.nodes[&Sym::new("b")]).expect("b is broken");
        assert_eq!(broken.layer, OperandLayer::Driver);
        match broken.problem {
            Problem::NotReady { pod, restarts, waiting, .. } => {
                assert_eq!(pod, "nvidia-driver-daemonset-q45bl");
                assert_eq!(restarts, 7);
                assert_eq!(waiting.as_ref().map(|w| w.0.as_str()), Some("CrashLoopBackOff"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_layer_labelled_for_the_node_without_its_pod_is_the_break_when_it_runs_elsewhere() {
        use OperandLayer::*;
        let on = |node: &str, layers: &[OperandLayer]| -> Vec<Pod> {
            layers.iter().map(|l| operand(&format!("{}-{node}", l.app()), node, *l, true)).collect()
        };
        let mut pods = on("a", &OperandLayer::ALL);
        // b: the user turned dcgm-exporter off; the validator is missing.
        pods.extend(on("b", &[Driver, ContainerToolkit, DevicePlugin, FeatureDiscovery]));
        // c: no device plugin.
        pods.extend(on("c", &[Driver, ContainerToolkit]));
        let nodes = vec![gpu_node("a"), gpu_node_without("b", &[DcgmExporter]), gpu_node("c")];
        let snap = snapshot(nodes, pods, vec![], 0);
        let index = Index::build(&snap, 0);
        let node = |n: &str| &snap.nodes[&Sym::new(n)];
        assert_eq!(first_break(&index, node("b")), Some(StackBreak { layer: Validator, problem: Problem::NoPod }));
        assert_eq!(first_break(&index, node("c")), Some(StackBreak { layer: DevicePlugin, problem: Problem::NoPod }));
        // Without the operator's pods anywhere (labels left behind), nothing is said.
        let snap = snapshot(vec![gpu_node("b")], vec![], vec![], 0);
        assert_eq!(first_break(&Index::build(&snap, 0), &snap.nodes[&Sym::new("b")]), None);
    }
}
