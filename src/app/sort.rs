//! Sorting a table by one of its columns, as k9s does it: shift and the
//! column's letter sorts by it, the same again reverses. The letters are
//! listed here once, for the key handler, the titles and the help.

use super::{Pane, Section};

/// One sortable column of a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Column {
    pub letter: char,
    pub label: &'static str,
}

const fn col(letter: char, label: &'static str) -> Column {
    Column { letter, label }
}

// Not G (last row), X (cancel) anywhere, nor R (requeue) in Pending and Gangs.
const NODES: &[Column] =
    &[col('N', "name"), col('F', "free GPUs"), col('P', "problems first"), col('U', "GPUs used"), col('D', "driver")];
const POOLS: &[Column] = &[col('N', "name"), col('F', "free GPUs"), col('U', "GPUs used")];
const PENDING: &[Column] =
    &[col('N', "name"), col('A', "oldest"), col('S', "most GPUs"), col('Q', "queue"), col('B', "blocking step")];
const GANGS: &[Column] = &[col('N', "name"), col('A', "oldest"), col('S', "state"), col('Q', "queue")];
const QUEUES: &[Column] = &[col('N', "name"), col('U', "most used"), col('P', "most pending"), col('C', "cohort")];
const MIG: &[Column] = &[col('N', "node"), col('C', "config"), col('S', "state")];
const UPGRADES: &[Column] = &[col('N', "node"), col('S', "state"), col('F', "longest in state"), col('D', "driver")];
const USAGE: &[Column] = &[
    col('I', "idle GPU-hours"),
    col('N', "pod"),
    col('M', "least busy"),
    col('S', "most GPUs"),
    col('W', "workload"),
    col('O', "node"),
];
const USAGE_WORKLOADS: &[Column] =
    &[col('I', "idle GPU-hours"), col('N', "workload"), col('M', "least busy"), col('S', "most GPUs")];
const EVENTS: &[Column] = &[
    col('A', "newest"),
    col('T', "warnings first"),
    col('E', "reason"),
    col('O', "object"),
    col('C', "most repeated"),
];

/// The sortable columns of the table that has the keys (`pools`: the
/// Fleet shows pools).
pub fn columns(pane: Pane, section: Section, pools: bool) -> &'static [Column] {
    match (pane, section) {
        (Pane::Fleet, _) if pools => POOLS,
        (Pane::Fleet, _) => NODES,
        (Pane::Pending, _) => PENDING,
        (Pane::Gangs, Section::First) => GANGS,
        (Pane::Gangs, _) => QUEUES,
        (Pane::Mig, _) => MIG,
        (Pane::Drivers, Section::Second) => UPGRADES,
        (Pane::Drivers, _) => &[],
        (Pane::Events, _) => EVENTS,
        (Pane::Usage, Section::First) => USAGE,
        (Pane::Usage, _) => USAGE_WORKLOADS,
    }
}

/// Every table's letters, for the help.
pub fn all() -> [(&'static str, &'static [Column]); 10] {
    [
        ("Fleet nodes", NODES),
        ("Fleet pools", POOLS),
        ("Pending", PENDING),
        ("Gangs", GANGS),
        ("Queues", QUEUES),
        ("MIG", MIG),
        ("Upgrades", UPGRADES),
        ("Events", EVENTS),
        ("Usage pods", USAGE),
        ("Usage workloads", USAGE_WORKLOADS),
    ]
}

/// How a table is sorted: by the column of `letter`, in its natural order
/// (names A→Z, most free first, oldest first…) or `reversed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sort {
    pub letter: char,
    pub reversed: bool,
}

impl Sort {
    pub const fn by(letter: char) -> Sort {
        Sort { letter, reversed: false }
    }

    /// What the title says: `name`, `free GPUs ↑` (reversed).
    pub fn label(self, columns: &[Column]) -> String {
        let label = columns.iter().find(|c| c.letter == self.letter).map_or("?", |c| c.label);
        if self.reversed { format!("{label} (reversed)") } else { label.to_string() }
    }

    /// `a`'s place before `b` in this sort, given the natural order.
    pub fn apply(self, natural: std::cmp::Ordering) -> std::cmp::Ordering {
        if self.reversed { natural.reverse() } else { natural }
    }

    /// Pressing `letter` while sorted by `self`: the same letter reverses.
    pub fn pressed(current: Option<Sort>, letter: char) -> Sort {
        match current {
            Some(s) if s.letter == letter => Sort { letter, reversed: !s.reversed },
            _ => Sort::by(letter),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letters_are_unique_per_table_and_clash_with_no_key() {
        for (name, columns) in all() {
            let mut seen = std::collections::HashSet::new();
            for c in columns {
                assert!(seen.insert(c.letter), "{name}: {} twice", c.letter);
                assert!(c.letter.is_ascii_uppercase());
                assert!(!matches!(c.letter, 'G' | 'X'), "{name}: {} is a key everywhere", c.letter);
            }
        }
        for columns in [PENDING, GANGS, QUEUES] {
            assert!(columns.iter().all(|c| c.letter != 'R'), "R requeues there");
        }
    }

    #[test]
    fn the_same_letter_reverses() {
        let s = Sort::pressed(None, 'N');
        assert_eq!(s, Sort::by('N'));
        assert_eq!(Sort::pressed(Some(s), 'N'), Sort { letter: 'N', reversed: true });
        assert_eq!(Sort::pressed(Some(s), 'F'), Sort::by('F'));
        assert_eq!(Sort { letter: 'F', reversed: true }.label(NODES), "free GPUs (reversed)");
    }
}
