//! kube-scheduler's FailedScheduling vocabulary, v1.9's predicate names to
//! v1.36's plugins (`assets/reference/scheduler-reasons.tsv`, strings from
//! the scheduler's source): which plugin wrote a reason, in which releases,
//! what it means and the kubectl that checks it. What kgpu models of it is
//! the analysis's business (`analysis::scheduler_msg::reason_code`).

use std::sync::OnceLock;

/// One reason of the vocabulary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reason {
    /// As the source writes it, `<placeholders>` for what is filled in.
    pub text: String,
    /// The plugin (or, before v1.18, the predicate) that writes it.
    pub plugin: String,
    /// Releases that write it (`1.24-1.34`).
    pub versions: String,
    /// Where it appears: `node`, `prefilter`, `postfilter`…
    pub scope: String,
    pub meaning: String,
    /// The command that checks it by hand (NS, POD, NODE to fill in).
    pub check: String,
}

impl Reason {
    /// Whether `reason` is this one: its literal parts in order, whatever
    /// the placeholders hold.
    pub fn matches(&self, reason: &str) -> bool {
        let parts: Vec<&str> = split_placeholders(&self.text);
        let starts_open = self.text.starts_with('<');
        let ends_open = self.text.ends_with('>');
        let mut rest = reason;
        for (i, part) in parts.iter().enumerate() {
            if i == 0 && !starts_open {
                match rest.strip_prefix(part) {
                    Some(r) => rest = r,
                    None => return false,
                }
            } else {
                match rest.find(part) {
                    Some(at) => rest = &rest[at + part.len()..],
                    None => return false,
                }
            }
        }
        ends_open || rest.is_empty()
    }
}

/// The literal parts of a text with `<placeholders>`.
fn split_placeholders(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('<') {
        if open > 0 {
            parts.push(&rest[..open]);
        }
        match rest[open..].find('>') {
            Some(close) => rest = &rest[open + close + 1..],
            None => {
                rest = "";
                break;
            }
        }
    }
    if !rest.is_empty() {
        parts.push(rest);
    }
    parts
}

pub fn all() -> &'static [Reason] {
    static TABLE: OnceLock<Vec<Reason>> = OnceLock::new();
    TABLE.get_or_init(|| parse(include_str!("../../assets/reference/scheduler-reasons.tsv")))
}

fn parse(text: &str) -> Vec<Reason> {
    let (_, rows) = super::tsv_rows(text);
    rows.into_iter()
        .filter(|r| r.len() >= 6)
        .map(|r| Reason {
            text: r[0].to_string(),
            plugin: r[1].to_string(),
            versions: r[2].to_string(),
            scope: r[3].to_string(),
            meaning: r[4].to_string(),
            check: r[5].to_string(),
        })
        .collect()
}

/// The vocabulary's entry for a reason the scheduler wrote: a verbatim
/// string before a pattern (`Insufficient cpu` before `Insufficient <resource>`).
pub fn lookup(reason: &str) -> Option<&'static Reason> {
    let r = reason.trim();
    let table = all();
    table
        .iter()
        .find(|e| !e.text.contains('<') && e.text == r)
        .or_else(|| table.iter().filter(|e| e.text.contains('<') && !e.text.starts_with('<')).find(|e| e.matches(r)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_of_each_release_is_found_by_its_own_words() {
        assert!(all().len() > 150, "{}", all().len());
        for e in all().iter().filter(|e| !e.text.starts_with('<')) {
            let example = e.text.replace("<key>", "nvidia.com/gpu").replace("<value>", "present");
            let found = lookup(&example).unwrap_or_else(|| panic!("{}", e.text));
            assert!(found.matches(&example), "{} found as {}", e.text, found.text);
            assert!(!e.plugin.is_empty() && !e.meaning.is_empty() && !e.check.is_empty(), "{}", e.text);
        }
        let taint = lookup("node(s) had untolerated taint {nvidia.com/gpu: present}").unwrap();
        assert_eq!((taint.plugin.as_str(), taint.versions.as_str()), ("TaintToleration", "1.24-1.34"));
        let old = lookup("node(s) had taint {dedicated: infer}, that the pod didn't tolerate").unwrap();
        assert_eq!(old.versions, "1.18-1.23");
        assert_eq!(lookup("Insufficient cpu").unwrap().text, "Insufficient cpu");
        assert_eq!(lookup("Insufficient example.com/fpga").unwrap().text, "Insufficient <resource>");
        assert!(lookup("something new in 1.37").is_none());
    }
}
