//! Markdown with YAML frontmatter (graph memory's file format): any text is
//! parsed or refused, never a panic. A parsed document renders to text that
//! parses back to the same document (what `markdown::render` documents), and
//! its timestamps and refs go through the graph's checks.
#![no_main]

use agent_memory_core::graph;
use agent_memory_core::graph::markdown::{self, Document, TimeValue};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok((_meta, body)) = markdown::parse_meta(text) {
        assert!(text.ends_with(body), "the body is the end of the text");
    }
    let Ok(doc) = markdown::parse(text) else {
        return;
    };
    let rendered = markdown::render(&doc);
    match markdown::parse(&rendered) {
        Ok(again) => assert!(
            same(&doc, &again),
            "render then parse changed {doc:?}\ninto {again:?}\nvia {rendered:?}"
        ),
        Err(e) => panic!("render wrote text parse refuses: {e}\n{rendered:?}\nfrom {doc:?}"),
    }
    let fm = &doc.frontmatter;
    for time in [&fm.created_at, &fm.updated_at, &fm.saved_at]
        .into_iter()
        .flatten()
    {
        let _ = graph::check_time(time);
    }
    if let Some(title) = &fm.title {
        let _ = graph::check_title(title);
    }
    let refs = fm.refs.clone().unwrap_or_default();
    let _ = graph::check_refs(&refs);
    let _ = graph::merge_refs(&refs, &doc.body);
});

/// Equal documents, a NaN timestamp equal to itself.
fn same(a: &Document, b: &Document) -> bool {
    let time = |x: &Option<TimeValue>, y: &Option<TimeValue>| match (x, y) {
        (Some(TimeValue::EpochMillis(p)), Some(TimeValue::EpochMillis(q))) => {
            p == q || (p.is_nan() && q.is_nan())
        }
        _ => x == y,
    };
    let (f, g) = (&a.frontmatter, &b.frontmatter);
    a.body == b.body
        && f.title == g.title
        && f.description == g.description
        && f.version == g.version
        && f.refs == g.refs
        && f.change_description == g.change_description
        && time(&f.created_at, &g.created_at)
        && time(&f.updated_at, &g.updated_at)
        && time(&f.saved_at, &g.saved_at)
}
