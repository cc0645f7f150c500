//! Interned strings for the compact model.
//!
//! Label keys, label values, namespaces, node names, resource names and the like
//! repeat across thousands of objects. A `Sym` is a thin (8-byte) counted
//! pointer to the one copy of its text, so a label costs 16 bytes and
//! comparing two symbols is a pointer comparison. Unbounded names (pod names)
//! are *not* interned: they use `Arc<str>`.
//!
//! A symbol no one holds any more is freed: a cockpit left open for days sees
//! names that come and go for ever (a busy queue's Job names and controller
//! uids, nodes an autoscaler replaces), and an interner that kept each one
//! grew without end (the soak benchmark measured it). The table holds one
//! count of each symbol; a sweep drops those whose count is the table's alone.

use std::fmt;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use hashbrown::HashTable;

/// `Arc<Box<str>>` rather than `Arc<str>`: a thin pointer keeps a label pair
/// at 16 bytes.
#[derive(Clone)]
pub struct Sym(Arc<Box<str>>);

/// foldhash rather than SipHash: interning is on the path of every label of
/// every node and pod decoded (two million labels for 10,000 real nodes), and
/// what is hashed is a cluster's own names, not an attacker's choice of keys
/// into a table whose lookups they time.
fn hash_of(s: &str) -> u64 {
    static STATE: OnceLock<foldhash::fast::RandomState> = OnceLock::new();
    STATE.get_or_init(Default::default).hash_one(s)
}

/// The table is cut in shards, each behind its own lock, and a string is
/// hashed before any lock is taken: the pages of nodes and pods decode side
/// by side, interning as they go, and one lock made them wait on each other.
const SHARDS: usize = 16;

#[derive(Default)]
struct Shard {
    table: HashTable<Arc<Box<str>>>,
    added_since_sweep: usize,
}

impl Shard {
    /// Drops the symbols only the table holds, once as many were added since
    /// the last sweep as half the table (at least 1,024): the table stays
    /// within a small multiple of the symbols in use, at O(1) a symbol.
    fn sweep_if_due(&mut self) {
        if self.added_since_sweep >= (self.table.len() / 2).max(1024) {
            self.sweep();
        }
    }

    /// Only the table holds a symbol whose count is 1, and only the table
    /// (under this shard's lock) hands out new holds: it cannot be revived
    /// meanwhile.
    fn sweep(&mut self) {
        self.table.retain(|s| Arc::strong_count(s) > 1);
        self.added_since_sweep = 0;
    }
}

fn shards() -> &'static [Mutex<Shard>; SHARDS] {
    static TABLE: OnceLock<[Mutex<Shard>; SHARDS]> = OnceLock::new();
    TABLE.get_or_init(|| std::array::from_fn(|_| Mutex::default()))
}

fn lock(shard: &'static Mutex<Shard>) -> MutexGuard<'static, Shard> {
    match shard.lock() {
        Ok(guard) => guard,
        // A panic while holding the lock cannot leave a shard inconsistent
        // (an insert or a retain is the only mutation), so keep using it.
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// How many symbols are held, and the bytes of their text, after dropping
/// those no one holds (the soak benchmark watches these stay level).
pub fn interned() -> (usize, usize) {
    shards().iter().map(lock).fold((0, 0), |(n, bytes), mut shard| {
        shard.sweep();
        (n + shard.table.len(), bytes + shard.table.iter().map(|s| s.len()).sum::<usize>())
    })
}

fn shard(hash: u64) -> MutexGuard<'static, Shard> {
    // Bits the shard's own table does not use to pick a bucket (the low
    // ones) or to tag it (the top seven).
    lock(&shards()[(hash >> 32) as usize % SHARDS])
}

impl Sym {
    /// Interns `s`, returning the one symbol for that text.
    pub fn new(s: &str) -> Sym {
        let hash = hash_of(s);
        let mut shard = shard(hash);
        if let Some(existing) = shard.table.find(hash, |e| ***e == *s) {
            return Sym(existing.clone());
        }
        shard.sweep_if_due();
        let text: Arc<Box<str>> = Arc::new(s.into());
        shard.table.insert_unique(hash, text.clone(), |e| hash_of(e));
        shard.added_since_sweep += 1;
        Sym(text)
    }

    /// The symbol for `s` if one is held. Lets lookups avoid growing the
    /// table with strings no object carries.
    pub fn get(s: &str) -> Option<Sym> {
        let hash = hash_of(s);
        shard(hash).table.find(hash, |e| ***e == *s).map(|found| Sym(found.clone()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl PartialEq for Sym {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
impl Eq for Sym {}

impl Hash for Sym {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (Arc::as_ptr(&self.0) as usize).hash(state)
    }
}

impl PartialOrd for Sym {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Sym {
    /// Alphabetical, so that maps keyed by symbols iterate in a stable,
    /// human order.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        if self == other { std::cmp::Ordering::Equal } else { self.as_str().cmp(other.as_str()) }
    }
}

impl fmt::Debug for Sym {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}
impl fmt::Display for Sym {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&str> for Sym {
    fn from(s: &str) -> Self {
        Sym::new(s)
    }
}

impl serde::Serialize for Sym {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl AsRef<str> for Sym {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_text_same_symbol() {
        let a = Sym::new("nvidia.com/gpu.product");
        let b = Sym::new(&String::from("nvidia.com/gpu.product"));
        assert_eq!(a, b);
        assert!(std::ptr::eq(a.as_str(), b.as_str()));
        assert_ne!(a, Sym::new("nvidia.com/gpu.count"));
    }

    #[test]
    fn orders_alphabetically() {
        let mut v = [Sym::new("b-node"), Sym::new("a-node"), Sym::new("c-node")];
        v.sort();
        assert_eq!(v.each_ref().map(|s| s.as_str()), ["a-node", "b-node", "c-node"]);
    }

    #[test]
    fn a_symbol_no_one_holds_is_freed_and_one_held_is_kept() {
        let held = Sym::new("held-text-5e1a");
        drop(Sym::new("dropped-text-5e1a"));
        let copy = held.clone();
        drop(held);
        interned();
        assert!(Sym::get("dropped-text-5e1a").is_none());
        assert_eq!(Sym::get("held-text-5e1a").as_ref().map(Sym::as_str), Some("held-text-5e1a"));
        // Interned again after it was freed, it is one symbol again.
        let again = Sym::new("dropped-text-5e1a");
        assert_eq!(Sym::new("dropped-text-5e1a"), again);
        assert_eq!(Sym::get("held-text-5e1a"), Some(copy));
    }

    #[test]
    fn sweeps_keep_the_table_near_the_symbols_held() {
        // Many short-lived names (a churning queue's Job names): the table
        // does not keep them.
        let held: Vec<Sym> = (0..100).map(|i| Sym::new(&format!("sweep-held-{i}"))).collect();
        for i in 0..50_000 {
            drop(Sym::new(&format!("sweep-churn-{i}")));
        }
        let table: usize = shards().iter().map(lock).map(|s| s.table.len()).sum();
        assert!(table < 40_000, "{table} symbols kept after 50,000 came and went");
        assert!(held.iter().all(|s| Sym::get(s.as_str()).as_ref() == Some(s)));
    }

    #[test]
    fn get_does_not_intern() {
        assert!(Sym::get("never-interned-text-1c9f").is_none());
        let s = Sym::new("interned-text-1c9f");
        assert_eq!(Sym::get("interned-text-1c9f"), Some(s));
    }
}

/// A map keyed by symbols. A symbol hashes as its address, which is already
/// unique, so a multiply-shift hash replaces SipHash (analyses look nodes up
/// by name millions of times on a big fleet).
pub type SymMap<V> = std::collections::HashMap<Sym, V, SymHash>;

/// The hasher of [`SymMap`], for keys made of symbols (tuples of them, or
/// structs of symbols, numbers and flags).
pub type SymHash = std::hash::BuildHasherDefault<SymHasher>;

#[derive(Default)]
pub struct SymHasher(u64);

impl Hasher for SymHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Not used by `Sym`; FNV-1a keeps it correct for anything else.
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.0 = (self.0 ^ n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(26);
    }
}
