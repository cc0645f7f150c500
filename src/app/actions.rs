//! The app's side of actions: which action a key means for the selection,
//! the confirmation with its blast radius, and the ids of running ones.

use super::keys::Command;
use super::*;
use crate::actions::choose;

impl App {
    pub(super) fn selected_node(&self, views: &Views) -> Option<Sym> {
        match self.pane {
            Pane::Fleet if !self.aggregated(views) => self.selected_id(Pane::Fleet, views).map(|s| Sym::new(&s)),
            Pane::Mig => self.selected_id(Pane::Mig, views).map(|s| Sym::new(&s)),
            _ => None,
        }
    }

    pub(super) fn refuse_read_only(&mut self) -> bool {
        if self.read_only {
            let why = self.read_only_why.clone().unwrap_or_else(|| "started with --read-only".into());
            self.notify(format!("read-only: actions are disabled ({why})"), true);
        }
        self.read_only
    }

    pub(super) fn confirm(&mut self, action: Action, views: &Views) {
        let index = Index::build(&views.snap, views.analysis.now);
        let impact = action.impact(&index);
        let gpu_only = matches!(action, Action::Drain { gpu_only: true, .. });
        let typed = (self.production && action.is_disruptive()).then(String::new);
        self.overlay = Some(Overlay::Confirm(Box::new(Confirm { action, impact, gpu_only, typed, scroll: 0 })));
    }

    pub(super) fn node_action(&mut self, command: Command, views: &Views) -> Vec<Effect> {
        if self.refuse_read_only() {
            return Vec::new();
        }
        let Some(node) = self.selected_node(views) else {
            self.notify("select a node first (Fleet or MIG pane, per-node view)", true);
            return Vec::new();
        };
        let action = match command {
            Command::Cordon => Action::Cordon { node },
            Command::Uncordon => Action::Uncordon { node },
            Command::Drain => Action::Drain { node, gpu_only: false, force: false },
            _ => {
                match choose::mig_configs(&views.snap, node.clone()) {
                    Ok(configs) => {
                        // Start on the config that serves the pending MIG slices.
                        let picker = crate::view_model::mig_picker::rows(&views.snap, node.clone(), &configs);
                        let selected = crate::view_model::mig_picker::best(&picker);
                        self.overlay = Some(Overlay::MigPicker { node, configs, selected });
                    }
                    Err(no) => self.notify(no.words().to_string(), no.is_error()),
                }
                return Vec::new();
            }
        };
        self.confirm(action, views);
        Vec::new()
    }

    pub(super) fn requeue(&mut self, views: &Views) -> Vec<Effect> {
        if self.refuse_read_only() {
            return Vec::new();
        }
        match self.requeue_target(views) {
            Some(gang) => self.confirm(Action::Requeue { gang }, views),
            None => self.notify("select a gang (Gangs pane) or a pending Workload/PodGroup", true),
        }
        Vec::new()
    }

    /// `y`: the kubectl commands of the selected (or opened) pending item's
    /// blocking step (else its first step that has some), for the clipboard:
    /// a command wrapped in a narrow terminal cannot be copied off the screen.
    pub(super) fn copy_commands(&mut self, views: &Views) -> Vec<Effect> {
        let id = self.drill.clone().or_else(|| self.selected_id(Pane::Pending, views));
        let Some(item) = views.analysis.pending.iter().find(|p| Some(p.display_name()) == id) else {
            self.notify("select a pending item to copy its commands", true);
            return Vec::new();
        };
        let blocking = item.steps.iter().find(|s| Some(s.step) == item.blocking && !s.commands.is_empty());
        let Some(step) = blocking.or_else(|| item.steps.iter().find(|s| !s.commands.is_empty())) else {
            self.notify(format!("{} has no kubectl command to copy", item.display_name()), false);
            return Vec::new();
        };
        self.notify(
            format!("copied {} command(s) of the {} step to the clipboard", step.commands.len(), step.step.title()),
            false,
        );
        vec![Effect::Copy(step.commands.join("\n"))]
    }

    /// The gang `R` would requeue: the selected gang, or the selected (or
    /// opened) pending Workload or PodGroup; a lone pod has none.
    pub(super) fn requeue_target(&self, views: &Views) -> Option<crate::model::GangKey> {
        match self.pane {
            Pane::Gangs if self.section(Pane::Gangs) == Section::First => {
                let id = self.selected_id(Pane::Gangs, views);
                views.analysis.gangs.iter().find(|g| Some(gang_id(&g.key)) == id).map(|g| g.key.clone())
            }
            Pane::Pending => {
                let id = self.drill.clone().or_else(|| self.selected_id(Pane::Pending, views));
                views
                    .analysis
                    .pending
                    .iter()
                    .find(|p| Some(p.display_name()) == id)
                    .and_then(|p| views.snap.gangs.keys().find(|k| gang_id(k) == gang_id_of_item(p)).cloned())
            }
            _ => None,
        }
    }

    pub(super) fn run_plan(&mut self, views: &Views) -> Vec<Effect> {
        if self.refuse_read_only() {
            return Vec::new();
        }
        match choose::plan(&views.analysis.fragmentation.plan) {
            Ok(action) => self.confirm(action, views),
            Err(no) => self.notify(no.words().to_string(), no.is_error()),
        }
        Vec::new()
    }

    /// `:release`: what abandoned actions left, in a confirmation.
    pub(super) fn release(&mut self, views: &Views) -> Vec<Effect> {
        if self.refuse_read_only() {
            return Vec::new();
        }
        let left = crate::analysis::leftovers::find(&views.abandoned, &views.snap);
        match choose::release_leftovers(&left) {
            Ok(action) => self.confirm(action, views),
            Err(no) => self.notify(no.words().to_string(), no.is_error()),
        }
        Vec::new()
    }

    pub(super) fn execute(&mut self, action: Action, dry_run: bool) -> Vec<Effect> {
        let label =
            format!("{}{} {}", if dry_run { "dry run: would " } else { "" }, action.verb(), action.targets().join(" "));
        self.next_action += 1;
        let id = self.next_action;
        self.in_flight.push(InFlight { id, action: action.clone(), label: label.clone(), dry_run, started: self.wall });
        self.notify(format!("{label}…"), false);
        vec![Effect::Execute { id, request: ActionRequest { action, dry_run } }]
    }

    /// `X`: the one running action, or the one on the selected node.
    pub(super) fn cancel(&mut self) -> Vec<Effect> {
        let selected = (self.pane == Pane::Fleet || self.pane == Pane::Mig)
            .then(|| self.selected.get(&self.pane).map(|s| Sym::new(s)))
            .flatten();
        let on_selected: Vec<&InFlight> =
            self.in_flight.iter().filter(|f| selected.as_ref().is_some_and(|n| f.action.nodes().contains(n))).collect();
        let chosen = match (self.in_flight.as_slice(), on_selected.as_slice()) {
            ([], _) => {
                self.notify("no action is running", false);
                return Vec::new();
            }
            ([only], _) => only.clone(),
            (_, [only]) => (*only).clone(),
            (all, _) => {
                let labels: Vec<&str> = all.iter().map(|f| f.label.as_str()).collect();
                self.notify(
                    format!("{} actions run ({}): select the node of the one to cancel", all.len(), labels.join("; ")),
                    true,
                );
                return Vec::new();
            }
        };
        self.notify(format!("cancelling {}…", chosen.label), false);
        vec![Effect::Cancel(chosen.id)]
    }
}
