//! The terminal: raw mode and the alternate screen, restored on drop, on
//! panic (the hook runs first, then the process exits: a panic is fatal,
//! so nothing draws on a cooked terminal), and on SIGTERM/SIGHUP.

use std::io::{self, Stdout};

use crossterm::execute;
use crossterm::terminal::{EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;

pub type Term = Terminal<CrosstermBackend<Stdout>>;

/// Undoes everything `enter` did. Safe to call twice.
pub fn restore() {
    let _ = disable_raw_mode();
    let _ = execute!(io::stdout(), LeaveAlternateScreen, crossterm::cursor::Show);
}

/// Installs the panic hook *before* raw mode: restore, then the previous
/// hook's report, then exit.
pub fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        tracing::error!("panic: {info}");
        previous(info);
        std::process::exit(101);
    }));
}

pub struct Guard {
    /// Never dropped: ratatui's `Terminal` drop `eprintln!`s when it cannot
    /// show the cursor, which panics once SIGHUP took the terminal away.
    /// [`restore`] shows the cursor instead.
    pub terminal: std::mem::ManuallyDrop<Term>,
}

impl Guard {
    pub fn enter() -> io::Result<Guard> {
        install_panic_hook();
        enable_raw_mode()?;
        if let Err(e) = execute!(io::stdout(), EnterAlternateScreen, crossterm::cursor::Hide) {
            restore();
            return Err(e);
        }
        match Terminal::new(CrosstermBackend::new(io::stdout())) {
            Ok(mut terminal) => {
                let _ = terminal.clear();
                Ok(Guard { terminal: std::mem::ManuallyDrop::new(terminal) })
            }
            Err(e) => {
                restore();
                Err(e)
            }
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        restore();
    }
}
