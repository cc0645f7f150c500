//! kgpu's per-node verdicts against the scheduler's own message, like with like.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::super::scheduler_msg;
use super::PendingItem;
use super::fit_step::FitResult;

/// kgpu's verdicts against the scheduler's message.
pub(super) struct CrossCheck {
    recognised: bool,
    /// The scheduler's histogram (node reason code, or its raw text).
    reasons: Arc<BTreeMap<String, u32>>,
    agrees: Option<bool>,
    disagreement: Option<String>,
}

impl CrossCheck {
    pub(super) fn apply(&self, item: &mut PendingItem) {
        item.scheduler_recognised = Some(self.recognised);
        item.scheduler_reasons = self.reasons.clone();
        item.agrees_with_scheduler = self.agrees;
        item.disagreement = self.disagreement.clone();
    }
}

pub(super) fn cross_check(fit: &FitResult, message: &str) -> CrossCheck {
    // Volcano's gang message says how many tasks wait, not why per node;
    // when it carries the first task's fit error ("Origin reason is: ..."),
    // that is compared. Kueue's message is the quota step's.
    let parsed = match scheduler_msg::read(message) {
        scheduler_msg::Said::Scheduler(parsed) => parsed,
        scheduler_msg::Said::Gang(_) => match message.split_once("Origin reason is: ") {
            Some((_, origin)) if scheduler_msg::parse(origin).recognised => scheduler_msg::parse(origin),
            _ => {
                return CrossCheck {
                    recognised: true,
                    reasons: Arc::default(),
                    agrees: None,
                    disagreement: Some("not compared: Volcano's gang message counts tasks, not nodes".into()),
                };
            }
        },
        scheduler_msg::Said::Quota(_) => {
            return CrossCheck { recognised: true, reasons: Arc::default(), agrees: None, disagreement: None };
        }
        scheduler_msg::Said::Unrecognised => {
            return CrossCheck { recognised: false, reasons: Arc::default(), agrees: None, disagreement: None };
        }
    };
    let mut check = CrossCheck { recognised: true, reasons: Arc::default(), agrees: None, disagreement: None };
    let mut reasons = BTreeMap::new();
    for (reason, count) in &parsed.reasons {
        let key = scheduler_msg::reason_code(reason).unwrap_or_else(|| reason.clone());
        *reasons.entry(key).or_default() += count;
    }
    check.reasons = Arc::new(reasons);
    if fit.total_nodes == 0 {
        return check;
    }
    // Like with like: the scheduler's histogram and kgpu's (one entry per
    // node per class, each node counted under its first failing filter), in
    // the classes both can name, with their counts.
    let mut theirs: BTreeMap<String, u32> = BTreeMap::new();
    for (reason, count) in &parsed.reasons {
        *theirs.entry(scheduler_msg::comparison_class(reason)).or_default() += count;
    }
    let fmt = |m: &BTreeMap<String, u32>| {
        if m.is_empty() {
            "fits somewhere".to_string()
        } else {
            m.iter().map(|(k, v)| format!("{v} {k}")).collect::<Vec<_>>().join(", ")
        }
    };
    if parsed.total_nodes.is_some_and(|n| n != fit.total_nodes) {
        // Nodes came or went since its last attempt: nothing to compare.
        check.disagreement = Some(format!(
            "not compared: the scheduler's last attempt saw {} node(s), kgpu sees {} now",
            parsed.total_nodes.unwrap_or(0),
            fit.total_nodes
        ));
        return check;
    }
    let agrees = theirs == fit.scheduler_view;
    check.agrees = Some(agrees);
    if !agrees {
        check.disagreement = Some(format!(
            "scheduler (last attempt): {}; kgpu (now): {} — the cluster changed since, or the scheduler sees something kgpu does not (another scheduler, volumes, pod affinity)",
            fmt(&theirs),
            fmt(&fit.scheduler_view)
        ));
    }
    check
}
