//! `ank get state [MASK...] [-o yaml|json] [--extensions]`: the (filtered)
//! complete state, printed as Ankaios' `ank` prints it.

use crate::cli::{GetStateArgs, OutputFormat};
use crate::cmd::{Ctx, fetch_state};
use crate::render::shape::{self, ShapeOptions};
use crate::render::{self, yaml};

/// The text `ank get state` prints for `tree`: YAML as serde_yaml writes
/// it, or pretty JSON, followed by one more line break (Ankaios prints the
/// document with `println!`, so YAML ends in an empty line).
pub fn state_text(tree: &serde_json::Value, opts: &ShapeOptions, format: OutputFormat) -> String {
    let node = shape::complete_state(tree, opts);
    let text = match format {
        OutputFormat::Yaml => yaml::to_string(&node),
        OutputFormat::Json => render::json_pretty(&node),
    };
    format!("{text}\n")
}

/// Prints the complete state selected by the masks.
pub async fn run(ctx: &mut Ctx<'_>, args: GetStateArgs) -> anyhow::Result<()> {
    let opts = ShapeOptions { masks: args.masks.clone(), extensions: args.extensions };
    let tree = fetch_state(ctx, args.masks).await?.to_tree()?;
    ctx.print(&state_text(&tree, &opts, args.output_format))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_state_text_ends_like_ankaios_println() {
        let tree = serde_json::json!({"desiredState": {"apiVersion": "v1", "workloads": {}, "configs": {}}});
        let opts = ShapeOptions::default();
        assert_eq!(
            state_text(&tree, &opts, OutputFormat::Yaml),
            "desiredState:\n  apiVersion: v1\n  workloads: {}\n\n"
        );
        assert_eq!(
            state_text(&tree, &opts, OutputFormat::Json),
            "{\n  \"desiredState\": {\n    \"apiVersion\": \"v1\",\n    \"workloads\": {}\n  }\n}\n"
        );
        assert_eq!(state_text(&serde_json::json!({}), &opts, OutputFormat::Yaml), "{}\n\n");
    }
}
