//! Lessons and mysteries: every scenario has a lesson whose question and
//! answer read the cluster's own numbers (the same as `kgpu snapshot`
//! says), which the trainee can solve in the cockpit by what it names as
//! evidence or by naming the cause; a mystery grades the answer and
//! reports it. The real binary solves one of each in tmux.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

mod support;

use std::process::Command;
use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use kgpu::analysis::Thresholds;
use kgpu::app::{App, Msg, Pane, Tutor, TutorMode};
use kgpu::model::{Cluster, SourceInfo, SourceKind, Sym};
use kgpu::runtime::load;
use kgpu::sources::sim::disguise::Renames;
use kgpu::view_model::lessons::{self, Cause, Evidence, LESSONS};
use kgpu::view_model::panes::Views;
use serde_json::Value;

fn views(scenario: &str) -> Views {
    let (snap, now) = load::demo(scenario, 1, 0).unwrap();
    Views::build(Arc::new(snap), now, &Thresholds::default(), None)
}

fn kgpu(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_kgpu")).args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn snapshot_json(scenario: &str) -> Value {
    serde_json::from_str(&kgpu(&["snapshot", "--scenario", scenario, "-o", "json"])).unwrap()
}

#[test]
fn the_readmes_mystery_report_is_what_its_seed_picks() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let picked = kgpu::runtime::mystery_scenario(3);
    let cause = kgpu::view_model::lessons::find(picked).unwrap().causes[0].word();
    let line =
        format!("kgpu mystery (seed 3, replay: kgpu demo --mystery --seed 3): scenario {picked}\ncause: {cause}");
    assert!(readme.contains(&line), "the README's mystery example should read:\n{line}");
}

#[test]
fn every_scenario_has_a_lesson_its_cluster_can_solve() {
    let names = kgpu::sources::sim::scenarios::names();
    let mut lessons: Vec<&str> = LESSONS.iter().map(|l| l.scenario).collect();
    lessons.sort_unstable();
    let mut scenarios = names.clone();
    scenarios.sort_unstable();
    assert_eq!(lessons, scenarios, "one lesson per scenario");
    for l in LESSONS {
        let v = views(l.scenario);
        let a = &v.analysis;
        let answer = l.answer(a).join("\n");
        assert!(
            !answer.contains("not on the cluster now"),
            "{}: the signal is there at the start\n{answer}",
            l.scenario
        );
        // A key an answer names (`Gangs pane, `R``) is the key that does it.
        for (i, _) in answer.match_indices("pane, `") {
            let key = answer[i + 7..].split('`').next().unwrap();
            assert!(
                kgpu::app::keys::BINDINGS.iter().any(|b| b.label == key),
                "{}: `{key}` is not a key\n{answer}",
                l.scenario
            );
        }
        // Something on screen proves it: the evidence the lesson names exists.
        let findable = l.evidence.iter().any(|e| match e {
            Evidence::Chain(step) => a.pending.iter().any(|p| p.blocking == Some(*step)),
            Evidence::Node(code) => a.nodes.iter().any(|n| n.issues.iter().any(|i| i.code == *code)),
            Evidence::SplitGang => a.gangs.iter().any(|g| g.topology_split),
            Evidence::SpotGang => !a.spot.jobs.is_empty(),
            Evidence::Pane(_) => true,
            Evidence::Action(_) => false,
        });
        assert!(findable, "{}: no evidence on the cluster", l.scenario);
    }
}

#[test]
fn the_arithmetic_is_the_snapshots() {
    // fragmented: the free, whole-node and stranded GPUs are the fragmentation section's.
    let doc = snapshot_json("fragmented");
    let f = &doc["fragmentation"];
    let answer = lessons::find("fragmented").unwrap().answer(&views("fragmented").analysis).join("\n");
    let said = format!(
        "{} GPUs are free, but {} of them on whole free nodes; {} are stranded",
        f["free"], f["freeOnWholeNodes"], f["stranded"]
    );
    assert!(answer.contains(&said), "{said}\n{answer}\n{f}");
    // gang-deadlock: each gang's idle GPUs are the gangs section's.
    let doc = snapshot_json("gang-deadlock");
    let answer = lessons::find("gang-deadlock").unwrap().answer(&views("gang-deadlock").analysis).join("\n");
    for g in doc["gangs"].as_array().unwrap() {
        let said = format!(
            "{}/{}: {}/{} placed, holding {} GPUs idle",
            g["namespace"].as_str().unwrap(),
            g["name"].as_str().unwrap(),
            g["placed"],
            g["required"],
            g["gpusHeldIdle"]
        );
        assert!(answer.contains(&said), "{said}\n{answer}");
    }
    // quota-starvation: the question's free GPUs are the fleet's.
    let doc = snapshot_json("quota-starvation");
    let question = lessons::find("quota-starvation").unwrap().question(&views("quota-starvation").analysis);
    assert!(question.contains(&format!("{} GPUs sit free", doc["fleet"]["totals"]["free"])), "{question}");
}

fn key(app: &mut App, v: &Views, code: KeyCode) {
    app.update(Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)), v);
}

fn palette(app: &mut App, v: &Views, line: &str) {
    key(app, v, KeyCode::Char(':'));
    for c in line.chars() {
        key(app, v, KeyCode::Char(c));
    }
    key(app, v, KeyCode::Enter);
}

#[test]
fn a_lesson_is_solved_by_opening_its_evidence_and_says_so() {
    let v = views("quota-starvation");
    let mut app = App::new(false, "dark", true);
    app.tutor = Some(Tutor::new(lessons::find("quota-starvation").unwrap(), TutorMode::Lesson));
    app.update(Msg::Viewport(Default::default()), &v);
    // Browsing the fleet solves nothing.
    key(&mut app, &v, KeyCode::Char('1'));
    palette(&mut app, &v, "hint");
    assert!(app.notice.as_ref().unwrap().text.starts_with("hint 1/3"), "{:?}", app.notice);
    assert!(app.tutor.as_ref().unwrap().solved.is_none());
    // The pending chain of the item blocked at quota does.
    key(&mut app, &v, KeyCode::Char('2'));
    key(&mut app, &v, KeyCode::Enter);
    let tutor = app.tutor.as_ref().unwrap();
    assert!(tutor.solved.is_some(), "{:?}", app.notice);
    assert!(app.notice.as_ref().unwrap().text.starts_with("lesson solved"), "{:?}", app.notice);
    let report = tutor.report(app.wall);
    assert!(
        report.contains("solved in 0s by opening the pending chain of an item blocked at queue / quota"),
        "{report}"
    );
    assert!(report.contains("hints: 1 of 3") && report.contains("panes visited: Fleet, Pending"), "{report}");
}

/// What a trainee would do to open `evidence`, in the app, on `v`.
fn open(app: &mut App, v: &Views, evidence: Evidence) {
    let a = &v.analysis;
    match evidence {
        Evidence::Chain(step) => {
            let item = a.pending.iter().find(|p| p.blocking == Some(step)).unwrap();
            palette(app, v, &format!("why {}", item.display_name()));
        }
        Evidence::Node(code) => {
            let node = a.nodes.iter().find(|n| n.issues.iter().any(|i| i.code == code)).unwrap();
            key(app, v, KeyCode::Char('1'));
            palette(app, v, &format!("filter ^{}$", node.name));
            key(app, v, KeyCode::Enter);
        }
        Evidence::SpotGang => {
            let gang = a.gangs.iter().find(|g| a.spot.job(&g.key).is_some()).unwrap();
            key(app, v, KeyCode::Char('3'));
            palette(app, v, &format!("filter {}", gang.key.name));
            key(app, v, KeyCode::Enter);
        }
        Evidence::SplitGang => {
            let gang = a.gangs.iter().find(|g| g.topology_split).unwrap();
            key(app, v, KeyCode::Char('3'));
            palette(app, v, &format!("filter {}", gang.key.name));
            key(app, v, KeyCode::Enter);
        }
        Evidence::Pane(pane) => {
            let p = Pane::ALL.into_iter().find(|p| p.title() == pane).unwrap();
            key(app, v, KeyCode::Char(char::from_digit(p.number() as u32, 10).unwrap()));
        }
        Evidence::Action(_) => unreachable!("actions are run in the demo, not here"),
    }
}

/// The question and worked answer are the cluster's as it was when the
/// lesson opened: fixing it does not rewrite what the trainee was asked.
#[test]
fn a_lesson_keeps_the_question_it_opened_with_after_the_cluster_changes() {
    let v = views("gang-deadlock");
    let lesson = lessons::find("gang-deadlock").unwrap();
    let mut app = App::new(false, "dark", true);
    app.tutor = Some(Tutor::new(lesson, TutorMode::Lesson));
    key(&mut app, &v, KeyCode::Char('1'));
    let asked = lesson.question(&v.analysis);
    // The deadlocked gangs are gone (requeued, deleted): the live answer changes.
    let (mut snap, now) = load::demo("gang-deadlock", 1, 0).unwrap();
    let waiting: Vec<_> = snap.pods.iter().filter(|(_, p)| p.node.is_none()).map(|(k, _)| k.clone()).collect();
    for k in waiting {
        snap.pods.remove(&k);
    }
    snap.gangs.clear();
    let later = Views::build(Arc::new(snap), now, &Thresholds::default(), None);
    assert_ne!(lesson.answer(&later.analysis), lesson.answer(&v.analysis), "the test must change the live answer");
    key(&mut app, &later, KeyCode::Char('2'));
    let opened = app.tutor.as_ref().unwrap().opened.clone().unwrap();
    assert_eq!(opened.question, asked);
    assert_eq!(opened.answer, lesson.answer(&v.analysis));
}

/// The fix a story names solves its lesson when it runs to its end:
/// mig-mismatch's repartition, through the picker, as a trainee would.
#[test]
fn the_repartition_its_story_names_solves_mig_mismatch() {
    let v = views("mig-mismatch");
    let mut app = App::new(false, "dark", true);
    app.tutor = Some(Tutor::new(lessons::find("mig-mismatch").unwrap(), TutorMode::Lesson));
    key(&mut app, &v, KeyCode::Char('4'));
    key(&mut app, &v, KeyCode::Char('m'));
    key(&mut app, &v, KeyCode::Enter);
    key(&mut app, &v, KeyCode::Char('y'));
    let running = app.in_flight.first().expect("the repartition runs");
    assert_eq!(running.action.verb(), "repartition-mig");
    let id = running.id;
    assert!(app.tutor.as_ref().unwrap().solved.is_none(), "started is not done");
    let done = kgpu::actions::Progress { id, text: "repartitioned".into(), error: false, done: true };
    app.update(Msg::Action(done), &v);
    let solved = app.tutor.as_ref().unwrap().solved.clone();
    assert!(solved.as_ref().is_some_and(|(_, how)| how == "by running repartition-mig to its end"), "{solved:?}");
}

#[test]
fn every_lessons_evidence_can_be_opened_in_the_cockpit() {
    for l in LESSONS {
        let v = views(l.scenario);
        for e in l.evidence.iter().filter(|e| !matches!(e, Evidence::Action(_))) {
            let mut app = App::new(false, "dark", true);
            app.tutor = Some(Tutor::new(l, TutorMode::Lesson));
            open(&mut app, &v, *e);
            let tutor = app.tutor.as_ref().unwrap();
            assert!(
                tutor.solved.is_some(),
                "{}: opening {e:?} did not solve it; {:?} {:?}",
                l.scenario,
                app.notice,
                app.overlay
            );
        }
    }
}

#[test]
fn a_mystery_grades_the_first_answer_and_never_names_the_scenario_before() {
    let v = views("gang-deadlock");
    let mut app = App::new(false, "dark", true);
    app.tutor = Some(Tutor::new(lessons::find("gang-deadlock").unwrap(), TutorMode::Mystery { seed: 7 }));
    palette(&mut app, &v, "lesson");
    let lesson = lessons::find("gang-deadlock").unwrap();
    let reader = kgpu::view_model::lessons::doc(
        lesson,
        &lessons::Opened::of(lesson, &v.analysis),
        &lessons::Standing { hints_shown: 0, solved: None, mystery: true },
    )
    .plain();
    // Not the question (it tells the story), and no hint before one is asked.
    assert!(reader.starts_with("Mystery:") && !reader.contains("training job"), "{reader}");
    assert!(!reader.contains("hint 1/3"), "{reader}");
    // Opening the evidence (enter on a partly placed gang: its pending
    // chain, blocked at the gang step) does not solve a mystery: only the answer is graded.
    key(&mut app, &v, KeyCode::Esc);
    key(&mut app, &v, KeyCode::Char('3'));
    key(&mut app, &v, KeyCode::Enter);
    assert!(app.tutor.as_ref().unwrap().solved.is_none());
    palette(&mut app, &v, "answer not-a-cause");
    assert!(app.notice.as_ref().unwrap().text.contains("not a cause kgpu knows"), "{:?}", app.notice);
    palette(&mut app, &v, "answer quota");
    assert!(app.notice.as_ref().unwrap().text.contains("quota is not it"), "{:?}", app.notice);
    palette(&mut app, &v, "answer gang deadlock");
    let tutor = app.tutor.as_ref().unwrap();
    assert!(tutor.solved.is_some());
    let report = tutor.report(app.wall);
    assert!(report.contains("seed 7") && report.contains("scenario gang-deadlock"), "{report}");
    assert!(report.contains("first answer: quota (wrong)"), "{report}");
    assert!(report.contains("answers: quota (wrong), gang-deadlock (right)"), "{report}");
    assert!(report.contains("panes visited: Fleet, Gangs & Queues, Pending"), "{report}");
    assert!(report.contains("drill-downs opened: pending chain "), "the gang's chain, opened with enter: {report}");
    assert!(!report.contains("guessing"), "one wrong answer is no guessing: {report}");
    assert_eq!(app.pane, Pane::Pending);
    // Cause after cause until one is right reads as guessing.
    let mut app = App::new(false, "dark", true);
    app.tutor = Some(Tutor::new(lessons::find("gang-deadlock").unwrap(), TutorMode::Mystery { seed: 7 }));
    for cause in ["quota", "taint", "fragmentation", "gang-deadlock"] {
        palette(&mut app, &v, &format!("answer {cause}"));
    }
    let report = app.tutor.as_ref().unwrap().report(app.wall);
    assert!(report.contains("guessing: 3 wrong causes named in 0s before the right one"), "{report}");
    assert!(report.contains("drill-downs opened: none"), "{report}");
    assert_eq!(Cause::parse("Gang Deadlock"), Some(Cause::GangDeadlock));
}

/// The snapshot JSON of a scenario as built, or disguised as a mystery with
/// this seed, with the renames made.
fn built_json(scenario: &str, seed: u64, disguised: bool) -> (String, Renames) {
    let mut sim = kgpu::sources::sim::scenarios::build(scenario, seed).unwrap();
    let renames = if disguised {
        sim.hide_scenario();
        sim.disguise(seed)
    } else {
        Renames::default()
    };
    let mut cluster = Cluster::new(SourceInfo { kind: SourceKind::Demo, name: "demo".into() });
    cluster.apply_all(sim.initial_events());
    let snap = cluster.snapshot();
    let analysis = kgpu::analysis::analyze(&snap, snap.clock, &Thresholds::default());
    let doc = kgpu::view_model::json::document(&snap, &analysis, None, None);
    (serde_json::to_string(&doc).unwrap(), renames)
}

/// `text` with each name in `renames` replaced where it stands as a name:
/// a node's also inside other names (`train-gpu-05-0`) but not as the start
/// of a longer number (`gpu-1` in `gpu-10`); a namespace only as a whole
/// word (not `ads` in `loads` or `ads-ranking`).
fn replace_names(text: &str, renames: &[(String, String)], node: bool) -> String {
    if renames.is_empty() {
        return text.to_string();
    }
    let (before, after) = if node { ("[^A-Za-z0-9]", "[^0-9]") } else { ("[^A-Za-z0-9_-]", "[^A-Za-z0-9_-]") };
    let mut froms: Vec<&str> = renames.iter().map(|(from, _)| from.as_str()).collect();
    froms.sort_by_key(|f| std::cmp::Reverse(f.len()));
    let alternatives: Vec<String> = froms.iter().map(|f| regex::escape(f)).collect();
    let re = regex::Regex::new(&format!("(^|{before})({})($|{after})", alternatives.join("|"))).unwrap();
    let to = |c: &regex::Captures| {
        let new = renames.iter().find(|(from, _)| *from == c[2]).map_or("", |(_, to)| to.as_str());
        format!("{}{new}{}", &c[1], &c[3])
    };
    // Twice: a match consumes the character after it, which may start the next.
    let once = re.replace_all(text, to);
    re.replace_all(&once, to).into_owned()
}

/// Arrays sorted, so that two documents that differ only in the order of
/// names compare equal.
fn canonical(v: &mut Value) {
    match v {
        Value::Array(items) => {
            items.iter_mut().for_each(canonical);
            items.sort_by_cached_key(|i| i.to_string());
        }
        Value::Object(map) => map.values_mut().for_each(canonical),
        _ => {}
    }
}

fn forget(v: &mut Value, keys: &[&str]) {
    match v {
        Value::Array(items) => items.iter_mut().for_each(|i| forget(i, keys)),
        Value::Object(map) => {
            map.retain(|k, _| !keys.contains(&k.as_str()));
            map.values_mut().for_each(|i| forget(i, keys));
        }
        _ => {}
    }
}

#[test]
fn a_mystery_disguises_every_name_and_keeps_every_number() {
    let scenarios = kgpu::sources::sim::scenarios::names().into_iter().filter(|s| *s != "default");
    for (i, scenario) in scenarios.enumerate() {
        // A seed of its own per scenario: other sites, offsets and namespaces each time.
        for seed in [1, 7 + i as u64] {
            let (plain, _) = built_json(scenario, seed, false);
            let (hidden, renames) = built_json(scenario, seed, true);
            assert!(!renames.nodes.is_empty() && !renames.namespaces.is_empty(), "{scenario}: {renames:?}");
            let pairs = |of: &[(Sym, Sym)], back: bool| -> Vec<(String, String)> {
                of.iter()
                    .map(
                        |(old, new)| {
                            if back { (new.to_string(), old.to_string()) } else { (old.to_string(), "<LEFT>".into()) }
                        },
                    )
                    .collect()
            };
            // No old name is left anywhere in what the cockpit shows.
            let mut shown = hidden.clone();
            for (_, new) in renames.nodes.iter().chain(&renames.namespaces) {
                shown = shown.replace(new.as_str(), "");
            }
            let marked = replace_names(&shown, &pairs(&renames.nodes, false), true);
            let marked = replace_names(&marked, &pairs(&renames.namespaces, false), false);
            if let Some(at) = marked.find("<LEFT>") {
                let around =
                    &marked[marked.floor_char_boundary(at.saturating_sub(200))..marked.ceil_char_boundary(at + 60)];
                panic!("{scenario} seed {seed}: an old name is left: …{around}…");
            }
            // Named back, it is the same cluster with the same verdicts.
            let back = replace_names(&hidden, &pairs(&renames.nodes, true), true);
            let back = replace_names(&back, &pairs(&renames.namespaces, true), false);
            let (mut back, mut plain): (Value, Value) =
                (serde_json::from_str(&back).unwrap(), serde_json::from_str(&plain).unwrap());
            // The simulated agents' readings jitter by pod name: a renamed
            // pod reads a little differently; whether it is idle does not change.
            for doc in [&mut back, &mut plain] {
                forget(&mut doc["utilization"], &["meanPercent", "recentPercent", "memoryUsedMib"]);
                // What a mystery hides on purpose.
                if let Some(top) = doc.as_object_mut() {
                    top.remove("scenario");
                    top.remove("source");
                }
            }
            canonical(&mut back);
            canonical(&mut plain);
            assert!(back == plain, "{scenario} seed {seed}: the disguise changed more than names");
        }
    }
}

#[test]
fn lesson_list_and_show_print_without_a_terminal() {
    let list = kgpu(&["lesson", "list"]);
    for l in LESSONS {
        assert!(list.lines().any(|line| line.starts_with(l.scenario)), "{} missing:\n{list}", l.scenario);
    }
    let show = kgpu(&["lesson", "show", "fragmented"]);
    assert!(show.contains("hint 3:") && !show.contains("cause:"), "{show}");
    let answer = kgpu(&["lesson", "show", "fragmented", "--answer"]);
    assert!(answer.contains("cause: fragmentation") && answer.contains("The plan:"), "{answer}");
    let out = Command::new(env!("CARGO_BIN_EXE_kgpu")).args(["lesson", "show", "nope"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no lesson 'nope'; lessons: default"));
}

mod tmux {
    use super::support::tmux::Tmux;

    /// Esc alone: followed at once by a key, the terminal reads Alt+key.
    fn esc(t: &Tmux) {
        t.keys(&["Escape"]);
        std::thread::sleep(std::time::Duration::from_millis(300));
    }

    fn start(t: &Tmux, args: &str) {
        let bin = env!("CARGO_BIN_EXE_kgpu");
        t.literal(&format!("clear; {bin} demo {args}; echo EXIT=$?"));
        t.keys(&["Enter"]);
    }

    /// The report, printed on the terminal once the cockpit has left it.
    fn report(t: &Tmux) -> String {
        let screen = t.wait_for("EXIT=0");
        let from = screen.find("kgpu lesson").or_else(|| screen.find("kgpu mystery")).unwrap_or(0);
        screen[from..].to_string()
    }

    #[test]
    fn a_newcomer_solves_a_lesson_in_the_real_binary() {
        let t = Tmux::start(80, 24, "lesson");
        start(&t, "--lesson black-hole");
        // The question opens first.
        t.wait_for("yet GPU pods keep failing");
        esc(&t);
        t.keys(&[":"]);
        t.literal("hint");
        t.keys(&["Enter"]);
        t.wait_for("hint 1/3");
        // The black hole's node detail solves it: select it on the Fleet map and open it.
        t.keys(&["/"]);
        t.literal("gpu-03");
        t.keys(&["Enter"]);
        t.keys(&["Enter"]);
        t.wait_for("lesson solved");
        esc(&t);
        t.keys(&[":"]);
        t.literal("lesson");
        t.keys(&["Enter"]);
        t.wait_for("Solved: in");
        esc(&t);
        t.keys(&["q"]);
        let report = report(&t);
        assert!(report.contains("kgpu lesson: scenario black-hole"), "{report}");
        assert!(report.contains("hints: 1 of 3"), "{report}");
    }

    #[test]
    fn an_interview_runs_a_mystery_to_its_report() {
        let t = Tmux::start(80, 24, "mystery");
        start(&t, "--mystery --seed 3");
        let screen = t.wait_for("Mystery: something on this cluster is wrong");
        assert!(screen.contains("demo:mystery"), "{screen}");
        let picked = super::lessons::find(kgpu::runtime::mystery_scenario(3)).unwrap();
        esc(&t);
        t.keys(&[":"]);
        t.literal(&format!("answer {}", picked.causes[0].word()));
        t.keys(&["Enter"]);
        t.wait_for("mystery solved");
        t.keys(&["q"]);
        // At 80 columns a long scenario name wraps.
        let report = report(&t).replace('\n', "");
        assert!(report.contains("seed 3") && report.contains(&format!("scenario {}", picked.scenario)), "{report}");
        assert!(report.contains(&format!("first answer: {} (right)", picked.causes[0].word())), "{report}");
    }

    #[test]
    fn a_mystery_quit_unanswered_says_so() {
        let t = Tmux::start(80, 24, "mystery-unanswered");
        start(&t, "--mystery --seed 5");
        t.wait_for("Mystery:");
        esc(&t);
        t.keys(&["q"]);
        let report = report(&t);
        assert!(report.contains("no answer given") && report.contains("hints: 0 of 3"), "{report}");
    }
}
