//! The `/` filter's language, as k9s users type it: text (any visible
//! column contains it, ignoring case), a regex when it has regex syntax
//! (`/h100-0[12]`), the inverse with a leading `!` (`/!a100`), and a label
//! selector with `-l` (`/-l nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3`,
//! `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, `k>n`, `k<n`, comma-separated, as
//! kubectl reads them) on rows that have labels (nodes).

use regex::{Regex, RegexBuilder};

use crate::model::NodeLabels;

#[derive(Clone, Debug)]
enum Pattern {
    Everything,
    Text(String),
    Regex(Regex),
    Labels(Vec<Requirement>),
    /// A selector kubectl would refuse: no row, inverted or not.
    Nothing,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    /// `k>n`, `k<n`: the label holds a whole number past `n`.
    Greater(String, i64),
    Less(String, i64),
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
            match selector_terms(selector).and_then(|terms| terms.into_iter().map(requirement).collect()) {
                Ok(requirements) => Pattern::Labels(requirements),
                Err(why) => {
                    // kubectl refuses it; so nothing matches, and the note says why.
                    note = Some(format!("not a label selector: {why}"));
                    Pattern::Nothing
                }
            }
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
            Pattern::Nothing => return false,
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

/// The selector's terms: split at the commas outside `( )`.
fn selector_terms(selector: &str) -> Result<Vec<&str>, String> {
    let (mut terms, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (i, c) in selector.char_indices() {
        match c {
            '(' if depth == 0 => depth = 1,
            '(' => return Err("a '(' inside a set".into()),
            ')' if depth == 1 => depth = 0,
            ')' => return Err("a ')' with no '('".into()),
            ',' if depth == 0 => {
                terms.push(selector[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth > 0 {
        return Err("a '(' is not closed".into());
    }
    terms.push(selector[start..].trim());
    if terms.len() > 1 && terms.iter().any(|t| t.is_empty()) {
        return Err("an empty requirement between commas".into());
    }
    Ok(terms.into_iter().filter(|t| !t.is_empty()).collect())
}

fn requirement(term: &str) -> Result<Requirement, String> {
    let requirement = if let Some((k, v)) = term.split_once("!=") {
        Requirement::NotEquals(key(k)?, value(v)?)
    } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
        Requirement::Equals(key(k)?, value(v)?)
    } else if let Some(k) = term.strip_prefix('!') {
        Requirement::Absent(key(k)?)
    } else if let Some((k, n)) = term.split_once('>') {
        Requirement::Greater(key(k)?, number(n)?)
    } else if let Some((k, n)) = term.split_once('<') {
        Requirement::Less(key(k)?, number(n)?)
    } else if let Some((k, set)) = term.split_once('(') {
        let set = set.strip_suffix(')').ok_or_else(|| format!("'{term}': text after the set"))?;
        let values = set.split(',').map(value).collect::<Result<Vec<_>, _>>()?;
        match k.trim().rsplit_once(char::is_whitespace) {
            Some((k, "in")) => Requirement::In(key(k)?, values),
            Some((k, "notin")) => Requirement::NotIn(key(k)?, values),
            _ => return Err(format!("'{term}': a set needs 'in' or 'notin' before it")),
        }
    } else {
        Requirement::Exists(key(term)?)
    };
    Ok(requirement)
}

/// A label key as Kubernetes allows it: `[prefix/]name`, the name at most 63
/// of letters, digits and `-_.`, starting and ending alphanumeric.
fn key(text: &str) -> Result<String, String> {
    let k = text.trim();
    let (prefix, name) = k.rsplit_once('/').map_or((None, k), |(p, n)| (Some(p), n));
    let prefix_ok = prefix
        .is_none_or(|p| !p.is_empty() && p.len() <= 253 && p.split('.').all(|part| !part.is_empty() && edges_ok(part)));
    if !prefix_ok || name.is_empty() || name.len() > 63 || !edges_ok(name) {
        return Err(format!("'{k}' is not a label key"));
    }
    Ok(k.to_string())
}

/// A label value: empty, or at most 63 of letters, digits and `-_.`,
/// starting and ending alphanumeric.
fn value(text: &str) -> Result<String, String> {
    let v = text.trim();
    if !v.is_empty() && (v.len() > 63 || !edges_ok(v)) {
        return Err(format!("'{v}' is not a label value"));
    }
    Ok(v.to_string())
}

/// Letters, digits and `-_.`, alphanumeric at both ends.
fn edges_ok(s: &str) -> bool {
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && alnum(s.chars().next())
        && alnum(s.chars().last())
}

/// The whole number `k>n` and `k<n` compare with.
fn number(text: &str) -> Result<i64, String> {
    let n = text.trim();
    n.parse().map_err(|_| format!("'{n}' is not a whole number"))
}

impl Requirement {
    /// As Kubernetes reads a label selector: `k!=v` holds when the label is absent too.
    fn holds(&self, labels: &NodeLabels) -> bool {
        let get = |k: &str| labels.value(k).map(|v| v.as_str());
        match self {
            Requirement::Equals(k, v) => get(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
            Requirement::In(k, set) => get(k).is_some_and(|v| set.iter().any(|s| s == v)),
            // As `!=`: a node without the label is not in the set.
            Requirement::NotIn(k, set) => get(k).is_none_or(|v| set.iter().all(|s| s != v)),
            Requirement::Greater(k, n) => get(k).and_then(|v| v.parse::<i64>().ok()).is_some_and(|v| v > *n),
            Requirement::Less(k, n) => get(k).and_then(|v| v.parse::<i64>().ok()).is_some_and(|v| v < *n),
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
        // Sets, as kubectl reads them; notin holds when the label is absent.
        assert!(f("-l pool in (train, serve)"));
        assert!(f("-l pool in (train),nvidia.com/gpu.product"));
        assert!(!f("-l pool in (serve)"));
        assert!(f("-l pool notin (serve)") && f("-l zone notin (a,b)"));
        assert!(!f("-l pool notin (train)"));
        // What kubectl refuses matches nothing, inverted or not, and says why.
        // kubectl's > and < on whole numbers.
        let gpus = labels(&[("nvidia.com/gpu.count", "8")]);
        assert!(Filter::parse("-l nvidia.com/gpu.count>4").matches(&["x"], Some(&gpus)));
        assert!(!Filter::parse("-l nvidia.com/gpu.count<4").matches(&["x"], Some(&gpus)));
        for bad in [
            "-l pool in (",
            "-l pool in (a,b",
            "-l pool (a)",
            "-l pool in (a) x",
            "-l po ol",
            "-l a=b c",
            "-l a/",
            "-l /a",
            "-l pool,",
            "-l a=-x",
            "-l a>x",
        ] {
            let filter = Filter::parse(bad);
            assert!(!filter.matches(&["x"], Some(&node)), "{bad}");
            assert!(!Filter::parse(&format!("!{bad}")).matches(&["x"], Some(&node)), "!{bad}");
            assert!(filter.note().is_some_and(|n| n.starts_with("not a label selector")), "{bad}: {:?}", filter.note());
        }
        // `-lx` is text, not a selector.
        assert!(!Filter::parse("-lx").is_label_selector());
    }
}
