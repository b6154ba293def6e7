//! `caldrix`: the model-serving command line. For now `caldrix run`, one generation.

mod pool;
mod run;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "caldrix",
    version,
    about = "Local GGUF models: generation under JSON-schema and OneOf constraints"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// One generation from the command line.
    Run(run::RunArgs),
    /// The model-serving daemon (`caldrix pool --help`), `pool stop`, `pool status`.
    #[command(disable_help_flag = true)]
    Pool {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("CALDRIX_LOG").unwrap_or_else(
            |_| tracing_subscriber::EnvFilter::new("warn,caldrix_hub=info,llama-cpp-2=error"),
        ))
        .with_writer(std::io::stderr)
        // Colour for a person at a terminal; a log file or a pipe gets plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run::run(&args),
        Command::Pool { args } => pool::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // A closed stdout (`caldrix run ... | head`) is not a failure.
            if err
                .downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
            {
                return ExitCode::SUCCESS;
            }
            eprintln!("caldrix: {err:#}");
            ExitCode::FAILURE
        }
    }
}
