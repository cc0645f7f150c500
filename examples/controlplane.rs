//! Starts the test control plane by hand (see tests/cluster/run.sh): prints
//! `export KUBECONFIG=...` first, then runs until interrupted.

#[path = "../tests/support/controlplane.rs"]
mod controlplane;

fn main() {
    let cp = match controlplane::ControlPlane::start() {
        Ok(cp) => cp,
        Err(e) => {
            eprintln!("cannot start the control plane: {e}");
            std::process::exit(1);
        }
    };
    if std::env::args().any(|a| a == "--crds") {
        let mut files = cp.kueue_crds();
        files.extend(cp.volcano_crds());
        if let Err(e) = cp.install_crds(&files) {
            eprintln!("installing CRDs: {e}");
        }
    }
    println!("export KUBECONFIG={}", cp.kubeconfig.display());
    println!("# server {} · logs in {} · ctrl-c stops it", cp.server, cp.dir.display());
    println!("# a user without RBAC: export KUBECONFIG={}", cp.viewer_kubeconfig.display());
    // Run until a signal ends the process; the watchdog then stops the
    // components (it polls for this process every second).
    loop {
        std::thread::park();
    }
}
