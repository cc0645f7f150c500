use std::process::ExitCode;

use clap::FromArgMatches;

fn main() -> ExitCode {
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
