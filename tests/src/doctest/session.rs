//! Runs one document's examples in order against a sample cluster of the
//! built binaries (`ank-server` + `ank-agent` `agent_A`, plain HTTP/2 on a
//! free port, real podman), started when the document's first example needs
//! it. Commands run in `bash` in a work folder holding the document's `file`
//! blocks, with `ank` from the build on PATH and `ANK_INSECURE` /
//! `ANK_SERVER_URL` set, as the user guide's set-up does.

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::expect;
use super::parse::{self, Block, Directive, Step};
use crate::binaries::{Cluster, ClusterOptions, bin, bin_dir, remove_containers_of};

/// The longest any one command may take.
const COMMAND_LIMIT: Duration = Duration::from_secs(180);
/// How long a command that follows (`-w`, `logs -f`, `get events`) runs.
const STREAM_RUN: Duration = Duration::from_secs(3);
/// How long a reading command is retried until it prints what is shown.
const SETTLE_LIMIT: Duration = Duration::from_secs(30);

/// What running one document gave.
#[derive(Debug, Default)]
pub struct Outcome {
    pub commands: usize,
    pub outputs_checked: usize,
    /// `file:line` and reason of every example not run.
    pub skipped: Vec<(String, String)>,
    pub failures: Vec<String>,
}

struct Printed {
    code: Option<i32>,
    lines: Vec<String>,
    still_running: bool,
}

/// One more agent of a document's cluster, killed and cleaned up on drop.
struct ExtraAgent {
    name: String,
    child: Child,
    _run_folder: tempfile::TempDir,
}

impl Drop for ExtraAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        remove_containers_of(&self.name);
    }
}

struct Env {
    work: PathBuf,
    cluster: Cluster,
    _agents: Vec<ExtraAgent>,
    last_code: i32,
    last_output: Vec<String>,
}

/// Runs the examples of the document at `path`.
pub fn run_document(path: &Path) -> Outcome {
    let mut out = Outcome::default();
    let name = path.display().to_string();
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            out.failures.push(format!("{name}: cannot read: {e}"));
            return out;
        }
    };
    let blocks = match parse::blocks(&text) {
        Ok(b) => b,
        Err(e) => {
            out.failures.push(format!("{name}:{}: {}", e.line, e.message));
            return out;
        }
    };
    let work = tempfile::tempdir().expect("doc test work folder");
    let mut env: Option<Env> = None;
    for (i, block) in blocks.iter().enumerate() {
        let at = format!("{name}:{}", block.line);
        for d in &block.directives {
            if let Directive::File(file) = d {
                let mut body = block.body.join("\n");
                body.push('\n');
                std::fs::write(work.path().join(file), body).expect("write a document's file");
            }
        }
        if block.directives.contains(&Directive::Output) {
            continue;
        }
        let mut steps = parse::steps(block);
        let runs_ank = steps.iter().any(|s| parse::runs_ank(&s.command));
        let has_run = block.directives.iter().any(|d| matches!(d, Directive::Run(_)));
        if !runs_ank {
            if has_run {
                out.failures.push(format!("{at}: a 'run' directive before a block that runs no ank command"));
            }
            continue;
        }
        if let Some(reason) =
            block.directives.iter().find_map(|d| if let Directive::Skip(r) = d { Some(r) } else { None })
        {
            out.skipped.push((at, reason.clone()));
            continue;
        }
        if let Some(next) = blocks.get(i + 1).filter(|b| b.directives.contains(&Directive::Output))
            && let Some(last) = steps.last_mut()
        {
            last.expected = Some(next.body.clone());
        }
        let env = match env.as_mut() {
            Some(e) => e,
            None => env.insert(start(&blocks, work.path())),
        };
        let vars: Vec<(String, String)> = block
            .directives
            .iter()
            .filter_map(|d| if let Directive::Env(k, v) = d { Some((k.clone(), v.clone())) } else { None })
            .collect();
        for d in &block.directives {
            if let Directive::Run(cmd) = d {
                let p = env.run(cmd, &vars, false);
                if p.code != Some(0) {
                    out.failures.push(format!("{at}: set-up '{cmd}' failed ({:?}):\n{}", p.code, p.lines.join("\n")));
                }
            }
        }
        for step in &steps {
            if let Err(e) = env.step(step, &vars, &mut out) {
                out.failures.push(format!("{at}: {e}"));
                break;
            }
        }
    }
    out
}

fn start(blocks: &[Block], work: &Path) -> Env {
    let server_args: Vec<String> = blocks
        .iter()
        .flat_map(|b| &b.directives)
        .filter_map(|d| if let Directive::Server(a) = d { Some(a.clone()) } else { None })
        .flatten()
        .collect();
    let server_refs: Vec<&str> = server_args.iter().map(String::as_str).collect();
    // `agent agent_A ARGS`: more arguments for the cluster's own agent.
    let agent_args: Vec<String> = blocks
        .iter()
        .flat_map(|b| &b.directives)
        .filter_map(|d| match d {
            Directive::Agent(name, a) if name == "agent_A" => Some(a.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    let agent_refs: Vec<&str> = agent_args.iter().map(String::as_str).collect();
    let options = ClusterOptions { server_args: &server_refs, agent_args: &agent_refs, ..Default::default() };
    let cluster = Cluster::start_opts("agent_A", options);
    let mut agents = Vec::new();
    for d in blocks.iter().flat_map(|b| &b.directives) {
        if let Directive::Agent(name, args) = d
            && name != "agent_A"
        {
            let run_folder = tempfile::tempdir().expect("agent run folder");
            let child = Command::new(bin("ank-agent"))
                .args(["--insecure", "--name", name, "--server-url", &cluster.url, "--run-folder"])
                .arg(run_folder.path())
                .args(args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn ank-agent");
            agents.push(ExtraAgent { name: name.clone(), child, _run_folder: run_folder });
            cluster.wait_for_agent_named(name, Duration::from_secs(20));
        }
    }
    Env { work: work.to_owned(), cluster, _agents: agents, last_code: 0, last_output: Vec::new() }
}

/// The `ank` subcommand words of a command line (flags left out).
fn subcommand(command: &str) -> Vec<&str> {
    let mut words = command.split_whitespace();
    if words.next() != Some("ank") {
        return Vec::new();
    }
    words.filter(|w| !w.starts_with('-')).take(2).collect()
}

fn has_flag(command: &str, flags: &[&str]) -> bool {
    command.split_whitespace().any(|w| flags.contains(&w))
}

/// Commands that keep following until interrupted.
fn follows(command: &str) -> bool {
    match subcommand(command).as_slice() {
        ["get", "events", ..] => true,
        ["get", ..] => has_flag(command, &["-w", "--watch"]),
        ["logs", ..] => has_flag(command, &["-f", "--follow"]),
        _ => false,
    }
}

/// Commands that only read, so they may be asked again until the state settles.
fn reads(command: &str) -> bool {
    matches!(subcommand(command).first(), Some(&"get" | &"describe" | &"logs"))
}

impl Env {
    fn step(&mut self, step: &Step, vars: &[(String, String)], out: &mut Outcome) -> Result<(), String> {
        if step.command.is_empty() {
            // More of the previous command's output, after prose between two blocks.
            let mut shown = vec!["...".to_owned()];
            shown.extend(step.expected.clone().unwrap_or_default());
            out.outputs_checked += 1;
            return if expect::matches(&shown, &self.last_output) {
                Ok(())
            } else {
                Err(format!(
                    "the previous command's output ends differently\n{}",
                    expect::explain(&shown, &self.last_output)
                ))
            };
        }
        out.commands += 1;
        let follow = follows(&step.command);
        let start = Instant::now();
        loop {
            let printed = self.run(&step.command, vars, follow);
            let ran_ok = printed.code == Some(0) || (follow && printed.still_running);
            let good = match &step.expected {
                Some(shown) => expect::matches(shown, &printed.lines),
                None => ran_ok,
            };
            if good || !reads(&step.command) || start.elapsed() > SETTLE_LIMIT {
                self.last_code = printed.code.unwrap_or(0);
                self.last_output = printed.lines.clone();
                if good {
                    if step.expected.is_some() {
                        out.outputs_checked += 1;
                    }
                    return Ok(());
                }
                return Err(match &step.expected {
                    Some(shown) => format!(
                        "'{}' printed other than shown\n{}",
                        step.command,
                        expect::explain(shown, &printed.lines)
                    ),
                    None => {
                        format!("'{}' failed (exit {:?}):\n{}", step.command, printed.code, printed.lines.join("\n"))
                    }
                });
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Runs `command` in `bash` (stderr merged into stdout, `$?` the previous
    /// command's exit code); a following command is stopped after a while.
    fn run(&self, command: &str, vars: &[(String, String)], follow: bool) -> Printed {
        let path = format!("{}:{}", bin_dir().display(), std::env::var("PATH").unwrap_or_default());
        let script = format!("exec 2>&1; (exit {}); {command}", self.last_code);
        let mut child = Command::new("bash")
            .arg("-c")
            .arg(script)
            .current_dir(&self.work)
            .env("PATH", path)
            .env("ANK_INSECURE", "true")
            .env("ANK_SERVER_URL", &self.cluster.url)
            .envs(vars.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("spawn bash");
        let mut stdout = child.stdout.take().expect("bash stdout");
        let (sent, read) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::Read;
            let mut bytes = Vec::new();
            let _ = stdout.read_to_end(&mut bytes);
            let _ = sent.send(String::from_utf8_lossy(&bytes).into_owned());
        });
        let limit = if follow { STREAM_RUN } else { COMMAND_LIMIT };
        let start = Instant::now();
        let mut still_running = false;
        let status = loop {
            if let Some(s) = child.try_wait().expect("wait for bash") {
                break Some(s);
            }
            if start.elapsed() > limit {
                still_running = true;
                // The whole group: bash and what it started.
                let group = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("a pid"));
                let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        // A process the command left behind (a daemon) may hold the pipe open.
        let text = read.recv_timeout(Duration::from_secs(5)).unwrap_or_default();
        if std::env::var_os("ANK_DOCTEST_TRACE").is_some() {
            eprintln!("doctest: {command} -> {:?} in {:?}\n{text}", status.and_then(|s| s.code()), start.elapsed());
        }
        Printed { code: status.and_then(|s| s.code()), lines: text.lines().map(str::to_owned).collect(), still_running }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn following_and_reading_commands_are_told_apart() {
        assert!(follows("ank get workloads -w"));
        assert!(follows("ank get events -o json workloadStates"));
        assert!(follows("ank logs -f -t 10 greeter"));
        assert!(!follows("ank wait -f app.yaml --for Ready"));
        assert!(!follows("ank get workloads"));
        assert!(reads("ank -v get job 2"));
        assert!(reads("ank logs greeter"));
        assert!(!reads("ank apply greeter.yaml"));
        assert!(!reads("podman ps"));
    }
}
