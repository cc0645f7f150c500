//! Moving between views: panes, the jumps `enter` makes, and the way back
//! `esc` retraces (with the path the titles show).

use super::*;

/// A view `esc` can return to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    Pane(Pane, Section),
    /// The Fleet's per-pool map, before enter listed one pool's nodes.
    Pools,
}

impl Place {
    pub fn label(self) -> &'static str {
        match self {
            Place::Pane(p, _) => p.title(),
            Place::Pools => "Pools",
        }
    }
}

impl App {
    pub(super) fn switch(&mut self, pane: Pane) {
        self.pane = pane;
    }

    /// Moving to a pane directly: there is no way back to retrace.
    pub(super) fn go(&mut self, pane: Pane) {
        self.back.clear();
        self.switch(pane);
    }

    /// A jump that leaves the current view: `esc` comes back here.
    pub(super) fn remember(&mut self, views: &Views) {
        // The Fleet is the pools' map only where it shows one (a small
        // fleet lists its nodes: that is where esc returns, and the title says so).
        let here = if self.pane == Pane::Fleet && self.aggregated(views) {
            Place::Pools
        } else {
            Place::Pane(self.pane, self.section(self.pane))
        };
        self.back.push(here);
    }

    pub(super) fn return_to(&mut self, place: Place) {
        match place {
            Place::Pane(pane, section) => {
                // Back from a workload's pods: the filter was the jump's.
                if pane == Pane::Usage && section == Section::Second {
                    self.filters.remove(&Pane::Usage);
                }
                self.pane = pane;
                self.section.insert(pane, section);
            }
            Place::Pools => {
                self.pane = Pane::Fleet;
                self.filters.remove(&Pane::Fleet);
                // The pools' map, as it was (a small fleet shows it only when asked, `a`).
                self.aggregate = Some(true);
            }
        }
    }

    /// Where the view came from, for its title: `Gangs › team-a/job`.
    pub fn breadcrumb(&self, here: &str) -> Option<String> {
        (!self.back.is_empty()).then(|| {
            let path: Vec<&str> = self.back.iter().map(|p| p.label()).collect();
            format!("{} › {here}", path.join(" › "))
        })
    }

    pub(super) fn enter(&mut self, views: &Views) {
        match self.pane {
            Pane::Pending => {
                if let Some(id) = self.selected_id(Pane::Pending, views) {
                    self.drill = Some(id);
                    self.drill_scroll = 0;
                }
            }
            Pane::Fleet | Pane::Mig if !self.aggregated(views) || self.pane == Pane::Mig => {
                if let Some(id) = self.selected_id(self.pane, views) {
                    self.overlay = Some(Overlay::NodeDetail { node: Sym::new(&id), scroll: 0 });
                }
            }
            Pane::Fleet => {
                // Enter on a pool narrows the node list to it.
                if let Some(pool) = self.selected_id(Pane::Fleet, views) {
                    self.remember(views);
                    self.aggregate = Some(false);
                    self.filters.insert(Pane::Fleet, pool);
                }
            }
            Pane::Gangs if self.section(Pane::Gangs) == Section::First => {
                let Some(id) = self.selected_id(Pane::Gangs, views) else { return };
                let item = views.analysis.pending.iter().find(|p| gang_id_of_item(p) == id);
                match item {
                    Some(p) => {
                        self.remember(views);
                        self.pane = Pane::Pending;
                        self.selected.insert(Pane::Pending, p.display_name());
                        self.drill = Some(p.display_name());
                        self.drill_scroll = 0;
                    }
                    // Not pending: where it runs.
                    None => self.overlay = Some(Overlay::Detail { detail: Detail::Gang(id), scroll: 0 }),
                }
            }
            Pane::Gangs => {
                let queues = rows::queues(views, self.filter(Pane::Gangs), self.sorting(Pane::Gangs, Section::Second));
                let ids = self.row_ids(Pane::Gangs, views);
                if let Some(q) = queues.get(self.selected_index(Pane::Gangs, &ids)) {
                    self.overlay = Some(Overlay::Detail { detail: Detail::Queue(Box::new((*q).clone())), scroll: 0 });
                }
            }
            Pane::Events => {
                let events = rows::events(views, self.filter(Pane::Events), self.sorting(Pane::Events, Section::First));
                let ids = self.row_ids(Pane::Events, views);
                if let Some(e) = events.get(self.selected_index(Pane::Events, &ids)) {
                    self.overlay = Some(Overlay::Detail { detail: Detail::Event(Box::new((*e).clone())), scroll: 0 });
                }
            }
            Pane::Usage if self.section(Pane::Usage) == Section::Second => {
                // A workload's pods: the pods table, filtered to it.
                let Some(id) = self.selected_id(Pane::Usage, views) else { return };
                let Some(w) = views.usage_workloads.iter().find(|w| w.id() == id) else { return };
                self.remember(views);
                self.section.insert(Pane::Usage, Section::First);
                self.filters.insert(Pane::Usage, w.pods_filter.clone());
            }
            Pane::Usage => {
                if let Some(id) = self.selected_id(Pane::Usage, views) {
                    self.overlay = Some(Overlay::Detail { detail: Detail::Usage(id), scroll: 0 });
                }
            }
            Pane::Drivers if self.section(Pane::Drivers) == Section::First => {
                self.overlay = Some(Overlay::CellDetail { scroll: 0 });
            }
            _ => {}
        }
    }
}

pub fn gang_id(key: &GangKey) -> String {
    format!("{}/{}/{}", key.kind.kind_name(), key.namespace, key.name)
}

pub(super) fn gang_id_of_item(p: &crate::analysis::pending::PendingItem) -> String {
    let kind = match p.kind {
        crate::analysis::pending::PendingKind::PodGroup => GangKind::VolcanoPodGroup.kind_name(),
        _ => GangKind::KueueWorkload.kind_name(),
    };
    format!("{kind}/{}/{}", p.namespace, p.name)
}
