//! Man pages from the clap models of the binaries: `ank(1)` with one page
//! per subcommand (`ank-get(1)`, `ank-get-workload(1)`, ...),
//! `ank-server(8)`, `ank-agent(8)` and `ank-certs(1)`. Used by
//! `ank-docgen DIR` and by packaging (`tools/build-deb.sh`).

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::CommandFactory;

/// The same models as Markdown: `docs/cli-reference.md` (`ank-docgen --markdown FILE`).
pub mod markdown;

/// Writes every page into `dir` (created if missing); returns their paths.
pub fn write_man_pages(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create '{}'", dir.display()))?;
    let mut written = Vec::new();
    let ank = ank_cli::cli::Cli::command();
    write_tree(&ank, "ank", "1", dir, &mut written)?;
    write_page(ank_server::cli::Args::command(), "ank-server", "8", dir, &mut written)?;
    write_page(ank_agent::cli::Cli::command(), "ank-agent", "8", dir, &mut written)?;
    write_page(ank_certs::cli::Args::command(), "ank-certs", "1", dir, &mut written)?;
    Ok(written)
}

/// One page for `cmd` and one for each of its subcommands, named
/// `parent-sub`.
fn write_tree(
    cmd: &clap::Command,
    name: &str,
    section: &str,
    dir: &Path,
    out: &mut Vec<PathBuf>,
) -> anyhow::Result<()> {
    write_page(cmd.clone(), name, section, dir, out)?;
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        write_tree(sub, &format!("{name}-{}", sub.get_name()), section, dir, out)?;
    }
    Ok(())
}

fn write_page(cmd: clap::Command, name: &str, section: &str, dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let cmd = cmd.name(name.to_owned());
    let man = clap_mangen::Man::new(cmd).section(section);
    let mut buf = Vec::new();
    man.render(&mut buf).with_context(|| format!("cannot render the page of {name}"))?;
    let path = dir.join(format!("{name}.{section}"));
    std::fs::write(&path, buf).with_context(|| format!("cannot write '{}'", path.display()))?;
    out.push(path);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn man_pages_cover_the_binaries_and_ank_subcommands() {
        let dir = tempfile::tempdir().unwrap();
        let pages = write_man_pages(dir.path()).unwrap();
        let names: Vec<String> = pages.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
        for expected in [
            "ank.1",
            "ank-apply.1",
            "ank-get-workload.1",
            "ank-get-events.1",
            "ank-server.8",
            "ank-agent.8",
            "ank-certs.1",
        ] {
            assert!(names.iter().any(|n| n == expected), "{expected} missing in {names:?}");
        }
        let apply = std::fs::read_to_string(dir.path().join("ank-apply.1")).unwrap();
        assert!(apply.starts_with(".ie") || apply.contains(".TH"), "roff: {apply}");
        assert!(apply.contains("\\-\\-agent") || apply.contains("--agent"), "{apply}");
        let server = std::fs::read_to_string(dir.path().join("ank-server.8")).unwrap();
        assert!(server.contains("startup\\-manifest") || server.contains("startup-manifest"), "{server}");
        let certs = std::fs::read_to_string(dir.path().join("ank-certs.1")).unwrap();
        assert!(certs.contains("server\\-san") || certs.contains("server-san"), "{certs}");
    }
}
