//! A lesson or a mystery in progress: what the trainee has revealed,
//! visited, done and answered, and when it was solved. Times are the views'
//! (the cluster's clock), so a test replays them exactly.

use crate::analysis::Analysis;
use crate::model::Timestamp;
use crate::model::time::age;
use crate::view_model::lessons::{Cause, Lesson, Opened, Sighting};
use crate::view_model::panes::Views;

use super::{App, Detail, Overlay};

/// Distinct wrong causes, before the right one, that read as guessing.
const GUESSES: usize = 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `kgpu demo --lesson NAME`: the question is shown; opening the
    /// evidence or running the fix solves it too.
    Lesson,
    /// `kgpu demo --mystery`: the scenario stays hidden; only `:answer`
    /// is graded. The seed replays it.
    Mystery { seed: u64 },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    pub said: String,
    pub right: bool,
    pub at: Timestamp,
}

#[derive(Debug)]
pub struct Tutor {
    pub lesson: &'static Lesson,
    pub mode: Mode,
    started: Option<Timestamp>,
    pub hints_shown: usize,
    /// Panes in the order first visited.
    pub panes: Vec<&'static str>,
    /// Actions run to their end (`cordon node/gpu-03`).
    pub actions: Vec<String>,
    pub answers: Vec<Answer>,
    /// When and how it was solved.
    pub solved: Option<(Timestamp, String)>,
    /// The question and answer as the cluster was when it opened.
    pub opened: Option<Opened>,
    seen: Vec<Sighting>,
}

impl Tutor {
    pub fn new(lesson: &'static Lesson, mode: Mode) -> Tutor {
        Tutor {
            lesson,
            mode,
            started: None,
            hints_shown: 0,
            panes: Vec::new(),
            actions: Vec::new(),
            answers: Vec::new(),
            solved: None,
            opened: None,
            seen: Vec::new(),
        }
    }

    pub fn mystery(&self) -> bool {
        matches!(self.mode, Mode::Mystery { .. })
    }

    /// The clock starts with the first frame the trainee sees.
    pub fn tick(&mut self, now: Timestamp) {
        self.started.get_or_insert(now);
    }

    fn elapsed(&self, now: Timestamp) -> String {
        age(now.saturating_sub(self.started.unwrap_or(now)).max(0))
    }

    /// The next hint, or that there are none left.
    pub fn hint(&mut self) -> String {
        let total = self.lesson.hints.len();
        match self.lesson.hints.get(self.hints_shown) {
            Some(h) => {
                self.hints_shown += 1;
                format!("hint {}/{total}: {h}", self.hints_shown)
            }
            None => format!("no hints left ({total} shown); :lesson shows them"),
        }
    }

    /// `:answer CAUSE`: graded, and said back.
    pub fn answer(&mut self, text: &str, now: Timestamp) -> Result<String, String> {
        let Some(cause) = Cause::parse(text) else {
            return Err(format!("'{text}' is not a cause kgpu knows; one of: {}", Cause::vocabulary()));
        };
        let right = self.lesson.accepts(cause);
        self.answers.push(Answer { said: cause.word().into(), right, at: now });
        if !right {
            return Err(format!("{} is not it; look again (:hint for a hint)", cause.word()));
        }
        if self.solved.is_none() {
            self.solved = Some((now, format!("by naming {}", cause.word())));
        }
        let kind = if self.mystery() { "mystery" } else { "lesson" };
        Ok(format!("{kind} solved: {} is right — :lesson shows the answer worked out", cause.word()))
    }

    /// Something the trainee opened or did; in a lesson, the evidence
    /// solves it. Says so once.
    pub fn see(&mut self, sighting: Sighting, a: &Analysis, now: Timestamp) -> Option<String> {
        if let Sighting::Pane(p) = &sighting
            && !self.panes.contains(p)
        {
            self.panes.push(p);
        }
        if let Sighting::Action { kind, target } = &sighting {
            self.actions.push(format!("{kind} {target}"));
        }
        if self.seen.contains(&sighting) {
            return None;
        }
        self.seen.push(sighting.clone());
        if self.mystery() || self.solved.is_some() {
            return None;
        }
        let found = self.lesson.evidence.iter().find(|e| e.shown_by(&sighting, a))?;
        self.solved = Some((now, format!("by {}", found.describe())));
        Some(format!("lesson solved in {} — :lesson shows the answer worked out", self.elapsed(now)))
    }

    /// `solved in 4m10s by naming quota, 1 hint`.
    pub fn solved_line(&self) -> Option<String> {
        let (at, how) = self.solved.as_ref()?;
        Some(format!("in {} {how}, {} of {} hints", self.elapsed(*at), self.hints_shown, self.lesson.hints.len()))
    }

    /// What the interviewer (or the trainee) reads when the cockpit closes.
    pub fn report(&self, now: Timestamp) -> String {
        let mut out = match self.mode {
            Mode::Mystery { seed } => {
                format!(
                    "kgpu mystery (seed {seed}, replay: kgpu demo --mystery --seed {seed}): scenario {}\n",
                    self.lesson.scenario
                )
            }
            Mode::Lesson => format!("kgpu lesson: scenario {}\n", self.lesson.scenario),
        };
        out.push_str(&format!("cause: {}\n", self.lesson.cause_words()));
        match (self.mode, self.answers.first(), &self.solved) {
            (Mode::Mystery { .. }, Some(first), _) => out.push_str(&format!(
                "first answer: {} ({}) after {}\n",
                first.said,
                if first.right { "right" } else { "wrong" },
                self.elapsed(first.at)
            )),
            (Mode::Mystery { .. }, None, _) => out.push_str("no answer given\n"),
            (Mode::Lesson, _, Some(_)) => out.push_str(&format!("solved {}\n", self.solved_line().unwrap_or_default())),
            (Mode::Lesson, _, None) => out.push_str("not solved\n"),
        }
        if self.answers.len() > 1 || (self.mode == Mode::Lesson && !self.answers.is_empty()) {
            let all: Vec<String> = self
                .answers
                .iter()
                .map(|a| format!("{} ({})", a.said, if a.right { "right" } else { "wrong" }))
                .collect();
            out.push_str(&format!("answers: {}\n", all.join(", ")));
        }
        // Naming cause after cause until one is right is guessing, not
        // diagnosing: the interviewer should see it as such.
        let wrong = &self.answers[..self.answers.iter().take_while(|a| !a.right).count()];
        let mut distinct: Vec<&str> = wrong.iter().map(|a| a.said.as_str()).collect();
        distinct.sort_unstable();
        distinct.dedup();
        if let (true, Some(first), Some(last)) = (distinct.len() >= GUESSES, wrong.first(), wrong.last()) {
            let span = age(last.at.saturating_sub(first.at).max(0));
            out.push_str(&format!(
                "guessing: {} wrong causes named in {span}{} — a list of answers, not a diagnosis\n",
                distinct.len(),
                if self.answers.iter().any(|a| a.right) { " before the right one" } else { "" }
            ));
        }
        out.push_str(&format!("time: {}\n", self.elapsed(now)));
        out.push_str(&format!("hints: {} of {}\n", self.hints_shown, self.lesson.hints.len()));
        out.push_str(&format!(
            "panes visited: {}\n",
            if self.panes.is_empty() { "-".into() } else { self.panes.join(", ") }
        ));
        let opened: Vec<String> = self
            .seen
            .iter()
            .filter_map(|s| match s {
                Sighting::Chain(item) => Some(format!("pending chain {item}")),
                Sighting::Node(node) => Some(format!("node {node}")),
                Sighting::Gang(gang) => Some(format!("gang {gang}")),
                Sighting::Pane(_) | Sighting::Action { .. } => None,
            })
            .collect();
        out.push_str(&format!(
            "drill-downs opened: {}\n",
            if opened.is_empty() { "none".into() } else { opened.join(", ") }
        ));
        out.push_str(&format!(
            "actions run: {}\n",
            if self.actions.is_empty() { "none".into() } else { self.actions.join("; ") }
        ));
        out
    }
}

impl App {
    /// A lesson watches where the trainee goes: the pane, the pending chain
    /// open, the node or gang detail read.
    pub(super) fn observe(&mut self, views: &Views) {
        let Some(tutor) = self.tutor.as_mut() else { return };
        tutor.tick(self.wall);
        // Once the cluster is there: the first frames may come before the
        // source's first list, and would freeze the no-data text.
        if tutor.opened.is_none() && !views.snap.nodes.is_empty() {
            tutor.opened = Some(Opened::of(tutor.lesson, &views.analysis));
        }
        let mut seen = vec![Sighting::Pane(self.pane.title())];
        if let Some(item) = &self.drill {
            seen.push(Sighting::Chain(item.clone()));
        }
        match &self.overlay {
            Some(Overlay::NodeDetail { node, .. }) => seen.push(Sighting::Node(node.to_string())),
            Some(Overlay::Detail { detail: Detail::Gang(id), .. }) => seen.push(Sighting::Gang(id.clone())),
            _ => {}
        }
        let said: Vec<String> = seen.into_iter().filter_map(|s| tutor.see(s, &views.analysis, self.wall)).collect();
        for text in said {
            self.notify(text, false);
        }
    }
}
