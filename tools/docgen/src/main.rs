//! `ank-docgen DIR`: writes the man pages of ank, ank-server, ank-agent and ank-certs
//! into DIR.
//! `ank-docgen --markdown FILE`: writes the Markdown command-line reference
//! (docs/cli-reference.md) into FILE, or to standard output for `-`.
//! `ank-docgen --schema FILE`: writes the manifest JSON schema
//! (schema/ank_schema.json) into FILE, or to standard output for `-`.

use std::process::ExitCode;

const USAGE: &str = "usage: ank-docgen DIR | ank-docgen --markdown FILE | ank-docgen --schema FILE";

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let result = match args.as_slice() {
        [flag, file] if flag == "--markdown" => write_markdown(std::path::Path::new(file)),
        [flag, file] if flag == "--schema" => write_schema(std::path::Path::new(file)),
        [dir] if !dir.to_string_lossy().starts_with('-') => write_man_pages(std::path::Path::new(dir)),
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ank-docgen: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn write_man_pages(dir: &std::path::Path) -> anyhow::Result<()> {
    for page in ank_docgen::write_man_pages(dir)? {
        println!("{}", page.display());
    }
    Ok(())
}

fn write_markdown(file: &std::path::Path) -> anyhow::Result<()> {
    write_text(file, &ank_docgen::markdown::cli_reference())
}

fn write_schema(file: &std::path::Path) -> anyhow::Result<()> {
    write_text(file, &ank_common::manifest_schema::manifest_schema_text())
}

fn write_text(file: &std::path::Path, text: &str) -> anyhow::Result<()> {
    if file.as_os_str() == "-" {
        print!("{text}");
        return Ok(());
    }
    std::fs::write(file, text).map_err(|e| anyhow::anyhow!("cannot write '{}': {e}", file.display()))?;
    println!("{}", file.display());
    Ok(())
}
