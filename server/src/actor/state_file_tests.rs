//! The state file through the actor: an accepted change is on disk when
//! its answer comes (an acknowledged `ank apply` survives a power cut right
//! after it), and an update that changes nothing writes nothing (each
//! write is a new file, a sync and a rename: flash wears with every one).

use std::os::unix::fs::MetadataExt;

use ank_common::messages::ResponseContent;

use super::lifecycle_tests::{apply, empty, start, wl};
use super::*;

#[tokio::test(start_paused = true)]
async fn state_file_holds_an_acknowledged_update_and_is_not_rewritten_without_a_change() {
    let dir = tempfile::tempdir().unwrap();
    let file = StateFile::new(dir.path().join("state.json"));
    let (mut h, _) = start(empty(), Some(file.clone()), LifecycleOptions::default()).await;
    let one = format!("apiVersion: v1\nworkloads:\n{}", wl("a", ""));
    let answer = apply(&mut h, &one).await;
    assert!(matches!(answer, ResponseContent::UpdateStateSuccess { .. }), "{answer:?}");
    let saved = file.load().unwrap().expect("saved before the answer");
    assert!(saved.state.workloads.contains_key("a"), "{:?}", saved.state);
    let written = std::fs::metadata(file.path()).unwrap().ino();

    // The same apply again: acknowledged, nothing written (a write renames
    // a new file over the old one: a new inode).
    let answer = apply(&mut h, &one).await;
    assert!(matches!(answer, ResponseContent::UpdateStateSuccess { .. }), "{answer:?}");
    assert_eq!(std::fs::metadata(file.path()).unwrap().ino(), written, "rewritten without a change");

    let two = format!("apiVersion: v1\nworkloads:\n{}", wl("b", ""));
    let answer = apply(&mut h, &two).await;
    assert!(matches!(answer, ResponseContent::UpdateStateSuccess { .. }), "{answer:?}");
    assert_ne!(std::fs::metadata(file.path()).unwrap().ino(), written, "a change is written");
    let saved = file.load().unwrap().unwrap();
    assert!(saved.state.workloads.contains_key("a") && saved.state.workloads.contains_key("b"), "{:?}", saved.state);
    h.stop.cancel();
}
