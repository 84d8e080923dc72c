//! Workload files: the `files` of a workload (text or base64 content, each
//! with a `mountPoint`) written under the workload's folder in the agent's
//! run folder, `<run folder>/<agent>_io/<workload>.<id>/files/<mount point>`
//! (Ankaios' path, next to the workload's `control_interface`), and handed
//! to the runtime as read-only bind mounts. The folders are created with
//! mode 0700 (below the private `<agent>_io`, see [`crate::run_folder`]):
//! no other local user reads the rendered content. The files keep the
//! default mode, so a container running as a non-root user still reads its
//! bind-mounted file. A mount point with a comma is refused: podman's
//! `--mount` option separates its fields with commas.

use std::path::{Path, PathBuf};

use ank_common::workload::{File, FileContent};
use base64::Engine;

use crate::runtime_connectors::FileMount;

/// Why the files of a workload cannot be provided.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadFilesError {
    #[error("file mount point '{0}' must be an absolute path below '/' without '..'")]
    InvalidMountPoint(String),
    #[error("file '{mount_point}': binaryData is not valid base64: {reason}")]
    InvalidBase64 { mount_point: String, reason: String },
    #[error("file '{mount_point}': cannot write '{path}': {reason}")]
    Write { mount_point: String, path: String, reason: String },
    #[error("file mount point '{0}' contains a comma, which podman's --mount option cannot carry")]
    CommaInMountPoint(String),
    #[error("file mount point '{0}' is given twice")]
    Duplicate(String),
}

/// The folder holding a workload's files.
pub fn files_folder(workload_folder: &Path) -> PathBuf {
    workload_folder.join("files")
}

/// Checks a mount point (absolute, not the root, no empty, `.` or `..`
/// parts) and returns it relative to `/`.
fn relative_target(mount_point: &str) -> Result<PathBuf, WorkloadFilesError> {
    let invalid = || WorkloadFilesError::InvalidMountPoint(mount_point.to_owned());
    if mount_point.contains(',') {
        return Err(WorkloadFilesError::CommaInMountPoint(mount_point.to_owned()));
    }
    let rest = mount_point.strip_prefix('/').ok_or_else(invalid)?;
    let parts: Vec<&str> = rest.split('/').collect();
    if rest.is_empty() || parts.iter().any(|p| p.is_empty() || *p == "." || *p == "..") {
        return Err(invalid());
    }
    Ok(parts.iter().collect())
}

fn content_bytes(file: &File) -> Result<Vec<u8>, WorkloadFilesError> {
    match &file.content {
        FileContent::Data(text) => Ok(text.as_bytes().to_vec()),
        // Lines are trimmed and joined first, as Ankaios does: base64
        // wrapped over several lines of a YAML block decodes.
        FileContent::BinaryData(b64) => {
            let joined: String = b64.lines().map(str::trim).collect();
            base64::engine::general_purpose::STANDARD.decode(joined).map_err(|e| WorkloadFilesError::InvalidBase64 {
                mount_point: file.mount_point.clone(),
                reason: e.to_string(),
            })
        }
    }
}

/// Validates all `files` before anything is written.
pub fn validate(files: &[File]) -> Result<(), WorkloadFilesError> {
    let mut seen = std::collections::BTreeSet::new();
    for f in files {
        relative_target(&f.mount_point)?;
        content_bytes(f)?;
        if !seen.insert(f.mount_point.as_str()) {
            return Err(WorkloadFilesError::Duplicate(f.mount_point.clone()));
        }
    }
    Ok(())
}

/// Writes `files` below `workload_folder/files` (replacing what an earlier
/// create left there) and returns their mounts.
pub async fn prepare(workload_folder: &Path, files: &[File]) -> Result<Vec<FileMount>, WorkloadFilesError> {
    validate(files)?;
    let root = files_folder(workload_folder);
    let _ = tokio::fs::remove_dir_all(&root).await;
    let mut mounts = Vec::with_capacity(files.len());
    for f in files {
        let host_path = root.join(relative_target(&f.mount_point)?);
        let write_error = |e: std::io::Error| WorkloadFilesError::Write {
            mount_point: f.mount_point.clone(),
            path: host_path.display().to_string(),
            reason: e.to_string(),
        };
        if let Some(parent) = host_path.parent() {
            let mut dirs = tokio::fs::DirBuilder::new();
            dirs.recursive(true).mode(0o700);
            dirs.create(parent).await.map_err(write_error)?;
        }
        tokio::fs::write(&host_path, content_bytes(f)?).await.map_err(write_error)?;
        mounts.push(FileMount { host_path, mount_point: f.mount_point.clone() });
    }
    Ok(mounts)
}

/// Removes a workload's files after the workload was deleted, and its
/// folder when that is left empty (its control interface may still be
/// there; that is removed with the pipes).
pub async fn remove(workload_folder: &Path) {
    remove_all(&files_folder(workload_folder)).await;
    let _ = tokio::fs::remove_dir(workload_folder).await;
}

/// Removes `folder` with everything in it; a missing folder is fine.
pub async fn remove_all(folder: &Path) {
    if let Err(e) = tokio::fs::remove_dir_all(folder).await
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!("cannot remove '{}': {e}", folder.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(mount_point: &str, data: &str) -> File {
        File { mount_point: mount_point.into(), content: FileContent::Data(data.into()) }
    }

    fn binary(mount_point: &str, data: &str) -> File {
        File { mount_point: mount_point.into(), content: FileContent::BinaryData(data.into()) }
    }

    #[tokio::test]
    async fn workload_files_are_written_below_the_workload_folder() {
        let dir = tempfile::tempdir().unwrap();
        let files = [text("/etc/app/config.yaml", "a: 1\n"), binary("/data/blob.bin", "AAEC/w==")];
        let mounts = prepare(dir.path(), &files).await.unwrap();
        assert_eq!(mounts.len(), 2);
        assert_eq!(mounts[0].host_path, dir.path().join("files/etc/app/config.yaml"));
        assert_eq!(mounts[0].mount_point, "/etc/app/config.yaml");
        assert_eq!(std::fs::read_to_string(&mounts[0].host_path).unwrap(), "a: 1\n");
        assert_eq!(std::fs::read(&mounts[1].host_path).unwrap(), vec![0u8, 1, 2, 255]);
        let wrapped = prepare(dir.path(), &[binary("/data/w.bin", "AAEC\n  /w==\n")]).await.unwrap();
        assert_eq!(std::fs::read(&wrapped[0].host_path).unwrap(), vec![0u8, 1, 2, 255], "base64 over lines");
        prepare(dir.path(), &files).await.unwrap();
        // a second create replaces the content
        let mounts = prepare(dir.path(), &[text("/etc/other", "x")]).await.unwrap();
        assert_eq!(mounts.len(), 1);
        assert!(!dir.path().join("files/etc/app/config.yaml").exists());
        remove(dir.path()).await;
        assert!(!dir.path().exists());
    }

    #[tokio::test]
    async fn workload_files_reject_bad_mount_points_and_base64_before_writing() {
        let dir = tempfile::tempdir().unwrap();
        for bad in ["relative/path", "/", "/a/../etc/passwd", "/a/./b", "/dir/", ""] {
            let err = prepare(dir.path(), &[text(bad, "x")]).await.unwrap_err();
            assert_eq!(err, WorkloadFilesError::InvalidMountPoint(bad.into()), "{bad}");
        }
        let err = prepare(dir.path(), &[text("/ok", "x"), binary("/b", "not base64!")]).await.unwrap_err();
        assert!(matches!(&err, WorkloadFilesError::InvalidBase64 { mount_point, .. } if mount_point == "/b"), "{err}");
        assert!(err.to_string().contains("'/b'"));
        assert!(!dir.path().join("files/ok").exists(), "nothing is written when one file is bad");
        let dup = prepare(dir.path(), &[text("/a", "1"), text("/a", "2")]).await.unwrap_err();
        assert_eq!(dup, WorkloadFilesError::Duplicate("/a".into()));
    }

    #[tokio::test]
    async fn workload_files_that_cannot_be_written_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        // A regular file where the folder should be.
        std::fs::write(dir.path().join("blocker"), "x").unwrap();
        let err = prepare(&dir.path().join("blocker"), &[text("/etc/f", "x")]).await.unwrap_err();
        assert!(matches!(&err, WorkloadFilesError::Write { mount_point, .. } if mount_point == "/etc/f"), "{err}");
    }

    #[tokio::test]
    async fn a_comma_in_a_mount_point_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        // Before: `/etc/a,source=/,destination=/host` reached podman's --mount.
        let e = prepare(dir.path(), &[text("/etc/a,source=/,destination=/host", "x")]).await.unwrap_err();
        assert_eq!(
            e.to_string(),
            "file mount point '/etc/a,source=/,destination=/host' contains a comma, which podman's --mount option cannot carry"
        );
        assert!(validate(&[text("/etc/a,b", "x")]).is_err());
    }

    #[tokio::test]
    async fn workload_file_folders_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let workload = dir.path().join("w.1");
        let mounts = prepare(&workload, &[text("/etc/app/secret.conf", "password: x")]).await.unwrap();
        for folder in [workload.clone(), files_folder(&workload), files_folder(&workload).join("etc/app")] {
            let mode = std::fs::metadata(&folder).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "{}", folder.display());
        }
        assert!(mounts[0].host_path.exists());
    }
}
