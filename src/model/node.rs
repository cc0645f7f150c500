//! Nodes: what the API server says about a machine, reduced to what the
//! analyses read. GPU Feature Discovery and GPU Operator labels are decoded
//! once, here, when the record is built.

use super::keys;
use super::resources::Resources;
use super::sym::Sym;
use super::versions::{CudaVersion, DriverVersion};
use super::{Labels, NodeLabels, Timestamp};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl TaintEffect {
    pub fn parse(s: &str) -> Option<TaintEffect> {
        match s {
            "NoSchedule" => Some(TaintEffect::NoSchedule),
            "PreferNoSchedule" => Some(TaintEffect::PreferNoSchedule),
            "NoExecute" => Some(TaintEffect::NoExecute),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Taint {
    pub key: Sym,
    /// Empty string when the taint has no value (`{gpu: }` in scheduler text).
    pub value: Sym,
    pub effect: TaintEffect,
}

impl Taint {
    pub fn new(key: &str, value: &str, effect: TaintEffect) -> Taint {
        Taint { key: Sym::new(key), value: Sym::new(value), effect }
    }

    /// The scheduler's rendering: `{nvidia.com/gpu: present}`.
    pub fn scheduler_text(&self) -> String {
        format!("{{{}: {}}}", self.key, self.value)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TolerationOperator {
    Equal,
    Exists,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Toleration {
    /// `None` with `Exists` tolerates every taint.
    pub key: Option<Sym>,
    pub operator: TolerationOperator,
    pub value: Sym,
    /// `None` matches every effect.
    pub effect: Option<TaintEffect>,
}

impl Toleration {
    pub fn exists(key: &str) -> Toleration {
        Toleration { key: Some(Sym::new(key)), operator: TolerationOperator::Exists, value: Sym::new(""), effect: None }
    }

    pub fn equal(key: &str, value: &str, effect: Option<TaintEffect>) -> Toleration {
        Toleration { key: Some(Sym::new(key)), operator: TolerationOperator::Equal, value: Sym::new(value), effect }
    }

    /// Kubernetes' `ToleratesTaint`.
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if let Some(effect) = self.effect
            && effect != taint.effect
        {
            return false;
        }
        match self.key.clone() {
            Some(key) if key != taint.key => return false,
            None if self.operator != TolerationOperator::Exists => return false,
            _ => {}
        }
        match self.operator {
            TolerationOperator::Exists => true,
            TolerationOperator::Equal => self.value == taint.value,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SelectorOperator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
}

impl SelectorOperator {
    /// Whether a label's `value` (None: the label is absent) satisfies this
    /// operator over `values`, as node selectors and label selectors read
    /// it (Gt and Lt compare integers; label selectors never carry them).
    pub fn matches(self, values: &[Sym], value: Option<Sym>) -> bool {
        let number = |s: Sym| s.as_str().trim().parse::<i64>().ok();
        match self {
            SelectorOperator::In => value.is_some_and(|v| values.contains(&v)),
            SelectorOperator::NotIn => value.is_none_or(|v| !values.contains(&v)),
            SelectorOperator::Exists => value.is_some(),
            SelectorOperator::DoesNotExist => value.is_none(),
            SelectorOperator::Gt | SelectorOperator::Lt => {
                let (Some(v), Some(bound)) = (value.and_then(number), values.first().cloned().and_then(number)) else {
                    return false;
                };
                if self == SelectorOperator::Gt { v > bound } else { v < bound }
            }
        }
    }

    pub fn parse(s: &str) -> Option<SelectorOperator> {
        Some(match s {
            "In" => SelectorOperator::In,
            "NotIn" => SelectorOperator::NotIn,
            "Exists" => SelectorOperator::Exists,
            "DoesNotExist" => SelectorOperator::DoesNotExist,
            "Gt" => SelectorOperator::Gt,
            "Lt" => SelectorOperator::Lt,
            _ => return None,
        })
    }
}

/// One `matchExpressions` (or `matchFields`) entry of a node selector term.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Requirement {
    pub key: Sym,
    pub operator: SelectorOperator,
    pub values: Box<[Sym]>,
}

/// One term of `requiredDuringSchedulingIgnoredDuringExecution`; the terms
/// are ORed, the requirements inside a term ANDed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct NodeSelectorTerm {
    pub expressions: Box<[Requirement]>,
    /// `matchFields`: only `metadata.name` exists.
    pub fields: Box<[Requirement]>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    NotReady,
    Unknown,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MigStrategy {
    None,
    Single,
    Mixed,
}

/// What GPU Feature Discovery says about the node's GPUs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GpuLabels {
    pub product: Option<Sym>,
    pub count: Option<u32>,
    pub memory_mib: Option<u32>,
    pub family: Option<Sym>,
    pub mig_capable: Option<bool>,
    pub mig_strategy: Option<MigStrategy>,
    pub driver: Option<DriverVersion>,
    /// The newest CUDA the *driver* supports (not a container's CUDA).
    pub cuda_runtime: Option<CudaVersion>,
    pub present: bool,
}

/// What the GPU Operator (driver upgrades, mig-manager) says.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OperatorLabels {
    pub upgrade_state: Option<Sym>,
    /// When the node entered `upgrade_state`, as far as anyone knows.
    pub upgrade_since: Option<Timestamp>,
    pub upgrade_skip: bool,
    pub mig_config: Option<Sym>,
    pub mig_config_state: Option<Sym>,
    pub mig_config_since: Option<Timestamp>,
    /// Some `nvidia.com/gpu.deploy.*` label is `paused-for-mig-change`.
    pub paused_for_mig_change: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct NodeCondition {
    pub kind: Sym,
    pub status: Sym,
    pub reason: Sym,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub name: Sym,
    pub labels: NodeLabels,
    pub taints: Box<[Taint]>,
    pub unschedulable: bool,
    pub readiness: Readiness,
    pub capacity: Resources,
    pub allocatable: Resources,
    pub created: Timestamp,
    /// Conditions other than Ready that report a problem (status True for
    /// pressure/problem types), e.g. NPD's GPU conditions.
    pub problems: Box<[NodeCondition]>,
    pub gpu: GpuLabels,
    pub operator: OperatorLabels,
}

impl Node {
    /// The taint of a kgpu defrag plan's reservation, if the node carries one.
    pub fn defrag_reservation(&self) -> Option<&Taint> {
        self.taints.iter().find(|t| t.key.as_str() == keys::DEFRAG_RESERVATION)
    }

    /// Builds the record and decodes its GPU labels.
    pub fn new(name: &str, labels: Labels) -> Node {
        let gpu = decode_gpu_labels(&labels);
        let operator = decode_operator_labels(&labels);
        let name = Sym::new(name);
        Node {
            name: name.clone(),
            labels: NodeLabels::new(name, &labels),
            taints: Box::new([]),
            unschedulable: false,
            readiness: Readiness::Ready,
            capacity: Resources::default(),
            allocatable: Resources::default(),
            created: 0,
            problems: Box::new([]),
            gpu,
            operator,
        }
    }

    pub fn label(&self, key: &str) -> Option<&Sym> {
        self.labels.value(key)
    }

    pub fn is_ready(&self) -> bool {
        self.readiness == Readiness::Ready
    }

    /// GPUs the hardware has, as far as labels tell (GFD `gpu.count`).
    /// Under MIG `single` GFD counts MIG devices, not physical GPUs.
    pub fn hardware_gpus(&self) -> Option<u32> {
        self.gpu.count
    }

    /// Whole GPUs the kubelet counts in capacity but not in allocatable:
    /// the devices its device plugin reports unhealthy (the kubelet takes
    /// them out of allocatable). Read from the Node object alone; none for
    /// a node that shares its GPUs (replicas count there, not devices).
    pub fn withheld_gpus(&self) -> u64 {
        if self.label(crate::model::keys::GPU_REPLICAS).is_some_and(|r| r.as_str().trim() != "1") {
            return 0;
        }
        self.capacity.gpu.saturating_sub(self.allocatable.gpu)
    }

    /// A node is a GPU node when it advertises, labels or reports GPUs.
    pub fn is_gpu_node(&self) -> bool {
        self.gpu.present
            || self.capacity.wants_gpu()
            || self.allocatable.wants_gpu()
            || self.gpu.count.is_some_and(|c| c > 0)
    }
}

pub fn label_value<'a>(labels: &'a Labels, key: &str) -> Option<&'a Sym> {
    label_of(labels, &Sym::get(key)?)
}

/// The value of label `key`.
pub fn label_of<'a>(labels: &'a [(Sym, Sym)], key: &Sym) -> Option<&'a Sym> {
    labels.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// Sorted, de-duplicated label pairs from any iterator of string pairs.
pub fn labels_from<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Labels {
    let mut v: Vec<(Sym, Sym)> = pairs.into_iter().map(|(k, v)| (Sym::new(k), Sym::new(v))).collect();
    v.sort_by_key(|a| a.0.clone());
    v.dedup_by(|a, b| a.0 == b.0);
    v.into_boxed_slice()
}

fn decode_gpu_labels(labels: &Labels) -> GpuLabels {
    let get = |k: &str| label_value(labels, k).map(|s| s.as_str());
    let parse_u32 = |k: &str| get(k).and_then(|v| v.trim().parse::<u32>().ok());
    let driver = get(keys::DRIVER_FULL)
        .and_then(DriverVersion::parse)
        .or_else(|| {
            get(keys::DRIVER_MAJOR)
                .and_then(|major| DriverVersion::from_parts(major, get(keys::DRIVER_MINOR), get(keys::DRIVER_REVISION)))
        })
        .or_else(|| {
            get(keys::DRIVER_MAJOR_DEPRECATED).and_then(|major| {
                DriverVersion::from_parts(major, get(keys::DRIVER_MINOR_DEPRECATED), get(keys::DRIVER_REV_DEPRECATED))
            })
        });
    let cuda_runtime = get(keys::CUDA_RUNTIME_MAJOR)
        .map(|major| (major, get(keys::CUDA_RUNTIME_MINOR)))
        .or_else(|| {
            get(keys::CUDA_RUNTIME_MAJOR_DEPRECATED).map(|major| (major, get(keys::CUDA_RUNTIME_MINOR_DEPRECATED)))
        })
        .and_then(|(major, minor)| CudaVersion::parse(&format!("{}.{}", major, minor.unwrap_or("0"))));
    let mig_strategy = get(keys::MIG_STRATEGY).and_then(|s| match s {
        "none" => Some(MigStrategy::None),
        "single" => Some(MigStrategy::Single),
        "mixed" => Some(MigStrategy::Mixed),
        _ => None,
    });
    let product = label_value(labels, keys::GPU_PRODUCT);
    GpuLabels {
        product: product.cloned(),
        count: parse_u32(keys::GPU_COUNT),
        memory_mib: parse_u32(keys::GPU_MEMORY),
        family: label_value(labels, keys::GPU_FAMILY).cloned(),
        mig_capable: get(keys::MIG_CAPABLE).map(|v| v == "true"),
        mig_strategy,
        driver,
        cuda_runtime,
        present: get(keys::GPU_PRESENT) == Some("true") || product.is_some(),
    }
}

fn decode_operator_labels(labels: &Labels) -> OperatorLabels {
    let paused = labels
        .iter()
        .any(|(k, v)| k.as_str().starts_with(keys::GPU_DEPLOY_PREFIX) && v.as_str() == keys::PAUSED_FOR_MIG_CHANGE);
    OperatorLabels {
        upgrade_state: label_value(labels, keys::DRIVER_UPGRADE_STATE).filter(|s| !s.as_str().is_empty()).cloned(),
        upgrade_since: None,
        upgrade_skip: label_value(labels, keys::DRIVER_UPGRADE_SKIP).is_some_and(|v| v.as_str() == "true"),
        mig_config: label_value(labels, keys::MIG_CONFIG).cloned(),
        mig_config_state: label_value(labels, keys::MIG_CONFIG_STATE).cloned(),
        mig_config_since: None,
        paused_for_mig_change: paused,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toleration_rules() {
        let gpu = Taint::new("nvidia.com/gpu", "present", TaintEffect::NoSchedule);
        assert!(Toleration::exists("nvidia.com/gpu").tolerates(&gpu));
        assert!(Toleration::equal("nvidia.com/gpu", "present", None).tolerates(&gpu));
        assert!(!Toleration::equal("nvidia.com/gpu", "true", None).tolerates(&gpu));
        assert!(!Toleration::equal("nvidia.com/gpu", "present", Some(TaintEffect::NoExecute)).tolerates(&gpu));
        let everything =
            Toleration { key: None, operator: TolerationOperator::Exists, value: Sym::new(""), effect: None };
        assert!(everything.tolerates(&gpu));
        assert!(!Toleration::exists("other").tolerates(&gpu));
    }

    #[test]
    fn decodes_gfd_labels() {
        let labels = labels_from([
            ("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"),
            ("nvidia.com/gpu.count", "8"),
            ("nvidia.com/cuda.driver.major", "550"),
            ("nvidia.com/cuda.driver.minor", "54"),
            ("nvidia.com/cuda.driver.rev", "15"),
            ("nvidia.com/cuda.runtime.major", "12"),
            ("nvidia.com/cuda.runtime.minor", "4"),
            ("nvidia.com/mig.strategy", "mixed"),
            ("nvidia.com/gpu.deploy.device-plugin", "paused-for-mig-change"),
            ("nvidia.com/gpu-driver-upgrade-state", "upgrade-required"),
        ]);
        let node = Node::new("n1", labels);
        assert_eq!(node.gpu.count, Some(8));
        assert_eq!(node.gpu.driver.as_ref().map(|d| d.to_string()).as_deref(), Some("550.54.15"));
        assert_eq!(node.gpu.cuda_runtime, Some(CudaVersion::new(12, 4)));
        assert_eq!(node.gpu.mig_strategy, Some(MigStrategy::Mixed));
        assert!(node.operator.paused_for_mig_change);
        assert_eq!(node.operator.upgrade_state.as_ref().map(|s| s.as_str()), Some("upgrade-required"));
        assert!(node.is_gpu_node());
    }
}
