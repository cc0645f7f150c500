//! kube-scheduler `FailedScheduling` messages: written (by the simulator)
//! and read (for every source) in the real format.
//!
//! `FitError.Error()`: `0/<N> nodes are available: <count> <reason>, ....`
//! (Volcano's per-task `FitErrors`: `0/<N> nodes are unavailable: ...`)
//! with the `"<count> <reason>"` strings sorted *as strings*, then a space
//! and the PostFilter (preemption) part `preemption: 0/<N> nodes are
//! available: ...`. Some releases end in `..`; both are accepted.
//! Pre-1.10 wording (`No nodes are available that match all of the following
//! predicates:: Insufficient cpu (9), ...`) is read too.

use std::collections::BTreeMap;

use crate::model::keys;

pub const PREEMPTION_NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";
pub const NO_PREEMPTION_VICTIMS: &str = "No preemption victims found for incoming pod";

/// What kube-scheduler's DRA plugin adds to every PostFilter message since
/// DRA went GA (seen verbatim from the v1.36.3 scheduler in the live tests).
pub const DRA_POST_FILTER: &str = "no new claims to deallocate";

/// The DRA plugin's PostFilter for a pod with claims none of which it could
/// deallocate (v1.36.3, seen in the live tests).
pub const DRA_POST_FILTER_CLAIMS: &str = "still not schedulable";

/// Builds a message from per-reason node counts, as kube-scheduler v1.36
/// does: the sorted histogram, then the PostFilter messages joined by ", "
/// (the DRA plugin's, then preemption's).
pub fn format(total_nodes: usize, reasons: &BTreeMap<String, usize>, preemption: &BTreeMap<String, usize>) -> String {
    format_after(total_nodes, reasons, preemption, DRA_POST_FILTER)
}

/// [`format`] for a pod with DRA claims ([`DRA_POST_FILTER_CLAIMS`]).
pub fn format_with_claims(
    total_nodes: usize,
    reasons: &BTreeMap<String, usize>,
    preemption: &BTreeMap<String, usize>,
) -> String {
    format_after(total_nodes, reasons, preemption, DRA_POST_FILTER_CLAIMS)
}

fn format_after(
    total_nodes: usize,
    reasons: &BTreeMap<String, usize>,
    preemption: &BTreeMap<String, usize>,
    dra: &str,
) -> String {
    let mut msg = format!("0/{total_nodes} nodes are available:");
    let histogram = sorted_histogram(reasons);
    if !histogram.is_empty() {
        msg.push_str(&format!(" {}.", histogram.join(", ")));
    }
    let post = sorted_histogram(preemption);
    if !post.is_empty() {
        msg.push_str(&format!(" {dra}, preemption: 0/{total_nodes} nodes are available: {}.", post.join(", ")));
    }
    msg
}

fn sorted_histogram(reasons: &BTreeMap<String, usize>) -> Vec<String> {
    let mut v: Vec<String> = reasons.iter().map(|(reason, count)| format!("{count} {reason}")).collect();
    v.sort();
    v
}

/// A FailedScheduling message, read back.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Parsed {
    pub total_nodes: Option<u32>,
    /// Raw reason text → node count, as the scheduler printed it.
    pub reasons: Vec<(String, u32)>,
    pub preemption: Vec<(String, u32)>,
    /// False when the text had none of the known shapes; the caller shows it raw.
    pub recognised: bool,
}

/// Reads a FailedScheduling message. Never panics; unknown text comes back
/// with `recognised: false`.
pub fn parse(message: &str) -> Parsed {
    let text = message.trim();
    let unrecognised = Parsed { recognised: false, ..Parsed::default() };
    // Event rows (`kubectl describe`, `kubectl get events`) put columns first.
    let pre_1_10 = "No nodes are available that match all of the following predicates::";
    if let Some(at) = text.find(pre_1_10) {
        return parse_pre_1_10(&text[at + pre_1_10.len()..]);
    }
    // Volcano's per-task reason: a histogram without a node total.
    if let Some(at) = text.find("all nodes are unavailable: ") {
        let reasons = parse_histogram(&text[at + "all nodes are unavailable: ".len()..]);
        return Parsed { total_nodes: None, recognised: !reasons.is_empty(), reasons, preemption: Vec::new() };
    }
    let Some((total, after)) = split_available(text) else {
        return unrecognised;
    };
    // A message cut before its start (only the preemption part left)
    // carries no histogram of its own: show it raw rather than misread it.
    if text.find(" nodes are available:").is_some_and(|i| text[..i].contains("preemption:")) {
        return unrecognised;
    }
    // The histogram ends at the first ". " (reasons contain dots, as in
    // nvidia.com, but never a dot and a space); PostFilter text follows.
    let (main, post) = match after.find(". ") {
        Some(i) => (&after[..=i], &after[i + 2..]),
        None => (after, ""),
    };
    let (main, post) = match main.find(" preemption: ") {
        // Older releases with no final dot before the PostFilter part.
        Some(i) if post.is_empty() => (&main[..i], &main[i + 1..]),
        _ => (main, post),
    };
    let reasons = parse_histogram(main);
    let preemption = post
        .find("preemption: ")
        .map(|i| &post[i + "preemption: ".len()..])
        .and_then(split_available)
        .map(|(_, rest)| parse_histogram(rest))
        .unwrap_or_default();
    let recognised = !reasons.is_empty() || main.trim().trim_end_matches('.').is_empty();
    Parsed { total_nodes: Some(total), reasons, preemption, recognised }
}

/// `0/6 nodes are available: rest` → (6, "rest"). Tolerates `0 /3`, and
/// Volcano's per-task wording `0/6 nodes are unavailable: rest`.
fn split_available(text: &str) -> Option<(u32, &str)> {
    let (i, marker) = [" nodes are available:", " nodes are unavailable:"]
        .into_iter()
        .filter_map(|m| text.find(m).map(|i| (i, m)))
        .min_by_key(|(i, _)| *i)?;
    let head = text[..i].trim();
    let total_text = head.rsplit('/').next()?.trim();
    let total = total_text.parse().ok()?;
    Some((total, &text[i + marker.len()..]))
}

/// `3 node(s) didn't match node selector, 6 Insufficient nvidia.com/gpu.`
fn parse_histogram(text: &str) -> Vec<(String, u32)> {
    let body = text.trim().trim_end_matches('.').trim();
    if body.is_empty() {
        return Vec::new();
    }
    // Split at ", " only where a count follows: reasons may contain commas.
    let mut items = Vec::new();
    let mut start = 0;
    let bytes = body.as_bytes();
    let mut i = 0;
    while i + 2 < bytes.len() {
        if bytes[i] == b',' && bytes[i + 1] == b' ' && bytes[i + 2].is_ascii_digit() {
            items.push(&body[start..i]);
            start = i + 2;
            i += 2;
        } else {
            i += 1;
        }
    }
    items.push(&body[start..]);
    items
        .into_iter()
        .filter_map(|item| {
            let item = item.trim();
            let (count, reason) = item.split_once(' ')?;
            let count = count.parse().ok()?;
            Some((reason.trim().to_string(), count))
        })
        .collect()
}

fn parse_pre_1_10(rest: &str) -> Parsed {
    let reasons: Vec<(String, u32)> = rest
        .trim()
        .trim_end_matches('.')
        .split(", ")
        .filter_map(|item| {
            let open = item.rfind(" (")?;
            let count = item[open + 2..].trim_end_matches(')').parse().ok()?;
            Some((item[..open].trim().to_string(), count))
        })
        .collect();
    Parsed { total_nodes: None, recognised: !reasons.is_empty(), reasons, preemption: Vec::new() }
}

/// The reason a whole-pod (PreFilter) rejection carries alone: `0/4 nodes
/// are available: pod has unbound immediate PersistentVolumeClaims.
/// preemption: …` → `pod has unbound immediate PersistentVolumeClaims`.
/// `None` where the message has a per-node histogram or another shape.
pub fn whole_pod_reason(message: &str) -> Option<&str> {
    let (_, after) = message.split_once(" nodes are available: ")?;
    let text = after.split(". ").next()?.trim();
    let text = text.strip_suffix('.').unwrap_or(text).trim();
    let counted = text.split_once(' ').is_some_and(|(n, _)| n.parse::<u32>().is_ok());
    (!text.is_empty() && !counted).then_some(text)
}

/// Any message about why work waits, by who said it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Said {
    /// kube-scheduler (or a scheduler printing its format).
    Scheduler(Parsed),
    /// Volcano's gang message.
    Gang(super::queue_msg::GangMessage),
    /// Kueue's admission message.
    Quota(super::queue_msg::QuotaMessage),
    /// None of the known shapes: shown raw, marked, counted.
    Unrecognised,
}

/// Reads a message of any of the known controllers.
pub fn read(message: &str) -> Said {
    if let Some(g) = super::queue_msg::parse_gang(message) {
        return Said::Gang(g);
    }
    if let Some(q) = super::queue_msg::parse_quota(message) {
        return Said::Quota(q);
    }
    let parsed = parse(message);
    if parsed.recognised { Said::Scheduler(parsed) } else { Said::Unrecognised }
}

/// The class a scheduler reason compares in (`fit::NodeReason::comparison_class`):
/// its node reason code, with every taint (named or not, NotReady's too)
/// one class; the raw text for reasons kgpu does not model.
pub fn comparison_class(reason: &str) -> String {
    if reason.trim() == super::fit::PINNED_ELSEWHERE {
        return super::fit::PINNED_ELSEWHERE_CLASS.into();
    }
    match reason_code(reason) {
        Some(code) if code == "not-ready" || code.starts_with("untolerated-taint") => "untolerated-taint".into(),
        Some(code) => code,
        None => reason.trim().to_string(),
    }
}

/// The node reason code for a scheduler reason, when there is one
/// (DESIGN.md's codes); `None` for reasons kgpu does not model.
pub fn reason_code(reason: &str) -> Option<String> {
    let r = reason.trim();
    // A resource name has no spaces (gpushare's "Insufficient GPU Memory in
    // one device" is prose, not a resource).
    if let Some(resource) = r.strip_prefix("Insufficient ").filter(|x| !x.trim().contains(' ')) {
        let resource = resource.trim();
        return Some(match resource {
            keys::RESOURCE_GPU => "insufficient-gpu".into(),
            "cpu" => "insufficient-cpu".into(),
            "memory" => "insufficient-memory".into(),
            "pods" => "insufficient-pods".into(),
            other => match keys::mig_profile_of(other) {
                Some(profile) => format!("insufficient-mig:{profile}"),
                None => format!("insufficient:{other}"),
            },
        });
    }
    if r == super::fit::PINNED_ELSEWHERE {
        return Some("affinity-mismatch".into());
    }
    if r == super::fit::PORTS_TAKEN || r == "PodFitsHostPorts" {
        return Some("ports-taken".into());
    }
    // Both plugins' reasons, and the 1.9 predicates' names for them.
    let topology = [
        (super::fit::SPREAD_SKEW, "EvenPodsSpreadNotMatch", "topology-spread"),
        (super::fit::SPREAD_MISSING_LABEL, "", "topology-spread-missing-label"),
        (super::fit::POD_AFFINITY, "PodAffinityRulesNotMatch", "pod-affinity"),
        (super::fit::POD_ANTI_AFFINITY, "PodAntiAffinityRulesNotMatch", "pod-anti-affinity"),
        (super::fit::EXISTING_ANTI_AFFINITY, "ExistingPodsAntiAffinityRulesNotMatch", "existing-anti-affinity"),
    ];
    if let Some((_, _, code)) = topology.iter().find(|(text, old, _)| r == *text || (!old.is_empty() && r == *old)) {
        return Some((*code).into());
    }
    // The volume filters' reasons, with their wordings since v1.9.
    let volumes = [
        (
            super::fit::VOLUME_IN_USE,
            "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode",
            "volume-in-use",
        ),
        (super::fit::VOLUME_NODE_AFFINITY, "node(s) had volume node affinity conflict", "volume-node-affinity"),
        (super::fit::VOLUME_NODE_AFFINITY, "VolumeNodeAffinityConflict", "volume-node-affinity"),
        (super::fit::VOLUME_UNBINDABLE, "VolumeBindingNoMatch", "volume-unbindable"),
        (super::fit::VOLUME_MISSING, "pvc(s) bound to non-existent pv(s)", "volume-missing"),
        (super::fit::VOLUME_ZONE, "NoVolumeZoneConflict", "volume-zone"),
    ];
    if let Some((_, _, code)) = volumes.iter().find(|(text, old, _)| r == *text || r == *old) {
        return Some((*code).into());
    }
    if r == "Too many pods" {
        return Some("insufficient-pods".into());
    }
    if r == "node(s) were unschedulable" {
        return Some("cordoned".into());
    }
    if r.starts_with("node(s) didn't match Pod's node affinity")
        || r == "node(s) didn't match node selector"
        || r == "MatchNodeSelector"
    {
        return Some("selector-mismatch".into());
    }
    // v1.36 no longer names the taint.
    if r == "node(s) had untolerated taint(s)" {
        return Some("untolerated-taint".into());
    }
    if let Some(taint) =
        r.strip_prefix("node(s) had untolerated taint {").or_else(|| r.strip_prefix("node(s) had taint {"))
    {
        let key = taint.split(':').next().unwrap_or("").trim_end_matches('}').trim();
        return Some(match key {
            keys::TAINT_NOT_READY | keys::TAINT_UNREACHABLE => "not-ready".into(),
            _ => format!("untolerated-taint:{key}"),
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_fit_error() {
        let reasons = BTreeMap::from([
            ("Insufficient nvidia.com/gpu".to_string(), 2),
            ("node(s) had untolerated taint(s)".to_string(), 10),
        ]);
        let pre = BTreeMap::from([(PREEMPTION_NOT_HELPFUL.to_string(), 10), (NO_PREEMPTION_VICTIMS.to_string(), 2)]);
        assert_eq!(
            format(12, &reasons, &pre),
            "0/12 nodes are available: 10 node(s) had untolerated taint(s), \
             2 Insufficient nvidia.com/gpu. no new claims to deallocate, preemption: 0/12 nodes are available: \
             10 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod."
        );
    }

    #[test]
    fn round_trips() {
        let reasons = BTreeMap::from([("Insufficient nvidia.com/gpu".to_string(), 4)]);
        let msg = format(4, &reasons, &BTreeMap::from([(NO_PREEMPTION_VICTIMS.to_string(), 4)]));
        let p = parse(&msg);
        assert!(p.recognised);
        assert_eq!(p.total_nodes, Some(4));
        assert_eq!(p.reasons, vec![("Insufficient nvidia.com/gpu".to_string(), 4)]);
        assert_eq!(p.preemption, vec![(NO_PREEMPTION_VICTIMS.to_string(), 4)]);
    }

    #[test]
    fn the_v1_36_message_with_the_dra_post_filter() {
        // Verbatim from the real kube-scheduler v1.36.3 (tests/cluster/README.md).
        let p = parse(
            "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. no new claims to deallocate, preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
        );
        assert!(p.recognised);
        assert_eq!(p.reasons, vec![("Insufficient nvidia.com/gpu".to_string(), 1)]);
        assert_eq!(p.preemption, vec![(PREEMPTION_NOT_HELPFUL.to_string(), 1)]);
    }

    #[test]
    fn double_period_and_odd_spacing() {
        let p = parse(
            "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod..",
        );
        assert_eq!(p.reasons, vec![("Insufficient nvidia.com/gpu".to_string(), 1)]);
        assert_eq!(p.preemption, vec![(NO_PREEMPTION_VICTIMS.to_string(), 1)]);
        let p = parse(
            "0 /3 nodes are available: 1 Insufficient GPU Memory in one device, 2 Insufficient aliyun.com/gpu-mem",
        );
        assert_eq!(p.total_nodes, Some(3));
        assert_eq!(p.reasons.len(), 2);
    }

    #[test]
    fn unknown_text_is_marked_not_guessed() {
        let p = parse("something else entirely");
        assert!(!p.recognised);
        assert!(p.reasons.is_empty());
    }

    #[test]
    fn reason_codes() {
        assert_eq!(reason_code("Insufficient nvidia.com/gpu").as_deref(), Some("insufficient-gpu"));
        assert_eq!(reason_code("Insufficient nvidia.com/mig-1g.10gb").as_deref(), Some("insufficient-mig:1g.10gb"));
        assert_eq!(reason_code("node(s) had untolerated taint {gpu: }").as_deref(), Some("untolerated-taint:gpu"));
        assert_eq!(
            reason_code("node(s) had untolerated taint {node.kubernetes.io/unreachable: }").as_deref(),
            Some("not-ready")
        );
        assert_eq!(reason_code("node(s) were unschedulable").as_deref(), Some("cordoned"));
        // verbatim from the real kube-scheduler v1.36.3
        assert_eq!(reason_code("node(s) had untolerated taint(s)").as_deref(), Some("untolerated-taint"));
        assert_eq!(
            reason_code("node(s) didn't match Pod's node affinity/selector").as_deref(),
            Some("selector-mismatch")
        );
        assert_eq!(reason_code("ExceedsGPUQuota"), None);
    }
}
