//! Glue: the command line's dispatch, one-shot loads for `snapshot` and
//! `why`, and the interactive cockpit's loop. `anyhow` lives here and in
//! `main.rs` only.

pub mod act;
pub mod lab;
pub mod load;
pub mod logging;
pub mod memory;
pub mod pacing;
pub mod scenario;
pub mod signals;
pub mod source;
pub mod terminal;
pub mod tui;

use std::process::ExitCode;

use crate::analysis::{self, Thresholds, waves};
use crate::cli::{Cli, Command, DemoArgs, Output, SnapshotArgs, WhyArgs};
use crate::sources::sim::scenarios;
use crate::view_model::{Section, json, text};

use source::Source;

/// An error the user caused: printed as is, exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

pub fn exit_code(err: &anyhow::Error) -> ExitCode {
    if err.downcast_ref::<UsageError>().is_some()
        || err.downcast_ref::<scenarios::UnknownScenario>().is_some()
        || err.downcast_ref::<crate::view_model::UnknownSection>().is_some()
    {
        ExitCode::from(2)
    } else {
        ExitCode::from(1)
    }
}

/// `println!` for a command's status lines, through [`emit`]: a closed pipe
/// (`kgpu lab status | head -3`) does not panic.
macro_rules! outln {
    ($($arg:tt)*) => {{
        if let Err(e) = $crate::runtime::emit(&format!("{}\n", format_args!($($arg)*))) {
            $crate::runtime::note_output_lost(&e);
        }
    }};
}

/// The first error writing a report line (a full disk, a closed terminal):
/// the command goes on — an action half done must finish or undo what it
/// holds — and then fails with it (`output_lost`), rather than exit 0 with
/// a report nobody got.
static OUTPUT_LOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();

pub fn note_output_lost(e: &anyhow::Error) {
    let _ = OUTPUT_LOST.set(e.to_string());
}

/// Why some of the command's output was lost, if it was.
pub fn output_lost() -> Option<&'static str> {
    OUTPUT_LOST.get().map(String::as_str)
}
pub(crate) use outln;

/// Writes a command's output, without the control characters of anything
/// the cluster sent. A reader that went away (`kgpu snapshot | head`) is
/// not an error: the rest of the output is simply not wanted.
pub fn emit(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let text = crate::view_model::style::printable(text);
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// A line on stderr, scrubbed. Never a panic: after SIGHUP the terminal is
/// gone (EIO), and `eprintln!` would panic on the way out.
pub fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{}", crate::view_model::style::printable(line));
}

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    if cli.print_paths {
        emit(&crate::config::Paths::from_env().describe())?;
        return Ok(ExitCode::SUCCESS);
    }
    match cli.command {
        Some(Command::Demo(args)) if args.list => {
            emit(&list_scenarios())?;
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Demo(args)) => demo(&args, &cli.ui),
        Some(Command::Lesson(args)) => lessons(&args, &cli.source),
        Some(Command::Snapshot(args)) => snapshot(&args, &cli.source),
        Some(Command::Why(args)) => why(&args, &cli.source),
        Some(Command::Scenario(args)) => scenario::run(&args, &cli.source),
        Some(Command::Agent(args)) => agent(&args, &cli.ui),
        Some(Command::Lab(args)) => lab::run(&args),
        Some(Command::Cordon(a)) => act::run(act::Wanted::Cordon(a.node), &a.act, &cli.source, &cli.ui),
        Some(Command::Uncordon(a)) => act::run(act::Wanted::Uncordon(a.node), &a.act, &cli.source, &cli.ui),
        Some(Command::Drain(a)) => {
            let wanted = act::Wanted::Drain { node: a.node, gpu_only: a.gpu_only, force: a.force };
            act::run(wanted, &a.act, &cli.source, &cli.ui)
        }
        Some(Command::Requeue(a)) => act::run(act::Wanted::Requeue(a.target), &a.act, &cli.source, &cli.ui),
        Some(Command::Repartition(a)) => {
            act::run(act::Wanted::Repartition { node: a.node, config: a.config }, &a.act, &cli.source, &cli.ui)
        }
        Some(Command::Defrag(a)) => act::run(act::Wanted::Defrag(a.target), &a.act, &cli.source, &cli.ui),
        Some(Command::Release(a)) => act::run(act::Wanted::Release(a.nodes), &a.act, &cli.source, &cli.ui),
        Some(Command::Completions(a)) => {
            let mut out = Vec::new();
            clap_complete::generate(a.shell, &mut crate::cli::command(false), "kgpu", &mut out);
            emit(&String::from_utf8_lossy(&out))?;
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Man) => {
            let mut out = Vec::new();
            clap_mangen::Man::new(crate::cli::command(false)).render(&mut out)?;
            emit(&String::from_utf8_lossy(&out))?;
            Ok(ExitCode::SUCCESS)
        }
        None if !cli.source.file.is_empty() => cockpit(Source::File(cli.source.file.clone()), &cli.ui),
        None => cockpit(Source::kube(&cli.source), &cli.ui),
    }
}

/// The scenarios, each field wrapped under the name column to the
/// terminal's width (100 columns into a pipe).
pub fn list_scenarios() -> String {
    use std::io::IsTerminal;
    let width = if std::io::stdout().is_terminal() {
        crossterm::terminal::size().map_or(100, |(w, _)| usize::from(w).max(40))
    } else {
        100
    };
    let mut out = String::new();
    // The name column as wide as the longest name, and a space.
    let column = scenarios::SCENARIOS.iter().map(|s| s.name.chars().count()).max().unwrap_or(0) + 2;
    for s in scenarios::SCENARIOS {
        let signal = format!("signal: {}", s.signal);
        for (lead, text) in [(s.name, s.title), ("", s.story), ("", signal.as_str())] {
            for line in crate::ui::widgets::wrap_under(&format!("{lead:<column$}"), text, width, column) {
                out.push_str(&line);
                out.push('\n');
            }
        }
        out.push('\n');
    }
    out
}

fn cockpit(source: Source, ui: &crate::cli::UiArgs) -> anyhow::Result<ExitCode> {
    let tutor = match &ui.lesson {
        Some(name) => Some((lesson(name)?, crate::app::TutorMode::Lesson)),
        None => None,
    };
    cockpit_with(source, ui, tutor)
}

fn cockpit_with(
    source: Source,
    ui: &crate::cli::UiArgs,
    tutor: Option<(&'static crate::view_model::lessons::Lesson, crate::app::TutorMode)>,
) -> anyhow::Result<ExitCode> {
    let runtime = memory::cockpit_runtime()?;
    let ending = runtime.block_on(tui::run(tui::CockpitOptions {
        source,
        tutor,
        theme: ui.theme.clone(),
        read_only: ui.read_only,
        log_level: ui.log_level.clone(),
    }))?;
    // What leaving stopped goes on stderr first: after an SSH drop only the
    // audit log reads it, but a q or a kill in a live terminal sees it here.
    let audit = crate::config::Paths::from_env().audit_log();
    for line in ending.words(audit.as_deref()) {
        say(&line);
    }
    if let Some(report) = &ending.report {
        emit(report)?;
    }
    Ok(ending.exit_code())
}

fn lesson(name: &str) -> anyhow::Result<&'static crate::view_model::lessons::Lesson> {
    crate::view_model::lessons::find(name).ok_or_else(|| {
        let names: Vec<&str> = crate::view_model::lessons::LESSONS.iter().map(|l| l.scenario).collect();
        UsageError(format!("no lesson '{name}'; lessons: {}", names.join(", "))).into()
    })
}

fn agent(args: &crate::cli::AgentArgs, ui: &crate::cli::UiArgs) -> anyhow::Result<ExitCode> {
    let choice = crate::agent::BackendChoice::parse(&args.backend).map_err(UsageError)?;
    let key = crate::agent::read_token(&args.token_file).map_err(UsageError)?;
    let _ = logging::init_stderr(&ui.log_level);
    let opts = crate::agent::Options {
        node: args.node_name.clone(),
        // Only this node's token opens it (see `wire::node_token`).
        token: crate::agent::wire::node_token(&key, &args.node_name).into_bytes(),
        pod_resources_socket: args.pod_resources_socket.clone(),
        interval: std::time::Duration::from_secs(args.interval),
        limits: crate::agent::server::Limits {
            requests_per_second: args.max_requests_per_second,
            burst: args.max_requests_per_second.saturating_mul(2),
            max_streams: usize::try_from(args.max_streams).unwrap_or(1),
            ..crate::agent::server::Limits::default()
        },
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(crate::agent::run(args.listen, choice, opts))?;
    Ok(ExitCode::SUCCESS)
}

fn demo(args: &DemoArgs, ui: &crate::cli::UiArgs) -> anyhow::Result<ExitCode> {
    if args.mystery {
        if ui.lesson.is_some() {
            return Err(UsageError("--mystery picks its own scenario; leave out --lesson".into()).into());
        }
        // Without --seed, a new mystery each time; the report names the seed to replay it.
        let seed = args.seed.unwrap_or_else(|| crate::clock::wall_clock().unsigned_abs());
        let scenario = mystery_scenario(seed);
        let tutor = Some((lesson(scenario)?, crate::app::TutorMode::Mystery { seed }));
        let source = Source::Demo { scenario: scenario.into(), seed, advance: 0, hidden: true };
        return cockpit_with(source, ui, tutor);
    }
    // A lesson plays its own scenario.
    let scenario = match &ui.lesson {
        Some(name) if args.scenario != "default" && args.scenario != *name => {
            return Err(UsageError(format!("--lesson {name} runs on scenario {name}, not {}", args.scenario)).into());
        }
        Some(name) => name.clone(),
        None => args.scenario.clone(),
    };
    scenarios::find(&scenario)?;
    cockpit(Source::Demo { scenario, seed: args.seed.unwrap_or(1), advance: 0, hidden: false }, ui)
}

/// The scenario a mystery's seed picks: any but `default`, whose cause is
/// a bit of everything.
pub fn mystery_scenario(seed: u64) -> &'static str {
    let names: Vec<&'static str> = scenarios::names().into_iter().filter(|n| *n != "default").collect();
    // The demo's own generator: nearby seeds pick unrelated scenarios.
    crate::sources::sim::rng::Rng::new(seed).pick(&names).copied().unwrap_or("fragmented")
}

fn lessons(args: &crate::cli::LessonArgs, source: &crate::cli::SourceArgs) -> anyhow::Result<ExitCode> {
    use crate::cli::LessonCommand;
    use crate::view_model::lessons;
    match &args.command {
        LessonCommand::List => {
            let mut out = String::new();
            for l in lessons::LESSONS {
                let (snap, now) = load::demo(l.scenario, 1, 0)?;
                let a = analysis::analyze(&snap, now, &Thresholds::default());
                out.push_str(&format!("{}\n    {}\n", l.scenario, l.question(&a)));
            }
            out.push_str(
                "\nkgpu demo --lesson NAME opens one; kgpu lesson show NAME prints it; kgpu demo --mystery hides it.\n",
            );
            emit(&out)?;
        }
        LessonCommand::Show { name, answer, cluster } => {
            let l = lesson(name)?;
            let (snap, now) = if *cluster { load::once(&Source::kube(source))? } else { load::demo(l.scenario, 1, 0)? };
            let a = analysis::analyze(&snap, now, &Thresholds::default());
            emit(&lessons::text(l, &a, *answer))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn snapshot(args: &SnapshotArgs, source: &crate::cli::SourceArgs) -> anyhow::Result<ExitCode> {
    let section = args.pane.as_deref().map(str::parse::<Section>).transpose()?;
    let max_unavailable = args
        .max_unavailable
        .as_deref()
        .map(|m| {
            waves::MaxUnavailable::parse(m)
                .filter(|v| !matches!(v, waves::MaxUnavailable::Percent(p) if *p > 100))
                .ok_or_else(|| {
                    UsageError(format!(
                        "--max-unavailable '{m}' is not a count or a percentage up to 100% (e.g. 2 or 25%)"
                    ))
                })
        })
        .transpose()?;
    let target = args
        .target_driver
        .as_deref()
        .map(|t| {
            let v = crate::model::DriverVersion::parse(t)
                .ok_or_else(|| UsageError(format!("--target-driver '{t}' is not a driver version like 570.124.06")))?;
            crate::reference::cuda::check_target(&v).map_err(|e| UsageError(format!("--target-driver '{t}': {e}")))?;
            Ok::<_, UsageError>(v)
        })
        .transpose()?;
    let (snap, now) = load::once(&Source::from_args(&args.from, args.advance, source))?;
    let thresholds = Thresholds::default();
    let analysis = analysis::analyze(&snap, now, &thresholds);
    // Without --target-driver, the waves go to what the GPU Operator is told.
    let target = crate::model::driver_policy::wave_target(target.as_ref(), snap.driver_policies.values().map(|p| &**p));
    if let (None, Some(why)) = (&target.version, &target.problem) {
        say(&format!("kgpu: no single driver target: {why}"));
    }
    let source = target.from.unwrap_or_else(|| "--target-driver".to_string());
    // A bound on the command line is chosen; the other one is the operator's.
    let chosen = (args.max_parallel.is_some() || max_unavailable.is_some()).then(|| {
        let (operator, _) = waves::bounds_for(None, target.upgrade.as_ref());
        waves::Policy {
            max_parallel: args.max_parallel.unwrap_or(operator.max_parallel),
            max_unavailable: max_unavailable.unwrap_or(operator.max_unavailable),
        }
    });
    let (policy, bounds) = waves::bounds_for(chosen, target.upgrade.as_ref());
    let plan = target.version.map(|t| {
        let index = analysis::index::Index::build(&snap, now);
        (waves::WavePlan { bounds, ..waves::plan(&index, &t, policy) }, source)
    });
    let plan = plan.as_ref().map(|(p, s)| (p, s.as_str()));
    match args.output {
        Output::Json => {
            let doc = json::document(&snap, &analysis, section, plan);
            emit(&format!("{}\n", serde_json::to_string_pretty(&doc)?))?;
        }
        Output::Text => emit(&text::render(&snap, &analysis, section, plan))?,
    }
    Ok(complete_or_failure(&snap))
}

fn why(args: &WhyArgs, source: &crate::cli::SourceArgs) -> anyhow::Result<ExitCode> {
    let Some((namespace, name)) = args.target.split_once('/') else {
        return Err(UsageError(format!("'{}' is not NAMESPACE/NAME", args.target)).into());
    };
    let (snap, now) = load::once(&Source::from_args(&args.from, args.advance, source))?;
    let analysis = analysis::analyze(&snap, now, &Thresholds::default());
    let Some(item) = analysis::pending::find(&analysis.pending, namespace, name) else {
        let known: Vec<String> = analysis.pending.iter().take(10).map(|p| p.display_name()).collect();
        return Err(UsageError(format!(
            "{namespace}/{name} is not pending (or does not exist); pending now: {}",
            if known.is_empty() { "nothing".into() } else { known.join(", ") }
        ))
        .into());
    };
    match args.output {
        Output::Json => {
            let doc = json::document(&snap, &analysis, Some(Section::Pending), None);
            let one: Vec<_> =
                doc.pending.into_iter().flatten().filter(|p| p.namespace == namespace && p.name == name).collect();
            emit(&format!("{}\n", serde_json::to_string_pretty(&one)?))?;
        }
        Output::Text => emit(&text::why(item))?,
    }
    Ok(complete_or_failure(&snap))
}

/// A one-shot's exit code: success only when every feed listed. A verdict
/// on part of a cluster is printed, marked, and exits 1 — never 0.
fn complete_or_failure(snap: &crate::model::Snapshot) -> ExitCode {
    let missing = crate::view_model::feeds::incomplete(snap);
    if missing.is_empty() {
        return ExitCode::SUCCESS;
    }
    let names: Vec<String> = missing
        .iter()
        .map(|f| match snap.feeds.get(f).map(|s| &s.state) {
            Some(crate::model::FeedState::Unavailable(p)) => format!("{} ({}: {})", f.name(), p.label(), p.describe()),
            _ => format!("{} (never listed within {} s)", f.name(), source::SYNC_TIMEOUT.as_secs()),
        })
        .collect();
    say(&format!("kgpu: the data are incomplete: {} (exit 1)", names.join("; ")));
    ExitCode::FAILURE
}
