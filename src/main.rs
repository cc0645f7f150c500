use std::process::ExitCode;

use clap::FromArgMatches;

/// mimalloc rather than glibc's malloc: loading a large fleet is millions of
/// small allocations (decoded API pages, freed page by page), where glibc
/// spent 40% of the time (benches/fleet_scale.rs). Its version 2: version 3
/// returns freed pages to the system after a second and only when it next
/// allocates, so an idle cockpit kept the initial list's decoding resident
/// (220 MiB for 90 MiB of live data at 100,000 pods).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc keeps a thread's freed pages until that thread allocates again;
/// this hands them (and those of threads that ended) back to the system now.
fn give_back_free_pages() {
    // SAFETY: takes no pointers; mimalloc allows it on any thread at any time.
    unsafe { libmimalloc_sys::mi_collect(true) }
}

fn main() -> ExitCode {
    kgpu::runtime::memory::set_release(give_back_free_pages);
    let plugin = kgpu::cli::is_kubectl_plugin(std::env::args_os().next().as_deref());
    let matches = kgpu::cli::command(plugin).get_matches();
    let cli = kgpu::cli::Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    match kgpu::runtime::run(cli) {
        Ok(code) => code,
        Err(err) => {
            kgpu::runtime::say(&format!("kgpu: {err:#}"));
            kgpu::runtime::exit_code(&err)
        }
    }
}
