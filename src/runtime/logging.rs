//! The cockpit logs to a file in the data dir, never to the terminal the UI
//! owns; the agent logs to stderr.

use std::path::Path;
use std::sync::Mutex;

use tracing_subscriber::EnvFilter;

/// Starts file logging at `level`; returns the file's path, or why not.
pub fn init(log_file: Option<&Path>, level: &str) -> Result<String, String> {
    let Some(path) = log_file else {
        return Err("no data dir (no home directory): logging is off".into());
    };
    if let Some(dir) = path.parent() {
        // The data dir holds the log and the audit log: the owner's alone.
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    // The log names nodes, pods and errors: the owner's alone (0600), as kubeconfigs are.
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = options.open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    // A log an older kgpu created 0644 is narrowed too.
    #[cfg(unix)]
    let _ = std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o600));
    let filter = EnvFilter::try_new(format!("kgpu={level},warn")).map_err(|e| format!("--log-level '{level}': {e}"))?;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(Mutex::new(file))
        .with_ansi(false)
        .try_init()
        .map_err(|e| e.to_string())?;
    Ok(path.display().to_string())
}

/// Logs to stderr, for `kgpu agent` (its logs go where the container's do).
pub fn init_stderr(level: &str) -> Result<(), String> {
    let filter = EnvFilter::try_new(format!("kgpu={level},warn")).map_err(|e| format!("--log-level '{level}': {e}"))?;
    // Colours only on a terminal: `kubectl logs` and journald showed the escapes.
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr()) && std::env::var_os("NO_COLOR").is_none();
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .try_init()
        .map_err(|e| e.to_string())
}
