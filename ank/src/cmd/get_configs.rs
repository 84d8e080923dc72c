//! `ank get configs`: the names of the configs in the desired state, in
//! Ankaios' one-column table (or the names as YAML/JSON with `-o`).

use crate::cli::OutputFormat;
use crate::cmd::{Ctx, fetch_state};
use crate::output;
use crate::table::{self, Fit, terminal_width};

/// The CONFIG table as Ankaios prints it.
pub fn config_table(names: &[String], max_width: Option<usize>) -> String {
    let rows: Vec<[String; 1]> = names.iter().map(|n| [n.clone()]).collect();
    table::render(["CONFIG"], &rows, Fit::Cut, max_width)
}

/// Prints the config table (or the names with `-o`).
pub async fn run(ctx: &mut Ctx<'_>, format: Option<OutputFormat>) -> anyhow::Result<()> {
    let names = fetch_state(ctx, vec!["desiredState.configs".to_owned()]).await?.config_names();
    if let Some(f) = format {
        return ctx.print(&output::records(&serde_json::json!(names), f)?);
    }
    ctx.print(&config_table(&names, terminal_width()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::StateView;

    #[test]
    fn get_configs_lists_names_sorted() {
        let tree = serde_json::json!({"desiredState": {"apiVersion": "v1", "configs": {"b": "1", "a": {"x": "y"}}}});
        assert_eq!(StateView::from_tree(&tree).unwrap().config_names(), vec!["a", "b"]);
        let none = serde_json::json!({"desiredState": {"apiVersion": "v1"}});
        assert!(StateView::from_tree(&none).unwrap().config_names().is_empty());
    }

    #[test]
    fn get_configs_table_pads_names_like_ankaios() {
        let names = vec!["config_1".to_owned(), "c".to_owned()];
        assert_eq!(config_table(&names, None), "CONFIG  \nconfig_1\nc       \n");
        assert_eq!(config_table(&[], None), "CONFIG\n");
    }
}
