//! Node ids, refs and graph file names: any text is accepted or refused,
//! never a panic, and what is accepted keeps the documented shape.
//!
//! The input is `explicit refs, one a line` NUL `body`; without a NUL it is
//! all body. Each explicit line is also tried as a node id and a file name.
#![no_main]

use std::collections::HashSet;

use agent_memory_core::graph;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (head, body) = text.split_once('\0').unwrap_or(("", &text));
    let explicit: Vec<String> = if head.is_empty() {
        Vec::new()
    } else {
        head.split('\n').map(str::to_owned).collect()
    };

    // Body links: node ids, in order, each once.
    let links = graph::body_links(body);
    assert!(links.iter().all(|id| graph::is_node_id(id)));
    assert!(unique(&links));

    // Merged refs: the explicit ones first, then the links, each once.
    let merged = graph::merge_refs(&explicit, body);
    assert!(unique(&merged));
    let mut seen = HashSet::new();
    let explicit_once: Vec<&String> = explicit.iter().filter(|id| seen.insert(*id)).collect();
    assert_eq!(
        merged.iter().take(explicit_once.len()).collect::<Vec<_>>(),
        explicit_once
    );
    assert!(links.iter().all(|id| merged.contains(id)));

    // Checked refs: valid ids, never the root, duplicates dropped.
    if let Ok(refs) = graph::check_refs(&explicit) {
        assert!(refs.iter().all(|id| graph::is_node_id(id)));
        assert!(unique(&refs));
        assert_eq!(refs.len(), explicit_once.len());
    }
    let _ = graph::check_parents(&explicit, explicit.first().map(String::as_str));

    for line in &explicit {
        assert_eq!(graph::check_node_id(line).is_ok(), graph::is_node_id(line));
        if let Ok(name) = graph::parse_file_name(line) {
            assert!(graph::is_node_id(&name.node_id));
            assert!(name.version.is_none_or(|v| v >= 1));
            // The name it stands for reads back the same.
            let written = graph::file_name(&name.node_id, name.version);
            assert_eq!(graph::parse_file_name(&written), Ok(name));
        }
    }
    let _ = graph::appended_body(body, head);
});

fn unique(items: &[String]) -> bool {
    let mut seen = HashSet::new();
    items.iter().all(|id| seen.insert(id))
}
