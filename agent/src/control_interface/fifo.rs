//! The two FIFOs of a workload's control interface on the host:
//! `<run folder>/<agent>_io/<workload>.<id>/control_interface/{input,output}`
//! (`output`: the workload writes, the agent reads; `input`: the other
//! way). Creating them is idempotent, so pipes survive for a workload that
//! reconnects and for an agent that restarts. The folders are created
//! without access for other users, and the agent opens the FIFOs without
//! following a symbolic link: a link planted in place of a FIFO (by the
//! workload, which has the folder mounted) is refused, not followed.

use std::io;
use std::path::{Path, PathBuf};

use ank_common::WorkloadInstanceName;
use nix::sys::stat::Mode;
use tokio::net::unix::pipe;

/// The folder mounted at `/run/ankaios/control_interface`.
// [impl->swdd~agent-control-interface-pipes-path-naming~1]
pub fn control_interface_folder(io_folder: &Path, instance: &WorkloadInstanceName) -> PathBuf {
    io_folder.join(instance.folder_name()).join("control_interface")
}

/// The pipe the agent writes (the workload's `input`).
pub fn input_pipe(folder: &Path) -> PathBuf {
    folder.join("input")
}

/// The pipe the agent reads (the workload's `output`).
pub fn output_pipe(folder: &Path) -> PathBuf {
    folder.join("output")
}

/// Creates the folder and both FIFOs; existing FIFOs are kept, anything
/// else in their place is replaced.
// [impl->swdd~agent-control-interface-creates-two-pipes-per-workload~1]
pub fn create_pipes(folder: &Path) -> io::Result<()> {
    create_private_dir_all(folder)?;
    for pipe in [input_pipe(folder), output_pipe(folder)] {
        match std::fs::symlink_metadata(&pipe) {
            Ok(m) if std::os::unix::fs::FileTypeExt::is_fifo(&m.file_type()) => continue,
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&pipe)?,
            Ok(_) => std::fs::remove_file(&pipe)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        nix::unistd::mkfifo(&pipe, Mode::from_bits_truncate(0o600)).map_err(io::Error::from)?;
    }
    Ok(())
}

/// Creates `folder` and its missing parents with mode 0700 (existing ones
/// keep theirs).
pub fn create_private_dir_all(folder: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(folder)
}

/// Opens a FIFO for the agent, read-write (so that neither the open nor a
/// read waits for the workload) and without following a symbolic link.
fn open_fifo(path: &Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(nix::libc::ELOOP) {
                io::Error::new(e.kind(), format!("'{}' is a symbolic link, not a FIFO: refused", path.display()))
            } else {
                e
            }
        })
}

/// Opens both FIFOs of `folder`: the reader of `output` and the writer of
/// `input`. Anything but a FIFO (a symbolic link included) is refused.
// [impl->swdd~agent-ensures-control-interface-output-pipe-read~1]
pub fn open_pipes(folder: &Path) -> io::Result<(pipe::Receiver, pipe::Sender)> {
    let reader = pipe::Receiver::from_file(open_fifo(&output_pipe(folder))?)?;
    let writer = pipe::Sender::from_file(open_fifo(&input_pipe(folder))?)?;
    Ok((reader, writer))
}

/// Removes the workload's control-interface folder (its parent too, when
/// that is left empty).
pub fn remove_pipes(folder: &Path) {
    if let Err(e) = std::fs::remove_dir_all(folder)
        && e.kind() != io::ErrorKind::NotFound
    {
        tracing::warn!("cannot remove '{}': {e}", folder.display());
    }
    if let Some(parent) = folder.parent() {
        let _ = std::fs::remove_dir(parent);
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::FileTypeExt;

    use super::*;

    #[test]
    // [utest->swdd~agent-control-interface-pipes-path-naming~1]
    // [utest->swdd~agent-control-interface-creates-two-pipes-per-workload~1]
    fn pipes_are_created_idempotently_under_the_instance_folder() {
        let io = tempfile::tempdir().unwrap();
        let instance = WorkloadInstanceName::parse("app.abc123.agent_A").unwrap();
        let folder = control_interface_folder(io.path(), &instance);
        assert_eq!(folder, io.path().join("app.abc123/control_interface"));
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(output_pipe(&folder), "stale").unwrap();
        create_pipes(&folder).unwrap();
        for pipe in [input_pipe(&folder), output_pipe(&folder)] {
            assert!(std::fs::metadata(&pipe).unwrap().file_type().is_fifo(), "{}", pipe.display());
        }
        let inode = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(input_pipe(&folder)).unwrap());
        create_pipes(&folder).unwrap();
        let again = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(input_pipe(&folder)).unwrap());
        assert_eq!(inode, again, "an existing FIFO is kept for reconnection");
        remove_pipes(&folder);
        assert!(!folder.exists() && !folder.parent().unwrap().exists());
    }

    #[tokio::test]
    async fn a_symlink_planted_in_place_of_a_fifo_is_refused() {
        let io = tempfile::tempdir().unwrap();
        let folder = io.path().join("w.1/control_interface");
        create_pipes(&folder).unwrap();
        assert!(open_pipes(&folder).is_ok());
        // The workload (or a local user) swaps `output` for a link to
        // another FIFO, e.g. another workload's pipe.
        let elsewhere = io.path().join("elsewhere");
        nix::unistd::mkfifo(&elsewhere, Mode::from_bits_truncate(0o600)).unwrap();
        std::fs::remove_file(output_pipe(&folder)).unwrap();
        std::os::unix::fs::symlink(&elsewhere, output_pipe(&folder)).unwrap();
        let e = open_pipes(&folder).unwrap_err();
        assert!(e.to_string().contains("is a symbolic link, not a FIFO: refused"), "{e}");
        // A regular file in place of a FIFO is refused too (not a pipe).
        std::fs::remove_file(output_pipe(&folder)).unwrap();
        std::fs::write(output_pipe(&folder), "x").unwrap();
        assert!(open_pipes(&folder).is_err());
    }

    #[test]
    fn the_folders_of_the_pipes_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let io = tempfile::tempdir().unwrap();
        let folder = io.path().join("w.1/control_interface");
        create_pipes(&folder).unwrap();
        for dir in [folder.parent().unwrap(), &folder] {
            assert_eq!(std::fs::metadata(dir).unwrap().permissions().mode() & 0o777, 0o700, "{}", dir.display());
        }
        assert_eq!(std::fs::metadata(input_pipe(&folder)).unwrap().permissions().mode() & 0o777, 0o600);
    }
}
