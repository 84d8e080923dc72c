//! `docs/cli-reference.md` from the clap models: every command and
//! subcommand of `ank`, `ank-server` and `ank-agent` with its usage, its
//! description and a table of its arguments (help, environment variable,
//! default, possible values). The text depends only on the clap models, so
//! a test can regenerate it and compare it with the committed file.

use std::fmt::Write as _;

use clap::{Arg, ArgAction, Command, CommandFactory};

/// The command that rewrites the committed reference.
pub const REGENERATE: &str = "cargo run -p ank-docgen -- --markdown docs/cli-reference.md";

/// The binaries in the order the reference lists them. `ank-certs` can be
/// added here as soon as its clap model is public (`ank_certs::cli::Args`).
fn binaries() -> Vec<Command> {
    vec![
        ank_cli::cli::Cli::command(),
        ank_server::cli::Args::command(),
        ank_agent::cli::Cli::command(),
        ank_certs::cli::Args::command(),
    ]
}

/// The whole reference as Markdown.
pub fn cli_reference() -> String {
    let mut roots = binaries();
    for root in &mut roots {
        // Propagates global arguments, adds help/version and sets the
        // full names (`ank get state`) used by the usage lines.
        root.build();
    }
    let mut out = String::new();
    out.push_str("# Command-line reference\n\n");
    out.push_str("<!-- Generated from the clap definitions by ank-docgen; do not edit by hand. -->\n\n");
    let _ = writeln!(
        out,
        "This file is generated from the command-line definitions of the binaries. After changing a flag, \
         run `{REGENERATE}`; a unit test of `ank-docgen` fails while this file and the definitions differ.\n"
    );
    out.push_str(
        "Every command also takes `-h, --help` (`-h` short help, `--help` the full text), and each program \
         takes `-V, --version`. Precedence of a setting: command-line flag, then environment variable, then \
         config file ([config-files.md](config-files.md)), then the default shown here. Man pages with the \
         same content: `cargo run -p ank-docgen -- DIR`.\n\n",
    );
    out.push_str("Contents:\n\n");
    for root in &roots {
        contents(&mut out, root, 0);
    }
    out.push('\n');
    for root in &roots {
        command(&mut out, root, 2, &[]);
    }
    // One newline at the end, none doubled.
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

/// The subcommands documented below `cmd`: all but the generated `help`
/// and hidden ones.
fn subcommands(cmd: &Command) -> impl Iterator<Item = &Command> {
    cmd.get_subcommands().filter(|s| s.get_name() != "help" && !s.is_hide_set())
}

fn full_name(cmd: &Command) -> String {
    cmd.get_bin_name().unwrap_or(cmd.get_name()).to_owned()
}

/// GitHub's anchor of a heading made of lowercase words, digits, `-` and
/// spaces.
fn anchor(title: &str) -> String {
    title
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

fn contents(out: &mut String, cmd: &Command, depth: usize) {
    let name = full_name(cmd);
    let _ = writeln!(out, "{}- [`{name}`](#{})", "  ".repeat(depth), anchor(&name));
    for sub in subcommands(cmd) {
        contents(out, sub, depth + 1);
    }
}

/// One section per command, its subcommands one heading level deeper
/// (at most `####`). `globals` are the global arguments of the parents,
/// described there.
fn command(out: &mut String, cmd: &Command, level: usize, globals: &[String]) {
    let name = full_name(cmd);
    let _ = writeln!(out, "{} {name}\n", "#".repeat(level.min(4)));
    if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
        let _ = writeln!(out, "{}\n", about.to_string().trim());
    }
    let aliases: Vec<&str> = cmd.get_visible_aliases().collect();
    if !aliases.is_empty() {
        let names: Vec<String> = aliases.iter().map(|a| format!("`{a}`")).collect();
        let _ = writeln!(out, "Also: {}.\n", names.join(", "));
    }
    let usage = cmd.clone().render_usage().to_string();
    let usage = usage.trim().strip_prefix("Usage: ").unwrap_or(usage.trim());
    let _ = writeln!(out, "```text\n{usage}\n```\n");

    let args: Vec<&Arg> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !is_help_or_version(a))
        .filter(|a| !globals.contains(&a.get_id().to_string()))
        .collect();
    if !args.is_empty() {
        out.push_str("| argument | description | environment | default | values |\n");
        out.push_str("|---|---|---|---|---|\n");
        for arg in &args {
            argument_row(out, arg);
        }
        out.push('\n');
    }
    if !globals.is_empty() {
        let root = name.split(' ').next().unwrap_or(&name);
        let _ = writeln!(out, "The global options of [`{root}`](#{}) apply too.\n", anchor(root));
    }
    let subs: Vec<&Command> = subcommands(cmd).collect();
    if !subs.is_empty() {
        out.push_str("| subcommand | description |\n|---|---|\n");
        for sub in &subs {
            let sub_name = full_name(sub);
            let about = sub.get_about().map(|a| cell(&a.to_string())).unwrap_or_default();
            let _ = writeln!(out, "| [`{}`](#{}) | {about} |", sub.get_name(), anchor(&sub_name));
        }
        out.push('\n');
    }
    let mut inherited = globals.to_vec();
    inherited.extend(cmd.get_arguments().filter(|a| a.is_global_set()).map(|a| a.get_id().to_string()));
    for sub in subs {
        command(out, sub, level + 1, &inherited);
    }
}

fn is_help_or_version(arg: &Arg) -> bool {
    matches!(arg.get_action(), ArgAction::Help | ArgAction::HelpShort | ArgAction::HelpLong | ArgAction::Version)
}

fn argument_row(out: &mut String, arg: &Arg) {
    let mut description = arg.get_long_help().or(arg.get_help()).map(|h| h.to_string()).unwrap_or_default();
    if arg.is_required_set() {
        description = format!("Required. {description}");
    }
    if arg.is_global_set() {
        description.push_str(" (global: also after a subcommand)");
    }
    let env = match arg.get_env() {
        Some(env) if !arg.is_hide_env_set() => format!("`{}`", env.to_string_lossy()),
        _ => String::new(),
    };
    let takes_values = arg.get_action().takes_values();
    let default = if takes_values && !arg.is_hide_default_value_set() {
        let values: Vec<String> =
            arg.get_default_values().iter().map(|v| format!("`{}`", v.to_string_lossy())).collect();
        values.join(", ")
    } else {
        String::new()
    };
    let values = if takes_values && !arg.is_hide_possible_values_set() {
        let values: Vec<String> = arg
            .get_possible_values()
            .iter()
            .filter(|v| !v.is_hide_set())
            .map(|v| match v.get_help() {
                Some(help) => format!("`{}`: {}", v.get_name(), help),
                None => format!("`{}`", v.get_name()),
            })
            .collect();
        values.join(", ")
    } else {
        String::new()
    };
    let _ = writeln!(out, "| {} | {} | {env} | {default} | {} |", syntax(arg), cell(&description), cell(&values));
}

/// How the argument is written: `-s, --server-url <SERVER_URL>`,
/// `<NAME>...`, with visible aliases.
fn syntax(arg: &Arg) -> String {
    let value = value_syntax(arg);
    if arg.is_positional() {
        return format!("`{value}`");
    }
    let mut names: Vec<String> = Vec::new();
    if let Some(shorts) = arg.get_short_and_visible_aliases() {
        names.extend(shorts.iter().map(|c| format!("-{c}")));
    }
    if let Some(longs) = arg.get_long_and_visible_aliases() {
        names.extend(longs.iter().map(|l| format!("--{l}")));
    }
    let names = names.join(", ");
    if arg.get_action().takes_values() { format!("`{names} {value}`") } else { format!("`{names}`") }
}

fn value_syntax(arg: &Arg) -> String {
    let names: Vec<String> = match arg.get_value_names() {
        Some(names) => names.iter().map(|n| format!("<{n}>")).collect(),
        None => vec![format!("<{}>", arg.get_id().as_str().to_uppercase())],
    };
    let mut value = names.join(" ");
    // A repeatable option says so in its help; a positional that takes
    // several values gets `...` as in the usage line.
    let repeats = arg.get_num_args().is_some_and(|n| n.max_values() > names.len())
        || (arg.is_positional() && matches!(arg.get_action(), ArgAction::Append));
    if repeats {
        value.push_str("...");
    }
    value
}

/// Text for one table cell: one line, `|` escaped, HTML-like `<x>` kept
/// visible.
fn cell(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ").replace('|', "\\|").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn committed_path() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/cli-reference.md")
    }

    #[test]
    fn committed_cli_reference_matches_the_clap_definitions() {
        let generated = cli_reference();
        let committed = std::fs::read_to_string(committed_path()).unwrap_or_default();
        if generated == committed {
            return;
        }
        let first_difference = generated
            .lines()
            .zip(committed.lines())
            .position(|(g, c)| g != c)
            .unwrap_or_else(|| generated.lines().count().min(committed.lines().count()));
        let line = |text: &str| text.lines().nth(first_difference).unwrap_or("<end of file>").to_owned();
        panic!(
            "docs/cli-reference.md differs from the clap definitions (first at line {}):\n  committed: {}\n  generated: {}\n\
             Regenerate it with: {REGENERATE}",
            first_difference + 1,
            line(&committed),
            line(&generated)
        );
    }

    #[test]
    fn cli_reference_covers_every_command_and_argument() {
        let text = cli_reference();
        for heading in ["## ank\n", "### ank get\n", "#### ank get state\n", "## ank-server\n", "## ank-agent\n"] {
            assert!(text.contains(heading), "{heading:?} missing");
        }
        // Every argument of every command, by its long name or value name.
        fn walk(cmd: &Command, text: &str) {
            for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
                let shown = match (arg.get_long(), arg.get_short()) {
                    (Some(long), _) => format!("--{long}"),
                    (None, Some(short)) => format!("`-{short}`"),
                    (None, None) => value_syntax(arg),
                };
                assert!(text.contains(&shown), "{shown} of {} missing", full_name(cmd));
            }
            for sub in subcommands(cmd) {
                assert!(text.contains(&format!("# {}\n", full_name(sub))), "{} missing", full_name(sub));
                walk(sub, text);
            }
        }
        for mut root in binaries() {
            root.build();
            walk(&root, &text);
        }
        assert!(text.contains("`ANKAGENT_HEARTBEAT_INTERVAL_MS` | `1000`"), "env and default of an agent flag");
        assert!(text.contains("`yaml`, `json`"), "possible values");
        assert!(text.contains("127.0.0.1:25551"), "server address default");
        assert!(!text.contains("## ank help"), "the generated help subcommand is left out");
    }

    #[test]
    fn cells_stay_on_one_line_and_escape_pipes() {
        assert_eq!(cell("a |\n b <X>"), "a \\| b &lt;X&gt;");
        assert_eq!(anchor("ank get state"), "ank-get-state");
        assert_eq!(anchor("ank-server"), "ank-server");
    }
}
