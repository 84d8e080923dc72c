//! Quoting helpers of config templates: `{{yaml x}}` and `{{json x}}`
//! write a config value as one YAML or JSON value, quoted and escaped, so a
//! value pasted into a `runtimeConfig` or a file stays one value: a value
//! holding `"`, a newline or `--privileged` cannot add options or keys.
//!
//! Both write on one line. `yaml` gives a double-quoted YAML scalar for a
//! string (escaping every character YAML would fold, drop or misread) and
//! a flow collection for a list or a map; `json` gives JSON text.
//!
//! Written without an argument (`{{json}}`) they read the value named
//! `json` / `yaml` as Handlebars would without a helper, so a config alias
//! of that name keeps working as in Ankaios.

use std::fmt::Write as _;

use handlebars::{Context, Handlebars, Helper, HelperDef, HelperResult, Output, RenderContext, RenderError};
use serde_json::Value;

/// The helpers by name.
pub fn register(engine: &mut Handlebars<'static>) {
    engine.register_helper("yaml", Box::new(Quote(yaml)));
    engine.register_helper("json", Box::new(Quote(json)));
}

/// A value as one JSON text.
pub fn json(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// A value as one YAML flow value on one line.
pub fn yaml(v: &Value) -> String {
    let mut out = String::new();
    write_yaml(v, &mut out);
    out
}

fn write_yaml(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => quote_yaml(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_yaml(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                quote_yaml(k, out);
                out.push_str(": ");
                write_yaml(item, out);
            }
            out.push('}');
        }
        // null, true/false and numbers read back as themselves.
        other => out.push_str(&other.to_string()),
    }
}

/// A YAML double-quoted scalar: `"` and `\` escaped, and every character
/// that is not printable or that YAML treats as a line break (NEL, LS, PS)
/// or a byte-order mark written as an escape.
fn quote_yaml(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || ('\u{7f}'..='\u{9f}').contains(&c) => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[derive(Clone, Copy)]
struct Quote(fn(&Value) -> String);

impl HelperDef for Quote {
    fn call<'reg: 'rc, 'rc>(
        &self,
        h: &Helper<'rc>,
        r: &'reg Handlebars<'reg>,
        ctx: &'rc Context,
        rc: &mut RenderContext<'reg, 'rc>,
        out: &mut dyn Output,
    ) -> HelperResult {
        if h.params().len() > 1 {
            return Err(RenderError::from(handlebars::RenderErrorReason::Other(format!(
                "helper '{}' takes one value, {} given",
                h.name(),
                h.params().len()
            ))));
        }
        let text = match h.param(0) {
            Some(p) if p.is_value_missing() && r.strict_mode() => {
                return Err(RenderError::strict_error(p.relative_path()));
            }
            Some(p) => (self.0)(p.value()),
            // `{{json}}` alone: the value of that name, as without the helper.
            None => {
                let v = rc.evaluate(ctx, h.name())?;
                if v.is_missing() {
                    if r.strict_mode() {
                        return Err(RenderError::strict_error(Some(&h.name().to_owned())));
                    }
                    return Ok(());
                }
                v.render()
            }
        };
        out.write(&text)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What a YAML parser reads back from `key: <yaml(v)>`.
    fn read_back(v: &Value) -> Value {
        let doc = format!("key: {}\n", yaml(v));
        let parsed: Value = serde_saphyr::from_str(&doc).unwrap_or_else(|e| panic!("{doc}: {e}"));
        parsed["key"].clone()
    }

    #[test]
    fn yaml_strings_stay_one_value_whatever_they_hold() {
        for s in [
            "plain",
            "--privileged -v /:/host",
            "a\"b\\c",
            "x\n  privileged: true\nimage: evil",
            "\" , \"--privileged",
            "tab\tcr\rnul\u{0}bell\u{7}",
            "nel\u{85}ls\u{2028}ps\u{2029}bom\u{feff}",
            "# comment",
            "{a: 1}",
            "[x]",
            "&anchor *alias !tag",
            "yes",
            "ümlaut 字",
            "",
        ] {
            assert_eq!(read_back(&json!(s)), json!(s), "{s:?} as {}", yaml(&json!(s)));
            assert!(!yaml(&json!(s)).contains('\n'), "{s:?}");
        }
    }

    #[test]
    fn yaml_lists_maps_and_scalars_read_back() {
        let v = json!({"ports": ["80", "443"], "x\ny": {"k": "v\"w"}, "n": 5, "b": true, "z": null});
        assert_eq!(read_back(&v), v);
    }

    #[test]
    fn json_text_reads_back() {
        let v = json!(["--x", "a\"b", {"k": "\n"}]);
        assert_eq!(serde_json::from_str::<Value>(&json(&v)).unwrap(), v);
        assert_eq!(json(&json!("a\"b")), r#""a\"b""#);
    }
}
