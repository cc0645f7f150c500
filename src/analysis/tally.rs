//! A growable sum of resources (what pods on a node use, what a queue holds).

use crate::model::{Pod, Resources, Sym, keys};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub cpu_milli: u64,
    pub memory: u64,
    pub pods: u64,
    pub gpu: u64,
    pub extended: Vec<(Sym, u64)>,
}

impl Tally {
    /// Adds one pod's requests, counting the pod itself.
    pub fn add_pod(&mut self, requests: &Resources) {
        self.add(requests);
        self.pods += 1;
    }

    /// What a node holds once `pods` (nominated there, not yet bound) are
    /// added, as the scheduler counts them for pods below them; `None` when
    /// there are none.
    pub fn with_pods(&self, pods: &[&Pod]) -> Option<Tally> {
        if pods.is_empty() {
            return None;
        }
        let mut held = self.clone();
        for pod in pods {
            held.add_pod(&pod.requests);
        }
        Some(held)
    }

    pub fn add(&mut self, r: &Resources) {
        self.cpu_milli += r.cpu_milli;
        self.memory += r.memory;
        self.pods += r.pods;
        self.gpu += r.gpu;
        self.add_extended(&r.extended);
    }

    /// Adds another tally (what the pods it counted use, and the pods).
    pub fn add_tally(&mut self, other: &Tally) {
        self.cpu_milli += other.cpu_milli;
        self.memory += other.memory;
        self.pods += other.pods;
        self.gpu += other.gpu;
        self.add_extended(&other.extended);
    }

    fn add_extended(&mut self, pairs: &[(Sym, u64)]) {
        for (name, amount) in pairs {
            match self.extended.iter_mut().find(|(s, _)| s == name) {
                Some((_, v)) => *v += amount,
                None => self.extended.push((name.clone(), *amount)),
            }
        }
    }

    pub fn get(&self, name: &str) -> u64 {
        match name {
            "cpu" => self.cpu_milli,
            "memory" => self.memory,
            "pods" => self.pods,
            keys::RESOURCE_GPU => self.gpu,
            other => self.extended.iter().find(|(s, _)| s.as_str() == other).map_or(0, |(_, v)| *v),
        }
    }

    pub fn mig(&self, profile: &str) -> u64 {
        self.extended.iter().find(|(s, _)| keys::mig_profile_of(s.as_str()) == Some(profile)).map_or(0, |(_, v)| *v)
    }
}
