//! Fuzzes config template rendering ([`ConfigRenderer`]), the server's
//! Handlebars step. The input, as UTF-8 text, is a template, optionally
//! followed by a NUL and a config item in YAML (the workload's alias `c`;
//! without it a small item with a string, a list and a map is used). The
//! template is the workload's `runtimeConfig` and its one file's `data`.
//!
//! Invariants: rendering returns (libFuzzer's `-timeout` and
//! `-rss_limit_mb` in tools/fuzz.sh turn a slow or memory-hungry input into
//! a failure: the guard must refuse such templates before they run); it
//! never panics (the renderer reports an engine panic as an error, which
//! is counted as a failure here too); a success stays within
//! [`MAX_RENDERED_BYTES`] per field and leaves the other fields as they
//! were; an error names the workload.

#![no_main]

use std::collections::BTreeMap;

use ank_common::complete_state::ConfigItem;
use ank_common::config_renderer::{ConfigRenderer, MAX_RENDERED_BYTES};
use ank_common::manifest::parse_manifest;
use ank_common::names::WorkloadName;
use ank_common::workload::FileContent;
use libfuzzer_sys::fuzz_target;

const BASE: &str = "apiVersion: v1
workloads:
  w:
    runtime: podman
    agent: agent_A
    configs:
      c: item
    files:
      - mountPoint: /etc/x.conf
        data: x
    runtimeConfig: x
";

const DEFAULT_ITEM: &str = "{s: text, l: [a, b, c], m: {k: v, n: [x]}}";

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (template, item) = text.split_once('\0').unwrap_or((text, DEFAULT_ITEM));
    let Ok(value) = serde_saphyr::from_str::<serde_json::Value>(item) else { return };
    let Ok(item) = serde_json::from_value::<ConfigItem>(value) else { return };
    let state = parse_manifest("fuzz.yaml", BASE).expect("the base manifest parses");
    let mut wl = state.workloads["w"].clone();
    wl.runtime_config = template.to_owned();
    wl.files[0].content = FileContent::Data(template.to_owned());
    let name = WorkloadName::new("w").expect("a valid name");
    let configs = BTreeMap::from([("item".to_owned(), item)]);

    match ConfigRenderer::new().render_workload(&name, &wl, &configs) {
        Ok(out) => {
            assert!(out.runtime_config.len() <= MAX_RENDERED_BYTES);
            let FileContent::Data(d) = &out.files[0].content else { panic!("the file kind changed") };
            assert!(d.len() <= MAX_RENDERED_BYTES);
            assert_eq!(out.agent, "agent_A");
            assert_eq!((&out.runtime, &out.configs, out.files.len()), (&wl.runtime, &wl.configs, 1));
            if !template.contains("{{") {
                assert_eq!(out.runtime_config, template, "text without a template is left as it is");
            }
        }
        Err(e) => {
            let e = e.to_string();
            assert!(e.starts_with("workload 'w': "), "{e}");
            assert!(!e.contains("panicked"), "the template engine panicked: {e}");
        }
    }
});
