//! The two FIFOs of a workload's control interface on the host:
//! `<run folder>/<agent>_io/<workload>.<id>/control_interface/{input,output}`
//! (`output`: the workload writes, the agent reads; `input`: the other
//! way). Creating them is idempotent, so pipes survive for a workload that
//! reconnects and for an agent that restarts.

use std::io;
use std::path::{Path, PathBuf};

use ank_common::WorkloadInstanceName;
use nix::sys::stat::Mode;

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
    std::fs::create_dir_all(folder)?;
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
}
