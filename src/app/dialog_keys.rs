//! The keys of the dialogs (readers, the confirmation, the MIG picker, the
//! quit question, the palette and the filter line): one table drives both
//! their handler and the help, as `keys::BINDINGS` does for the panes.

use crossterm::event::KeyCode;

/// The kinds of dialog, as the help groups their keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialog {
    /// Help, node details, a matrix cell: text to scroll.
    Reader,
    Confirm,
    /// A disruptive action on a production-looking context.
    ProductionConfirm,
    MigPicker,
    QuitWhileRunning,
    Palette,
    Filter,
}

impl Dialog {
    pub const ALL: [Dialog; 7] = [
        Dialog::Reader,
        Dialog::Confirm,
        Dialog::ProductionConfirm,
        Dialog::MigPicker,
        Dialog::QuitWhileRunning,
        Dialog::Palette,
        Dialog::Filter,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Dialog::Reader => "in help and details",
            Dialog::Confirm => "in a confirmation",
            Dialog::ProductionConfirm => "confirming a disruptive action on a PRODUCTION context",
            Dialog::MigPicker => "in the MIG config picker",
            Dialog::QuitWhileRunning => "quitting while actions run",
            Dialog::Palette => "in the command palette",
            Dialog::Filter => "in the filter line",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DialogCommand {
    Down,
    Up,
    PageDown,
    PageUp,
    Top,
    Bottom,
    /// Close, cancel, or answer no.
    Close,
    /// Run the action, or answer yes.
    Yes,
    /// Run only what disrupts nothing running (cordon, uncordon): a
    /// reflexive enter must not evict anything.
    YesIfHarmless,
    DryRun,
    /// Complete what is typed (the palette).
    Complete,
    ToggleGpuOnly,
    /// Drain: also evict pods without a controller or with emptyDir data.
    ToggleForce,
    /// Take the choice or the line typed.
    Choose,
}

pub struct DialogBinding {
    pub dialog: Dialog,
    pub keys: &'static [KeyCode],
    pub label: &'static str,
    pub command: DialogCommand,
    pub help: &'static str,
}

const fn bind(
    dialog: Dialog,
    keys: &'static [KeyCode],
    label: &'static str,
    command: DialogCommand,
    help: &'static str,
) -> DialogBinding {
    DialogBinding { dialog, keys, label, command, help }
}

use Dialog as D;
use DialogCommand as C;

pub const DIALOG_BINDINGS: &[DialogBinding] = &[
    bind(D::Reader, &[KeyCode::Down, KeyCode::Char('j')], "j/↓", C::Down, "scroll down"),
    bind(D::Reader, &[KeyCode::Up, KeyCode::Char('k')], "k/↑", C::Up, "scroll up"),
    bind(D::Reader, &[KeyCode::PageDown, KeyCode::Char(' ')], "PgDn/space", C::PageDown, "a page down"),
    bind(D::Reader, &[KeyCode::PageUp], "PgUp", C::PageUp, "a page up"),
    bind(D::Reader, &[KeyCode::Home, KeyCode::Char('g')], "g/Home", C::Top, "to the top"),
    bind(D::Reader, &[KeyCode::End, KeyCode::Char('G')], "G/End", C::Bottom, "to the end"),
    bind(
        D::Reader,
        &[KeyCode::Esc, KeyCode::Char('q'), KeyCode::Enter, KeyCode::Char('?')],
        "esc/q/enter",
        C::Close,
        "close",
    ),
    bind(D::Confirm, &[KeyCode::Char('y'), KeyCode::Char('Y')], "y", C::Yes, "run it"),
    bind(D::Confirm, &[KeyCode::Down, KeyCode::Char('j')], "j/↓", C::Down, "scroll the blast radius and commands"),
    bind(D::Confirm, &[KeyCode::Up, KeyCode::Char('k')], "k/↑", C::Up, "scroll back"),
    bind(D::Confirm, &[KeyCode::PageDown, KeyCode::Char(' ')], "PgDn/space", C::PageDown, "a page down"),
    bind(D::Confirm, &[KeyCode::PageUp], "PgUp", C::PageUp, "a page up"),
    bind(D::Confirm, &[KeyCode::Home], "Home", C::Top, "to the top"),
    bind(D::Confirm, &[KeyCode::End, KeyCode::Char('G')], "G/End", C::Bottom, "to the last step"),
    bind(
        D::Confirm,
        &[KeyCode::Enter],
        "enter",
        C::YesIfHarmless,
        "run a cordon or uncordon (never a disruptive action)",
    ),
    bind(
        D::Confirm,
        &[KeyCode::Char('d'), KeyCode::Char('D')],
        "d",
        C::DryRun,
        "dry run (the API server checks, nothing changes)",
    ),
    bind(D::Confirm, &[KeyCode::Char('g')], "g", C::ToggleGpuOnly, "drain: GPU pods only, or all pods"),
    bind(
        D::Confirm,
        &[KeyCode::Char('f')],
        "f",
        C::ToggleForce,
        "drain: also evict pods without a controller or with emptyDir data (they are lost)",
    ),
    bind(
        D::Confirm,
        &[KeyCode::Char('n'), KeyCode::Char('N'), KeyCode::Esc, KeyCode::Char('q')],
        "n/esc",
        C::Close,
        "cancel",
    ),
    bind(
        D::ProductionConfirm,
        &[KeyCode::Enter],
        "NAME enter",
        C::Choose,
        "type the node's or workload's name, then enter: runs it when the name matches",
    ),
    bind(D::ProductionConfirm, &[KeyCode::Tab], "tab", C::DryRun, "dry run (the API server checks, nothing changes)"),
    bind(D::ProductionConfirm, &[KeyCode::Esc], "esc", C::Close, "cancel"),
    bind(D::ProductionConfirm, &[KeyCode::Down], "↓", C::Down, "scroll the blast radius and commands"),
    bind(D::ProductionConfirm, &[KeyCode::Up], "↑", C::Up, "scroll back"),
    bind(D::ProductionConfirm, &[KeyCode::PageDown], "PgDn", C::PageDown, "a page down"),
    bind(D::ProductionConfirm, &[KeyCode::PageUp], "PgUp", C::PageUp, "a page up"),
    bind(D::MigPicker, &[KeyCode::Down, KeyCode::Char('j')], "j/↓", C::Down, "next config"),
    bind(D::MigPicker, &[KeyCode::Up, KeyCode::Char('k')], "k/↑", C::Up, "previous config"),
    bind(D::MigPicker, &[KeyCode::Home, KeyCode::Char('g'), KeyCode::PageUp], "g/Home/PgUp", C::Top, "first config"),
    bind(D::MigPicker, &[KeyCode::End, KeyCode::Char('G'), KeyCode::PageDown], "G/End/PgDn", C::Bottom, "last config"),
    bind(D::MigPicker, &[KeyCode::Enter], "enter", C::Choose, "choose it (a confirmation follows)"),
    bind(D::MigPicker, &[KeyCode::Esc, KeyCode::Char('q')], "esc/q", C::Close, "cancel"),
    bind(
        D::QuitWhileRunning,
        &[KeyCode::Char('y'), KeyCode::Char('Y')],
        "y",
        C::Yes,
        "stop them at their next step, then quit",
    ),
    bind(
        D::QuitWhileRunning,
        &[KeyCode::Char('n'), KeyCode::Char('N'), KeyCode::Esc],
        "n/esc",
        C::Close,
        "stay (X cancels one action cleanly)",
    ),
    bind(D::Palette, &[KeyCode::Enter], "enter", C::Choose, "run the command"),
    bind(D::Palette, &[KeyCode::Tab], "tab", C::Complete, "complete the command or its argument"),
    bind(D::Palette, &[KeyCode::Esc], "esc", C::Close, "cancel"),
    bind(D::Filter, &[KeyCode::Enter], "enter", C::Choose, "keep the filter"),
    bind(D::Filter, &[KeyCode::Esc], "esc", C::Close, "clear it"),
];

/// What `code` does in `dialog`, if anything (other keys in the palette
/// and filter are typed text).
pub fn dialog_command(dialog: Dialog, code: KeyCode) -> Option<DialogCommand> {
    DIALOG_BINDINGS.iter().find(|b| b.dialog == dialog && b.keys.contains(&code)).map(|b| b.command)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_key_means_two_things_in_one_dialog() {
        for dialog in Dialog::ALL {
            let mut seen = std::collections::HashSet::new();
            for b in DIALOG_BINDINGS.iter().filter(|b| b.dialog == dialog) {
                for k in b.keys {
                    assert!(seen.insert(*k), "{k:?} bound twice in {dialog:?}");
                }
            }
            assert!(DIALOG_BINDINGS.iter().any(|b| b.dialog == dialog && b.command == DialogCommand::Close));
        }
        assert_eq!(dialog_command(Dialog::Confirm, KeyCode::Enter), Some(DialogCommand::YesIfHarmless));
        assert_eq!(dialog_command(Dialog::Palette, KeyCode::Char('q')), None, "q is text in the palette");
    }
}
