//! `leasehold completions SHELL` and `leasehold man`: generated from the clap definitions, so
//! they never drift from the commands.

use std::io::Write;
use std::process::ExitCode;

use clap::CommandFactory;

use crate::Cli;

/// Prints the completion script for `shell`.
pub fn completions(shell: clap_complete::Shell) -> ExitCode {
    let mut cmd = Cli::command();
    clap_complete::generate(shell, &mut cmd, "leasehold", &mut std::io::stdout());
    ExitCode::SUCCESS
}

/// Prints the man page (roff): synopsis, options and the list of subcommands.
pub fn man() -> ExitCode {
    let mut out = Vec::new();
    if clap_mangen::Man::new(Cli::command()).render(&mut out).is_err()
        || std::io::stdout().write_all(&out).is_err()
    {
        return ExitCode::from(crate::code::SOFTWARE);
    }
    ExitCode::SUCCESS
}
