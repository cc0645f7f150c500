//! The command palette's language: `:fleet`, `:scenario gang-deadlock`,
//! `:theme light`, `:plan 570.124.06`, `:why team-a/job-x`, `:q`.

use super::Pane;
use crate::model::DriverVersion;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PaletteCommand {
    Pane(Pane),
    Queues,
    Quit,
    Scenario(String),
    Theme(String),
    /// `None`: stop planning.
    Plan(Option<DriverVersion>),
    Why(String),
    Filter(String),
    Help,
}

pub const COMMANDS: &[(&str, &str)] = &[
    ("fleet | pending | gangs | queues | mig | drivers | events", "switch pane"),
    ("scenario NAME", "restart the demo on another scenario (demo only)"),
    ("theme NAME", "dark, light, high-contrast, mono"),
    ("plan VERSION | plan off", "plan driver-upgrade waves to a version"),
    ("why NAMESPACE/NAME", "open the pending chain of an item"),
    ("filter TEXT", "filter this pane (empty clears)"),
    ("help", "the key help"),
    ("q | quit", "quit"),
];

pub fn parse(line: &str) -> Result<PaletteCommand, String> {
    let line = line.trim().trim_start_matches(':').trim();
    let (word, rest) = line.split_once(char::is_whitespace).map_or((line, ""), |(w, r)| (w, r.trim()));
    let need = |what: &str| -> Result<String, String> {
        if rest.is_empty() { Err(format!(":{word} needs {what}")) } else { Ok(rest.to_string()) }
    };
    Ok(match word {
        "fleet" | "nodes" | "1" => PaletteCommand::Pane(Pane::Fleet),
        "pending" | "2" => PaletteCommand::Pane(Pane::Pending),
        "gangs" | "3" => PaletteCommand::Pane(Pane::Gangs),
        "queues" => PaletteCommand::Queues,
        "mig" | "4" => PaletteCommand::Pane(Pane::Mig),
        "drivers" | "5" => PaletteCommand::Pane(Pane::Drivers),
        "events" | "audit" | "6" => PaletteCommand::Pane(Pane::Events),
        "q" | "quit" | "q!" => PaletteCommand::Quit,
        "scenario" => PaletteCommand::Scenario(need("a scenario name (kgpu demo --list)")?),
        "theme" => PaletteCommand::Theme(need("a theme name")?),
        "plan" => match rest {
            "" => return Err(":plan needs a driver version, e.g. :plan 570.124.06 (or :plan off)".into()),
            "off" => PaletteCommand::Plan(None),
            v => match DriverVersion::parse(v) {
                Some(version) => PaletteCommand::Plan(Some(version)),
                None => return Err(format!("'{v}' is not a driver version like 570.124.06")),
            },
        },
        "why" => PaletteCommand::Why(need("NAMESPACE/NAME")?),
        "filter" => PaletteCommand::Filter(rest.to_string()),
        "help" | "?" => PaletteCommand::Help,
        "" => return Err("empty command; try :help".into()),
        other => {
            return Err(format!(
                "unknown command ':{other}'; try fleet, pending, scenario NAME, theme NAME, plan VERSION, why NS/NAME, q"
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_commands() {
        assert_eq!(parse(":fleet"), Ok(PaletteCommand::Pane(Pane::Fleet)));
        assert_eq!(parse("scenario gang-deadlock"), Ok(PaletteCommand::Scenario("gang-deadlock".into())));
        assert_eq!(parse(":theme  light "), Ok(PaletteCommand::Theme("light".into())));
        assert_eq!(parse(":q"), Ok(PaletteCommand::Quit));
        assert_eq!(parse(":plan off"), Ok(PaletteCommand::Plan(None)));
        // The version is parsed here, so the effect carries a version, never a string.
        assert_eq!(parse(":plan 570.124.06"), Ok(PaletteCommand::Plan(DriverVersion::parse("570.124.06"))));
        assert_eq!(parse(":plan 57x").unwrap_err(), "'57x' is not a driver version like 570.124.06");
        assert!(parse(":scenario").unwrap_err().contains("needs"));
        assert!(parse(":bogus").unwrap_err().contains("unknown command ':bogus'"));
    }
}
