//! The keymap: one table drives both the key handler and the help overlay,
//! so the help can never disagree with what the keys do.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::Pane;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    Pane(Pane),
    NextPane,
    PrevPane,
    Up,
    Down,
    PageUp,
    PageDown,
    Top,
    Bottom,
    Left,
    Right,
    Enter,
    Back,
    Help,
    Palette,
    Filter,
    Focus,
    Sort,
    Aggregate,
    NextShape,
    PrevShape,
    Cordon,
    Uncordon,
    Drain,
    Requeue,
    /// Copy the kubectl commands of a pending item's blocking step.
    Copy,
    Repartition,
    RunPlan,
    Cancel,
    Quit,
}

pub struct Binding {
    pub keys: &'static [KeyCode],
    pub label: &'static str,
    pub command: Command,
    pub help: &'static str,
    /// Panes where the key does something; `None`: everywhere.
    pub panes: Option<&'static [Pane]>,
}

const ALL_LIST_PANES: &[Pane] =
    &[Pane::Fleet, Pane::Pending, Pane::Gangs, Pane::Mig, Pane::Drivers, Pane::Events, Pane::Usage];

pub const BINDINGS: &[Binding] = &[
    Binding {
        keys: &[KeyCode::Char('1')],
        label: "1",
        command: Command::Pane(Pane::Fleet),
        help: "Fleet: nodes and the fragmentation map",
        panes: None,
    },
    Binding {
        keys: &[KeyCode::Char('2')],
        label: "2",
        command: Command::Pane(Pane::Pending),
        help: "Pending: why pods, gangs and workloads wait",
        panes: None,
    },
    Binding {
        keys: &[KeyCode::Char('3')],
        label: "3",
        command: Command::Pane(Pane::Gangs),
        help: "Gangs & Queues",
        panes: None,
    },
    Binding {
        keys: &[KeyCode::Char('4')],
        label: "4",
        command: Command::Pane(Pane::Mig),
        help: "MIG: slices per GPU",
        panes: None,
    },
    Binding {
        keys: &[KeyCode::Char('5')],
        label: "5",
        command: Command::Pane(Pane::Drivers),
        help: "Drivers: CUDA matrix and upgrade waves",
        panes: None,
    },
    Binding {
        keys: &[KeyCode::Char('6')],
        label: "6",
        command: Command::Pane(Pane::Events),
        help: "Events and the audit log",
        panes: None,
    },
    Binding {
        keys: &[KeyCode::Char('7')],
        label: "7",
        command: Command::Pane(Pane::Usage),
        help: "Usage: who holds GPUs idle",
        panes: None,
    },
    Binding {
        keys: &[KeyCode::Right, KeyCode::Char('l')],
        label: "→ l",
        command: Command::Right,
        help: "next column / matrix cell",
        panes: Some(&[Pane::Drivers]),
    },
    Binding {
        keys: &[KeyCode::Left, KeyCode::Char('h')],
        label: "← h",
        command: Command::Left,
        help: "previous column / matrix cell",
        panes: Some(&[Pane::Drivers]),
    },
    Binding {
        keys: &[KeyCode::Down, KeyCode::Char('j')],
        label: "↓ j",
        command: Command::Down,
        help: "next row",
        panes: Some(ALL_LIST_PANES),
    },
    Binding {
        keys: &[KeyCode::Up, KeyCode::Char('k')],
        label: "↑ k",
        command: Command::Up,
        help: "previous row",
        panes: Some(ALL_LIST_PANES),
    },
    Binding {
        keys: &[KeyCode::PageDown, KeyCode::Char(' ')],
        label: "PgDn",
        command: Command::PageDown,
        help: "next page",
        panes: Some(ALL_LIST_PANES),
    },
    Binding {
        keys: &[KeyCode::PageUp],
        label: "PgUp",
        command: Command::PageUp,
        help: "previous page",
        panes: Some(ALL_LIST_PANES),
    },
    Binding {
        keys: &[KeyCode::Home, KeyCode::Char('g')],
        label: "g Home",
        command: Command::Top,
        help: "first row",
        panes: Some(ALL_LIST_PANES),
    },
    Binding {
        keys: &[KeyCode::End, KeyCode::Char('G')],
        label: "G End",
        command: Command::Bottom,
        help: "last row",
        panes: Some(ALL_LIST_PANES),
    },
    Binding {
        keys: &[KeyCode::Enter],
        label: "enter",
        command: Command::Enter,
        help: "drill down: why pending, node, matrix cell, event, gang, queue, a pod's GPU use",
        panes: None,
    },
    Binding {
        keys: &[KeyCode::Esc],
        label: "esc",
        command: Command::Back,
        help: "back to where you came from (the title shows the path) / close / clear the filter",
        panes: None,
    },
    Binding {
        keys: &[KeyCode::Tab],
        label: "tab",
        command: Command::Focus,
        help: "switch section (gangs ↔ queues, matrix ↔ upgrades ↔ waves, pods ↔ workloads)",
        panes: Some(&[Pane::Gangs, Pane::Drivers, Pane::Usage]),
    },
    Binding {
        keys: &[KeyCode::Char('s')],
        label: "s",
        command: Command::Sort,
        help: "sort nodes: name, free GPUs, problems first",
        panes: Some(&[Pane::Fleet]),
    },
    Binding {
        keys: &[KeyCode::Char('a')],
        label: "a",
        command: Command::Aggregate,
        help: "map: per node ↔ per pool (automatic above 500 nodes)",
        panes: Some(&[Pane::Fleet]),
    },
    Binding {
        keys: &[KeyCode::Char(']')],
        label: "]",
        command: Command::NextShape,
        help: "next pending shape in the side panel",
        panes: Some(&[Pane::Fleet]),
    },
    Binding {
        keys: &[KeyCode::Char('[')],
        label: "[",
        command: Command::PrevShape,
        help: "previous pending shape",
        panes: Some(&[Pane::Fleet]),
    },
    Binding {
        keys: &[KeyCode::Char('c')],
        label: "c",
        command: Command::Cordon,
        help: "cordon the selected node",
        panes: Some(&[Pane::Fleet, Pane::Mig]),
    },
    Binding {
        keys: &[KeyCode::Char('u')],
        label: "u",
        command: Command::Uncordon,
        help: "uncordon the selected node",
        panes: Some(&[Pane::Fleet, Pane::Mig]),
    },
    Binding {
        keys: &[KeyCode::Char('r')],
        label: "r",
        command: Command::Drain,
        help: "drain the selected node (Eviction API, PDBs honoured)",
        panes: Some(&[Pane::Fleet, Pane::Mig]),
    },
    Binding {
        keys: &[KeyCode::Char('R')],
        label: "R",
        command: Command::Requeue,
        help: "requeue the selected gang or workload",
        panes: Some(&[Pane::Pending, Pane::Gangs]),
    },
    Binding {
        keys: &[KeyCode::Char('y')],
        label: "y",
        command: Command::Copy,
        help: "copy the blocking step's kubectl commands (clipboard, OSC 52)",
        panes: Some(&[Pane::Pending]),
    },
    Binding {
        keys: &[KeyCode::Char('m')],
        label: "m",
        command: Command::Repartition,
        help: "repartition MIG on the selected node",
        panes: Some(&[Pane::Fleet, Pane::Mig]),
    },
    Binding {
        keys: &[KeyCode::Char('x')],
        label: "x",
        command: Command::RunPlan,
        help: "run the defragmentation plan (its evictions)",
        panes: Some(&[Pane::Fleet]),
    },
    Binding {
        keys: &[KeyCode::Char('X')],
        label: "X",
        command: Command::Cancel,
        help: "cancel the running action (with several: the selected node's) at its next step",
        panes: None,
    },
    Binding {
        keys: &[KeyCode::Char('/')],
        label: "/",
        command: Command::Filter,
        help: "filter: text, a regex, !inverse, -l label selector (nodes)",
        panes: None,
    },
    Binding {
        keys: &[KeyCode::Char(':')],
        label: ":",
        command: Command::Palette,
        help: "command palette (:fleet :pending :usage :scenario NAME :theme NAME :q ...)",
        panes: None,
    },
    Binding { keys: &[KeyCode::Char('?')], label: "?", command: Command::Help, help: "this help", panes: None },
    Binding {
        keys: &[KeyCode::Char('q')],
        label: "q",
        command: Command::Quit,
        help: "quit (also ctrl-c)",
        panes: None,
    },
    Binding {
        keys: &[KeyCode::BackTab],
        label: "shift-tab",
        command: Command::PrevPane,
        help: "previous pane",
        panes: None,
    },
];

/// The command a key means in `pane`, if any.
pub fn command_for(key: KeyEvent, pane: Pane) -> Option<Command> {
    if key.modifiers.contains(KeyModifiers::CONTROL) {
        return match key.code {
            KeyCode::Char('c') => Some(Command::Quit),
            KeyCode::Char('f') => Some(Command::PageDown),
            KeyCode::Char('b') => Some(Command::PageUp),
            _ => None,
        };
    }
    BINDINGS
        .iter()
        .filter(|b| b.panes.is_none_or(|p| p.contains(&pane)))
        .find(|b| b.keys.contains(&key.code))
        .map(|b| b.command)
        .or(match key.code {
            KeyCode::Tab => Some(Command::NextPane),
            _ => None,
        })
}

/// Short key hints for the status bar of a pane: the pane's own keys first.
pub fn hints(pane: Pane) -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = BINDINGS
        .iter()
        .filter(|b| b.panes.is_some_and(|p| p.contains(&pane) && p.len() < 6))
        .map(|b| (b.label, short(b.command)))
        .collect();
    out.extend([("?", "help"), (":", "cmd"), ("/", "filter"), ("q", "quit")]);
    out
}

fn short(c: Command) -> &'static str {
    match c {
        Command::Sort => "sort",
        Command::Aggregate => "pools",
        Command::NextShape | Command::PrevShape => "shape",
        Command::Cordon => "cordon",
        Command::Uncordon => "uncordon",
        Command::Drain => "drain",
        Command::Requeue => "requeue",
        Command::Copy => "copy",
        Command::Repartition => "MIG",
        Command::RunPlan => "defrag",
        Command::Focus => "section",
        Command::Left | Command::Right => "cell",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_key_means_two_things_in_one_pane() {
        for pane in Pane::ALL {
            let mut seen = std::collections::HashSet::new();
            for b in BINDINGS.iter().filter(|b| b.panes.is_none_or(|p| p.contains(&pane))) {
                for k in b.keys {
                    assert!(seen.insert(*k), "{k:?} bound twice in {pane:?}");
                }
            }
        }
    }

    #[test]
    fn design_keys_are_bound() {
        let key = |c: char| KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE);
        assert_eq!(command_for(key('q'), Pane::Fleet), Some(Command::Quit));
        assert_eq!(command_for(key('?'), Pane::Events), Some(Command::Help));
        assert_eq!(command_for(key('c'), Pane::Fleet), Some(Command::Cordon));
        assert_eq!(command_for(key('R'), Pane::Pending), Some(Command::Requeue));
        assert_eq!(command_for(key('c'), Pane::Events), None, "cordon means nothing on events");
        assert_eq!(
            command_for(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL), Pane::Fleet),
            Some(Command::Quit)
        );
    }
}
