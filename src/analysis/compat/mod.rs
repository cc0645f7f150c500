//! Driver ↔ CUDA compatibility.
//!
//! A container's CUDA need comes from `NVIDIA_REQUIRE_CUDA` (and the other
//! `NVIDIA_REQUIRE_*` variables), from a legacy `CUDA_VERSION`, or — marked
//! *guessed* — from the image tag. The container toolkit's grammar: spaces
//! separate ORed clauses, commas ANDed constraints, separate variables are
//! ANDed, and `NVIDIA_DISABLE_REQUIRE` switches the check off.
//!
//! Verdicts for a need on a node (rules from `assets/reference/`):
//! - `ok`: the driver runs that CUDA natively (Table 3);
//! - `minor-compat`: same CUDA major, driver at or above the family minimum
//!   (minor-version compatibility), with a limited feature set;
//! - `forward-compat`: a newer CUDA major via the cuda-compat package; only
//!   on data-center GPUs and on a supported branch;
//! - `incompatible`: none of the above, or the container runtime's own
//!   requirement check refuses to start the container;
//! - `unknown`: the driver or the need is not known.

use crate::model::{CudaNeed, CudaVersion, DriverVersion, Node, Sym, Timestamp};
use crate::reference::cuda::tables;

mod matrix;
#[cfg(test)]
mod tests;

pub use matrix::{Cell, Matrix, Sample, matrix};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verdict {
    Ok,
    MinorCompat,
    ForwardCompat,
    Unknown,
    Incompatible,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::MinorCompat => "minor-compat",
            Verdict::ForwardCompat => "forward-compat",
            Verdict::Incompatible => "incompatible",
            Verdict::Unknown => "unknown",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Ge,
    Gt,
    Le,
    Lt,
    Eq,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Constraint {
    Cuda(Op, CudaVersion),
    Driver(Op, DriverVersion),
    Brand(String),
    Arch(Op, String),
}

/// One `NVIDIA_REQUIRE_*` value: ORed clauses of ANDed constraints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequireSet {
    pub text: String,
    pub clauses: Vec<Vec<Constraint>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NeedSource {
    /// `NVIDIA_REQUIRE_CUDA` (and friends), enforced by the container runtime.
    Require,
    /// Legacy `CUDA_VERSION`, enforced as `cuda>=X.Y`.
    LegacyCudaVersion,
    /// From the image tag; nothing enforces it.
    Guessed,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Need {
    /// The headline CUDA version (the matrix column).
    pub cuda: CudaVersion,
    pub source: NeedSource,
    /// All sets must hold (empty when disabled or guessed).
    pub sets: Vec<RequireSet>,
    pub disabled: bool,
}

impl Need {
    pub fn column(&self) -> String {
        match self.source {
            NeedSource::Guessed => format!("{} (guessed)", self.cuda),
            _ => self.cuda.to_string(),
        }
    }
}

fn parse_op(s: &str) -> Option<(Op, &str)> {
    for (prefix, op) in [(">=", Op::Ge), ("<=", Op::Le), ("==", Op::Eq), (">", Op::Gt), ("<", Op::Lt), ("=", Op::Eq)] {
        if let Some(rest) = s.strip_prefix(prefix) {
            return Some((op, rest));
        }
    }
    None
}

fn parse_constraint(text: &str) -> Option<Constraint> {
    let t = text.trim();
    let key_end = t.find(|c: char| !c.is_ascii_alphabetic())?;
    let (key, rest) = t.split_at(key_end);
    let (op, value) = parse_op(rest)?;
    match key {
        "cuda" => Some(Constraint::Cuda(op, CudaVersion::parse(value)?)),
        "driver" => Some(Constraint::Driver(op, DriverVersion::parse(value)?)),
        "brand" => Some(Constraint::Brand(value.to_ascii_lowercase())),
        "arch" => Some(Constraint::Arch(op, value.to_string())),
        _ => None,
    }
}

/// Parses one requirement value (`cuda>=12.4 brand=tesla,driver>=470,driver<471`).
/// Unknown constraints make their clause unsatisfiable rather than vanish.
pub fn parse_require(text: &str) -> RequireSet {
    let clauses = text
        .split_whitespace()
        .map(|clause| {
            clause
                .split(',')
                .filter(|c| !c.is_empty())
                .map(|c| parse_constraint(c).unwrap_or(Constraint::Brand(format!("<unparsed:{c}>"))))
                .collect()
        })
        .collect();
    RequireSet { text: text.to_string(), clauses }
}

fn truthy(v: &str) -> bool {
    matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on")
}

/// The requirement strings the container toolkit derives from an
/// environment (`nvidia-require-cases.tsv`): legacy `CUDA_VERSION` becomes
/// `cuda>=X.Y`, Jetpack variables are ignored, `NVIDIA_DISABLE_REQUIRE` drops all.
pub fn derive_requirements(env: &[(&str, &str)]) -> Vec<String> {
    if env.iter().any(|(k, v)| *k == "NVIDIA_DISABLE_REQUIRE" && truthy(v)) {
        return Vec::new();
    }
    let mut out = Vec::new();
    let require_cuda = env.iter().find(|(k, _)| *k == "NVIDIA_REQUIRE_CUDA").map(|(_, v)| v.to_string());
    match require_cuda {
        Some(v) => out.push(v),
        None => {
            if let Some((_, v)) = env.iter().find(|(k, _)| *k == "CUDA_VERSION")
                && let Some(c) = CudaVersion::parse(v)
            {
                out.push(format!("cuda>={c}"));
            }
        }
    }
    for (k, v) in env {
        if k.starts_with("NVIDIA_REQUIRE_") && *k != "NVIDIA_REQUIRE_CUDA" && !k.starts_with("NVIDIA_REQUIRE_JETPACK") {
            out.push(v.to_string());
        }
    }
    out
}

/// The need of a pod's GPU container, if anything says.
pub fn need_of(cuda: &CudaNeed) -> Option<Need> {
    let mut env: Vec<(&str, &str)> = Vec::new();
    if let Some(r) = &cuda.require_cuda {
        env.push(("NVIDIA_REQUIRE_CUDA", r.as_str()));
    }
    if let Some(v) = &cuda.cuda_version {
        env.push(("CUDA_VERSION", v.as_str()));
    }
    let others: Vec<(String, String)> = cuda
        .other_requires
        .iter()
        .filter_map(|s| s.as_str().split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
        .collect();
    for (k, v) in &others {
        env.push((k, v));
    }
    if cuda.disable_require {
        env.push(("NVIDIA_DISABLE_REQUIRE", "true"));
    }
    let headline = cuda.require_cuda.as_ref().and_then(|r| {
        parse_require(r.as_str()).clauses.iter().flatten().find_map(|c| match c {
            Constraint::Cuda(Op::Ge | Op::Gt | Op::Eq, v) => Some(*v),
            _ => None,
        })
    });
    if let Some(cuda_v) = headline {
        let sets = derive_requirements(&env).iter().map(|t| parse_require(t)).collect();
        return Some(Need { cuda: cuda_v, source: NeedSource::Require, sets, disabled: cuda.disable_require });
    }
    if let Some(v) = cuda.cuda_version.as_ref().and_then(|v| CudaVersion::parse(v.as_str())) {
        let sets = derive_requirements(&env).iter().map(|t| parse_require(t)).collect();
        return Some(Need { cuda: v, source: NeedSource::LegacyCudaVersion, sets, disabled: cuda.disable_require });
    }
    let guessed = cuda.image.as_ref().and_then(|i| guess_from_image(i.as_str()))?;
    Some(Need { cuda: guessed, source: NeedSource::Guessed, sets: Vec::new(), disabled: false })
}

/// `nvidia/cuda:12.4.1-runtime-ubuntu22.04` → 12.4; `pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime`
/// → 12.1; `...:cu124` / `torch-cu118` → 12.4 / 11.8.
pub fn guess_from_image(image: &str) -> Option<CudaVersion> {
    let lower = image.to_ascii_lowercase();
    let (repo, tag) = match lower.rsplit_once(':') {
        Some((r, t)) if !t.contains('/') => (r, t),
        _ => (lower.as_str(), ""),
    };
    if repo.ends_with("/cuda") || repo == "cuda" {
        let v: String = tag.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
        if let Some(c) = CudaVersion::parse(&v).filter(|c| c.major >= 7) {
            return Some(c);
        }
    }
    for (i, _) in lower.match_indices("cuda") {
        let rest = lower[i + 4..].trim_start_matches(['-', '_']);
        let v: String = rest.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
        if v.contains('.')
            && let Some(c) = CudaVersion::parse(&v).filter(|c| (7..=20).contains(&c.major))
        {
            return Some(c);
        }
    }
    for (i, _) in lower.match_indices("cu") {
        let before_ok = i == 0 || !lower.as_bytes()[i - 1].is_ascii_alphabetic();
        let digits: String = lower[i + 2..].chars().take_while(|c| c.is_ascii_digit()).collect();
        if before_ok && (digits.len() == 3 || digits.len() == 4) {
            let (major, minor) = digits.split_at(digits.len() - 1);
            if let (Ok(major), Ok(minor)) = (major.parse(), minor.parse())
                && (10..=20).contains(&major)
            {
                return Some(CudaVersion::new(major, minor));
            }
        }
    }
    None
}

/// What kgpu knows of a node for compatibility.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeFacts {
    pub driver: Option<DriverVersion>,
    /// The newest CUDA the driver supports (GFD `cuda.runtime-version`, else Table 3).
    pub cuda: Option<CudaVersion>,
    pub brand: &'static str,
    pub datacenter: bool,
    pub product: Option<Sym>,
}

pub fn node_facts(node: &Node) -> NodeFacts {
    facts_of(node.gpu.driver.clone(), node.gpu.cuda_runtime, node.gpu.product.clone())
}

/// [`node_facts`] where GFD's labels are missing: the driver its agent
/// reads or its DRA slices publish, and the product they publish.
pub fn node_facts_in(index: &crate::analysis::index::Index<'_>, node: &Node) -> NodeFacts {
    let product = node.gpu.product.clone().or_else(|| crate::analysis::fleet::node_product(index, node));
    facts_of(crate::analysis::fleet::node_driver(index, node), node.gpu.cuda_runtime, product)
}

fn facts_of(driver: Option<DriverVersion>, cuda_runtime: Option<CudaVersion>, product: Option<Sym>) -> NodeFacts {
    let cuda = cuda_runtime.or_else(|| driver.as_ref().and_then(|d| tables().max_native_cuda(d)));
    let datacenter = product.as_ref().is_some_and(|p| is_datacenter(p.as_str()));
    NodeFacts { driver, cuda, brand: brand_of(product.as_ref().map(|p| p.as_str())), datacenter, product }
}

/// Data-center GPUs (forward compatibility applies to them only).
pub fn is_datacenter(product: &str) -> bool {
    let p = product.to_ascii_uppercase();
    [
        "A100", "A800", "H100", "H800", "H200", "H20", "B200", "B300", "GB200", "GH200", "A30", "A40", "A10", "L40",
        "L4", "T4", "V100", "P100", "A16", "A2",
    ]
    .iter()
    .any(|m| p.contains(m))
        && !p.contains("GEFORCE")
        && !p.contains("RTX")
}

fn brand_of(product: Option<&str>) -> &'static str {
    let Some(p) = product else { return "unknown" };
    let p = p.to_ascii_uppercase();
    if p.contains("GEFORCE") {
        if p.contains("RTX") { "geforcertx" } else { "geforce" }
    } else if p.contains("QUADRO") {
        "quadro"
    } else if p.contains("TITAN") {
        "titan"
    } else if p.contains("TESLA") {
        "tesla"
    } else if is_datacenter(&p) {
        "nvidia"
    } else {
        "unknown"
    }
}

fn cmp_ok<T: Ord>(op: Op, have: &T, want: &T) -> bool {
    match op {
        Op::Ge => have >= want,
        Op::Gt => have > want,
        Op::Le => have <= want,
        Op::Lt => have < want,
        Op::Eq => have == want,
    }
}

fn constraint_holds(c: &Constraint, node: &NodeFacts) -> Option<bool> {
    Some(match c {
        Constraint::Cuda(op, v) => cmp_ok(*op, &node.cuda?, v),
        Constraint::Driver(op, v) => cmp_ok(*op, node.driver.as_ref()?, v),
        Constraint::Brand(b) => b == node.brand || (node.brand == "nvidia" && b == "tesla"),
        // Architecture is not modelled per GPU; do not refuse on it.
        Constraint::Arch(..) => true,
    })
}

/// The container runtime's check: every set needs one satisfied clause.
/// `None` when the node's facts do not allow a decision.
pub fn runtime_allows(need: &Need, node: &NodeFacts) -> Option<bool> {
    if need.disabled {
        return Some(true);
    }
    for set in &need.sets {
        let mut any = false;
        for clause in &set.clauses {
            let mut all = true;
            for c in clause {
                match constraint_holds(c, node) {
                    Some(true) => {}
                    Some(false) => {
                        all = false;
                        break;
                    }
                    None => return None,
                }
            }
            if all {
                any = true;
                break;
            }
        }
        if !any {
            return Some(false);
        }
    }
    Some(true)
}

/// End of support of a branch, as a Unix time (first day of the month after
/// the named one), from `datacenter-driver-branches.tsv` ("June 2026").
fn end_of_life(text: &str) -> Option<Timestamp> {
    const MONTHS: [&str; 12] = [
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ];
    let mut parts = text.split_whitespace();
    let month = parts.next()?.to_ascii_lowercase();
    let year: i64 = parts.next()?.parse().ok()?;
    let m = MONTHS.iter().position(|x| *x == month)? as i64 + 1;
    let (y, m) = if m == 12 { (year + 1, 1) } else { (year, m + 1) };
    Some(crate::model::time::days_from_civil(y, m, 1) * 86_400)
}

/// The verdict and a sentence that says why (citing the table row used).
pub fn verdict(need: &Need, node: &NodeFacts, now: Timestamp) -> (Verdict, String) {
    let t = tables();
    let (Some(driver), Some(node_cuda)) = (node.driver.as_ref(), node.cuda) else {
        return (Verdict::Unknown, "the node's driver version is not known (no GFD labels, no agent)".into());
    };
    let enforced = matches!(need.source, NeedSource::Require | NeedSource::LegacyCudaVersion) && !need.disabled;
    if enforced && runtime_allows(need, node) == Some(false) {
        let texts: Vec<&str> = need.sets.iter().map(|s| s.text.split_whitespace().next().unwrap_or("")).collect();
        return (
            Verdict::Incompatible,
            format!(
                "the container runtime refuses to start it: unsatisfied condition: {} (driver {driver} supports CUDA {node_cuda})",
                texts.join(", ")
            ),
        );
    }
    let native = t.native_min_driver(need.cuda);
    if node_cuda >= need.cuda || native.is_some_and(|r| *driver >= r.min_driver) {
        let row = native.map_or(String::new(), |r| format!(" (Table 3: {} ≥ {})", r.release, r.min_driver));
        return (Verdict::Ok, format!("driver {driver} runs CUDA {} natively{row}", need.cuda));
    }
    if need.cuda.major == node_cuda.major
        && let Some(range) = t.minor_compat(need.cuda.major)
        && driver.branch() >= range.min_branch
    {
        return (
            Verdict::MinorCompat,
            format!(
                "minor-version compatibility: CUDA {}.x runs on driver ≥ {} with a limited feature set (features that need a newer driver, e.g. JIT of newer PTX, are not guaranteed); driver {driver} natively supports CUDA {node_cuda}",
                need.cuda.major, range.min_branch
            ),
        );
    }
    if need.cuda.major > node_cuda.major {
        if !node.datacenter {
            return (
                Verdict::Incompatible,
                format!(
                    "CUDA {} needs a newer driver than {driver} (CUDA {node_cuda}); forward compatibility (cuda-compat) only works on data-center GPUs",
                    need.cuda
                ),
            );
        }
        match t.branch(driver.branch()) {
            Some(b) if end_of_life(&b.end_of_life).is_some_and(|eol| now >= eol) => {
                return (
                    Verdict::Incompatible,
                    format!(
                        "R{} ({}) reached end of life in {}: no forward compatibility to CUDA {}",
                        b.branch, b.designation, b.end_of_life, need.cuda
                    ),
                );
            }
            Some(b) => {
                return (
                    Verdict::ForwardCompat,
                    format!(
                        "forward compatibility: needs the cuda-compat-{}-{} package in the image; R{} ({}, supported until {}) on a data-center GPU",
                        need.cuda.major, need.cuda.minor, b.branch, b.designation, b.end_of_life
                    ),
                );
            }
            None => {
                return (
                    Verdict::Incompatible,
                    format!(
                        "driver branch R{} is not a supported data-center branch: no forward compatibility to CUDA {}",
                        driver.branch(),
                        need.cuda
                    ),
                );
            }
        }
    }
    let row = native.map_or(String::new(), |r| format!("; Table 3: {} needs ≥ {}", r.release, r.min_driver));
    (Verdict::Incompatible, format!("driver {driver} (CUDA {node_cuda}) is too old for CUDA {}{row}", need.cuda))
}
