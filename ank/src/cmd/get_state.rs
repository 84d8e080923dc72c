//! `ank get state [MASK...] [-o yaml|json]`: the (filtered) complete state.

use crate::cli::GetStateArgs;
use crate::cmd::{Ctx, fetch_state};
use crate::output;

/// Prints the complete state selected by the masks.
pub async fn run(ctx: &mut Ctx<'_>, args: GetStateArgs) -> anyhow::Result<()> {
    let tree = fetch_state(ctx, args.masks).await?;
    ctx.print(&output::state_tree(&tree, args.output_format)?)
}
