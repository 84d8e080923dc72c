//! Reads a Markdown document into the examples the doc test runs: fenced
//! blocks with the `<!-- doctest: ... -->` directives written just before
//! them, split into commands and the output the document shows for each.

/// What a `<!-- doctest: KIND REST -->` comment asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Directive {
    /// `file NAME`: the next block is written to NAME in the work folder.
    File(String),
    /// `skip REASON`: the next block is not run (a reason is required).
    Skip(String),
    /// `output`: the next block is what the previous block's last command prints.
    Output,
    /// `run COMMAND`: a hidden command run before the next block (set-up).
    Run(String),
    /// `env K=V`: set for the commands of the next block.
    Env(String, String),
    /// `server ARGS`: extra `ank-server` arguments for this document's cluster.
    Server(Vec<String>),
    /// `agent NAME ARGS`: one more agent for this document's cluster.
    Agent(String, Vec<String>),
}

/// One fenced block of a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// 1-based line of the opening fence.
    pub line: usize,
    /// The fence's info string (`sh`, `console`, `yaml`, ...).
    pub lang: String,
    pub body: Vec<String>,
    /// Directives written before this block, in order.
    pub directives: Vec<Directive>,
}

/// One command of an example and, where the document shows it, its output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub command: String,
    pub expected: Option<Vec<String>>,
}

/// A document's directive comment that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectiveError {
    pub line: usize,
    pub message: String,
}

/// Splits a document into fenced blocks and their directives.
pub fn blocks(text: &str) -> Result<Vec<Block>, DirectiveError> {
    let mut out = Vec::new();
    let mut pending = Vec::new();
    // The open block and its fence's indentation (a block in a list item).
    let mut open: Option<(Block, usize)> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if let Some((block, indent)) = open.as_mut() {
            if raw.trim() == "```" {
                out.push(open.take().expect("an open block").0);
            } else {
                let cut = (raw.len() - raw.trim_start().len()).min(*indent);
                block.body.push(raw[cut..].to_owned());
            }
            continue;
        }
        let indent = raw.len() - raw.trim_start().len();
        if let Some(lang) = raw.trim_start().strip_prefix("```") {
            let block = Block {
                line,
                lang: lang.trim().to_owned(),
                body: Vec::new(),
                directives: std::mem::take(&mut pending),
            };
            open = Some((block, indent));
        } else if let Some(rest) = raw.trim().strip_prefix("<!-- doctest:") {
            let inner = rest.strip_suffix("-->").ok_or_else(|| DirectiveError {
                line,
                message: "a doctest directive must end with '-->' on the same line".into(),
            })?;
            pending.push(directive(inner.trim()).map_err(|message| DirectiveError { line, message })?);
        }
    }
    if let Some((block, _)) = open {
        return Err(DirectiveError { line: block.line, message: "fenced block is never closed".into() });
    }
    if !pending.is_empty() {
        return Err(DirectiveError {
            line: text.lines().count(),
            message: "doctest directive with no block after it".into(),
        });
    }
    Ok(out)
}

fn directive(text: &str) -> Result<Directive, String> {
    let (kind, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
    let rest = rest.trim();
    let words = || rest.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    let need =
        |what: &str| if rest.is_empty() { Err(format!("doctest directive '{kind}' needs {what}")) } else { Ok(()) };
    match kind {
        "file" => need("a file name").map(|()| Directive::File(rest.to_owned())),
        "skip" => need("a reason").map(|()| Directive::Skip(rest.to_owned())),
        "output" => Ok(Directive::Output),
        "run" => need("a command").map(|()| Directive::Run(rest.to_owned())),
        "env" => {
            let (k, v) = rest.split_once('=').ok_or_else(|| format!("doctest env needs K=V, got '{rest}'"))?;
            Ok(Directive::Env(k.to_owned(), v.to_owned()))
        }
        "server" => need("arguments").map(|()| Directive::Server(words())),
        "agent" => {
            need("an agent name")?;
            let mut w = words();
            let name = w.remove(0);
            Ok(Directive::Agent(name, w))
        }
        other => Err(format!("unknown doctest directive '{other}' (file, skip, output, run, env, server, agent)")),
    }
}

/// Joins lines ending in a backslash with the next one.
fn logical_lines(body: &[String]) -> Vec<(bool, String)> {
    let mut out: Vec<(bool, String)> = Vec::new();
    let mut continuing = false;
    for raw in body {
        if continuing {
            let last = out.last_mut().expect("a line to continue");
            last.1.push(' ');
            last.1.push_str(raw.trim());
        } else {
            out.push((false, raw.clone()));
        }
        let last = out.last_mut().expect("a line");
        continuing = last.1.ends_with('\\');
        if continuing {
            last.1.pop();
            last.1 = last.1.trim_end().to_owned();
            last.0 = true;
        }
    }
    out
}

/// Drops a trailing `   # comment` (two or more spaces before the `#`).
fn strip_comment(line: &str) -> &str {
    line.find("  #").map_or(line, |i| &line[..i]).trim()
}

/// Whether a shell command line runs the `ank` CLI or the fleet's
/// `ank-fleet` (docs/fleet.md's quick start).
pub fn runs_ank(command: &str) -> bool {
    matches!(command.split_whitespace().next(), Some("ank" | "ank-fleet"))
}

/// The commands of a block and the output it shows for them. `console`
/// blocks, and `text` blocks that open with `$ `, are transcripts: `$ `
/// lines are commands and the lines up to the next one their output. In
/// `sh`/`shell` blocks every non-comment line is a command and no output
/// is shown.
pub fn steps(block: &Block) -> Vec<Step> {
    let transcript = block.lang == "console"
        || (block.lang == "text"
            && block.body.iter().find(|l| !l.trim().is_empty()).is_some_and(|l| l.starts_with("$ ")));
    let mut out: Vec<Step> = Vec::new();
    if transcript {
        let mut in_command = false;
        for raw in &block.body {
            if let Some(cmd) = raw.strip_prefix("$ ").or(if in_command { Some(raw.as_str()) } else { None }) {
                if in_command {
                    let last = out.last_mut().expect("a command to continue");
                    last.command.push(' ');
                    last.command.push_str(cmd.trim());
                } else {
                    out.push(Step { command: cmd.trim().to_owned(), expected: Some(Vec::new()) });
                }
                let last = out.last_mut().expect("a command");
                in_command = last.command.ends_with('\\');
                if in_command {
                    last.command.pop();
                    last.command = last.command.trim_end().to_owned();
                }
            } else if let Some(last) = out.last_mut() {
                last.expected.get_or_insert_with(Vec::new).push(raw.clone());
            } else {
                // Output before any command: a continuation of an earlier block's
                // command (a transcript split by prose); kept as a step with none.
                out.push(Step { command: String::new(), expected: Some(vec![raw.clone()]) });
            }
        }
        // Output lines before the first command belong to no command: merge them.
        if out.first().is_some_and(|s| s.command.is_empty()) {
            let mut lead = Vec::new();
            while out.first().is_some_and(|s| s.command.is_empty()) {
                lead.extend(out.remove(0).expected.unwrap_or_default());
            }
            out.insert(0, Step { command: String::new(), expected: Some(lead) });
        }
        return out;
    }
    if block.lang == "sh" || block.lang == "shell" {
        for (_, line) in logical_lines(&block.body) {
            let cmd = strip_comment(&line);
            if cmd.is_empty() || cmd.starts_with('#') {
                continue;
            }
            out.push(Step { command: cmd.to_owned(), expected: None });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directives_attach_to_the_next_block() {
        let doc = "text\n<!-- doctest: file a.yaml -->\n```yaml\nx: 1\n```\n<!-- doctest: skip not here -->\n```sh\nank get workloads\n```\n";
        let b = blocks(doc).unwrap();
        assert_eq!(b.len(), 2);
        assert_eq!(b[0].directives, vec![Directive::File("a.yaml".into())]);
        assert_eq!(b[0].body, vec!["x: 1"]);
        assert_eq!(b[1].directives, vec![Directive::Skip("not here".into())]);
        assert_eq!(b[1].line, 7);
    }

    #[test]
    fn a_block_in_a_list_item_loses_its_indentation() {
        let doc = "1. Do:\n\n   <!-- doctest: skip not here -->\n   ```sh\n   ank get workloads\n     --more\n   ```\n";
        let b = blocks(doc).unwrap();
        assert_eq!(b[0].body, vec!["ank get workloads", "  --more"]);
        assert_eq!(b[0].directives, vec![Directive::Skip("not here".into())]);
    }

    #[test]
    fn bad_directives_are_named() {
        assert!(blocks("<!-- doctest: skip -->\n```sh\n```\n").unwrap_err().message.contains("needs a reason"));
        assert!(
            blocks("<!-- doctest: frobnicate -->\n```sh\n```\n")
                .unwrap_err()
                .message
                .contains("unknown doctest directive")
        );
        assert!(blocks("<!-- doctest: output\n```sh\n```\n").unwrap_err().message.contains("-->"));
        assert!(blocks("```sh\nank\n").unwrap_err().message.contains("never closed"));
    }

    #[test]
    fn sh_blocks_give_commands_without_comments_and_with_continuations() {
        let b = Block {
            line: 1,
            lang: "sh".into(),
            body: vec![
                "# a comment".into(),
                "ank get workloads   # all of them".into(),
                "ank run workload x \\".into(),
                "    --agent a".into(),
                "".into(),
            ],
            directives: vec![],
        };
        let s = steps(&b);
        assert_eq!(
            s.iter().map(|s| s.command.as_str()).collect::<Vec<_>>(),
            vec!["ank get workloads", "ank run workload x --agent a"]
        );
        assert!(s.iter().all(|s| s.expected.is_none()));
    }

    #[test]
    fn console_blocks_pair_commands_with_their_output() {
        let b = Block {
            line: 1,
            lang: "console".into(),
            body: vec![
                "left over".into(),
                "$ ank get jobs".into(),
                "ID  PHASE".into(),
                "".into(),
                "$ echo $?".into(),
                "1".into(),
            ],
            directives: vec![],
        };
        let s = steps(&b);
        assert_eq!(s[0], Step { command: String::new(), expected: Some(vec!["left over".into()]) });
        assert_eq!(s[1], Step { command: "ank get jobs".into(), expected: Some(vec!["ID  PHASE".into(), "".into()]) });
        assert_eq!(s[2], Step { command: "echo $?".into(), expected: Some(vec!["1".into()]) });
    }

    #[test]
    fn text_blocks_are_transcripts_only_when_they_open_with_a_prompt() {
        let usage =
            Block { line: 1, lang: "text".into(), body: vec!["ank [OPTIONS] <COMMAND>".into()], directives: vec![] };
        assert!(steps(&usage).is_empty());
        let shown = Block {
            line: 1,
            lang: "text".into(),
            body: vec!["$ ank get agents -o yaml".into(), "agents:".into()],
            directives: vec![],
        };
        assert_eq!(steps(&shown).len(), 1);
        assert!(runs_ank(&steps(&shown)[0].command));
    }

    #[test]
    fn ank_and_ank_fleet_commands_are_run_other_tools_alone_are_not() {
        assert!(runs_ank("ank get workloads"));
        assert!(runs_ank("ank-fleet --ca ca.pem status"));
        assert!(!runs_ank("ank-certs --out certs --server"));
        assert!(!runs_ank("mosquitto -c broker.conf"));
    }
}
