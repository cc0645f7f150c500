//! The command palette's language: `:fleet`, `:scenario gang-deadlock`,
//! `:theme light`, `:plan 570.124.06`, `:why team-a/job-x`, `:ctx prod-east`,
//! `:ns team-a`, `:q` — with k9s's aliases (`:no`, `:po`, `:q!`) and Tab
//! completion of commands and their arguments.

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
    /// Another kube context, same namespace scope.
    Context(String),
    /// Another namespace (`None`: all of them).
    Namespace(Option<String>),
    Help,
    Messages,
    /// What a kgpu that ended without finishing left: see it, release it.
    Release,
    /// The lesson or mystery running: its reader.
    Lesson,
    Hint,
    /// `:answer CAUSE`.
    Answer(String),
}

pub const COMMANDS: &[(&str, &str)] = &[
    ("fleet | pending | gangs | queues | mig | drivers | events | usage", "switch pane (:no :po :ev :idle too)"),
    ("ctx NAME", "switch kube context; the feeds restart (live cluster)"),
    ("ns NAME | ns all", "watch one namespace's pods and events, or all"),
    ("scenario NAME", "restart the demo on another scenario (demo only)"),
    ("theme NAME", "dark, light, high-contrast, mono"),
    ("plan VERSION | plan off", "plan driver-upgrade waves to a version"),
    ("why NAMESPACE/NAME", "open the pending chain of an item"),
    ("filter TEXT", "filter this pane (empty clears)"),
    ("lesson | hint | answer CAUSE", "a lesson or mystery: its question, the next hint, your answer"),
    ("help", "the key help"),
    ("messages", "every message of this session, newest first"),
    ("release", "what a killed kgpu left (defrag reservations, open actions): see and release it"),
    ("q | quit", "quit"),
];

pub fn parse(line: &str) -> Result<PaletteCommand, String> {
    let line = line.trim().trim_start_matches(':').trim();
    let (word, rest) = line.split_once(char::is_whitespace).map_or((line, ""), |(w, r)| (w, r.trim()));
    let need = |what: &str| -> Result<String, String> {
        if rest.is_empty() { Err(format!(":{word} needs {what}")) } else { Ok(rest.to_string()) }
    };
    Ok(match word {
        "fleet" | "nodes" | "node" | "no" | "1" => PaletteCommand::Pane(Pane::Fleet),
        "pending" | "pods" | "pod" | "po" | "2" => PaletteCommand::Pane(Pane::Pending),
        "gangs" | "workloads" | "wl" | "podgroups" | "pg" | "3" => PaletteCommand::Pane(Pane::Gangs),
        "queues" | "clusterqueues" | "cq" | "lq" => PaletteCommand::Queues,
        "mig" | "4" => PaletteCommand::Pane(Pane::Mig),
        "drivers" | "5" => PaletteCommand::Pane(Pane::Drivers),
        "events" | "ev" | "audit" | "6" => PaletteCommand::Pane(Pane::Events),
        "usage" | "idle" | "utilization" | "util" | "7" => PaletteCommand::Pane(Pane::Usage),
        "q" | "quit" | "q!" => PaletteCommand::Quit,
        "ctx" | "context" => PaletteCommand::Context(need("a context name (Tab lists them)")?),
        "ns" | "namespace" => match rest {
            "" => return Err(":ns needs a namespace, or all".into()),
            "all" | "-A" | "*" => PaletteCommand::Namespace(None),
            ns => PaletteCommand::Namespace(Some(ns.to_string())),
        },
        "scenario" => PaletteCommand::Scenario(need("a scenario name (kgpu demo --list)")?),
        "theme" => PaletteCommand::Theme(need("a theme name")?),
        "plan" => match rest {
            "" => return Err(":plan needs a driver version, e.g. :plan 570.124.06 (or :plan off)".into()),
            "off" => PaletteCommand::Plan(None),
            v => match DriverVersion::parse(v) {
                Some(version) => {
                    crate::reference::cuda::check_target(&version).map_err(|e| format!("'{v}': {e}"))?;
                    PaletteCommand::Plan(Some(version))
                }
                None => return Err(format!("'{v}' is not a driver version like 570.124.06")),
            },
        },
        "why" => PaletteCommand::Why(need("NAMESPACE/NAME")?),
        "filter" => PaletteCommand::Filter(rest.to_string()),
        "lesson" => PaletteCommand::Lesson,
        "hint" => PaletteCommand::Hint,
        "answer" => PaletteCommand::Answer(need("a cause (Tab lists them)")?),
        "help" | "?" => PaletteCommand::Help,
        "messages" | "msgs" | "log" => PaletteCommand::Messages,
        "release" => PaletteCommand::Release,
        "" => return Err("empty command; try :help".into()),
        other => {
            return Err(format!(
                "unknown command ':{other}'; try fleet, pending, ctx NAME, ns NAME, theme NAME, plan VERSION, why NS/NAME, q (Tab completes)"
            ));
        }
    })
}

/// What the palette can complete besides its own words.
#[derive(Clone, Debug, Default)]
pub struct Vocabulary {
    pub contexts: Vec<String>,
    pub namespaces: Vec<String>,
    pub scenarios: Vec<String>,
    /// Pending items (`NAMESPACE/NAME`), for `:why`.
    pub pending: Vec<String>,
}

/// The words a command line starts with, in the order the hint lists them.
pub const WORDS: &[&str] = &[
    "fleet", "pending", "gangs", "queues", "mig", "drivers", "events", "usage", "idle", "ctx", "ns", "scenario",
    "theme", "plan", "why", "filter", "messages", "release", "lesson", "hint", "answer", "help", "quit",
];

pub const THEMES: &[&str] = &["dark", "light", "high-contrast", "mono"];

/// A line after Tab, and what could follow what is typed (shown as you type).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    pub line: String,
    pub choices: Vec<String>,
}

/// What may follow `line`: command words, or the arguments of the command
/// typed. Tab takes the one choice, or the longest prefix they share.
pub fn complete(line: &str, vocabulary: &Vocabulary) -> Completion {
    let typed = line.trim_start().trim_start_matches(':');
    let (prefix, partial, candidates): (String, &str, Vec<String>) = match typed.split_once(' ') {
        None => (String::new(), typed, WORDS.iter().map(|w| w.to_string()).collect()),
        Some((word, rest)) => {
            let rest = rest.trim_start();
            let args: Vec<String> = match word {
                "ctx" | "context" => vocabulary.contexts.clone(),
                "ns" | "namespace" => {
                    std::iter::once("all".to_string()).chain(vocabulary.namespaces.iter().cloned()).collect()
                }
                "scenario" => vocabulary.scenarios.clone(),
                "theme" => THEMES.iter().map(|t| t.to_string()).collect(),
                "plan" => vec!["off".to_string()],
                "why" => vocabulary.pending.clone(),
                "answer" => crate::view_model::lessons::Cause::ALL.iter().map(|c| c.word().to_string()).collect(),
                _ => Vec::new(),
            };
            (format!("{word} "), rest, args)
        }
    };
    let choices: Vec<String> = candidates.into_iter().filter(|c| c.starts_with(partial)).collect();
    let completed = match choices.as_slice() {
        [] => partial.to_string(),
        [one] if prefix.is_empty() && takes_argument(one) => format!("{one} "),
        [one] => one.clone(),
        [first, rest @ ..] => {
            let mut common = first.as_str();
            for c in rest {
                let shared = common.chars().zip(c.chars()).take_while(|(a, b)| a == b).count();
                common = &common[..common.char_indices().nth(shared).map_or(common.len(), |(i, _)| i)];
            }
            common.to_string()
        }
    };
    Completion { line: format!("{prefix}{completed}"), choices }
}

fn takes_argument(word: &str) -> bool {
    matches!(word, "ctx" | "ns" | "scenario" | "theme" | "plan" | "why" | "filter" | "answer")
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
        assert!(parse(":plan 999.1").is_err_and(|e| e.contains("no NVIDIA driver branch R999")));
        assert_eq!(parse(":plan 57x").unwrap_err(), "'57x' is not a driver version like 570.124.06");
        assert!(parse(":scenario").unwrap_err().contains("needs"));
        assert!(parse(":bogus").unwrap_err().contains("unknown command ':bogus'"));
    }

    #[test]
    fn the_help_names_every_command_word() {
        // Each word the hint offers is in the help's command list (or is an
        // alias the help names in its description).
        let help: String = COMMANDS.iter().map(|(c, d)| format!("{c} {d} ")).collect();
        for word in WORDS {
            assert!(help.contains(word), ":{word} is missing from the help");
        }
    }

    #[test]
    fn k9s_aliases_and_scope_commands() {
        assert_eq!(parse(":no"), Ok(PaletteCommand::Pane(Pane::Fleet)));
        assert_eq!(parse(":po"), Ok(PaletteCommand::Pane(Pane::Pending)));
        assert_eq!(parse(":q!"), Ok(PaletteCommand::Quit));
        assert_eq!(parse(":ctx prod-east"), Ok(PaletteCommand::Context("prod-east".into())));
        assert_eq!(parse(":ns team-a"), Ok(PaletteCommand::Namespace(Some("team-a".into()))));
        assert_eq!(parse(":ns all"), Ok(PaletteCommand::Namespace(None)));
        assert!(parse(":ctx").unwrap_err().contains("context name"));
    }

    #[test]
    fn tab_completes_words_then_arguments() {
        let vocabulary = Vocabulary {
            contexts: vec!["kgpu-lab".into(), "prod-east".into(), "prod-west".into()],
            namespaces: vec!["team-a".into(), "team-b".into()],
            ..Vocabulary::default()
        };
        let c = |line: &str| complete(line, &vocabulary);
        // Every word listed for an empty line; one match completes with a space.
        assert_eq!(c("").choices.len(), WORDS.len());
        assert_eq!(c("cu").line, "cu");
        assert_eq!(c("ct").line, "ctx ");
        assert_eq!(c("pe").line, "pending");
        // Several: the prefix they share, and all of them to show.
        assert_eq!(
            c("ctx pr"),
            Completion { line: "ctx prod-".into(), choices: vec!["prod-east".into(), "prod-west".into()] }
        );
        assert_eq!(c("ctx prod-e").line, "ctx prod-east");
        assert_eq!(c("ns ").choices, ["all", "team-a", "team-b"]);
        assert_eq!(c("ns team-").line, "ns team-");
        assert_eq!(c("theme h").line, "theme high-contrast");
        assert_eq!(c(":plan o").line, "plan off");
    }
}
