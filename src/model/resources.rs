//! A compact bag of resource amounts, in the base units of `quantity`.

use super::keys;
use super::sym::Sym;

/// Requests of a pod, or capacity / allocatable of a node.
/// `nvidia.com/gpu` has its own field because every analysis reads it;
/// other extended resources (MIG profiles, `nvidia.com/gpu.shared`, RDMA...)
/// live in `extended`, sorted by name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Resources {
    pub cpu_milli: u64,
    pub memory: u64,
    pub pods: u64,
    pub gpu: u64,
    pub extended: Box<[(Sym, u64)]>,
}

impl Resources {
    /// Builds from `(resource name, amount)` pairs; repeated names add up.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, u64)>) -> Resources {
        let mut r = Resources::default();
        let mut extended: Vec<(Sym, u64)> = Vec::new();
        for (name, amount) in pairs {
            match name {
                "cpu" => r.cpu_milli += amount,
                "memory" => r.memory += amount,
                "pods" => r.pods += amount,
                keys::RESOURCE_GPU => r.gpu += amount,
                other => {
                    let sym = Sym::new(other);
                    match extended.iter_mut().find(|(s, _)| *s == sym) {
                        Some((_, v)) => *v += amount,
                        None => extended.push((sym, amount)),
                    }
                }
            }
        }
        extended.sort_by_key(|a| a.0.clone());
        r.extended = extended.into_boxed_slice();
        r
    }

    /// Amount of any resource by its Kubernetes name.
    pub fn get(&self, name: &str) -> u64 {
        match name {
            "cpu" => self.cpu_milli,
            "memory" => self.memory,
            "pods" => self.pods,
            keys::RESOURCE_GPU => self.gpu,
            other => self.extended.iter().find(|(s, _)| s.as_str() == other).map_or(0, |(_, v)| *v),
        }
    }

    /// Every non-zero amount, cpu/memory/pods/gpu first, then extended ones.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u64)> + '_ {
        [("cpu", self.cpu_milli), ("memory", self.memory), ("pods", self.pods), (keys::RESOURCE_GPU, self.gpu)]
            .into_iter()
            .chain(self.extended.iter().map(|(s, v)| (s.as_str(), *v)))
            .filter(|(_, v)| *v > 0)
    }

    /// MIG profiles and amounts (`1g.10gb`, 2), from `nvidia.com/mig-*`.
    pub fn mig(&self) -> impl Iterator<Item = (&str, u64)> + '_ {
        self.extended.iter().filter_map(|(s, v)| keys::mig_profile_of(s.as_str()).map(|p| (p, *v)))
    }

    pub fn mig_total(&self) -> u64 {
        self.mig().map(|(_, v)| v).sum()
    }

    /// Whether these requests take any GPU (whole, shared or a MIG slice).
    pub fn wants_gpu(&self) -> bool {
        self.gpu > 0 || self.extended.iter().any(|(s, v)| *v > 0 && keys::is_gpu_resource(s.as_str()))
    }

    /// `self + other`, resource by resource.
    pub fn plus(&self, other: &Resources) -> Resources {
        Resources::from_pairs(self.all_pairs().chain(other.all_pairs()))
    }

    /// These requests split in two: the named resources, and the rest.
    pub fn split_off(&self, names: &[&str]) -> (Resources, Resources) {
        let (named, rest): (Vec<_>, Vec<_>) = self.all_pairs().partition(|(k, _)| names.contains(k));
        (Resources::from_pairs(named), Resources::from_pairs(rest))
    }

    /// `self * n` (a pod's requests times its replica count).
    pub fn times(&self, n: u64) -> Resources {
        Resources::from_pairs(self.all_pairs().map(|(k, v)| (k, v * n)))
    }

    fn all_pairs(&self) -> impl Iterator<Item = (&str, u64)> + '_ {
        [("cpu", self.cpu_milli), ("memory", self.memory), ("pods", self.pods), (keys::RESOURCE_GPU, self.gpu)]
            .into_iter()
            .chain(self.extended.iter().map(|(s, v)| (s.as_str(), *v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_add_up_and_sort() {
        let r = Resources::from_pairs([
            ("nvidia.com/mig-3g.40gb", 1),
            ("cpu", 500),
            ("nvidia.com/mig-1g.10gb", 2),
            ("nvidia.com/mig-1g.10gb", 1),
            ("nvidia.com/gpu", 0),
        ]);
        assert_eq!(r.cpu_milli, 500);
        assert_eq!(r.get("nvidia.com/mig-1g.10gb"), 3);
        assert_eq!(r.mig().collect::<Vec<_>>(), vec![("1g.10gb", 3), ("3g.40gb", 1)]);
        assert_eq!(r.mig_total(), 4);
        assert!(r.wants_gpu());
        assert!(!Resources::from_pairs([("cpu", 1)]).wants_gpu());
    }

    #[test]
    fn plus_and_times() {
        let a = Resources::from_pairs([("nvidia.com/gpu", 2), ("cpu", 1000)]);
        let b = Resources::from_pairs([("nvidia.com/gpu", 1), ("rdma/ib", 1)]);
        let c = a.plus(&b).times(2);
        assert_eq!(c.gpu, 6);
        assert_eq!(c.cpu_milli, 2000);
        assert_eq!(c.get("rdma/ib"), 2);
    }
}
