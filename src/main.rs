use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = kgpu::cli::Cli::parse();
    match kgpu::runtime::run(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("kgpu: {}", kgpu::view_model::style::printable(&format!("{err:#}")));
            kgpu::runtime::exit_code(&err)
        }
    }
}
