//! The words of the gang and queue controllers, read back: Volcano's
//! `tasks in gang unschedulable` and Kueue's `couldn't assign flavors`.
//! Like the scheduler's messages (see `scheduler_msg`), these are read from
//! events and conditions as the controllers print them, in every wording
//! the fixtures hold; anything else is left to be shown raw.

/// Volcano's gang message:
/// `1/1 tasks in gang unschedulable: pod group is not ready, 1 Pending, 1 minAvailable; Pending: 1 Unschedulable`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GangMessage {
    /// Tasks waiting (Volcano prints the pending tasks first)...
    pub waiting: u32,
    /// ...of the job's tasks.
    pub tasks: u32,
    /// `pod group is not ready`, `job is not ready`, `0 nodes are available`, ...
    pub why: String,
    pub min_available: Option<u32>,
    /// Task counts by phase: `Pending`, `Running`, ...
    pub phases: Vec<(String, u32)>,
    /// After `; Pending:`: why the pending tasks wait (`Unschedulable`, `Undetermined`).
    pub pending_reasons: Vec<(String, u32)>,
}

/// Reads Volcano's gang message anywhere in `text` (events prefix it with
/// columns, the job controller with `PodGroup ns:name unschedule,reason: `).
pub fn parse_gang(text: &str) -> Option<GangMessage> {
    let marker = " tasks in gang unschedulable:";
    let at = text.find(marker)?;
    let head = text[..at].rsplit(|c: char| c.is_whitespace() || c == ':').next()?;
    let (waiting, tasks) = head.split_once('/')?;
    let (waiting, tasks) = (waiting.trim().parse().ok()?, tasks.trim().parse().ok()?);
    let rest = text[at + marker.len()..].trim().trim_end_matches('.');
    let (main, pending) = match rest.split_once("; Pending:") {
        Some((m, p)) => (m, Some(p)),
        None => (rest, None),
    };
    let mut why = Vec::new();
    let mut min_available = None;
    let mut phases = Vec::new();
    for part in main.split(", ") {
        match counted(part) {
            Some((n, "minAvailable")) => min_available = Some(n),
            Some((n, phase)) if is_phase(phase) => phases.push((phase.to_string(), n)),
            _ => why.push(part.trim()),
        }
    }
    let pending_reasons = pending
        .map(|p| p.split(", ").filter_map(counted).map(|(n, r)| (r.to_string(), n)).collect())
        .unwrap_or_default();
    Some(GangMessage { waiting, tasks, why: why.join(", "), min_available, phases, pending_reasons })
}

fn is_phase(word: &str) -> bool {
    matches!(word, "Pending" | "Running" | "Succeeded" | "Failed" | "Unknown" | "Releasing" | "Allocated" | "Pipelined")
}

/// `12 Running` → (12, "Running").
fn counted(part: &str) -> Option<(u32, &str)> {
    let (n, word) = part.trim().split_once(' ')?;
    Some((n.parse().ok()?, word.trim()))
}

/// Kueue's reason for not reserving quota (for a pod set, where it names one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuotaMessage {
    pub pod_set: Option<String>,
    pub problem: QuotaProblem,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QuotaProblem {
    /// `insufficient unused quota for R in flavor F, N more needed` (the
    /// quota exists but others use it), or `insufficient quota for R in
    /// flavor F ...` (the request exceeds what the flavor can ever give).
    Insufficient { resource: String, flavor: String, unused: bool, more_needed: Option<String> },
    /// `resource R unavailable in ClusterQueue`: no flavor covers it.
    Unavailable { resource: String },
    /// `topology "T" doesn't allow to fit any of N pod(s)`.
    Topology { topology: String, pods: u32 },
    /// `LocalQueue Q doesn't exist`.
    LocalQueueMissing { local_queue: String },
    /// `Workload no longer fits after processing another workload`: another
    /// workload took the quota in the same admission cycle.
    NoLongerFits,
    /// The words after the pod set, when they are none of the above.
    Other(String),
}

impl QuotaMessage {
    /// One line for the pending chain.
    pub fn describe(&self) -> String {
        let ps = self.pod_set.as_deref().map_or(String::new(), |p| format!("pod set {p}: "));
        match &self.problem {
            QuotaProblem::Insufficient { resource, flavor, unused: true, more_needed } => format!(
                "{ps}{} more {resource} needed in flavor {flavor} (others use the quota)",
                more_needed.as_deref().unwrap_or("some")
            ),
            QuotaProblem::Insufficient { resource, flavor, unused: false, .. } => {
                format!("{ps}asks for more {resource} than flavor {flavor} can ever give")
            }
            QuotaProblem::Unavailable { resource } => format!("{ps}no flavor of the ClusterQueue covers {resource}"),
            QuotaProblem::Topology { topology, pods } => {
                format!("{ps}topology {topology} has no domain for {pods} pod(s)")
            }
            QuotaProblem::LocalQueueMissing { local_queue } => format!("LocalQueue {local_queue} does not exist"),
            QuotaProblem::NoLongerFits => "another workload took the quota in the same admission cycle".into(),
            QuotaProblem::Other(text) => format!("{ps}{text}"),
        }
    }
}

/// Reads Kueue's admission messages anywhere in `text`: `couldn't assign
/// flavors to pod set P: ...`, `LocalQueue Q doesn't exist`, `Workload no
/// longer fits after processing another workload`.
pub fn parse_quota(text: &str) -> Option<QuotaMessage> {
    if text.contains("Workload no longer fits after processing another workload") {
        return Some(QuotaMessage { pod_set: None, problem: QuotaProblem::NoLongerFits });
    }
    if let Some(at) = text.find("LocalQueue ")
        && let Some(q) = text[at + "LocalQueue ".len()..].strip_suffix(" doesn't exist")
        && !q.contains(' ')
    {
        return Some(QuotaMessage {
            pod_set: None,
            problem: QuotaProblem::LocalQueueMissing { local_queue: q.to_string() },
        });
    }
    let marker = "couldn't assign flavors to pod set ";
    let rest = &text[text.find(marker)? + marker.len()..];
    let (pod_set, reason) = rest.split_once(": ")?;
    let reason = reason.trim();
    let problem = if let Some(r) = reason.strip_prefix("insufficient unused quota for ") {
        let (resource, after) = r.split_once(" in flavor ")?;
        let (flavor, more) = match after.split_once(", ") {
            Some((f, m)) => (f, m.strip_suffix(" more needed").map(str::to_string)),
            None => (after, None),
        };
        QuotaProblem::Insufficient {
            resource: resource.to_string(),
            flavor: flavor.trim().to_string(),
            unused: true,
            more_needed: more,
        }
    } else if let Some(r) = reason.strip_prefix("insufficient quota for ") {
        let (resource, after) = r.split_once(" in flavor ")?;
        let flavor = after.split([',', ' ']).next().unwrap_or(after);
        QuotaProblem::Insufficient {
            resource: resource.to_string(),
            flavor: flavor.to_string(),
            unused: false,
            more_needed: None,
        }
    } else if let Some(r) =
        reason.strip_prefix("resource ").and_then(|r| r.strip_suffix(" unavailable in ClusterQueue"))
    {
        QuotaProblem::Unavailable { resource: r.to_string() }
    } else if let Some(r) = reason.strip_prefix("topology ") {
        let (topology, after) = r.split_once(" doesn't allow to fit any of ")?;
        let pods = after.split(' ').next()?.parse().ok()?;
        QuotaProblem::Topology { topology: topology.trim_matches('"').to_string(), pods }
    } else {
        QuotaProblem::Other(reason.to_string())
    };
    Some(QuotaMessage { pod_set: Some(pod_set.trim().to_string()), problem })
}

/// Why Kueue's DRA quota (v0.17, `DynamicResourceAllocation` gate) finds a
/// workload inadmissible, as `pkg/dra/claims.go` and the workload
/// controller word it: it counts `exactly` requests of a DeviceClass its
/// `deviceClassMappings` name, in claim templates, and nothing else.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DraRefusal {
    /// A pod set names a ResourceClaim (`resourceClaimName`).
    Claims,
    /// A template asks for a class no mapping names.
    Unmapped { class: String, pod_set: String },
    /// A template uses what Kueue does not count (`CEL selectors`,
    /// `FirstAvailable device selection`, `AdminAccess`, …).
    Unsupported { template: Option<String>, feature: String },
    /// A template Kueue could not read.
    TemplateMissing { template: String, pod_set: String },
}

pub fn parse_dra(text: &str) -> Option<DraRefusal> {
    if text.contains("DynamicResourceAllocation feature does not support use of resource claims") {
        return Some(DraRefusal::Claims);
    }
    if let Some(at) = text.find("DeviceClass ")
        && let Some((class, rest)) =
            text[at + "DeviceClass ".len()..].split_once(" is not mapped in DRA configuration for podset ")
    {
        let pod_set = rest.trim_end_matches(['"', '.', ' ']).to_string();
        return Some(DraRefusal::Unmapped { class: class.to_string(), pod_set });
    }
    let marker = "failed to get claim spec for ResourceClaimTemplate ";
    if let Some(at) = text.find(marker)
        && let Some((template, rest)) = text[at + marker.len()..].split_once(" in podset ")
    {
        let pod_set = rest.split(':').next().unwrap_or(rest).trim().to_string();
        return Some(DraRefusal::TemplateMissing { template: template.to_string(), pod_set });
    }
    let supported = ["is not supported", "are not supported"];
    let unsupported = supported.iter().any(|s| text.contains(s)) || text.contains("unsupported allocation mode");
    if unsupported && text.contains("resourceClaims") {
        let marker = "ResourceClaimTemplate ";
        let (template, feature) = match text.find(marker) {
            Some(at) => match text[at + marker.len()..].split_once(": ") {
                Some((t, f)) => (Some(t.to_string()), f),
                None => (None, &text[at..]),
            },
            None => (None, text),
        };
        let feature = supported.iter().fold(feature.trim(), |f, s| f.strip_suffix(s).unwrap_or(f)).trim();
        return Some(DraRefusal::Unsupported { template, feature: feature.to_string() });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volcano_gang_message() {
        let m = parse_gang(
            "1/1 tasks in gang unschedulable: pod group is not ready, 1 Pending, 1 minAvailable; Pending: 1 Undetermined",
        )
        .unwrap();
        assert_eq!((m.waiting, m.tasks, m.min_available), (1, 1, Some(1)));
        assert_eq!(m.why, "pod group is not ready");
        assert_eq!(m.phases, [("Pending".to_string(), 1)]);
        assert_eq!(m.pending_reasons, [("Undetermined".to_string(), 1)]);
    }

    #[test]
    fn kueue_quota_message() {
        let m = parse_quota(
            "couldn't assign flavors to pod set rank: insufficient unused quota for nvidia.com/gpu in flavor gb200, 8 more needed",
        )
        .unwrap();
        assert_eq!(m.pod_set.as_deref(), Some("rank"));
        assert_eq!(
            m.problem,
            QuotaProblem::Insufficient {
                resource: "nvidia.com/gpu".into(),
                flavor: "gb200".into(),
                unused: true,
                more_needed: Some("8".into())
            }
        );
        assert_eq!(m.describe(), "pod set rank: 8 more nvidia.com/gpu needed in flavor gb200 (others use the quota)");
    }

    /// Kueue v0.17's own words, as its workload controller wrote them on the
    /// lab (tests/fixtures/verdicts/kueue-dra/).
    #[test]
    fn kueue_dra_refusals() {
        assert_eq!(
            parse_dra("DynamicResourceAllocation feature does not support use of resource claims"),
            Some(DraRefusal::Claims)
        );
        assert_eq!(
            parse_dra(
                "spec.podSets[0].template.spec.resourceClaims[0].resourceClaimTemplateName: Not found: \"DeviceClass vfio.gpu.nvidia.com is not mapped in DRA configuration for podset main\""
            ),
            Some(DraRefusal::Unmapped { class: "vfio.gpu.nvidia.com".into(), pod_set: "main".into() })
        );
        assert_eq!(
            parse_dra(
                "spec.podSets[0].template.spec.resourceClaims[0].devices.requests[0].exactly.selectors: Invalid value: null: ResourceClaimTemplate h100-by-selector: CEL selectors are not supported"
            ),
            Some(DraRefusal::Unsupported {
                template: Some("h100-by-selector".into()),
                feature: "CEL selectors".into()
            })
        );
        assert_eq!(
            parse_dra(
                "spec.podSets[0].template.spec.resourceClaims[0].devices.requests[0]: Invalid value: null: ResourceClaimTemplate any-gpu: FirstAvailable device selection is not supported"
            ),
            Some(DraRefusal::Unsupported {
                template: Some("any-gpu".into()),
                feature: "FirstAvailable device selection".into()
            })
        );
        assert_eq!(
            parse_dra(
                "spec.podSets[0].template.spec.resourceClaims[0]: Internal error: failed to get claim spec for ResourceClaimTemplate two-gpus in podset main: resourceclaimtemplates.resource.k8s.io \"two-gpus\" not found"
            ),
            Some(DraRefusal::TemplateMissing { template: "two-gpus".into(), pod_set: "main".into() })
        );
        assert_eq!(
            parse_dra(
                "couldn't assign flavors to pod set main: insufficient unused quota for whole-gpus in flavor default, 1 more needed"
            ),
            None
        );
    }
}
