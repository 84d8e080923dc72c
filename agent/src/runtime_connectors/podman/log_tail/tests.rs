//! Tests of [`LogTail`] against real files in a temporary folder.

use std::io::Write;
use std::time::Duration;

use super::*;

fn line(s: &str) -> TailItem {
    TailItem::Line(s.to_owned())
}

fn append(path: &Path, text: &str) {
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

/// The next `n` items, failing after 5 s.
async fn take(tail: &mut LogTail, n: usize) -> Vec<TailItem> {
    let mut items = Vec::new();
    for _ in 0..n {
        match tokio::time::timeout(Duration::from_secs(5), tail.next()).await {
            Ok(item) => items.push(item),
            Err(_) => panic!("only {items:?} of {n} items came"),
        }
    }
    items
}

/// Fails if an item comes within 200 ms.
async fn assert_quiet(tail: &mut LogTail) {
    if let Ok(item) = tokio::time::timeout(Duration::from_millis(200), tail.next()).await {
        panic!("unexpected {item:?}");
    }
}

#[tokio::test]
async fn log_tail_starts_at_the_end_and_reads_appended_lines() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("events.log");
    append(&log, "old1\nold2\n");
    let mut tail = LogTail::from_end(&log).unwrap();
    assert_quiet(&mut tail).await;
    append(&log, "new1\nnew2\n");
    append(&log, "new3\n");
    assert_eq!(take(&mut tail, 3).await, [line("new1"), line("new2"), line("new3")]);
}

#[tokio::test]
async fn log_tail_joins_a_line_split_across_writes() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("events.log");
    append(&log, "old\n{\"Status\":\"st");
    // The line being written when the tail starts is new: it is read whole.
    let mut tail = LogTail::from_end(&log).unwrap();
    append(&log, "art\"}\n{\"a\"");
    assert_eq!(take(&mut tail, 1).await, [line("{\"Status\":\"start\"}")]);
    assert_quiet(&mut tail).await;
    append(&log, ":1}\n");
    assert_eq!(take(&mut tail, 1).await, [line("{\"a\":1}")]);
}

#[tokio::test]
async fn log_tail_reads_a_log_that_appears_later_from_its_start() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("events.log");
    let mut tail = LogTail::from_end(&log).unwrap();
    assert_quiet(&mut tail).await;
    append(&log, "first\nsecond\n");
    assert_eq!(take(&mut tail, 2).await, [line("first"), line("second")]);
}

#[tokio::test]
async fn log_tail_waits_for_a_missing_folder() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("events");
    let log = folder.join("events.log");
    let mut tail = LogTail::from_end(&log).unwrap();
    std::fs::create_dir(&folder).unwrap();
    append(&log, "first\n");
    assert_eq!(take(&mut tail, 1).await, [line("first")]);
    append(&log, "second\n");
    assert_eq!(take(&mut tail, 1).await, [line("second")]);
}

#[tokio::test]
async fn log_tail_goes_on_after_the_last_line_in_a_rotated_log() {
    // podman's rotation: a copy of the newer half is renamed over the log.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("events.log");
    append(&log, "a\nb\n");
    let mut tail = LogTail::from_end(&log).unwrap();
    append(&log, "c\n");
    assert_eq!(take(&mut tail, 1).await, [line("c")]);
    let tmp = dir.path().join("rotate.tmp");
    append(&tmp, "b\nc\nd\n");
    std::fs::rename(&tmp, &log).unwrap();
    append(&log, "e\n");
    assert_eq!(take(&mut tail, 2).await, [line("d"), line("e")]);
    assert_quiet(&mut tail).await;
}

#[tokio::test]
async fn log_tail_drains_the_old_log_before_a_rotation() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("events.log");
    append(&log, "a\n");
    let mut tail = LogTail::from_end(&log).unwrap();
    // Written and rotated away before the tail looked: read from the old file.
    append(&log, "b\nc\n");
    let tmp = dir.path().join("rotate.tmp");
    append(&tmp, "c\nd\n");
    std::fs::rename(&tmp, &log).unwrap();
    assert_eq!(take(&mut tail, 3).await, [line("b"), line("c"), line("d")]);
    assert_quiet(&mut tail).await;
}

#[tokio::test]
async fn log_tail_reads_a_replacement_without_the_last_line_from_its_start_then_reports_a_gap() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("events.log");
    append(&log, "a\n");
    let mut tail = LogTail::from_end(&log).unwrap();
    append(&log, "b\n");
    assert_eq!(take(&mut tail, 1).await, [line("b")]);
    std::fs::remove_file(&log).unwrap();
    let tmp = dir.path().join("new.tmp");
    append(&tmp, "x\ny\n");
    std::fs::rename(&tmp, &log).unwrap();
    assert_eq!(take(&mut tail, 3).await, [line("x"), line("y"), TailItem::Gap("the log was replaced")]);
}

#[tokio::test]
async fn log_tail_finds_its_place_in_a_log_truncated_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("events.log");
    append(&log, "a\n");
    let mut tail = LogTail::from_end(&log).unwrap();
    append(&log, "bb\ncc\n");
    assert_eq!(take(&mut tail, 2).await, [line("bb"), line("cc")]);
    // Rewritten in place, shorter, keeping the newer lines (one write).
    std::fs::write(&log, "cc\nd\n").unwrap();
    let items = take(&mut tail, 1).await;
    // The truncation may be seen before the rewrite: then "cc" is not found
    // in the empty file, which is read from its start (a gap).
    if items == [TailItem::Gap("the log was truncated")] {
        assert_eq!(take(&mut tail, 2).await, [line("cc"), line("d")]);
    } else {
        assert_eq!(items, [line("d")]);
    }
    append(&log, "e\n");
    assert_eq!(take(&mut tail, 1).await, [line("e")]);
}

#[tokio::test]
async fn log_tail_reads_a_log_emptied_in_place_from_its_start_with_a_gap() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("events.log");
    append(&log, "a\nb\n");
    let mut tail = LogTail::from_end(&log).unwrap();
    std::fs::OpenOptions::new().write(true).open(&log).unwrap().set_len(0).unwrap();
    append(&log, "x\n");
    let mut items = take(&mut tail, 2).await;
    items.sort_by_key(|i| matches!(i, TailItem::Gap(_)));
    assert_eq!(items, [line("x"), TailItem::Gap("the log was truncated")]);
}

#[tokio::test]
async fn log_tail_drops_an_overlong_line_and_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("events.log");
    let mut tail = LogTail::from_end(&log).unwrap();
    append(&log, &"x".repeat(MAX_LINE + 10));
    append(&log, "yyy\nok\n");
    assert_eq!(take(&mut tail, 1).await, [line("ok")]);
}

#[test]
fn log_tail_finds_the_offset_after_a_line() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("events.log");
    append(&log, "a\nbb\nc");
    let file = File::open(&log).unwrap();
    assert_eq!(offset_after(&file, b"a").unwrap(), Some(2));
    assert_eq!(offset_after(&file, b"bb").unwrap(), Some(5));
    assert_eq!(offset_after(&file, b"c").unwrap(), None, "an incomplete line does not count");
    assert_eq!(offset_after(&file, b"zz").unwrap(), None);
}

#[test]
fn log_tail_refuses_a_path_without_a_file_name() {
    assert!(matches!(LogTail::from_end(Path::new("/")), Err(TailError::NoFolder { .. })));
}
