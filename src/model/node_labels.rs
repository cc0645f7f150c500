//! A node's labels, kept so that the nodes of a pool share one copy.
//!
//! A GPU node carries about 200 labels (GFD's, NFD's, the cloud's): 3 KiB as
//! symbol pairs, which at 65,000 nodes is 200 MB. All but a few are the same
//! on every node of a pool. So a node keeps apart only the labels that are
//! each node's own by nature (its hostname, the time GFD labelled it, any
//! whose value is the node's name) and shares the rest with every node whose
//! rest is equal, through a table of the sets in use. A label set unlike any
//! other (a node being upgraded, a pool of one) costs what it did before.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use super::{Labels, Sym, SymHash};

/// Keys whose value differs from node to node whatever the pool.
const OWN_KEYS: [&str; 2] = ["kubernetes.io/hostname", super::keys::GFD_TIMESTAMP];

type Pairs = Arc<[(Sym, Sym)]>;

/// Sorted `(key, value)` label pairs of one node.
#[derive(Clone, Debug)]
pub struct NodeLabels {
    /// Sorted; one allocation for every node whose shared labels are equal.
    shared: Pairs,
    /// Sorted; this node's own.
    own: Box<[(Sym, Sym)]>,
}

impl NodeLabels {
    /// The labels of node `name` (`labels` with one value a key, as
    /// [`labels_from`](super::node::labels_from) and the decoder make them,
    /// sorted by key there).
    pub fn new(name: Sym, labels: &[(Sym, Sym)]) -> NodeLabels {
        static OWN: LazyLock<[Sym; 2]> = LazyLock::new(|| OWN_KEYS.map(Sym::new));
        let is_own = |(k, v): &&(Sym, Sym)| *v == name || OWN.contains(k);
        let mut own: Box<[(Sym, Sym)]> = labels.iter().filter(is_own).cloned().collect();
        let mut shared: Vec<(Sym, Sym)> = labels.iter().filter(|p| !is_own(p)).cloned().collect();
        // Lookups search by key: whoever built `labels` unsorted loses nothing.
        if !shared.is_sorted_by_key(|p| p.0.clone()) || !own.is_sorted_by_key(|p| p.0.clone()) {
            shared.sort_by_key(|p| p.0.clone());
            own.sort_by_key(|p| p.0.clone());
        }
        NodeLabels { shared: share(shared), own }
    }

    /// The value of label `key`.
    pub fn get(&self, key: &Sym) -> Option<&Sym> {
        find(&self.own, key).or_else(|| find(&self.shared, key))
    }

    /// The value of label `key`, by name.
    pub fn value(&self, key: &str) -> Option<&Sym> {
        self.get(&Sym::get(key)?)
    }

    /// Every label, sorted by key.
    pub fn iter(&self) -> impl Iterator<Item = &(Sym, Sym)> + '_ {
        Merge { a: &self.shared, b: &self.own }
    }

    pub fn len(&self) -> usize {
        self.shared.len() + self.own.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A copy as one sorted list, to edit.
    pub fn to_labels(&self) -> Labels {
        self.iter().cloned().collect()
    }

    /// Whether the two hold the one copy of their shared labels.
    pub fn shares_with(&self, other: &NodeLabels) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }
}

impl PartialEq for NodeLabels {
    /// Equal when they hold the same labels, however split.
    fn eq(&self, other: &NodeLabels) -> bool {
        (self.shares_with(other) && self.own == other.own)
            || (self.len() == other.len() && self.iter().eq(other.iter()))
    }
}

fn find<'a>(pairs: &'a [(Sym, Sym)], key: &Sym) -> Option<&'a Sym> {
    pairs.binary_search_by(|(k, _)| k.cmp(key)).ok().map(|i| &pairs[i].1)
}

/// Two sorted lists read as one.
struct Merge<'a> {
    a: &'a [(Sym, Sym)],
    b: &'a [(Sym, Sym)],
}

impl<'a> Iterator for Merge<'a> {
    type Item = &'a (Sym, Sym);

    fn next(&mut self) -> Option<&'a (Sym, Sym)> {
        let from_a = match (self.a.first(), self.b.first()) {
            (Some(a), Some(b)) => a.0 <= b.0,
            (a, _) => a.is_some(),
        };
        let side = if from_a { &mut self.a } else { &mut self.b };
        let (first, rest) = side.split_first()?;
        *side = rest;
        Some(first)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.a.len() + self.b.len();
        (n, Some(n))
    }
}

/// The shared label sets in use, by hash.
#[derive(Default)]
struct SharedSets {
    by_hash: HashMap<u64, Vec<Pairs>, SymHash>,
    kept: usize,
    added_since_sweep: usize,
}

static SHARED: LazyLock<Mutex<SharedSets>> = LazyLock::new(Mutex::default);

/// The one copy of `pairs` in use, or `pairs` made that copy.
fn share(pairs: Vec<(Sym, Sym)>) -> Pairs {
    let hash = SymHash::default().hash_one(&pairs);
    let mut sets = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(found) = sets.by_hash.get(&hash).and_then(|same| same.iter().find(|s| ***s == *pairs)) {
        return found.clone();
    }
    sets.sweep_if_due();
    let set: Pairs = pairs.into();
    sets.by_hash.entry(hash).or_default().push(set.clone());
    sets.kept += 1;
    sets.added_since_sweep += 1;
    set
}

impl SharedSets {
    /// Drops the sets no node holds any more (a label changed, a node went),
    /// once as many were added since the last sweep as half the table: the
    /// table stays within a small multiple of the sets in use, at O(1) a set.
    fn sweep_if_due(&mut self) {
        if self.added_since_sweep < (self.kept / 2).max(64) {
            return;
        }
        // Only the table holds a set whose count is 1, and only the table
        // (under this lock) hands out new holds: it cannot be revived meanwhile.
        self.by_hash.retain(|_, same| {
            same.retain(|s| Arc::strong_count(s) > 1);
            !same.is_empty()
        });
        self.kept = self.by_hash.values().map(Vec::len).sum();
        self.added_since_sweep = 0;
    }
}

/// Label sets the table keeps (tests: that unused ones go).
#[cfg(test)]
fn kept_sets_holding(key: Sym) -> usize {
    let sets = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
    sets.by_hash.values().flatten().filter(|s| find(s, &key).is_some()).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::node::labels_from;

    fn labels(name: &str, extra: &[(&str, &str)]) -> NodeLabels {
        let mut pairs = vec![
            ("kubernetes.io/hostname", name),
            ("nvidia.com/gfd.timestamp", "1715709242"),
            ("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"),
            ("nvidia.com/gpu.count", "8"),
            ("node.kubernetes.io/instance-type", "p5.48xlarge"),
        ];
        pairs.extend_from_slice(extra);
        NodeLabels::new(Sym::new(name), &labels_from(pairs))
    }

    #[test]
    fn nodes_of_a_pool_share_one_copy_and_keep_their_own() {
        let a = labels("gpu-a", &[]);
        let b = labels("gpu-b", &[]);
        assert!(a.shares_with(&b));
        assert_eq!(a.value("kubernetes.io/hostname").map(|s| s.as_str()), Some("gpu-a"));
        assert_eq!(b.value("kubernetes.io/hostname").map(|s| s.as_str()), Some("gpu-b"));
        assert_eq!(a.value("nvidia.com/gpu.count").map(|s| s.as_str()), Some("8"));
        assert_eq!(a.value("no-such-label"), None);
        assert_ne!(a, b);
        // A label only one node has splits it from the pool.
        let c = labels("gpu-c", &[("nvidia.com/gpu-driver-upgrade-state", "upgrade-required")]);
        assert!(!c.shares_with(&a));
    }

    #[test]
    fn reads_as_one_sorted_list_whatever_the_split() {
        let pairs = labels_from([
            ("zone", "a"),
            ("kubernetes.io/hostname", "n1"),
            ("a-label-naming-the-node", "n1"),
            ("nvidia.com/gfd.timestamp", "7"),
            ("m", "x"),
        ]);
        let node = NodeLabels::new(Sym::new("n1"), &pairs);
        assert_eq!(node.iter().cloned().collect::<Vec<_>>(), pairs.to_vec());
        assert_eq!(node.to_labels(), pairs);
        assert_eq!(node.len(), 5);
        assert_eq!(node.iter().size_hint(), (5, Some(5)));
        // Split differently (here nothing names the node), equal all the same.
        assert_eq!(node, NodeLabels::new(Sym::new("other"), &pairs));
        for (k, v) in pairs.iter() {
            assert_eq!(node.get(k), Some(v), "{k}");
        }
        let mut unsorted = pairs.to_vec();
        unsorted.reverse();
        let node = NodeLabels::new(Sym::new("n1"), &unsorted);
        assert_eq!(node.iter().cloned().collect::<Vec<_>>(), pairs.to_vec());
        assert_eq!(node.value("zone").map(|s| s.as_str()), Some("a"));
        let empty = NodeLabels::new(Sym::new("n1"), &[]);
        assert!(empty.is_empty() && empty.iter().next().is_none());
    }

    #[test]
    fn sets_no_node_holds_are_dropped() {
        let key = Sym::new("sweep-test/generation");
        for generation in 0..1_000 {
            let node = labels("gpu-sweep", &[("sweep-test/generation", &generation.to_string())]);
            drop(node);
        }
        let held = labels("gpu-sweep", &[("sweep-test/generation", "held")]);
        // Sweeps run as sets are added; what is left is the one in use and
        // at most one sweep's worth of others.
        let kept = kept_sets_holding(key);
        assert!(kept <= 1 + 64.max(kept_total() / 2), "{kept} sets kept");
        assert!(kept < 1_000, "{kept}");
        assert_eq!(held.value("sweep-test/generation").map(|s| s.as_str()), Some("held"));
    }

    fn kept_total() -> usize {
        SHARED.lock().unwrap_or_else(PoisonError::into_inner).kept
    }
}
