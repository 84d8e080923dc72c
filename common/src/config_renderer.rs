//! Templating of workloads with config items: the Handlebars rendering of
//! `agent`, `runtimeConfig` and `files[].data/binaryData` from the items a
//! workload's `configs` aliases name. Strict mode (a missing key is an
//! error naming it), no HTML escaping, the `indent` partial that keeps
//! the indentation of the line it stands on for multi-line values, and the
//! quoting helpers `{{yaml x}}` and `{{json x}}` ([`crate::template_helpers`]).
//!
//! A template is bounded before it runs ([`crate::template_guard`]): no
//! recursive partials, limited nesting and work. It renders on a thread of
//! its own with a large stack, its output is capped at
//! [`MAX_RENDERED_BYTES`], and a panic of the engine is an error of that
//! workload: a bad template never takes the server down.

use std::collections::BTreeMap;
use std::io::Write;

use handlebars::Handlebars;
use serde_json::Value;

use crate::template_guard::{TemplateRefused, check_nesting, check_template};

use crate::complete_state::{ConfigItem, State};
use crate::names::{AgentName, WorkloadName};
use crate::workload::{FileContent, Workload};

/// Why a workload cannot be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    #[error("workload '{workload}': config alias '{alias}' refers to config item '{key}', which does not exist")]
    MissingConfig { workload: String, alias: String, key: String },
    #[error("workload '{workload}': cannot render field '{field}': {message}")]
    Template { workload: String, field: String, message: String },
    #[error("workload '{workload}': field 'agent' renders to an invalid agent name: {message}")]
    AgentName { workload: String, message: String },
}

/// Most bytes one rendered field may have.
pub const MAX_RENDERED_BYTES: usize = 8 * 1024 * 1024;
/// Stack of the thread that parses and renders (the checks keep the
/// nesting far below what it holds).
const RENDER_STACK_BYTES: usize = 64 * 1024 * 1024;

/// Renders workloads; one engine serves every render.
pub struct ConfigRenderer {
    engine: Handlebars<'static>,
}

impl Default for ConfigRenderer {
    fn default() -> Self {
        Self::new()
    }
}

impl ConfigRenderer {
    pub fn new() -> Self {
        let mut engine = Handlebars::new();
        engine.set_strict_mode(true);
        engine.register_escape_fn(handlebars::no_escape);
        // A standalone `{{> indent content=x}}` gets the indentation of its
        // line on every line of x (Handlebars' partial indentation).
        engine.register_partial("indent", "{{content}}").expect("the indent partial is a valid template");
        crate::template_helpers::register(&mut engine);
        Self { engine }
    }

    /// The state with every workload rendered; configs and everything else
    /// unchanged. A workload without config aliases is left as it is.
    pub fn render_state(&self, state: &State) -> Result<State, RenderError> {
        let mut out = state.clone();
        for (name, wl) in out.workloads.iter_mut() {
            *wl = self.render_workload(name, wl, &state.configs)?;
        }
        Ok(out)
    }

    /// Renders one workload with the config items its aliases name.
    pub fn render_workload(
        &self,
        name: &WorkloadName,
        wl: &Workload,
        configs: &BTreeMap<String, ConfigItem>,
    ) -> Result<Workload, RenderError> {
        if wl.configs.is_empty() {
            return Ok(wl.clone());
        }
        let data = alias_data(name, wl, configs)?;
        // One thread per workload: parsing and rendering recurse, and the
        // caller's stack (a runtime worker's) is small.
        let rendered = std::thread::scope(|scope| {
            std::thread::Builder::new()
                .name("template-render".into())
                .stack_size(RENDER_STACK_BYTES)
                .spawn_scoped(scope, || self.render_fields(name, wl, &data))
                .map_err(|e| template_error(name, "*", format!("cannot start the render thread: {e}")))?
                .join()
                .unwrap_or_else(|_| Err(template_error(name, "*", "the template engine failed (panicked)".into())))
        })?;
        AgentName::new(rendered.agent.as_str())
            .map_err(|e| RenderError::AgentName { workload: name.to_string(), message: e.to_string() })?;
        Ok(rendered)
    }

    fn render_fields(&self, name: &WorkloadName, wl: &Workload, data: &Value) -> Result<Workload, RenderError> {
        let render = |field: &str, text: &str| -> Result<String, RenderError> {
            if !text.contains("{{") {
                return Ok(text.to_owned());
            }
            self.render_text(text, data).map_err(|e| template_error(name, field, e.to_string()))
        };
        let mut out = wl.clone();
        out.agent = render("agent", &wl.agent)?;
        out.runtime_config = render("runtimeConfig", &wl.runtime_config)?;
        for (i, file) in out.files.iter_mut().enumerate() {
            file.content = match &file.content {
                FileContent::Data(d) => FileContent::Data(render(&format!("files[{i}].data"), d)?),
                FileContent::BinaryData(d) => FileContent::BinaryData(render(&format!("files[{i}].binaryData"), d)?),
            };
        }
        Ok(out)
    }

    /// One field: bounded, parsed, checked, rendered into a capped buffer.
    fn render_text(&self, text: &str, data: &Value) -> Result<String, FieldError> {
        check_nesting(text)?;
        let template = handlebars::Template::compile(text)
            .map_err(|e| FieldError::Engine(describe(&handlebars::RenderError::from(e))))?;
        check_template(&template, data)?;
        let mut out = CappedBuffer::default();
        match self.engine.render_template_to_write(text, data, &mut out) {
            Ok(()) => String::from_utf8(out.bytes).map_err(FieldError::Utf8),
            Err(_) if out.overflowed => Err(FieldError::TooLong),
            Err(e) => Err(FieldError::Engine(describe(&e))),
        }
    }
}

/// Why the template of one field does not render.
#[derive(Debug, thiserror::Error)]
enum FieldError {
    #[error("template refused: {0}")]
    Refused(#[from] TemplateRefused),
    /// The engine's words, with the position.
    #[error("{0}")]
    Engine(String),
    #[error("{0}")]
    Utf8(std::string::FromUtf8Error),
    #[error("the rendered text exceeds {MAX_RENDERED_BYTES} bytes")]
    TooLong,
}

fn template_error(name: &WorkloadName, field: &str, message: String) -> RenderError {
    RenderError::Template { workload: name.to_string(), field: field.to_owned(), message }
}

/// Collects rendered text and refuses to grow past [`MAX_RENDERED_BYTES`].
#[derive(Default)]
struct CappedBuffer {
    bytes: Vec<u8>,
    overflowed: bool,
}

impl Write for CappedBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.bytes.len() + buf.len() > MAX_RENDERED_BYTES {
            self.overflowed = true;
            return Err(std::io::Error::other("rendered text too large"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// alias -> the config item it names, as template data.
fn alias_data(
    name: &WorkloadName,
    wl: &Workload,
    configs: &BTreeMap<String, ConfigItem>,
) -> Result<Value, RenderError> {
    let mut data = serde_json::Map::new();
    for (alias, key) in &wl.configs {
        let item = configs.get(key).ok_or_else(|| RenderError::MissingConfig {
            workload: name.to_string(),
            alias: alias.clone(),
            key: key.clone(),
        })?;
        data.insert(alias.clone(), serde_json::to_value(item).unwrap_or(Value::Null));
    }
    Ok(Value::Object(data))
}

/// The engine's message without its template-name noise, e.g.
/// `Failed to access variable in strict mode Some("db.port")`.
fn describe(e: &handlebars::RenderError) -> String {
    let text = e.to_string();
    let text = text.replace("Error rendering \"Unnamed template\" ", "");
    // `... strict mode Some("db.port")` -> `... strict mode: 'db.port'`
    let text = match (text.find(" Some(\""), text.rfind("\")")) {
        (Some(start), Some(end)) if end > start => {
            format!("{}: '{}'{}", &text[..start], &text[start + 7..end], &text[end + 2..])
        }
        _ => text,
    };
    match (e.line_no, e.column_no) {
        (Some(l), Some(c)) if !text.contains("line") => format!("{text} (line {l}, column {c})"),
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::parse_manifest;

    fn render(yaml: &str) -> Result<State, RenderError> {
        ConfigRenderer::new().render_state(&parse_manifest("t", yaml).unwrap())
    }

    const BASE: &str = r#"apiVersion: v1
workloads:
  db:
    runtime: podman
    agent: "{{place.primary}}"
    configs:
      place: placement
      conf: postgres
      k8s: k8s_objects
    files:
      - mountPoint: /etc/db.conf
        data: "port={{conf.port}} list={{conf.list.[1]}}"
    runtimeConfig: |
      image: x
      commandOptions: ["-p", "{{conf.port}}:5432"]
      manifest: |
        {{> indent content=k8s.pod}}
  plain:
    runtime: podman
    agent: agent_B
    runtimeConfig: "keep {{this}}"
configs:
  placement:
    primary: agent_A
  postgres:
    port: "5433"
    list: [a, "<b&c>"]
  k8s_objects:
    pod: |
      kind: Pod
      spec:
        x: 1
"#;

    #[test]
    fn renders_agent_runtime_config_and_files_without_escaping() {
        let s = render(BASE).unwrap();
        let db = &s.workloads["db"];
        assert_eq!(db.agent, "agent_A");
        assert!(db.runtime_config.contains(r#"["-p", "5433:5432"]"#), "{}", db.runtime_config);
        assert_eq!(db.files[0].content, FileContent::Data("port=5433 list=<b&c>".into()));
        // Without aliases nothing is rendered.
        assert_eq!(s.workloads["plain"].runtime_config, "keep {{this}}");
    }

    #[test]
    fn indent_partial_keeps_the_line_indentation() {
        let s = render(BASE).unwrap();
        let rc = &s.workloads["db"].runtime_config;
        assert!(rc.contains("manifest: |\n  kind: Pod\n  spec:\n    x: 1\n"), "{rc:?}");
    }

    #[test]
    fn strict_mode_names_the_missing_key() {
        let e = render(&BASE.replace("{{conf.port}}:5432", "{{conf.nope}}:5432")).unwrap_err().to_string();
        assert!(
            e.contains("workload 'db'") && e.contains("runtimeConfig") && e.contains("strict mode: 'conf.nope'"),
            "{e}"
        );
    }

    #[test]
    fn missing_config_item_and_bad_rendered_agent_are_errors() {
        let e = render(&BASE.replace("conf: postgres", "conf: mysql")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "workload 'db': config alias 'conf' refers to config item 'mysql', which does not exist"
        );
        let e = render(&BASE.replace("primary: agent_A", "primary: \"a b\"")).unwrap_err().to_string();
        assert!(e.contains("invalid agent name") && e.contains("'a b'"), "{e}");
        let e = render(&BASE.replace("{{place.primary}}", "{{#if}}")).unwrap_err().to_string();
        assert!(e.contains("field 'agent'"), "{e}");
    }
}

/// The attack templates of the security review and the bounds that stop
/// them; each would crash or hang the process without the guard.
#[cfg(test)]
mod bound_tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;
    use crate::manifest::parse_manifest;

    /// A workload `w` whose runtimeConfig is `template`, with the config
    /// item `c` (YAML) under the alias `c`.
    fn render_one(template: &str, config_yaml: &str) -> Result<State, RenderError> {
        let manifest = format!(
            "apiVersion: v1\nworkloads:\n  w:\n    runtime: podman\n    agent: agent_A\n    configs:\n      c: c\n    runtimeConfig: {}\nconfigs:\n  c: {}\n",
            serde_json::to_string(template).unwrap(),
            config_yaml
        );
        ConfigRenderer::new().render_state(&parse_manifest("t", &manifest).unwrap())
    }

    /// Runs `f` on a thread and fails the test if it has not finished in a
    /// minute (a hang guard, not a timing assertion: the bounded cases
    /// finish at once).
    fn within_a_minute<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(Duration::from_secs(60)).expect("the render did not finish within a minute")
    }

    const RECURSIVE: &str = r#"{{#*inline "a"}}{{> b}}{{/inline}}{{#*inline "b"}}{{> a}}{{/inline}}{{> a}}"#;
    /// Recursion through a condition that stays true.
    const SELF: &str = r#"{{#*inline "p"}}{{#if c.x}}{{> p}}{{/if}}{{/inline}}{{> p}}"#;

    /// Runs in a child process (see below): on the unbounded engine these
    /// overflow the stack and abort the process.
    #[test]
    fn child_renders_mutually_recursive_inline_partials() {
        if std::env::var_os("ANK_TEMPLATE_CHILD").is_none() {
            return;
        }
        let e = render_one(RECURSIVE, "{x: y}").unwrap_err().to_string();
        assert!(e.contains("workload 'w'") && e.contains("runtimeConfig"), "{e}");
        assert!(e.contains("partial 'a' includes itself (a -> b -> a)"), "{e}");
        let e = render_one(SELF, "{x: y}").unwrap_err().to_string();
        assert!(e.contains("partial 'p' includes itself (p -> p)"), "{e}");
        println!("CHILD-DONE");
    }

    #[test]
    fn recursive_inline_partials_are_an_error_not_a_crash() {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "config_renderer::bound_tests::child_renders_mutually_recursive_inline_partials"])
            .args(["--nocapture", "--test-threads=1"])
            .env("ANK_TEMPLATE_CHILD", "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("CHILD-DONE"),
            "child: {:?}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// p0 is `x`, each p(n) includes p(n-1) twice: 2^40 expansions.
    fn chained(levels: usize) -> String {
        let mut t = String::from(r#"{{#*inline "p0"}}x{{/inline}}"#);
        for n in 1..=levels {
            t.push_str(&format!(r#"{{{{#*inline "p{n}"}}}}{{{{> p{m}}}}}{{{{> p{m}}}}}{{{{/inline}}}}"#, m = n - 1));
        }
        t.push_str(&format!("{{{{> p{levels}}}}}"));
        t
    }

    #[test]
    fn chained_partials_are_refused_before_taking_exponential_time() {
        let e = within_a_minute(|| render_one(&chained(40), "{x: y}")).unwrap_err().to_string();
        assert!(e.contains("too much work") && e.contains("chained partials"), "{e}");
    }

    #[test]
    fn modest_partials_loops_and_the_indent_partial_still_render() {
        let s = render_one(
            &(chained(4) + r#" {{#each c.items}}[{{this}}{{#each ../c.items}}.{{/each}}]{{/each}}"#),
            "{items: [a, b, c]}",
        )
        .unwrap();
        assert_eq!(s.workloads["w"].runtime_config, format!("{} [a...][b...][c...]", "x".repeat(16)));
        let s = render_one("k:\n  {{> indent content=c.text}}\n", "{text: \"l1\\nl2\\n\"}").unwrap();
        assert_eq!(s.workloads["w"].runtime_config, "k:\n  l1\n  l2\n");
    }

    #[test]
    fn nested_loops_over_a_large_list_are_refused() {
        let items = format!("{{items: [{}]}}", (0..1000).map(|i| format!("i{i}")).collect::<Vec<_>>().join(","));
        let t = "{{#each c.items}}{{#each ../c.items}}{{#each ../../c.items}}{{/each}}{{/each}}{{/each}}";
        let e = within_a_minute(move || render_one(t, &items)).unwrap_err().to_string();
        assert!(e.contains("too much work"), "{e}");
    }

    #[test]
    fn deep_nesting_is_refused_before_parsing() {
        let deep = |n: usize| "{{#if c.x}}".repeat(n) + &"{{/if}}".repeat(n);
        assert!(render_one(&deep(40), "{x: y}").is_ok());
        let e = render_one(&deep(100_000), "{x: y}").unwrap_err().to_string();
        assert!(e.contains("blocks are nested more than 64 deep"), "{e}");
        // A close inside a comment, an escape or a string is not a close.
        for hidden in ["{{!-- {{/if}} --}}", "{{! {{/if}} }}", "\\{{/if}}", r#"{{c.y "}}{{/if}}"}}"#] {
            let t = format!("{{{{#if c.x}}}}{hidden}").repeat(100);
            let e = render_one(&t, "{x: y}").unwrap_err().to_string();
            assert!(e.contains("blocks are nested"), "{hidden}: {e}");
        }
        let e = render_one(&format!("{{{{c.x {}}}}}", "(".repeat(100_000)), "{x: y}").unwrap_err().to_string();
        assert!(e.contains("more than 32 deep"), "{e}");
    }

    /// A config value pasted unquoted adds podman options; through the
    /// helpers it stays one value.
    #[test]
    fn yaml_and_json_helpers_keep_a_hostile_value_one_value() {
        let hostile = r#"{v: "x\", \"--privileged\", \"-v\", \"/:/host"}"#;
        let options = |rc: &str| -> Vec<String> {
            let parsed: serde_json::Value = serde_saphyr::from_str(rc).unwrap();
            serde_json::from_value(parsed["commandOptions"].clone()).unwrap()
        };
        let raw = render_one("commandOptions: [\"-e\", \"{{c.v}}\"]", hostile).unwrap();
        assert!(options(&raw.workloads["w"].runtime_config).contains(&"--privileged".to_owned()), "the risk");
        let quoted = render_one("commandOptions: [\"-e\", {{yaml c.v}}]", hostile).unwrap();
        assert_eq!(options(&quoted.workloads["w"].runtime_config), ["-e", r#"x", "--privileged", "-v", "/:/host"#]);
        let as_json = render_one(r#"{"commandOptions": ["-e", {{json c.v}}]}"#, hostile).unwrap();
        assert_eq!(options(&as_json.workloads["w"].runtime_config), ["-e", r#"x", "--privileged", "-v", "/:/host"#]);
        // Lists and maps too; a missing key is still a strict-mode error.
        let list = render_one("l: {{yaml c.l}}", "{l: [a, \"b: c\"]}").unwrap();
        assert_eq!(list.workloads["w"].runtime_config, r#"l: ["a", "b: c"]"#);
        let e = render_one("{{yaml c.nope}}", "{x: y}").unwrap_err().to_string();
        assert!(e.contains("strict mode: 'c.nope'"), "{e}");
        let e = render_one("{{json c.x c.x}}", "{x: y}").unwrap_err().to_string();
        assert!(e.contains("helper 'json' takes one value, 2 given"), "{e}");
    }

    /// The example of docs/server-and-cli.md renders as the text says.
    #[test]
    fn the_documented_example_renders_with_the_quoting_helper() {
        let doc = include_str!("../../docs/server-and-cli.md");
        let head = "## Configs and templates\n\n```yaml\n";
        let start = doc.find(head).expect("the section") + head.len();
        let yaml = &doc[start..start + doc[start..].find("```").unwrap()];
        let s = ConfigRenderer::new().render_state(&parse_manifest("doc", yaml).unwrap()).unwrap();
        let web = &s.workloads["web"];
        assert_eq!(web.agent, "agent_A");
        assert!(web.runtime_config.contains(r#"commandOptions: ["-e", "GREETING=hello"]"#), "{}", web.runtime_config);
    }

    /// An alias named `json` or `yaml` still reads as its value, as in
    /// Ankaios, where these helpers do not exist.
    #[test]
    fn an_alias_named_like_a_helper_keeps_its_value() {
        let manifest = "apiVersion: v1\nworkloads:\n  w:\n    runtime: podman\n    agent: agent_A\n    configs:\n      json: c\n      yaml: c\n    runtimeConfig: \"{{#with json}}{{yaml}}{{/with}} {{json.x}}\"\nconfigs:\n  c: {x: y, yaml: inner}\n";
        let s = ConfigRenderer::new().render_state(&parse_manifest("t", manifest).unwrap()).unwrap();
        assert_eq!(s.workloads["w"].runtime_config, "inner y");
    }

    #[test]
    fn computed_partial_names_are_refused() {
        let e = render_one("{{> (lookup c 'x')}}", "{x: indent}").unwrap_err().to_string();
        assert!(e.contains("partial names must be literal"), "{e}");
    }

    #[test]
    fn output_is_capped() {
        let big = "y".repeat(1024 * 1024);
        let e = render_one(
            "{{#each c.l}}{{../c.big}}{{/each}}",
            &format!("{{big: {big}, l: [{}]}}", "a,".repeat(20) + "a"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("exceeds 8388608 bytes"), "{e}");
    }
}
