//! `kgpu lab up --kind`: the same living cluster on kind, where kind and a
//! container engine exist. The GPU nodes stay KWOK's fake nodes (installed
//! in-cluster from KWOK's release manifest, with the lab's own stages);
//! Kueue comes from its release manifest with `--kueue`.
//!
//! The plan is data (commands and files), so it can be printed
//! (`--print`) and tested where kind cannot run.

use std::path::{Path, PathBuf};

/// The cluster `kind` creates (its kube context is `kind-<name>`).
pub const CLUSTER: &str = "kgpu-lab";
pub const CONFIG: &str = include_str!("../../assets/kind/kgpu-lab.yaml");
pub const KWOK_RELEASE: &str = "https://github.com/kubernetes-sigs/kwok/releases/download/v0.8.0/kwok.yaml";
pub const KUEUE_RELEASE: &str = "https://github.com/kubernetes-sigs/kueue/releases/download/v0.17.0/manifests.yaml";
pub const VOLCANO_CRDS: [&str; 2] = [
    "https://raw.githubusercontent.com/volcano-sh/volcano/v1.14.0/config/crd/volcano/bases/scheduling.volcano.sh_podgroups.yaml",
    "https://raw.githubusercontent.com/volcano-sh/volcano/v1.14.0/config/crd/volcano/bases/scheduling.volcano.sh_queues.yaml",
];

/// One step: why, and the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub why: &'static str,
    pub argv: Vec<String>,
}

/// The files the plan writes before it runs, and its steps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub context: String,
    pub files: Vec<(PathBuf, &'static str)>,
    pub steps: Vec<Step>,
    /// Run when the lab stops.
    pub teardown: Step,
}

fn argv(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

/// The plan for a kind lab whose files go to `dir`; `kgpu` is this binary.
pub fn plan(dir: &Path, kgpu: &str, scenario: Option<&str>, kueue: bool) -> Plan {
    let context = format!("kind-{CLUSTER}");
    let config = dir.join("kind-config.yaml");
    let stages = dir.join("kwok-stages.yaml");
    let config_arg = config.display().to_string();
    let stages_arg = stages.display().to_string();
    let kubectl = |rest: &[&str]| {
        let mut v = argv(&["kubectl", "--context", &context]);
        v.extend(argv(rest));
        v
    };
    let mut steps = vec![
        Step { why: "create the kind cluster", argv: argv(&["kind", "create", "cluster", "--config", &config_arg]) },
        Step {
            why: "install KWOK in-cluster (its CRDs, RBAC and controller)",
            argv: kubectl(&["apply", "--server-side", "-f", KWOK_RELEASE]),
        },
        Step {
            why: "wait for the KWOK controller",
            argv: kubectl(&["-n", "kube-system", "rollout", "status", "deployment/kwok-controller", "--timeout=180s"]),
        },
        Step {
            why: "the lab's KWOK stages (heartbeats; pods that run and finish)",
            argv: kubectl(&["apply", "--server-side", "-f", &stages_arg]),
        },
        Step {
            why: "Volcano's PodGroup and Queue CRDs (objects as status only)",
            argv: kubectl(&["apply", "--server-side", "-f", VOLCANO_CRDS[0], "-f", VOLCANO_CRDS[1]]),
        },
    ];
    if kueue {
        steps.push(Step {
            why: "the Kueue manager and its CRDs",
            argv: kubectl(&["apply", "--server-side", "-f", KUEUE_RELEASE]),
        });
        steps.push(Step {
            why: "wait for the Kueue manager",
            argv: kubectl(&[
                "-n",
                "kueue-system",
                "rollout",
                "status",
                "deployment/kueue-controller-manager",
                "--timeout=300s",
            ]),
        });
    }
    if let Some(name) = scenario {
        steps.push(Step {
            why: "the scenario's nodes, controllers, pods and queues",
            argv: argv(&[kgpu, "scenario", "apply", name, "--context", &context]),
        });
    }
    Plan {
        context,
        files: vec![(config, CONFIG), (stages, super::kwok::STAGES)],
        steps,
        teardown: Step {
            why: "delete the kind cluster",
            argv: argv(&["kind", "delete", "cluster", "--name", CLUSTER]),
        },
    }
}

/// What is missing to run the plan here: kind, kubectl, a container engine.
pub fn missing_tools(found: impl Fn(&str) -> bool) -> Vec<&'static str> {
    let mut missing = Vec::new();
    for tool in ["kind", "kubectl"] {
        if !found(tool) {
            missing.push(tool);
        }
    }
    if !found("docker") && !found("podman") && !found("nerdctl") {
        missing.push("a container engine (docker, podman or nerdctl) with a running daemon");
    }
    missing
}

impl Plan {
    /// The plan as a shell script a user could run by hand.
    pub fn script(&self) -> String {
        let quote = |a: &String| {
            if a.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:=@".contains(c)) {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        };
        let mut out = String::from("# kgpu lab on kind: the files below are written first\n");
        for (path, _) in &self.files {
            out.push_str(&format!("#   {}\n", path.display()));
        }
        for step in &self.steps {
            out.push_str(&format!("# {}\n{}\n", step.why, step.argv.iter().map(quote).collect::<Vec<_>>().join(" ")));
        }
        out.push_str(&format!(
            "# when done: {}\n{}\n",
            self.teardown.why,
            self.teardown.argv.iter().map(quote).collect::<Vec<_>>().join(" ")
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kind_config_names_the_cluster() {
        let v: serde_yaml::Value = serde_yaml::from_str(CONFIG).unwrap();
        assert_eq!(v["kind"], "Cluster");
        assert_eq!(v["apiVersion"], "kind.x-k8s.io/v1alpha4");
        assert_eq!(v["name"], CLUSTER);
    }

    #[test]
    fn the_plan_creates_installs_applies_and_tears_down() {
        let p = plan(Path::new("/tmp/lab"), "kgpu", Some("fragmented"), true);
        assert_eq!(p.context, "kind-kgpu-lab");
        assert_eq!(p.steps[0].argv, ["kind", "create", "cluster", "--config", "/tmp/lab/kind-config.yaml"]);
        assert!(p.steps.iter().any(|s| s.argv.contains(&KWOK_RELEASE.to_string())));
        assert!(p.steps.iter().any(|s| s.argv.contains(&KUEUE_RELEASE.to_string())));
        let last = p.steps.last().unwrap();
        assert_eq!(last.argv, ["kgpu", "scenario", "apply", "fragmented", "--context", "kind-kgpu-lab"]);
        // every kubectl step talks to the kind cluster, never the current context
        for s in p.steps.iter().filter(|s| s.argv[0] == "kubectl") {
            assert_eq!(&s.argv[1..3], ["--context", "kind-kgpu-lab"], "{s:?}");
        }
        assert_eq!(p.teardown.argv, ["kind", "delete", "cluster", "--name", "kgpu-lab"]);
        let files: Vec<&Path> = p.files.iter().map(|(f, _)| f.as_path()).collect();
        for s in &p.steps {
            for a in s.argv.iter().filter(|a| a.starts_with("/tmp/lab/")) {
                assert!(files.contains(&Path::new(a)), "{a} is written by the plan");
            }
        }
        let script = p.script();
        assert!(script.contains("kind create cluster --config /tmp/lab/kind-config.yaml"), "{script}");
        let without = plan(Path::new("/tmp/lab"), "kgpu", None, false);
        assert!(!without.steps.iter().any(|s| s.argv.iter().any(|a| a.contains("kueue"))));
        assert!(!without.steps.iter().any(|s| s.argv.iter().any(|a| a == "scenario")));
    }

    #[test]
    fn missing_tools_are_named() {
        assert!(missing_tools(|_| true).is_empty());
        assert_eq!(missing_tools(|t| t == "podman" || t == "kubectl"), vec!["kind"]);
        let none = missing_tools(|_| false);
        assert_eq!(none.len(), 3);
        assert!(none[2].contains("container engine"));
    }
}
