//! Lessons for trainees and the cause vocabulary of interviews: each demo
//! scenario asked as a question, with hints, and answered with the
//! arithmetic worked on the cluster's own numbers (the analysis of what is
//! on screen, so it holds in the demo and on the lab alike). What the
//! trainee did is the app's to keep; this says what counts as the answer.

mod answers;
mod catalog;

use crate::analysis::Analysis;
use crate::analysis::fleet::IssueCode;
use crate::analysis::pending::Step;

use super::style::{Doc, Role};

pub use catalog::LESSONS;

/// The causes an answer may name (`:answer CAUSE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cause {
    DevicePlugin,
    Quota,
    GangDeadlock,
    Fragmentation,
    Taint,
    NodeSelector,
    MigProfile,
    DriverCompat,
    BlackHole,
    Topology,
    Preemption,
    IdleHolders,
    DriverRollout,
    Spot,
    TimeSlicing,
    FairShare,
    /// A DRA claim no published device can satisfy.
    Dra,
}

impl Cause {
    pub const ALL: [Cause; 17] = [
        Cause::DevicePlugin,
        Cause::Quota,
        Cause::GangDeadlock,
        Cause::Fragmentation,
        Cause::Taint,
        Cause::NodeSelector,
        Cause::MigProfile,
        Cause::DriverCompat,
        Cause::BlackHole,
        Cause::Topology,
        Cause::Preemption,
        Cause::IdleHolders,
        Cause::DriverRollout,
        Cause::Spot,
        Cause::TimeSlicing,
        Cause::FairShare,
        Cause::Dra,
    ];

    pub fn word(self) -> &'static str {
        match self {
            Cause::DevicePlugin => "device-plugin",
            Cause::Quota => "quota",
            Cause::GangDeadlock => "gang-deadlock",
            Cause::Fragmentation => "fragmentation",
            Cause::Taint => "taint",
            Cause::NodeSelector => "node-selector",
            Cause::MigProfile => "mig-profile",
            Cause::DriverCompat => "driver-compat",
            Cause::BlackHole => "black-hole",
            Cause::Topology => "topology",
            Cause::Preemption => "preemption",
            Cause::IdleHolders => "idle-holders",
            Cause::DriverRollout => "driver-rollout",
            Cause::Spot => "spot",
            Cause::TimeSlicing => "time-slicing",
            Cause::FairShare => "fair-share",
            Cause::Dra => "dra",
        }
    }

    /// Every word, for a list people read: `device-plugin, quota, …`.
    pub fn vocabulary() -> String {
        Cause::ALL.iter().map(|c| c.word()).collect::<Vec<_>>().join(", ")
    }

    /// A word as people type it: `Quota`, `gang deadlock`, `mig_profile`.
    pub fn parse(text: &str) -> Option<Cause> {
        let word: String =
            text.trim().to_lowercase().chars().map(|c| if c == ' ' || c == '_' { '-' } else { c }).collect();
        let word = match word.as_str() {
            "deadlock" | "gang" => "gang-deadlock",
            "stranded" | "fragmented" => "fragmentation",
            "toleration" | "taints" => "taint",
            "selector" | "nodeselector" => "node-selector",
            "mig" => "mig-profile",
            "driver" | "cuda" => "driver-compat",
            "blackhole" => "black-hole",
            "nvlink" | "topology-split" => "topology",
            "idle" => "idle-holders",
            "canary" | "rollback" | "upgrade" | "driver-upgrade" => "driver-rollout",
            "spot-preemption" | "preemptible" => "spot",
            "timeslicing" | "sharing" | "gpu-sharing" => "time-slicing",
            "fairshare" | "borrowing" | "cohort" | "quota-gaming" => "fair-share",
            "preempted" | "eviction" => "preemption",
            "plugin" => "device-plugin",
            "claim" | "claims" | "resourceclaim" | "resource-claim" | "deviceclass" | "cel" => "dra",
            w => w,
        };
        Cause::ALL.into_iter().find(|c| c.word() == word)
    }
}

/// Something the trainee opened or did that shows the cause.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Evidence {
    /// The pending chain of an item blocked at this step.
    Chain(Step),
    /// The detail of a node flagged with this issue.
    Node(IssueCode),
    /// A gang spread over nodes when one could hold it, opened.
    SplitGang,
    /// A gang on spot nodes, its detail opened.
    SpotGang,
    /// This pane, looked at (`Drivers`, `Usage`).
    Pane(&'static str),
    /// This action, run for real and finished without error.
    Action(&'static str),
}

/// What the app saw the trainee do, in the analysis's terms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sighting {
    /// A pending item's chain (`namespace/name`).
    Chain(String),
    Node(String),
    /// A gang's detail (`Kind/namespace/name`).
    Gang(String),
    Pane(&'static str),
    /// A finished action (`cordon`, `drain`, `requeue`, `defrag`, …) on its target.
    Action {
        kind: &'static str,
        target: String,
    },
}

impl Evidence {
    /// Whether `seen` shows this, on the cluster as `a` has it.
    pub fn shown_by(self, seen: &Sighting, a: &Analysis) -> bool {
        match (self, seen) {
            (Evidence::Chain(step), Sighting::Chain(item)) => {
                a.pending.iter().any(|p| p.display_name() == *item && p.blocking == Some(step))
            }
            (Evidence::Node(code), Sighting::Node(node)) => {
                a.nodes.iter().any(|n| n.name.as_str() == node && n.issues.iter().any(|i| i.code == code))
            }
            (Evidence::SplitGang, Sighting::Gang(id)) => a.gangs.iter().any(|g| gang_id(g) == *id && g.topology_split),
            (Evidence::SpotGang, Sighting::Gang(id)) => {
                a.gangs.iter().any(|g| gang_id(g) == *id && a.spot.job(&g.key).is_some())
            }
            (Evidence::Pane(pane), Sighting::Pane(seen)) => pane == *seen,
            (Evidence::Action(kind), Sighting::Action { kind: done, .. }) => kind == *done,
            _ => false,
        }
    }

    /// For people: what was done, after "by".
    pub fn describe(self) -> String {
        match self {
            Evidence::Chain(step) => format!("opening the pending chain of an item blocked at {}", step.title()),
            Evidence::Node(code) => format!("opening the detail of a node flagged {}", code.as_str()),
            Evidence::SplitGang => "opening the detail of a gang split across nodes".into(),
            Evidence::SpotGang => "opening the detail of a gang on spot nodes".into(),
            Evidence::Pane(pane) => format!("opening the {pane} pane"),
            Evidence::Action(kind) => format!("running {kind} to its end"),
        }
    }
}

/// One scenario as a lesson.
#[derive(Debug)]
pub struct Lesson {
    pub scenario: &'static str,
    /// The causes a right answer may name (the first is the main one).
    pub causes: &'static [Cause],
    pub hints: &'static [&'static str],
    /// Opening or doing any of these solves it, as naming the cause does.
    pub evidence: &'static [Evidence],
    question: fn(&Analysis) -> String,
    answer: fn(&Analysis) -> Vec<String>,
}

impl Lesson {
    /// The question, as an interviewer would ask it, on this cluster.
    pub fn question(&self, a: &Analysis) -> String {
        (self.question)(a)
    }

    /// The answer with its arithmetic, on this cluster.
    pub fn answer(&self, a: &Analysis) -> Vec<String> {
        (self.answer)(a)
    }

    /// `taint + node-selector`: the causes a right answer names.
    pub fn cause_words(&self) -> String {
        self.causes.iter().map(|c| c.word()).collect::<Vec<_>>().join(" + ")
    }

    pub fn accepts(&self, cause: Cause) -> bool {
        self.causes.contains(&cause)
    }
}

pub fn find(scenario: &str) -> Option<&'static Lesson> {
    LESSONS.iter().find(|l| l.scenario == scenario)
}

/// A gang as the app names it: `Kind/namespace/name`.
fn gang_id(g: &crate::analysis::gangs::GangSummary) -> String {
    format!("{}/{}/{}", g.key.kind.kind_name(), g.key.namespace, g.key.name)
}

/// Where a trainee stands, for the lesson reader.
pub struct Standing<'a> {
    pub hints_shown: usize,
    /// `solved in 4m12s by naming quota`, when solved.
    pub solved: Option<&'a str>,
    /// A mystery: the scenario's name stays hidden until solved.
    pub mystery: bool,
}

/// A lesson's question and worked answer as the cluster was when it
/// opened: once the trainee fixes the cluster, the live numbers would
/// rewrite the question they were asked (or say it is gone).
#[derive(Clone, Debug, PartialEq)]
pub struct Opened {
    pub question: String,
    pub answer: Vec<String>,
}

impl Opened {
    pub fn of(lesson: &Lesson, a: &Analysis) -> Opened {
        Opened { question: lesson.question(a), answer: lesson.answer(a) }
    }
}

/// The lesson reader: the question, the hints revealed so far, how to
/// answer, and once solved the answer with its arithmetic.
pub fn doc(lesson: &Lesson, opened: &Opened, standing: &Standing<'_>) -> Doc {
    let mut d = Doc::default();
    if standing.mystery && standing.solved.is_none() {
        d.line(Role::Accent, "Mystery: something on this cluster is wrong.");
        d.line(Role::Text, "Find what with the cockpit, then name the cause.");
    } else {
        d.line(Role::Accent, opened.question.clone());
    }
    d.blank();
    let total = lesson.hints.len();
    for (i, hint) in lesson.hints.iter().take(standing.hints_shown).enumerate() {
        d.line(Role::Text, format!("hint {}/{total}: {hint}", i + 1));
    }
    if standing.hints_shown < total {
        d.line(Role::Dim, format!(":hint reveals hint {} of {total}", standing.hints_shown + 1));
    }
    d.blank();
    match standing.solved {
        None => {
            d.line(Role::Text, "Answer with :answer CAUSE, one of:");
            d.line(Role::Dim, Cause::vocabulary());
            if !standing.mystery {
                // What proves it would give it away: said once it is found.
                d.line(Role::Dim, "Opening what proves the cause, or running what fixes it, solves it too.");
            }
        }
        Some(how) => {
            d.line(Role::Ok, format!("Solved: {how}."));
            d.line(Role::Text, format!("The cause: {}.", lesson.cause_words()));
            d.blank();
            for line in &opened.answer {
                d.line(Role::Text, line.clone());
            }
        }
    }
    d
}

/// `kgpu lesson show`: the question, every hint and the answer, as text.
pub fn text(lesson: &Lesson, a: &Analysis, with_answer: bool) -> String {
    let mut out = format!("lesson {}\n\n{}\n\n", lesson.scenario, lesson.question(a));
    for (i, hint) in lesson.hints.iter().enumerate() {
        out.push_str(&format!("hint {}: {hint}\n", i + 1));
    }
    out.push('\n');
    if with_answer {
        out.push_str(&format!("cause: {}\n", lesson.cause_words()));
        for line in lesson.answer(a) {
            out.push_str(&format!("  {line}\n"));
        }
    } else {
        out.push_str("(--answer prints the cause and the arithmetic)\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_read_as_people_type_them() {
        assert_eq!(Cause::parse("Quota"), Some(Cause::Quota));
        assert_eq!(Cause::parse("gang deadlock"), Some(Cause::GangDeadlock));
        assert_eq!(Cause::parse("mig_profile"), Some(Cause::MigProfile));
        assert_eq!(Cause::parse("deadlock"), Some(Cause::GangDeadlock));
        assert_eq!(Cause::parse("bad luck"), None);
        for c in Cause::ALL {
            assert_eq!(Cause::parse(c.word()), Some(c));
        }
    }
}
