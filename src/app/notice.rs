//! What the status line says, and `:messages`, which keeps it all.

use super::App;

/// A line in the status bar. It lasts until the next key, as in vi: a
/// message still on screen minutes later reads as news. An error (a failed
/// action, a stopped source) stays until it is dismissed (esc).
#[derive(Clone, Debug, PartialEq)]
pub struct Notice {
    pub text: String,
    pub error: bool,
    pub sticky: bool,
}

impl Notice {
    pub fn new(text: impl Into<String>, error: bool) -> Self {
        Notice { text: text.into(), error, sticky: false }
    }
}

/// A notice kept for `:messages`.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    pub text: String,
    pub error: bool,
    pub at: crate::model::Timestamp,
}

/// How many notices `:messages` keeps.
pub const MESSAGES_KEPT: usize = 200;

impl App {
    /// A notice on the status line, kept for `:messages`. An error stays
    /// until it is dismissed (esc); other notices go with the next key.
    pub(super) fn notify(&mut self, text: impl Into<String>, error: bool) {
        self.show(Notice { text: text.into(), error, sticky: error });
    }

    /// A passing word that answers the key just typed (a sort, a hint while
    /// typing a filter): on the status line, not kept for `:messages`.
    pub(super) fn say_briefly(&mut self, text: impl Into<String>, error: bool) {
        self.notice = Some(Notice { text: text.into(), error, sticky: false });
    }

    pub(super) fn show(&mut self, notice: Notice) {
        if self.messages.len() == MESSAGES_KEPT {
            self.messages.pop_front();
        }
        self.messages.push_back(Message { text: notice.text.clone(), error: notice.error, at: self.clock });
        self.notice = Some(notice);
    }
}
