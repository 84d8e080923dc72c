//! [`PidFiles`]: the pids of a running podman container read from the
//! files podman keeps for it, `<runroot>/<driver>-containers/<id>/userdata/`
//! `pidfile` (the main process) and `conmon.pid`, instead of a `podman
//! container inspect` per started container. An inspect costs about a third
//! of a `podman run`'s own CPU; on a node of half a core that was several
//! seconds of a cold boot with 100 workloads. The folder is learned from the
//! first inspect (its `ConmonPidFile`), so storage.conf's `runroot` and
//! driver are podman's to decide; until then, and whenever a file is
//! missing or does not read, the caller inspects.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// Where podman's per-container run folders are, once learned.
#[derive(Debug, Clone, Default)]
pub struct PidFiles {
    base: Arc<OnceLock<PathBuf>>,
}

impl PidFiles {
    /// Learns the folder from an inspect's `ConmonPidFile` of container `id`.
    pub fn learn(&self, id: &str, conmon_pid_file: &str) {
        if let Some(base) = base_of(id, Path::new(conmon_pid_file)) {
            let _ = self.base.set(base);
        }
    }

    /// `(main pid, conmon pid)` of container `id`, when both files read.
    pub fn read(&self, id: &str) -> Option<(i32, i32)> {
        let userdata = self.base.get()?.join(id).join("userdata");
        let pid = read_pid(&userdata.join("pidfile"))?;
        let conmon = read_pid(&userdata.join("conmon.pid"))?;
        Some((pid, conmon))
    }
}

/// `<base>` of `<base>/<id>/userdata/conmon.pid`.
fn base_of(id: &str, conmon_pid_file: &Path) -> Option<PathBuf> {
    let userdata = conmon_pid_file.parent()?;
    let container = userdata.parent()?;
    if userdata.file_name()? != "userdata" || container.file_name()? != id {
        return None;
    }
    container.parent().map(Path::to_path_buf)
}

fn read_pid(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok().filter(|p| *p > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_folder_is_learned_from_the_conmon_pid_file_of_its_container_only() {
        let p = Path::new("/run/containers/storage/overlay-containers/abc/userdata/conmon.pid");
        assert_eq!(base_of("abc", p), Some(PathBuf::from("/run/containers/storage/overlay-containers")));
        assert_eq!(base_of("other", p), None);
        assert_eq!(base_of("abc", Path::new("/x/abc/data/conmon.pid")), None);
        assert_eq!(base_of("abc", Path::new("conmon.pid")), None);
    }

    #[test]
    fn pids_are_read_from_both_files_and_a_missing_or_bad_one_gives_none() {
        let dir = tempfile::tempdir().unwrap();
        let files = PidFiles::default();
        assert_eq!(files.read("abc"), None, "nothing learned yet");
        let userdata = dir.path().join("abc/userdata");
        std::fs::create_dir_all(&userdata).unwrap();
        files.learn("abc", userdata.join("conmon.pid").to_str().unwrap());
        assert_eq!(files.read("abc"), None, "no files yet");
        std::fs::write(userdata.join("pidfile"), "4242\n").unwrap();
        std::fs::write(userdata.join("conmon.pid"), "4200").unwrap();
        assert_eq!(files.read("abc"), Some((4242, 4200)));
        std::fs::write(userdata.join("pidfile"), "garbage").unwrap();
        assert_eq!(files.read("abc"), None);
        std::fs::write(userdata.join("pidfile"), "0").unwrap();
        assert_eq!(files.read("abc"), None);
        assert_eq!(files.read("unknown"), None);
    }
}
