//! Path rules of the memory tool and of Claude's memory tool: any text is
//! refused or normalised, never a panic; a normalised path obeys the rules
//! its helpers rely on (`parent`, `ancestors`, `under`, `under_end`,
//! `entry_of`, `directories_removed`).
#![no_main]

use agent_memory_core::files::claude_memory;
use agent_memory_core::files::memory_tool::{
    self as files, MAX_PATH_BYTES, MAX_SEGMENT_BYTES, MAX_SEGMENTS,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let raw = String::from_utf8_lossy(data);
    if let Ok(path) = files::normalise_path(&raw) {
        check_normalised(&path);
    }
    let _ = files::normalise_path(&format!("/memories/{raw}"));

    // Claude's paths: the input as given, and under /memories.
    for raw in [raw.to_string(), format!("/memories/{raw}")] {
        if let Ok(target) = claude_memory::target(&raw) {
            check_normalised(&target.stored);
            // Shown as given, stored normalised: a path without control
            // characters (which are escaped) is echoed byte for byte.
            assert!(target.shown.starts_with(claude_memory::ROOT));
            if !raw.chars().any(char::is_control) {
                assert_eq!(target.shown, raw);
            }
        }
    }
});

/// What `normalise_path` promises of its result, and what the helpers on
/// normalised paths promise.
fn check_normalised(path: &str) {
    // One spelling: normalising again changes nothing.
    assert_eq!(
        files::normalise_path(path).as_deref(),
        Ok(path),
        "not canonical"
    );
    assert!(path.starts_with('/'));
    assert!(path.len() <= MAX_PATH_BYTES);
    assert!(path == "/" || !path.ends_with('/'));
    assert!(!path.contains("//"));
    let segments: Vec<&str> = path.split('/').skip(1).filter(|s| !s.is_empty()).collect();
    assert!(segments.len() <= MAX_SEGMENTS);
    assert!(
        segments
            .iter()
            .all(|s| s.len() <= MAX_SEGMENT_BYTES && *s != "." && *s != "..")
    );

    let parent = files::parent(path);
    let ancestors = files::ancestors(path);
    if path == "/" {
        assert_eq!(parent, "/");
        assert!(ancestors.is_empty());
        return;
    }
    // Every directory above, nearest last, root excluded.
    assert_eq!(ancestors.len(), segments.len() - 1);
    assert_eq!(ancestors.last().copied().unwrap_or("/"), parent);
    let name = *segments.last().unwrap();
    assert_eq!(files::entry_of(parent, path), (name, false));
    for (depth, dir) in std::iter::once("/")
        .chain(ancestors.iter().copied())
        .enumerate()
    {
        // [under(dir), under_end(dir)) holds the path, in byte order.
        let (from, to) = (files::under(dir), files::under_end(dir));
        assert!(path.starts_with(&from), "{path:?} not under {from:?}");
        assert!(
            from.as_str() <= path && path < to.as_str(),
            "{path:?} outside [{from:?}, {to:?})"
        );
        let (entry, is_dir) = files::entry_of(dir, path);
        assert_eq!(entry, segments[depth]);
        assert_eq!(is_dir, depth + 1 < segments.len());
        // Deleting dir removes dir and every directory down to the file's.
        let removed = files::directories_removed(dir, std::iter::once(parent));
        assert_eq!(removed, segments.len() - depth);
    }
}
