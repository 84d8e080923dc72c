//! `ank completion SHELL`: prints the shell code that registers ank's
//! completion. The shell then calls `ank` back (with `COMPLETE=<shell>`), so
//! completions come from the clap model and, for workload and config names
//! and field masks, from the running server (see [`crate::completers`]).

use anyhow::Context;

use crate::cli::CompletionShell;
use crate::cmd::Ctx;

/// The registration code for `shell`, calling back the program `ank`.
pub fn registration(shell: CompletionShell) -> anyhow::Result<String> {
    let shells = clap_complete::env::Shells::builtins();
    let completer =
        shells.completer(shell.name()).with_context(|| format!("no completion support for {}", shell.name()))?;
    let mut buf = Vec::new();
    completer.write_registration("COMPLETE", "ank", "ank", "ank", &mut buf).context("cannot write the shell code")?;
    String::from_utf8(buf).context("the shell code is not UTF-8")
}

/// Prints the registration code.
pub fn run(ctx: &mut Ctx<'_>, shell: CompletionShell) -> anyhow::Result<()> {
    ctx.print(&registration(shell)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completion_code_registers_ank_for_each_shell() {
        let bash = registration(CompletionShell::Bash).unwrap();
        assert!(
            bash.contains("complete") && bash.contains("COMPLETE=\"bash\"") || bash.contains("COMPLETE=bash"),
            "{bash}"
        );
        let zsh = registration(CompletionShell::Zsh).unwrap();
        assert!(zsh.contains("compdef"), "{zsh}");
        let fish = registration(CompletionShell::Fish).unwrap();
        assert!(fish.contains("complete") && fish.contains("ank"), "{fish}");
    }
}
