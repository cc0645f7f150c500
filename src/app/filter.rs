//! The `/` filter's language, as k9s users type it: text (any visible
//! column contains it, ignoring case), a regex when it has regex syntax
//! (`/h100-0[12]`), the inverse with a leading `!` (`/!a100`), and a label
//! selector with `-l` (`/-l nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3`,
//! `k!=v`, `k`, `!k`, comma-separated) on rows that have labels (nodes).

use regex::{Regex, RegexBuilder};

use crate::model::NodeLabels;

#[derive(Clone, Debug)]
enum Pattern {
    Everything,
    Text(String),
    Regex(Regex),
    Labels(Vec<Requirement>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    Absent(String),
}

/// A compiled filter. It never fails: text that is not a valid regex is
/// matched as text, and [`Filter::note`] says so.
#[derive(Clone, Debug)]
pub struct Filter {
    pattern: Pattern,
    inverse: bool,
    note: Option<String>,
}

const REGEX_SYNTAX: &[char] = &['[', ']', '(', ')', '{', '}', '*', '+', '?', '^', '$', '|', '\\'];

impl Filter {
    pub fn parse(text: &str) -> Filter {
        let text = text.trim();
        let (inverse, text) = match text.strip_prefix('!') {
            Some(rest) => (true, rest.trim_start()),
            None => (false, text),
        };
        let mut note = None;
        let pattern = if text.is_empty() {
            Pattern::Everything
        } else if let Some(selector) = text.strip_prefix("-l").filter(|s| s.is_empty() || s.starts_with(' ')) {
            Pattern::Labels(selector.split(',').map(str::trim).filter(|s| !s.is_empty()).map(requirement).collect())
        } else if text.contains(REGEX_SYNTAX) {
            match RegexBuilder::new(text).case_insensitive(true).size_limit(1 << 20).build() {
                Ok(re) => Pattern::Regex(re),
                Err(e) => {
                    note = Some(format!("not a regex ({}); matching it as text", first_line(&e.to_string())));
                    Pattern::Text(text.to_lowercase())
                }
            }
        } else {
            Pattern::Text(text.to_lowercase())
        };
        Filter { pattern, inverse, note }
    }

    /// Whether every row passes (no filter): callers skip building columns.
    pub fn is_everything(&self) -> bool {
        matches!(self.pattern, Pattern::Everything)
    }

    /// Whether this is a label selector (only rows with labels can match).
    pub fn is_label_selector(&self) -> bool {
        matches!(self.pattern, Pattern::Labels(_))
    }

    /// Something the user should know about how the filter was read.
    pub fn note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    /// Whether a row with these visible `columns` (and `labels`, where rows
    /// have them) passes.
    pub fn matches(&self, columns: &[&str], labels: Option<&NodeLabels>) -> bool {
        let hit = match &self.pattern {
            Pattern::Everything => return true,
            Pattern::Text(t) => columns.iter().any(|c| contains_ignoring_case(c, t)),
            Pattern::Regex(re) => columns.iter().any(|c| re.is_match(c)),
            Pattern::Labels(requirements) => match labels {
                Some(labels) => requirements.iter().all(|r| r.holds(labels)),
                // A row without labels passes no selector, nor its inverse.
                None => return false,
            },
        };
        hit != self.inverse
    }
}

/// Whether `column` contains `lowered` (already lower case), ignoring case.
/// Most columns are ASCII (names, products, versions): those are searched in
/// place, where lower-casing a copy of each cell of 10,000 rows at every key
/// press cost more than the rest of a frame.
fn contains_ignoring_case(column: &str, lowered: &str) -> bool {
    if column.is_ascii() {
        column.as_bytes().windows(lowered.len()).any(|w| w.eq_ignore_ascii_case(lowered.as_bytes()))
    } else {
        column.to_lowercase().contains(lowered)
    }
}

fn first_line(s: &str) -> &str {
    s.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or(s).trim()
}

fn requirement(term: &str) -> Requirement {
    if let Some((k, v)) = term.split_once("!=") {
        Requirement::NotEquals(k.trim().to_string(), v.trim().to_string())
    } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
        Requirement::Equals(k.trim().to_string(), v.trim().to_string())
    } else if let Some(k) = term.strip_prefix('!') {
        Requirement::Absent(k.trim().to_string())
    } else {
        Requirement::Exists(term.to_string())
    }
}

impl Requirement {
    /// As Kubernetes reads a label selector: `k!=v` holds when the label is absent too.
    fn holds(&self, labels: &NodeLabels) -> bool {
        let get = |k: &str| labels.value(k).map(|v| v.as_str());
        match self {
            Requirement::Equals(k, v) => get(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::Absent(k) => get(k).is_none(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Sym;

    fn labels(pairs: &[(&str, &str)]) -> NodeLabels {
        NodeLabels::new(Sym::new("h100-01"), &crate::model::node::labels_from(pairs.iter().copied()))
    }

    /// The in-place search of ASCII cells finds what lower-casing a copy
    /// found, whatever the cell and the text typed.
    #[test]
    fn text_is_found_in_any_case_as_lower_casing_finds_it() {
        let cells =
            ["gpu-node-00042", "NVIDIA-H100-80GB-HBM3", "550.54.15", "8/8", "Énergie-ÉCOLE", "straße", "", "İstanbul"];
        let typed = ["H100", "hbm3", "gpu-node-0004", "8/8", "é", "école", "STRASSE", "ß", "i̇", "x", "550.54.15!"];
        for cell in cells {
            for text in typed {
                let lowered = text.to_lowercase();
                assert_eq!(
                    contains_ignoring_case(cell, &lowered),
                    cell.to_lowercase().contains(&lowered),
                    "{cell:?} / {text:?}"
                );
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn any_text_is_found_as_lower_casing_finds_it(cell in "([a-zA-Z0-9./-]|\\PC){0,16}", text in "[a-zA-Z0-9./-]{1,4}") {
            let lowered = text.to_lowercase();
            proptest::prop_assert_eq!(contains_ignoring_case(&cell, &lowered), cell.to_lowercase().contains(&lowered));
        }
    }

    #[test]
    fn text_regex_and_inverse() {
        let row = ["h100-01", "NVIDIA-H100-80GB-HBM3", "cordon"];
        assert!(Filter::parse("H100-0").matches(&row, None), "text ignores case");
        assert!(Filter::parse("cordon").matches(&row, None), "any visible column");
        assert!(Filter::parse("h100-0[12]").matches(&row, None));
        assert!(!Filter::parse("h100-0[34]").matches(&row, None));
        assert!(Filter::parse("!a100").matches(&row, None));
        assert!(!Filter::parse("!h100").matches(&row, None));
        assert!(Filter::parse("").matches(&row, None));
        // A bad regex is text, and says so.
        let bad = Filter::parse("h100-0[");
        assert!(bad.note().is_some_and(|n| n.contains("not a regex")), "{:?}", bad.note());
        assert!(!bad.matches(&row, None));
        assert!(bad.matches(&["h100-0[x"], None));
        // Dots in versions are text, not wildcards.
        assert!(!Filter::parse("570.124").matches(&["570x124"], None));
    }

    #[test]
    fn label_selectors_read_as_kubernetes_reads_them() {
        let node = labels(&[("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"), ("pool", "train")]);
        let f = |s: &str| Filter::parse(s).matches(&["h100-01"], Some(&node));
        assert!(f("-l nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3"));
        assert!(f("-l pool=train,nvidia.com/gpu.product"));
        assert!(!f("-l pool=serve"));
        assert!(f("-l pool!=serve"));
        assert!(f("-l zone!=a"), "!= holds when the label is absent");
        assert!(f("-l !zone"));
        assert!(!f("-l !pool"));
        assert!(f("!-l pool=serve"));
        // Rows without labels pass no selector.
        assert!(!Filter::parse("-l pool=train").matches(&["x"], None));
        assert!(!Filter::parse("!-l pool=train").matches(&["x"], None));
        assert!(Filter::parse("-l pool").is_label_selector());
        // `-lx` is text, not a selector.
        assert!(!Filter::parse("-lx").is_label_selector());
    }
}
