//! `kgpu snapshot -o text` and `kgpu why`: the same view models as plain
//! text for an SSH session without a TTY, or for pasting into a ticket.

use std::fmt::Write as _;

use super::feeds::FeedHealth;
use crate::analysis::Analysis;
use crate::analysis::pending::{PendingItem, Verdict};
use crate::analysis::waves::WavePlan;
use crate::model::Snapshot;
use crate::model::time::age;

use super::Section;

/// Left-aligned columns, two spaces apart.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(c.chars().count());
            }
        }
    }
    let mut out = String::new();
    let line = |cells: Vec<&str>, out: &mut String| {
        let mut l = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                l.push_str(c);
            } else {
                let pad = widths[i].saturating_sub(c.chars().count());
                l.push_str(c);
                l.push_str(&" ".repeat(pad + 2));
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(header.to_vec(), &mut out);
    for r in rows {
        line(r.iter().map(|s| s.as_str()).collect(), &mut out);
    }
    if rows.is_empty() {
        // A header alone read as output cut short.
        out.push_str("(none)\n");
    }
    out
}

/// Writes one section of the text snapshot.
type WriteSection = fn(&mut String, &Snapshot, &Analysis);

/// The text snapshot: every section, or only `section`; with `waves` (from
/// `--target-driver`), the drivers section ends with the upgrade waves.
pub fn render(snap: &Snapshot, a: &Analysis, section: Option<Section>, waves: Option<(&WavePlan, &str)>) -> String {
    let want = |s: Section| section.is_none_or(|x| x == s);
    let mut out = String::new();
    let _ = writeln!(out, "kgpu snapshot — {} {}", snap.source.kind.as_str(), snap.source.name);
    if let Some(s) = &snap.scenario {
        let _ = writeln!(out, "scenario: {} — {}", s.name, s.title);
    }
    let feeds = super::feeds::health(snap, a.now);
    // Feeds whose API is not there, one line per reason (a dump without
    // Kueue or Volcano objects listed fourteen lines of them first).
    let mut absent: Vec<(String, Vec<&str>)> = Vec::new();
    for h in feeds.iter().filter(|h| h.not_installed && !h.incomplete) {
        let reason = h.reason.clone().unwrap_or_default();
        match absent.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, names)) => names.push(h.feed.name()),
            None => absent.push((reason, vec![h.feed.name()])),
        }
    }
    for (reason, names) in absent.iter().filter(|(_, names)| names.len() > 1) {
        let _ = writeln!(out, "feeds not installed ({reason}): {}", names.join(", "));
    }
    let grouped = |h: &FeedHealth| absent.iter().any(|(_, names)| names.len() > 1 && names.contains(&h.feed.name()));
    for h in feeds.iter().filter(|h| !(h.not_installed && !h.incomplete && grouped(h))) {
        if h.incomplete {
            let why = if h.unavailable {
                format!("{} ({})", h.state, h.reason.as_deref().unwrap_or(""))
            } else {
                "never listed".to_string()
            };
            let _ = writeln!(out, "feed {}: {why} — INCOMPLETE: what follows lacks its objects", h.feed.name());
        } else if h.unavailable || h.stale() {
            let data = if h.stale() {
                h.age.map_or(", no data yet".into(), |t| format!(", data {} old", age(t)))
            } else {
                String::new()
            };
            let _ = writeln!(out, "feed {}: {}{data} ({})", h.feed.name(), h.state, h.reason.as_deref().unwrap_or(""));
        }
    }
    for line in feeds.iter().filter_map(FeedHealth::skipped_line) {
        let _ = writeln!(out, "{line}");
    }
    for line in super::feeds::older_api_lines(&feeds) {
        let _ = writeln!(out, "{line}");
    }
    for line in super::feeds::pages_lines(&feeds) {
        let _ = writeln!(out, "{line}");
    }
    for line in feeds.iter().filter(|h| !h.unavailable).filter_map(|h| h.coverage_line(a.now)) {
        let _ = writeln!(out, "{line}");
    }
    for line in super::feeds::dra_unmodelled_lines(a) {
        let _ = writeln!(out, "{line}");
    }
    out.push('\n');
    let sections: [(Section, WriteSection); 9] = [
        (Section::Fleet, fleet),
        (Section::Fragmentation, fragmentation),
        (Section::Pending, pending),
        (Section::Gangs, gangs),
        (Section::Queues, queues),
        (Section::Drivers, drivers),
        (Section::Mig, mig),
        (Section::Events, events),
        (Section::Utilization, utilization),
    ];
    for (section, write) in sections {
        if want(section) {
            write(&mut out, snap, a);
            if section == Section::Drivers
                && let Some((plan, source)) = waves
            {
                wave_plan(&mut out, plan, source);
            }
        }
    }
    out
}

fn wave_plan(out: &mut String, plan: &WavePlan, source: &str) {
    let _ = writeln!(
        out,
        "WAVES to driver {} (from {source}): {} wave(s), {}, canary first",
        plan.target,
        plan.waves.len(),
        super::docs::wave_bound(plan)
    );
    let _ = writeln!(out, "BOUNDS: {}", super::docs::wave_bounds_source(plan));
    if let Some(why) = &plan.stalled {
        let _ = writeln!(out, "STALLED: {why}");
    }
    if let Some(halt) = &plan.halted {
        let _ = writeln!(out, "HALTED: {}", halt.summary(&plan.target));
    }
    let rows: Vec<Vec<String>> = plan
        .waves
        .iter()
        .map(|w| {
            let names: Vec<String> = w.nodes.iter().map(|n| n.to_string()).collect();
            vec![
                format!("{}{}", w.index, if w.canary { " (canary)" } else { "" }),
                names.join(" "),
                if w.gangs.is_empty() { "-".into() } else { w.gangs.join(" ") },
                if w.breaks.is_empty() {
                    "none".into()
                } else {
                    w.breaks
                        .iter()
                        .map(|b| format!("{} on {}: {}", b.pod, b.node, b.reason))
                        .collect::<Vec<_>>()
                        .join("; ")
                },
            ]
        })
        .collect();
    out.push_str(&table(&["WAVE", "NODES", "GANGS KEPT WHOLE", "WOULD BREAK"], &rows));
    // Grouped by reason: "already on the target" can be most of a fleet.
    let mut left_out: Vec<(&str, Vec<String>)> = Vec::new();
    for (node, why) in &plan.excluded {
        match left_out.iter_mut().find(|(w, _)| *w == why.as_str()) {
            Some((_, nodes)) => nodes.push(node.to_string()),
            None => left_out.push((why.as_str(), vec![node.to_string()])),
        }
    }
    for (why, nodes) in left_out {
        let _ = writeln!(out, "left out ({why}): {}", nodes.join(" "));
    }
    out.push('\n');
}

fn fleet(out: &mut String, snap: &Snapshot, a: &Analysis) {
    let t = &a.totals;
    let _ = writeln!(
        out,
        "FLEET  {} GPUs: {} in use{}, {} free ({} stranded), {} on unavailable nodes, {} unadvertised, {} unhealthy{}{}; fragmentation score {:.2}",
        t.gpus,
        t.allocated,
        match a.held_not_started() {
            0 => String::new(),
            n => format!(" ({n} held by pods that do not start)"),
        },
        t.free,
        t.stranded,
        t.unavailable,
        t.unadvertised,
        t.unhealthy,
        if t.mig_gpus > 0 { format!(" ({} in MIG slices)", t.mig_gpus) } else { String::new() },
        if t.replicas.0 > 0 {
            format!("; time-slicing: {} of {} replicas allocated", t.replicas.1, t.replicas.0)
        } else {
            String::new()
        },
        a.fragmentation.score
    );
    // Where some node gives GPUs through DRA, each row says how it gives them.
    let via = a.nodes.iter().any(|n| n.dra.is_some());
    let rows: Vec<Vec<String>> = a
        .nodes
        .iter()
        .map(|n| {
            let mig = n
                .mig_slices()
                .iter()
                .map(|m| format!("{}:{}/{}", m.profile, m.allocated, m.allocatable))
                .collect::<Vec<_>>()
                .join(" ");
            let mut row = vec![
                n.name.to_string(),
                if n.ready { "Ready".into() } else { "NotReady".into() },
                n.product.as_ref().map_or("-".into(), |p| p.to_string()),
                n.driver.clone().unwrap_or_else(|| "-".into()),
                {
                    let (used, of) = super::panes::used_of(n.gpu_allocated, n.gpu_allocatable, &n.buckets);
                    format!("{used}/{of}")
                },
                n.hardware.map_or("-".into(), |h| h.to_string()),
                if mig.is_empty() { "-".into() } else { mig },
                n.issues.iter().map(|i| i.code.as_str()).collect::<Vec<_>>().join(","),
            ];
            if via {
                row.insert(4, super::panes::gpus_via(snap.nodes.get(&n.name).map(|n| &**n), n).to_string());
            }
            row
        })
        .collect();
    let mut header = vec!["NODE", "STATUS", "PRODUCT", "DRIVER", "GPU USED/ALLOC", "HW", "MIG USED/ALLOC", "ISSUES"];
    if via {
        header.insert(4, "VIA");
    }
    out.push_str(&table(&header, &rows));
    out.push('\n');
}

fn fragmentation(out: &mut String, _snap: &Snapshot, a: &Analysis) {
    let f = &a.fragmentation;
    let _ = writeln!(
        out,
        "FRAGMENTATION  {} free, {} on whole free nodes, {} stranded, score {:.2}",
        f.free_total, f.free_on_whole_nodes, f.stranded_total, f.score
    );
    let rows: Vec<Vec<String>> = f
        .shapes
        .iter()
        .map(|s| {
            vec![
                s.demand.label(),
                if s.fits_now { "yes".into() } else { "no".into() },
                s.usable_free.to_string(),
                s.stranded_free.to_string(),
                s.largest_gang.to_string(),
                match &s.demand.source {
                    crate::analysis::fragmentation::ShapeSource::Canonical => "canonical".into(),
                    crate::analysis::fragmentation::ShapeSource::Pod(k) => format!("pod {k}"),
                    crate::analysis::fragmentation::ShapeSource::Gang(k) => {
                        format!("{} {}/{}", k.kind.kind_name(), k.namespace, k.name)
                    }
                },
            ]
        })
        .collect();
    out.push_str(&table(&["SHAPE", "FITS", "USABLE", "STRANDED", "LARGEST", "FROM"], &rows));
    let p = &f.plan;
    match &p.status {
        crate::analysis::fragmentation::PlanStatus::NotNeeded => {
            let _ = writeln!(out, "{}", f.not_needed_text());
        }
        crate::analysis::fragmentation::PlanStatus::Impossible(why) => {
            let _ = writeln!(out, "plan for {}: none — {why}", p.target.clone().unwrap_or_default());
        }
        crate::analysis::fragmentation::PlanStatus::Found => {
            let _ = writeln!(
                out,
                "plan for {} ({}): {}, {:.1} GPU-hours disrupted, frees {}",
                p.target.clone().unwrap_or_default(),
                p.target_shape.clone().unwrap_or_default(),
                p.steps_summary(),
                p.gpu_hours,
                p.nodes_freed.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", ")
            );
            for s in &p.steps {
                let _ = writeln!(
                    out,
                    "  {} {}/{} ({} GPU, {:.1} GPU-h{}) {} → {}{}",
                    if s.to_node.is_some() { "move" } else { "evict" },
                    s.namespace,
                    s.pod,
                    s.gpus,
                    s.gpu_hours_disrupted,
                    s.idle_seconds.map_or(String::new(), |i| format!(", idle {}", age(i))),
                    s.from_node,
                    s.to_node.as_ref().map_or("nowhere (work lost)".to_string(), |n| n.to_string()),
                    s.gang.as_ref().map_or(String::new(), |g| format!(" [gang {g}]"))
                );
            }
        }
    }
    out.push('\n');
}

fn pending(out: &mut String, _snap: &Snapshot, a: &Analysis) {
    let raw = a.pending.iter().filter(|p| p.scheduler_recognised == Some(false)).count();
    let _ = write!(out, "PENDING  {} item(s)", a.pending.len());
    let _ =
        if raw > 0 { writeln!(out, ", {raw} scheduler message(s) not recognised (shown raw)") } else { writeln!(out) };
    let rows: Vec<Vec<String>> = a
        .pending
        .iter()
        .map(|p| {
            vec![
                p.kind.as_str().to_string(),
                p.display_name(),
                age(p.age),
                p.queue.as_ref().map_or("-".into(), |q| q.to_string()),
                p.shape.clone(),
                p.blocking_str().to_string(),
                p.summary.clone(),
            ]
        })
        .collect();
    out.push_str(&table(&["KIND", "NAME", "AGE", "QUEUE", "SHAPE", "BLOCKED AT", "WHY"], &rows));
    out.push('\n');
}

fn gangs(out: &mut String, _snap: &Snapshot, a: &Analysis) {
    let _ = writeln!(out, "GANGS");
    let rows: Vec<Vec<String>> = a
        .gangs
        .iter()
        .map(|g| {
            vec![
                g.key.kind.kind_name().to_string(),
                g.display_name(),
                format!("{}/{}", g.placed, g.required),
                g.gpus_held_idle.to_string(),
                if g.deadlocked_with.is_empty() { g.state.as_str().to_string() } else { "deadlocked".into() },
                age(g.age),
                g.nodes.iter().map(|(n, c)| format!("{n}:{c}")).collect::<Vec<_>>().join(" "),
                [
                    (!g.deadlocked_with.is_empty())
                        .then(|| format!("deadlocked with {}", g.deadlocked_with.join(", "))),
                    g.topology_note(),
                    g.quota_note(),
                ]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join("; "),
            ]
        })
        .collect();
    out.push_str(&table(&["KIND", "NAME", "PLACED", "IDLE GPU", "STATE", "AGE", "NODES", "NOTES"], &rows));
    out.push('\n');
    spot(out, &a.spot);
}

/// Work on spot nodes: what preemptions cost it, and the discount it needs.
fn spot(out: &mut String, s: &crate::analysis::spot::Spot) {
    if s.nodes == 0 {
        return;
    }
    let _ = writeln!(out, "SPOT  {}", s.rate_explained());
    for j in &s.jobs {
        let _ = writeln!(out, "  {} ({} GPUs): {}", j.name, j.gpus, j.explain(s.rate_per_node_hour));
    }
    out.push('\n');
}

fn queues(out: &mut String, _snap: &Snapshot, a: &Analysis) {
    let _ = writeln!(out, "QUEUES");
    let rows: Vec<Vec<String>> = a
        .queues
        .iter()
        .map(|q| {
            let fmt = |v: u64| crate::model::quantity::format(q.resource.as_str(), v);
            vec![
                q.kind.kind_name().to_string(),
                match q.namespace.clone() {
                    Some(ns) => format!("{ns}/{}", q.name),
                    None => q.name.to_string(),
                },
                q.cohort.as_ref().map_or("-".into(), |c| c.to_string()),
                q.flavor.as_ref().map_or("-".into(), |f| f.to_string()),
                q.resource.to_string(),
                format!("{}/{}", fmt(q.used), fmt(q.nominal)),
                if q.cohort.is_some() { fmt(q.borrowed) } else { "-".into() },
                q.borrowing_limit.map_or("-".into(), fmt),
                q.pending_cell(),
                q.admitted.to_string(),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "KIND",
            "NAME",
            "COHORT",
            "FLAVOR",
            "RESOURCE",
            "USED/NOMINAL",
            "BORROWED",
            "BORROW LIMIT",
            "PENDING",
            "ADMITTED",
        ],
        &rows,
    ));
    if a.queues.iter().any(|q| q.inadmissible > 0) {
        let _ = writeln!(
            out,
            "PENDING N+M: N pending as Kueue counts them, M more it found inadmissible (the PENDING section says why)"
        );
    }
    out.push('\n');
}

fn drivers(out: &mut String, _snap: &Snapshot, a: &Analysis) {
    let _ = writeln!(out, "DRIVERS × CUDA");
    let rows: Vec<Vec<String>> = a
        .matrix
        .cells
        .iter()
        .map(|c| {
            vec![
                c.driver.clone(),
                c.nodes.len().to_string(),
                c.cuda.clone(),
                c.workloads.count.to_string(),
                c.placed.count.to_string(),
                c.verdict.as_str().to_string(),
            ]
        })
        .collect();
    out.push_str(&table(&["DRIVER", "NODES", "CUDA", "WORKLOADS", "PLACED", "VERDICT"], &rows));
    let _ = writeln!(out, "\nUPGRADES");
    let rows: Vec<Vec<String>> = a
        .upgrades
        .iter()
        .filter(|u| u.state.is_some())
        .map(|u| {
            vec![
                u.node.to_string(),
                u.state_str().to_string(),
                u.seconds_in_state.map_or("unknown".into(), age),
                super::docs::upgrade_mark(u).to_string(),
                u.driver.as_ref().map(|d| d.to_string()).unwrap_or_default(),
            ]
        })
        .collect();
    out.push_str(&table(&["NODE", "STATE", "FOR", "", "DRIVER"], &rows));
    out.push('\n');
}

fn mig(out: &mut String, snap: &Snapshot, a: &Analysis) {
    // The MIG pane's rows: the same nodes as the JSON's `mig`.
    let rows: Vec<Vec<String>> = super::panes::mig_rows(snap, a)
        .into_iter()
        .map(|m| {
            vec![
                m.node.to_string(),
                m.product,
                m.config,
                format!("{}{}", m.state, if m.paused { " (plugin paused)" } else { "" }),
                m.summary,
            ]
        })
        .collect();
    let _ = writeln!(out, "MIG  {} node(s)", rows.len());
    out.push_str(&table(&["NODE", "PRODUCT", "CONFIG", "STATE", "SLICES USED/ADVERTISED"], &rows));
    out.push('\n');
}

fn events(out: &mut String, snap: &Snapshot, a: &Analysis) {
    let rows: Vec<Vec<String>> = super::panes::event_rows(snap, a.now)
        .into_iter()
        .take(50)
        .map(|e| vec![e.age, if e.warning { "Warning" } else { "Normal" }.into(), e.reason, e.object, e.message])
        .collect();
    let _ = writeln!(out, "EVENTS  newest {} of {}", rows.len(), snap.events.len());
    out.push_str(&table(&["AGE", "TYPE", "REASON", "OBJECT", "MESSAGE"], &rows));
    out.push('\n');
}

fn utilization(out: &mut String, snap: &Snapshot, a: &Analysis) {
    // The Usage pane's rows, in its order: the idle holders first.
    let u = &a.utilization;
    let _ = writeln!(out, "UTILIZATION  {}", super::usage::summary(u));
    if u.has_source() {
        let _ = writeln!(out, "from {}", super::usage::sources(u));
    }
    let rows: Vec<Vec<String>> = super::usage::rows(a)
        .into_iter()
        .map(|r| vec![r.pod, r.node, r.held, r.now, r.mean, r.memory, r.idle, r.idle_gpu_hours, r.workload, r.queue])
        .collect();
    if u.has_source() {
        let header = ["POD", "NODE", "HELD", "NOW", "MEAN", "MEMORY", "IDLE", "IDLE-GPU-H", "WORKLOAD", "QUEUE"];
        out.push_str(&table(&header, &rows));
        // The Usage pane's workloads table, those with idle pods.
        let idle: Vec<Vec<String>> = super::usage::workload_rows(a)
            .into_iter()
            .filter(|w| w.any_idle)
            .map(|w| vec![w.name, w.idle_pods, w.gpus, w.idle_gpus, w.mean, w.idle, w.idle_gpu_hours, w.queue])
            .collect();
        if !idle.is_empty() {
            let _ = writeln!(out, "IDLE BY WORKLOAD");
            out.push_str(&table(
                &["WORKLOAD", "IDLE PODS", "GPUS", "IDLE GPUS", "MEAN", "IDLE", "IDLE-GPU-H", "QUEUE"],
                &idle,
            ));
        }
    }
    for note in super::usage::notes(u, snap) {
        let _ = writeln!(out, "{note}");
    }
    out.push('\n');
}

/// `kgpu why`: the isolation chain of one pending item.
pub fn why(item: &PendingItem) -> String {
    let mut out = String::new();
    // Placed, its containers do not start: not pending to the scheduler
    // (a crash loop's pod is even Running), waiting all the same.
    let waiting = match item.blocking {
        Some(crate::analysis::pending::Step::Start) => "not started",
        _ => "pending",
    };
    let _ = writeln!(
        out,
        "{} {} — {waiting} {}, shape {}",
        item.kind.as_str(),
        item.display_name(),
        age(item.age),
        item.shape
    );
    use crate::analysis::pending::VerdictSource;
    let whose = match item.verdict_source {
        VerdictSource::Kgpu => "",
        VerdictSource::Scheduler => " (the scheduler's word: not evaluated by kgpu)",
        VerdictSource::Kueue => " (Kueue's word: not evaluated by kgpu)",
        VerdictSource::Volcano => " (Volcano's word: not evaluated by kgpu)",
        VerdictSource::Undecided => " (kgpu cannot tell, and the scheduler has not said yet)",
    };
    let _ = writeln!(out, "blocked at: {}{whose}\n{}\n", item.blocking_str(), item.summary);
    for (i, s) in item.steps.iter().enumerate() {
        let mark = match s.verdict {
            Verdict::Block if s.said_by == Some(VerdictSource::Undecided) => " ?? ",
            Verdict::Pass => "ok  ",
            Verdict::Block => "STOP",
            Verdict::Warn => "warn",
            Verdict::NotApplicable => "n/a ",
        };
        let _ = writeln!(out, "{}. [{mark}] {}: {}", i + 1, s.step.title(), s.summary);
        for d in s.details.iter() {
            let _ = writeln!(out, "       {d}");
        }
        for c in &s.commands {
            let _ = writeln!(out, "       $ {c}");
        }
    }
    if let Some(m) = &item.scheduler_message {
        let _ = writeln!(out, "\nscheduler said: {m}");
        match item.agrees_with_scheduler {
            Some(true) => out.push_str("kgpu agrees with the scheduler.\n"),
            Some(false) => {
                let _ = writeln!(out, "kgpu disagrees: {}", item.disagreement.clone().unwrap_or_default());
            }
            None if item.scheduler_recognised == Some(false) => out.push_str("(message not recognised; shown raw)\n"),
            None => {}
        }
    }
    if !item.hints.is_empty() {
        out.push_str("\nhints:\n");
        for h in &item.hints {
            let _ = writeln!(out, "  - {h}");
        }
    }
    if !item.unblock.is_empty() {
        out.push_str("\nwhat would unblock it:\n");
        for u in &item.unblock {
            let _ = writeln!(out, "  - {u}");
        }
    }
    out
}
