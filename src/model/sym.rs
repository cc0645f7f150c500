//! Interned strings for the compact model.
//!
//! Label keys, label values, namespaces, node names, resource names and the like
//! repeat across thousands of objects. A `Sym` is a thin (8-byte) pointer to a
//! string that lives for the rest of the process, so a label costs 16 bytes and
//! comparing two symbols is a pointer comparison. The vocabulary is bounded by
//! what a cluster names (keys, values, node names), so the leak is bounded too.
//! Unbounded names (pod names) are *not* interned: they use `Arc<str>`.

use std::fmt;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Mutex, MutexGuard, OnceLock};

use hashbrown::HashTable;

#[derive(Clone, Copy)]
pub struct Sym(&'static String);

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

type Shard = Mutex<HashTable<&'static String>>;

fn shards() -> &'static [Shard; SHARDS] {
    static TABLE: OnceLock<[Shard; SHARDS]> = OnceLock::new();
    TABLE.get_or_init(|| std::array::from_fn(|_| Mutex::new(HashTable::new())))
}

fn lock(shard: &'static Shard) -> MutexGuard<'static, HashTable<&'static String>> {
    match shard.lock() {
        Ok(guard) => guard,
        // A panic while holding the lock cannot leave a shard inconsistent
        // (insert is the only mutation), so keep using it.
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// How many symbols were ever interned, and the bytes of their text: what
/// the process holds for them for the rest of its life (the soak benchmark
/// watches these grow, or not).
pub fn interned() -> (usize, usize) {
    shards()
        .iter()
        .map(lock)
        .fold((0, 0), |(n, bytes), table| (n + table.len(), bytes + table.iter().map(|s| s.capacity()).sum::<usize>()))
}

fn shard(hash: u64) -> MutexGuard<'static, HashTable<&'static String>> {
    // Bits the shard's own table does not use to pick a bucket (the low
    // ones) or to tag it (the top seven).
    lock(&shards()[(hash >> 32) as usize % SHARDS])
}

impl Sym {
    /// Interns `s`, returning the one symbol for that text.
    pub fn new(s: &str) -> Sym {
        let hash = hash_of(s);
        let mut table = shard(hash);
        if let Some(existing) = table.find(hash, |e| e.as_str() == s) {
            return Sym(existing);
        }
        let leaked: &'static String = Box::leak(Box::new(s.to_string()));
        table.insert_unique(hash, leaked, |e| hash_of(e));
        Sym(leaked)
    }

    /// The symbol for `s` if it was ever interned. Lets lookups avoid growing
    /// the table with strings no object carries.
    pub fn get(s: &str) -> Option<Sym> {
        let hash = hash_of(s);
        shard(hash).find(hash, |e| e.as_str() == s).map(|found| Sym(found))
    }

    pub fn as_str(&self) -> &'static str {
        self.0.as_str()
    }
}

impl PartialEq for Sym {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}
impl Eq for Sym {}

impl Hash for Sym {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (self.0 as *const String as usize).hash(state)
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
        assert_eq!(v.map(|s| s.as_str()), ["a-node", "b-node", "c-node"]);
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
