//! How view models mark what they show: each piece of text carries its
//! role (a header, a warning, a key hint, a free GPU), and the ui's theme
//! decides what a role looks like. A `Doc` is a block of such text (a
//! drilldown, a detail, a side panel) that the ui draws as it is, and that
//! tests can read without a terminal.

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    Text,
    Dim,
    Title,
    Header,
    Border,
    BorderFocused,
    Selection,
    Tab,
    TabActive,
    KeyHint,
    Accent,
    Ok,
    Warn,
    Error,
    Pending,
    Destructive,
    Production,
    GpuUsed,
    GpuFree,
    GpuStranded,
    GpuUnadvertised,
    GpuUnhealthy,
    GpuUnavailable,
    MigUsed,
    MigFree,
    BarUsed,
    BarFree,
}

impl Role {
    pub const ALL: [Role; 27] = [
        Role::Text,
        Role::Dim,
        Role::Title,
        Role::Header,
        Role::Border,
        Role::BorderFocused,
        Role::Selection,
        Role::Tab,
        Role::TabActive,
        Role::KeyHint,
        Role::Accent,
        Role::Ok,
        Role::Warn,
        Role::Error,
        Role::Pending,
        Role::Destructive,
        Role::Production,
        Role::GpuUsed,
        Role::GpuFree,
        Role::GpuStranded,
        Role::GpuUnadvertised,
        Role::GpuUnhealthy,
        Role::GpuUnavailable,
        Role::MigUsed,
        Role::MigFree,
        Role::BarUsed,
        Role::BarFree,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Role::Text => "text",
            Role::Dim => "dim",
            Role::Title => "title",
            Role::Header => "header",
            Role::Border => "border",
            Role::BorderFocused => "border_focused",
            Role::Selection => "selection",
            Role::Tab => "tab",
            Role::TabActive => "tab_active",
            Role::KeyHint => "key_hint",
            Role::Accent => "accent",
            Role::Ok => "ok",
            Role::Warn => "warn",
            Role::Error => "error",
            Role::Pending => "pending",
            Role::Destructive => "destructive",
            Role::Production => "production",
            Role::GpuUsed => "gpu_used",
            Role::GpuFree => "gpu_free",
            Role::GpuStranded => "gpu_stranded",
            Role::GpuUnadvertised => "gpu_unadvertised",
            Role::GpuUnhealthy => "gpu_unhealthy",
            Role::GpuUnavailable => "gpu_unavailable",
            Role::MigUsed => "mig_used",
            Role::MigFree => "mig_free",
            Role::BarUsed => "bar_used",
            Role::BarFree => "bar_free",
        }
    }

    pub fn index(self) -> usize {
        Role::ALL.iter().position(|r| *r == self).unwrap_or(0)
    }
}

/// `text` safe to print on a terminal: what the cluster, an agent or a file
/// sends may carry escape sequences (an event message that retitles the
/// terminal, a label that clears the screen). Control characters (C0, DEL,
/// C1) become `�`, except newlines (kept) and tabs and carriage returns
/// (spaces), so a tampered text shows as tampered. Bidirectional controls
/// (right-to-left override and its kin) become `�` too: they make a name
/// read backwards on screen ("Trojan Source"), and no Kubernetes name needs one.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| c != '\n' && unsafe_on_screen(c);
    if !text.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    let cleaned = text
        .chars()
        .map(|c| match c {
            '\n' => '\n',
            '\t' | '\r' => ' ',
            c if unsafe_char(c) => '\u{FFFD}',
            c => c,
        })
        .collect();
    std::borrow::Cow::Owned(cleaned)
}

/// A character that must not reach a terminal as it is: a control, or one
/// that reorders or hides text so that a name reads as another (`gpu-1` +
/// zero-width space looks like `gpu-1`).
pub fn unsafe_on_screen(c: char) -> bool {
    c.is_control() || is_bidi_control(c) || is_invisible(c)
}

/// Unicode's explicit directional formatting characters (UAX #9): marks,
/// embeddings, overrides and isolates.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// Characters that draw nothing (zero-width spaces and joiners, word
/// joiners, the BOM, soft hyphen, tag characters, Hangul fillers) or break
/// lines by themselves (U+2028, U+2029).
fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{115F}'
            | '\u{1160}'
            | '\u{180E}'
            | '\u{200B}'..='\u{200D}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{2060}'..='\u{2064}'
            | '\u{3164}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{E0000}'..='\u{E007F}'
    )
}

/// One piece of text and its role.
pub type Piece = (Role, String);

/// A line of a [`Doc`].
#[derive(Clone, Debug, PartialEq)]
pub enum DocLine {
    Pieces(Vec<Piece>),
    /// A command to copy: wrapped lines hang under the command, after `prefix`.
    Command {
        prefix: &'static str,
        text: String,
    },
}

/// A block of styled text, built by a view model and drawn by the ui.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Doc {
    pub lines: Vec<DocLine>,
}

impl Doc {
    /// A line of one piece.
    pub fn line(&mut self, role: Role, text: impl Into<String>) -> &mut Self {
        self.lines.push(DocLine::Pieces(vec![(role, text.into())]));
        self
    }

    /// A line of several pieces.
    pub fn pieces(&mut self, pieces: Vec<(Role, String)>) -> &mut Self {
        self.lines.push(DocLine::Pieces(pieces));
        self
    }

    pub fn blank(&mut self) -> &mut Self {
        self.lines.push(DocLine::Pieces(Vec::new()));
        self
    }

    pub fn command(&mut self, prefix: &'static str, text: impl Into<String>) -> &mut Self {
        self.lines.push(DocLine::Command { prefix, text: text.into() });
        self
    }

    /// Columns its widest line needs (a panel's natural width).
    pub fn width(&self) -> usize {
        self.plain().lines().map(|l| l.chars().count()).max().unwrap_or(0)
    }

    /// The text without roles, one line per `DocLine` (for tests and logs).
    pub fn plain(&self) -> String {
        let mut out = String::new();
        for l in &self.lines {
            match l {
                DocLine::Pieces(p) => p.iter().for_each(|(_, t)| out.push_str(t)),
                DocLine::Command { prefix, text } => {
                    out.push_str(prefix);
                    out.push_str(text);
                }
            }
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_cannot_reach_the_terminal() {
        assert_eq!(printable("\u{1b}]0;pwned\u{7}ok"), "\u{FFFD}]0;pwned\u{FFFD}ok");
        assert_eq!(printable("a\u{9b}31mb"), "a\u{FFFD}31mb", "C1 CSI too");
        assert_eq!(printable("line one\nline\ttwo\r"), "line one\nline two ");
        // A right-to-left override would show `train-gpu-8txt.exe` reversed.
        assert_eq!(printable("pod-\u{202E}exe.txt"), "pod-\u{FFFD}exe.txt");
        assert_eq!(printable("a\u{2066}b\u{2069}c\u{200F}"), "a\u{FFFD}b\u{FFFD}c\u{FFFD}");
        assert!(matches!(printable("plain text, ünïcode ✓"), std::borrow::Cow::Borrowed(_)));
    }
}
