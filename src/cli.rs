//! The command line (clap). Help texts here are the user's manual for each
//! flag; keep them current with the code.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Parser, Debug)]
#[command(
    name = "kgpu",
    version,
    about = "A terminal cockpit for Kubernetes GPU clusters",
    long_about = "kgpu shows where the free GPUs are and why they can't be used, why a pod, gang or \
                  Kueue/Volcano workload is Pending, which drivers run where and what an upgrade wave \
                  would break — and lets you cordon, drain, requeue and repartition MIG, guarded and audited.\n\n\
                  Without a subcommand it opens the cockpit on the current kube context. \
                  Try `kgpu demo` first: an embedded simulated GPU cluster with failure scenarios.",
    after_help = "Exit codes: 0 ok, 1 runtime failure, 2 bad usage or unreachable cluster."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    #[command(flatten)]
    pub source: SourceArgs,

    #[command(flatten)]
    pub ui: UiArgs,

    /// Print the config, theme, log and audit paths kgpu uses, then exit.
    #[arg(long, global = true)]
    pub print_paths: bool,
}

#[derive(Args, Debug, Clone, Default)]
pub struct SourceArgs {
    /// Kubeconfig file (default: $KUBECONFIG, then ~/.kube/config; in a pod, the in-cluster config).
    #[arg(long, global = true, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Kube context to use (default: the current context).
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// Watch pods and events in one namespace only (nodes and queues stay cluster-wide).
    #[arg(long, short = 'n', global = true, value_name = "NS")]
    pub namespace: Option<String>,
    /// Read `kubectl get ... -o json|yaml` dumps instead of a live cluster: files or directories.
    #[arg(long, global = true, value_name = "PATH", num_args = 1..)]
    pub file: Vec<PathBuf>,
    /// How to read the node agents and dcgm-exporter: proxy (through the API server), direct (pod IPs, in-cluster), off.
    #[arg(long, global = true, value_enum, default_value_t = AgentTransport::Proxy, value_name = "HOW")]
    pub agents: AgentTransport,
    /// Namespace of the agent DaemonSet.
    #[arg(long, global = true, default_value = crate::sources::agents::DEFAULT_NAMESPACE, value_name = "NS")]
    pub agent_namespace: String,
    /// The agents' key, from which each node's token is derived (default: the Secret kgpu-agent-token in the agents' namespace).
    #[arg(long, global = true, env = "KGPU_AGENT_TOKEN_FILE", value_name = "FILE")]
    pub agent_token_file: Option<PathBuf>,
    /// Requests a second the agents and dcgm-exporter together may send through the API server's pod proxy (a burst of 16 first; the stalest nodes with the most GPUs are read first).
    #[arg(long, global = true, default_value_t = crate::sources::poll::DEFAULT_BUDGET, value_name = "REQ/S", value_parser = api_budget)]
    pub api_budget: f64,
    /// Read dcgm-exporter's GPU use from a Prometheus that scrapes it, one query a round for the whole fleet, instead of each exporter through the API server: http://HOST:PORT[/PATH] (e.g. a port-forward), NAMESPACE/SERVICE:PORT (through the API server's service proxy), or auto (the Prometheus operator's or chart's Service, found in the cluster; else each exporter as without this flag).
    #[arg(long, global = true, value_name = "WHERE", value_parser = crate::sources::prometheus::Choice::parse)]
    pub prometheus: Option<crate::sources::prometheus::Choice>,
}

/// A request budget: a positive number of requests a second, at most 1,000.
fn api_budget(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 && r <= 1000.0 => Ok(r),
        _ => Err(format!(
            "'{text}' is not a request rate: give requests a second, more than 0 and at most 1000 (e.g. 0.5)"
        )),
    }
}

/// A node's name as Kubernetes allows it (a DNS-1123 subdomain): it is
/// logged, served and turned into the node's token, so nothing else passes.
fn node_name(text: &str) -> Result<String, String> {
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if text.len() <= 253 && text.split('.').all(label_ok) {
        Ok(text.to_string())
    } else {
        // Debug quoting escapes control characters: none reaches the terminal.
        Err(format!("{text:?} is not a node name: lowercase letters, digits, '-' and '.', at most 253 characters"))
    }
}

#[derive(ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AgentTransport {
    #[default]
    Proxy,
    Direct,
    Off,
}

impl SourceArgs {
    /// What to watch in a live cluster, from these flags.
    pub fn scope(&self) -> crate::sources::kube::watch::Scope {
        use crate::sources::agents::{Config, Transport};
        let transport = match self.agents {
            AgentTransport::Proxy => Transport::PodProxy,
            AgentTransport::Direct => Transport::Direct,
            AgentTransport::Off => Transport::Off,
        };
        crate::sources::kube::watch::Scope {
            namespace: self.namespace.clone(),
            agents: Config {
                namespace: self.agent_namespace.clone(),
                transport,
                token_file: self.agent_token_file.clone(),
                budget: self.api_budget,
                prometheus: self.prometheus.clone(),
                ..Config::default()
            },
            ..Default::default()
        }
    }
}

#[derive(Args, Debug, Clone, Default)]
pub struct UiArgs {
    /// Disable every action (cordon, drain, requeue, repartition); the cockpit only reads.
    #[arg(long, global = true)]
    pub read_only: bool,
    /// Colour theme: dark, light, high-contrast or mono (NO_COLOR selects mono).
    #[arg(long, global = true, value_name = "NAME")]
    pub theme: Option<String>,
    /// Log level for the log file (error, warn, info, debug, trace).
    #[arg(long, global = true, value_name = "LEVEL", default_value = "info")]
    pub log_level: String,
    /// Run a lesson (kgpu lesson list): in `kgpu demo` on its scenario, or on a cluster it was put on (kgpu lab up --scenario NAME).
    #[arg(long, global = true, value_name = "NAME")]
    pub lesson: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the cockpit on the embedded simulated GPU cluster.
    Demo(DemoArgs),
    /// Print the cockpit's views without a terminal (text or JSON).
    Snapshot(SnapshotArgs),
    /// Explain why one pod, Kueue Workload or Volcano PodGroup is Pending.
    Why(WhyArgs),
    /// Put a demo scenario onto a real cluster (a kind cluster, the test control plane), or take it off.
    Scenario(ScenarioArgs),
    /// Lessons for trainees: each scenario as a question, with hints and the answer worked out.
    Lesson(LessonArgs),
    /// Run the node agent: read the GPUs through NVML and serve them to cockpits (one per GPU node).
    Agent(AgentArgs),
    /// A living local cluster: real API server, scheduler and controllers, KWOK's fake GPU nodes.
    Lab(LabArgs),
    /// Cordon a node (actions from the command line: same guards, blast radius and audit as the cockpit).
    Cordon(NodeActionArgs),
    /// Uncordon a node.
    Uncordon(NodeActionArgs),
    /// Cordon a node and evict its pods through the Eviction API (PodDisruptionBudgets honoured).
    Drain(DrainArgs),
    /// Requeue a Kueue Workload or Volcano PodGroup (deactivate and reactivate; abort and resume).
    Requeue(TargetActionArgs),
    /// Repartition a node's MIG GPUs: cordon, drain GPU pods, set nvidia.com/mig.config, wait, uncordon.
    Repartition(RepartitionArgs),
    /// Run the defragmentation plan for a pending gang or pod until it is placed.
    Defrag(DefragArgs),
    /// Release what a kgpu that ended without finishing (killed, its SSH session dropped) left: its defrag reservations, its open audit lines. Lists it first.
    Release(ReleaseArgs),
    /// Print shell completions: `source <(kgpu completions bash)`.
    Completions(CompletionsArgs),
    /// Print the manual page (roff): `kgpu man | man -l -`.
    Man,
}

#[derive(Args, Debug, Clone)]
pub struct CompletionsArgs {
    /// The shell to complete in.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// The cockpit's global flags that mean nothing to `kgpu agent`: its help
/// leaves them out.
const NOT_FOR_THE_AGENT: &[&str] = &[
    "kubeconfig",
    "context",
    "namespace",
    "file",
    "agents",
    "agent_namespace",
    "agent_token_file",
    "api_budget",
    "prometheus",
    "read_only",
    "theme",
    "print_paths",
    "lesson",
];

/// Whether kgpu was started as a kubectl plugin (`kubectl gpu ...` runs an
/// executable named `kubectl-gpu` on the PATH).
pub fn is_kubectl_plugin(program: Option<&std::ffi::OsStr>) -> bool {
    program.and_then(|p| std::path::Path::new(p).file_name()).is_some_and(|n| n == "kubectl-gpu")
}

/// The command line as clap builds it from the definitions above, with two
/// adjustments: as a kubectl plugin it calls itself `kubectl gpu`, and the
/// agent's help lists only the flags the agent reads.
pub fn command(kubectl_plugin: bool) -> clap::Command {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    if kubectl_plugin {
        cmd = cmd.bin_name("kubectl gpu");
    }
    // A global flag is not copied into a subcommand that already has one of
    // its name: give the agent hidden copies (still parsed, never shown).
    let hidden: Vec<clap::Arg> = cmd
        .get_arguments()
        .filter(|a| NOT_FOR_THE_AGENT.contains(&a.get_id().as_str()))
        .map(|a| a.clone().hide(true))
        .collect();
    cmd.mut_subcommand("agent", |agent| agent.args(hidden))
}

/// `--demo`, `--scenario`, `--seed` of the one-shot commands: the embedded
/// demo cluster instead of the kube context (it lives for the command).
#[derive(Args, Debug, Clone, Default)]
pub struct DemoChoice {
    /// Use the embedded demo cluster instead of the kube context.
    #[arg(long)]
    pub demo: bool,
    /// Demo scenario (implies --demo).
    #[arg(long, short = 's', value_name = "NAME")]
    pub scenario: Option<String>,
    /// Demo seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

impl DemoChoice {
    /// The demo scenario asked for, if the demo is.
    pub fn scenario(&self) -> Option<&str> {
        (self.demo || self.scenario.is_some()).then(|| self.scenario.as_deref().unwrap_or("default"))
    }
}

/// How an action from the command line runs.
#[derive(Args, Debug, Clone)]
#[command(after_help = "Without --yes, on a terminal it asks; without a terminal it prints the blast radius and \
    exits 2. Exit 0 only when the action reached its goal (defrag: the target placed), 1 otherwise, with the \
    report. --read-only refuses every action. Each run is written to the audit log (kgpu --print-paths).")]
pub struct ActOptions {
    /// Server-side dry run: the API server checks every request, nothing changes (needs no --yes).
    #[arg(long)]
    pub dry_run: bool,
    /// Run without asking.
    #[arg(long, short = 'y')]
    pub yes: bool,
    #[command(flatten)]
    pub from: DemoChoice,
}

#[derive(Args, Debug, Clone)]
pub struct NodeActionArgs {
    /// The node.
    pub node: String,
    #[command(flatten)]
    pub act: ActOptions,
}

#[derive(Args, Debug, Clone)]
pub struct DrainArgs {
    /// The node.
    pub node: String,
    /// Evict only the pods that use GPUs (the node stays cordoned either way).
    #[arg(long)]
    pub gpu_only: bool,
    /// Also evict pods without a controller (they do not come back) and pods
    /// with emptyDir data (it is lost); without it they stay, as with kubectl.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub act: ActOptions,
}

#[derive(Args, Debug, Clone)]
pub struct TargetActionArgs {
    /// NAMESPACE/NAME of a Kueue Workload or Volcano PodGroup.
    pub target: String,
    #[command(flatten)]
    pub act: ActOptions,
}

#[derive(Args, Debug, Clone)]
pub struct RepartitionArgs {
    /// The node.
    pub node: String,
    /// The mig-parted config to apply (e.g. all-1g.10gb; only those valid for the node's GPU).
    pub config: String,
    #[command(flatten)]
    pub act: ActOptions,
}

#[derive(Args, Debug, Clone)]
pub struct DefragArgs {
    /// NAMESPACE/NAME of the pending Workload, PodGroup or pod (default: the plan's own target).
    pub target: Option<String>,
    #[command(flatten)]
    pub act: ActOptions,
}

#[derive(Args, Debug, Clone)]
pub struct ReleaseArgs {
    /// Nodes whose kgpu reservation to remove (default: every one an abandoned action still holds).
    pub nodes: Vec<String>,
    #[command(flatten)]
    pub act: ActOptions,
}

#[derive(Args, Debug, Clone)]
pub struct LabArgs {
    #[command(subcommand)]
    pub command: LabCommand,
}

#[derive(Subcommand, Debug, Clone)]
pub enum LabCommand {
    /// Start the lab and keep it running until ctrl-c or SIGTERM (first line: export KUBECONFIG=...).
    #[command(long_about = "Start the lab on loopback and keep it running in the foreground until ctrl-c or SIGTERM, \
        which stop every process it started. The first line of output is `export KUBECONFIG=...`; run `kgpu` \
        with it in another terminal.\n\n\
        The lab runs etcd, kube-apiserver, kube-scheduler and kube-controller-manager (Jobs, ReplicaSets, \
        eviction, garbage collection, node lifecycle) built from their Go modules (minutes the first time, then \
        cached in ~/.cache/kgpu or $KGPU_CP_CACHE), and KWOK, whose fake kubelets keep the GPU nodes Ready and \
        run and finish their pods. Needs Go >= 1.26 and the Go module proxy once.")]
    Up {
        /// Put a demo scenario on the lab (kgpu demo --list): nodes, controllers, pods, queues.
        #[arg(long, short = 's', value_name = "NAME")]
        scenario: Option<String>,
        /// Also run the real Kueue manager, which admits the scenario's Kueue workloads.
        #[arg(long)]
        kueue: bool,
        /// Submit a seeded stream of GPU Jobs that arrive and finish.
        #[arg(long)]
        churn: bool,
        /// With --churn: mean seconds between arrivals.
        #[arg(long, default_value_t = 20, value_name = "SECONDS", value_parser = clap::value_parser!(u32).range(1..=3600))]
        churn_every: u32,
        /// With --churn: the seed of the arrivals (the same seed replays the same Jobs).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Run the lab on a kind cluster instead (needs kind, kubectl and a container engine).
        #[arg(long)]
        kind: bool,
        /// With --kind: print the steps (a shell script) instead of running them.
        #[arg(long, requires = "kind")]
        print: bool,
    },
    /// Whether a lab runs here, what it runs, and how its nodes and pods are doing.
    Status,
    /// Stop the running lab (as ctrl-c in its terminal would).
    Down,
}

/// `kgpu agent`. In the DaemonSet of assets/agent/ it runs with the node's
/// name from the downward API and the token from a Secret.
#[derive(Args, Debug, Clone)]
pub struct AgentArgs {
    /// Address to serve on.
    #[arg(long, default_value = "0.0.0.0:9400", value_name = "ADDR")]
    pub listen: std::net::SocketAddr,
    /// File holding the cluster's agent key; every request must present this node's token derived from it (Authorization: Bearer, or X-Kgpu-Token; see the README).
    #[arg(long, value_name = "FILE")]
    pub token_file: PathBuf,
    /// The node this agent runs on.
    #[arg(long, env = "NODE_NAME", value_name = "NAME", value_parser = node_name)]
    pub node_name: String,
    /// Where the GPU facts come from: nvml, or fake:PATH (serve a recorded agent snapshot).
    #[arg(long, default_value = "nvml", value_name = "BACKEND")]
    pub backend: String,
    /// The kubelet's pod-resources socket (which pod holds which GPU).
    #[arg(long, default_value = crate::agent::podres::DEFAULT_SOCKET, value_name = "PATH")]
    pub pod_resources_socket: PathBuf,
    /// Seconds between readings of the GPUs and the kubelet, 1 to 3600 (XIDs arrive at once).
    #[arg(long, default_value_t = 5, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub interval: u64,
    /// Requests per second served to each client (bursts of twice that), 1 to 10000.
    #[arg(long, default_value_t = 10, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub max_requests_per_second: u32,
    /// Event streams open at once, 1 to 1024.
    #[arg(long, default_value_t = 4, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub max_streams: u64,
}

#[derive(Subcommand, Debug, Clone)]
pub enum ScenarioCommand {
    /// Create the scenario's nodes, pods, Kueue and Volcano objects (server-side apply; repeatable).
    Apply {
        /// Scenario name (kgpu demo --list), or a YAML file of your own objects (statuses are
        /// written through the status subresource, so hand-made nodes get their capacity).
        name: String,
        /// Server-side dry run: validate everything, change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Delete what `apply` created (namespaces stay).
    Delete {
        /// Scenario name, or the YAML file that was applied.
        name: String,
    },
    /// Print the scenario's manifests (multi-document YAML).
    Export {
        /// Scenario name.
        name: String,
    },
}

#[derive(Args, Debug, Clone)]
pub struct ScenarioArgs {
    #[command(subcommand)]
    pub command: ScenarioCommand,
}

#[derive(Args, Debug, Clone)]
pub struct DemoArgs {
    /// The failure scenario to run (see --list).
    #[arg(long, short = 's', default_value = "default", value_name = "NAME")]
    pub scenario: String,
    /// Seed of the simulation: the same seed replays the same cluster (default 1; with --mystery, a new one each time, printed in the report).
    #[arg(long)]
    pub seed: Option<u64>,
    /// List the scenarios with their stories and exit.
    #[arg(long)]
    pub list: bool,
    /// An interview: a scenario picked by --seed, its name and story hidden; answer with :answer CAUSE, graded, and a report for the interviewer on exit.
    #[arg(long)]
    pub mystery: bool,
}

#[derive(Args, Debug, Clone)]
pub struct LessonArgs {
    #[command(subcommand)]
    pub command: LessonCommand,
}

#[derive(Subcommand, Debug, Clone)]
pub enum LessonCommand {
    /// Every lesson with its question (on the demo scenario's numbers).
    List,
    /// A lesson's question and hints; with --answer, the cause and its arithmetic.
    Show {
        /// The lesson (a scenario name).
        name: String,
        /// Also print the answer.
        #[arg(long)]
        answer: bool,
        /// Read the cluster of the kube context (the lab, with the scenario put on it) instead of the demo.
        #[arg(long)]
        cluster: bool,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    Text,
    Json,
}

/// How far `--advance` may run the demo: a day (a simulated day takes about
/// a minute; 2^32 seconds ran for ever and u64::MAX wrapped to nothing).
fn advance_seconds() -> clap::builder::RangedU64ValueParser<u64> {
    clap::value_parser!(u64).range(0..=86_400)
}

/// `kgpu snapshot`: the source is the current kube context unless `--demo`,
/// `--scenario` or `--file` says otherwise.
#[derive(Args, Debug, Clone)]
pub struct SnapshotArgs {
    #[command(flatten)]
    pub from: DemoChoice,
    /// Run the demo cluster this many seconds before taking the snapshot
    /// (at most a day, 86400: a simulated day takes about a minute).
    #[arg(long, default_value_t = 0, value_name = "SECONDS", value_parser = advance_seconds())]
    pub advance: u64,
    /// Limit the output to one section: fleet, fragmentation, pending, gangs, queues, drivers, mig, events, utilization (or usage).
    #[arg(long, value_name = "PANE")]
    pub pane: Option<String>,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value = "text")]
    pub output: Output,
    /// Plan driver-upgrade waves to this driver version (adds `drivers.waves`).
    #[arg(long, value_name = "VERSION")]
    pub target_driver: Option<String>,
    /// maxParallelUpgrades for the wave planner (0 = unlimited); default:
    /// the GPU Operator's upgradePolicy, else its default 1.
    #[arg(long, value_name = "N")]
    pub max_parallel: Option<u32>,
    /// maxUnavailable for the wave planner: a count or a percentage;
    /// default: the GPU Operator's upgradePolicy, else its default 25%.
    #[arg(long, value_name = "N|P%")]
    pub max_unavailable: Option<String>,
}

#[derive(Args, Debug, Clone)]
pub struct WhyArgs {
    /// NAMESPACE/NAME of a pending pod, Workload or PodGroup.
    pub target: String,
    #[command(flatten)]
    pub from: DemoChoice,
    /// Run the demo cluster this many seconds first (at most a day, 86400).
    #[arg(long, default_value_t = 0, value_name = "SECONDS", value_parser = advance_seconds())]
    pub advance: u64,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value = "text")]
    pub output: Output,
}
