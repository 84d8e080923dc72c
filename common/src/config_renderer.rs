//! Templating of workloads with config items: the Handlebars rendering of
//! `agent`, `runtimeConfig` and `files[].data/binaryData` from the items a
//! workload's `configs` aliases name. Strict mode (a missing key is an
//! error naming it), no HTML escaping, and the `indent` partial that keeps
//! the indentation of the line it stands on for multi-line values.

use std::collections::BTreeMap;

use handlebars::Handlebars;
use serde_json::Value;

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
        let render = |field: &str, text: &str| -> Result<String, RenderError> {
            if !text.contains("{{") {
                return Ok(text.to_owned());
            }
            self.engine.render_template(text, &data).map_err(|e| RenderError::Template {
                workload: name.to_string(),
                field: field.to_owned(),
                message: describe(&e),
            })
        };
        let mut out = wl.clone();
        out.agent = render("agent", &wl.agent)?;
        AgentName::new(out.agent.as_str())
            .map_err(|e| RenderError::AgentName { workload: name.to_string(), message: e.to_string() })?;
        out.runtime_config = render("runtimeConfig", &wl.runtime_config)?;
        for (i, file) in out.files.iter_mut().enumerate() {
            file.content = match &file.content {
                FileContent::Data(d) => FileContent::Data(render(&format!("files[{i}].data"), d)?),
                FileContent::BinaryData(d) => FileContent::BinaryData(render(&format!("files[{i}].binaryData"), d)?),
            };
        }
        Ok(out)
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
