//! The agent's run folder and its `<agent>_io` folder, checked before
//! anything is written there: the FIFOs, workload files (rendered configs,
//! i.e. secrets) and the health socket live there, and a folder another
//! local user controls would let them swap a FIFO or a file folder for a
//! link, or read what the agent writes.
//!
//! - A run folder in the temporary directory (the default one is) must be a
//!   directory (not a link) owned by the agent's user. If it is writable by
//!   group or others (Ankaios creates its default folder with mode 0777),
//!   the agent takes those write bits away, with a warning: it owns it.
//! - `<agent>_io` is created with mode 0700; an existing one must be a
//!   directory owned by the agent's user and writable by no one else, and
//!   is made 0700 (so the workload files below it, rendered configs, are
//!   readable by no other local user).

use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why the agent refuses to start with a run folder.
#[derive(Debug, thiserror::Error)]
pub enum RunFolderError {
    #[error(
        "run folder '{path}' is owned by uid {owner}, not by the agent's user (uid {me}): another local user may control it; remove it or choose another with --run-folder"
    )]
    NotOwned { path: PathBuf, owner: u32, me: u32 },
    #[error(
        "run folder '{0}' is not a directory (a symbolic link is refused): remove it or choose another with --run-folder"
    )]
    NotADirectory(PathBuf),
    #[error("run folder '{path}' is writable by group or others (mode {mode:04o}): make it 0700 or 0755")]
    Writable { path: PathBuf, mode: u32 },
    #[error("cannot prepare run folder '{path}': {source}")]
    Io { path: PathBuf, source: io::Error },
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> RunFolderError + '_ {
    move |source| RunFolderError::Io { path: path.to_owned(), source }
}

/// Whether `path` lies in the temporary directory, where any local user
/// may create it first.
fn in_temp_dir(path: &Path) -> bool {
    let temp = ank_common::config_file::default_run_folder();
    let temp = temp.parent().unwrap_or(Path::new("/tmp"));
    path.starts_with(temp) || path.starts_with(std::env::temp_dir())
}

/// A directory owned by `me`; returns its permission bits.
fn owned_dir(path: &Path, me: u32) -> Result<u32, RunFolderError> {
    let meta = std::fs::symlink_metadata(path).map_err(io_error(path))?;
    if !meta.is_dir() {
        return Err(RunFolderError::NotADirectory(path.to_owned()));
    }
    if meta.uid() != me {
        return Err(RunFolderError::NotOwned { path: path.to_owned(), owner: meta.uid(), me });
    }
    Ok(meta.permissions().mode() & 0o7777)
}

/// Creates (if missing) and checks the run folder and `<agent>_io` in it
/// (see the module doc); returns the `<agent>_io` folder.
pub fn prepare(run_folder: &Path, agent: &ank_common::AgentName) -> Result<PathBuf, RunFolderError> {
    prepare_as(run_folder, agent, nix::unistd::geteuid().as_raw(), in_temp_dir(run_folder))
}

fn prepare_as(
    run_folder: &Path,
    agent: &ank_common::AgentName,
    me: u32,
    check_base: bool,
) -> Result<PathBuf, RunFolderError> {
    std::fs::create_dir_all(run_folder).map_err(io_error(run_folder))?;
    if check_base {
        let mode = owned_dir(run_folder, me)?;
        if mode & 0o022 != 0 {
            let tightened = mode & !0o022;
            std::fs::set_permissions(run_folder, std::fs::Permissions::from_mode(tightened))
                .map_err(io_error(run_folder))?;
            tracing::warn!(
                "run folder '{}' was writable by group or others (mode {mode:04o}); now {tightened:04o}",
                run_folder.display()
            );
        }
    }
    let io_folder = run_folder.join(format!("{agent}_io"));
    match std::fs::DirBuilder::new().mode(0o700).create(&io_folder) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(RunFolderError::Io { path: io_folder, source: e }),
    }
    let mode = owned_dir(&io_folder, me)?;
    if mode & 0o022 != 0 {
        return Err(RunFolderError::Writable { path: io_folder, mode });
    }
    // One Ankaios or an earlier version created readable by others.
    if mode & 0o077 != 0 {
        std::fs::set_permissions(&io_folder, std::fs::Permissions::from_mode(0o700)).map_err(io_error(&io_folder))?;
    }
    Ok(io_folder)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent() -> ank_common::AgentName {
        ank_common::AgentName::new("agent_A").unwrap()
    }

    fn me() -> u32 {
        nix::unistd::geteuid().as_raw()
    }

    #[test]
    fn a_new_run_folder_gets_a_private_io_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let run = tmp.path().join("ankaios");
        let io = prepare_as(&run, &agent(), me(), true).unwrap();
        assert_eq!(io, run.join("agent_A_io"));
        assert_eq!(std::fs::metadata(&io).unwrap().permissions().mode() & 0o777, 0o700);
        assert!(in_temp_dir(&run), "tempfile's folders are in the temporary directory");
        assert!(!in_temp_dir(Path::new("/run/ankaios")));
    }

    #[test]
    fn a_run_folder_of_another_user_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let e = prepare_as(tmp.path(), &agent(), me() + 1, true).unwrap_err();
        assert!(e.to_string().contains("not by the agent's user"), "{e}");
        assert!(e.to_string().contains(&tmp.path().display().to_string()), "{e}");
    }

    #[test]
    fn a_world_writable_run_folder_of_ours_is_tightened_and_a_planted_link_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let run = tmp.path().join("ankaios");
        std::fs::create_dir(&run).unwrap();
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o777)).unwrap();
        prepare_as(&run, &agent(), me(), true).unwrap();
        assert_eq!(std::fs::metadata(&run).unwrap().permissions().mode() & 0o777, 0o755);
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&run, &link).unwrap();
        assert!(matches!(prepare_as(&link, &agent(), me(), true), Err(RunFolderError::NotADirectory(_))));
    }

    #[test]
    fn a_planted_or_open_io_folder_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let io = tmp.path().join("agent_A_io");
        std::fs::create_dir(&io).unwrap();
        std::fs::set_permissions(&io, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = prepare_as(tmp.path(), &agent(), me(), false).unwrap_err();
        assert!(e.to_string().contains("writable by group or others (mode 0777)"), "{e}");
        std::fs::set_permissions(&io, std::fs::Permissions::from_mode(0o755)).unwrap();
        prepare_as(tmp.path(), &agent(), me(), false).unwrap();
        assert_eq!(std::fs::metadata(&io).unwrap().permissions().mode() & 0o777, 0o700, "made private");
        std::fs::remove_dir(&io).unwrap();
        std::os::unix::fs::symlink(tmp.path(), &io).unwrap();
        assert!(matches!(prepare_as(tmp.path(), &agent(), me(), false), Err(RunFolderError::NotADirectory(_))));
    }
}
