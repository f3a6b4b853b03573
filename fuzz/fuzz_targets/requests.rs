//! Requests of both tool dialects: any JSON is answered, never a panic.
//!
//! `memory_files::parse_request` (the JSON memory tool) and
//! `claude_memory::parse` (Claude's `memory_20250818`) read the same value.
//! A valid Claude request is then carried out on text the fuzzer controls
//! too: the file content is the request's `_content` string (a fixed note
//! when absent), the files under a viewed directory are its `_files`
//! strings (each a path under /memories; its size is its length).
#![no_main]

use agent_memory_core::files::claude_memory::{self as claude, Request, Target};
use agent_memory_core::files::memory_tool::{self as files, Command};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

const NOTE: &str = "# Notes\nuser likes tea\nmeeting on friday\n";

fuzz_target!(|data: &[u8]| {
    let Ok(request) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    memory_tool(&request);
    claude_tool(&request);
});

fn memory_tool(request: &Value) {
    let (echo, result) = files::parse_request(request);
    // The envelope is JSON text either way.
    let envelope = match &result {
        Ok(_) => files::envelope_ok(&echo, &files::read_result(NOTE, 1)),
        Err(error) => files::envelope_error(&echo, error),
    };
    let parsed: Value = serde_json::from_str(&envelope).expect("the envelope is JSON");
    assert_eq!(parsed["ok"], Value::Bool(result.is_ok()));
    let Ok((command, path)) = result else { return };
    assert_eq!(files::normalise_path(&path).as_deref(), Ok(path.as_str()));
    assert_eq!(echo.path.as_deref(), Some(path.as_str()));
    assert_eq!(echo.command.as_deref(), Some(command.name()));
    match command {
        Command::Update { old, new } => {
            assert!(!old.is_empty());
            let content = format!("{new}{old}{new}");
            assert!(files::occurrences(&content, &old) >= 1);
        }
        Command::Append { content } => {
            // A rendering of the appended file never holds more than asked.
            for max_chars in [0, 40, content.chars().count()] {
                let mut rendering = files::Rendering::new(max_chars, usize::MAX);
                rendering.push_file(&path, &content).expect("no byte limit");
                let text = rendering.finish();
                let note = text.starts_with("[cut at") || text.contains("\n[cut at");
                assert!(text.chars().count() <= max_chars || note);
            }
        }
        Command::List => {
            let mut entries = vec![
                (path.clone(), false),
                (files::parent(&path).to_owned(), true),
            ];
            let list = files::list_result(&mut entries);
            serde_json::from_str::<Value>(&list).expect("the list result is JSON");
        }
        Command::Search { query } => {
            // The words and phrases go to websearch_to_tsquery joined by
            // `or`: no term is empty, and a query has one side at least
            // when it had any word.
            for side in [&query.wanted, &query.unwanted] {
                assert!(side.split(" or ").all(|term| !term.is_empty()) || side.is_empty());
            }
            let result = files::search_result(&[(path.clone(), query.wanted.clone(), 1.0)]);
            serde_json::from_str::<Value>(&result).expect("the search result is JSON");
        }
        Command::Read | Command::Delete => {}
    }
}

fn claude_tool(request: &Value) {
    let Ok(parsed) = claude::parse(request) else {
        return;
    };
    let content = request
        .get("_content")
        .and_then(Value::as_str)
        .unwrap_or(NOTE);
    match parsed {
        Request::View { path, range } => {
            check_target(&path);
            if let Ok(range) = range {
                let _ = claude::file_view(&path, content, range);
            }
            let _ = claude::file_view(&path, content, None);
            let listing = claude::directory_listing(&path, &files_under(request, &path), &[]);
            assert!(listing.starts_with("Here're the files and directories"));
        }
        Request::Create { path, text } => {
            check_target(&path);
            if let Ok(view) = claude::file_view(&path, &text, None) {
                assert!(view.starts_with("Here's the content of"));
            }
        }
        Request::StrReplace { path, old, new } => {
            check_target(&path);
            assert!(!old.is_empty());
            replace(&path, content, &old, &new);
            // Content where `old` surely occurs, once or more.
            replace(&path, &format!("{content}\n{old}\n"), &old, &new);
        }
        Request::Insert { path, line, text } => {
            check_target(&path);
            for at in [line, 0, 1, -1, i64::MAX, i64::MIN] {
                if let Ok((edited, _)) = claude::insert_lines(&path, content, at, &text) {
                    assert!(
                        edited.ends_with('\n'),
                        "insert result must end with a newline"
                    );
                }
            }
        }
        Request::Delete { path } => check_target(&path),
        Request::Rename { from, to } => {
            check_target(&from);
            check_target(&to);
            let _ = claude::renamed(&from, &to);
            let _ = claude::into_itself(&from, &to);
        }
    }
}

fn replace(path: &Target, content: &str, old: &str, new: &str) {
    if let Ok((edited, answer)) = claude::replace_once(path, content, old, new) {
        assert_eq!(files::occurrences(content, old), 1);
        assert_eq!(edited, content.replacen(old, new, 1));
        assert!(answer.starts_with("The memory file has been edited."));
    }
}

/// A target is the normalised scope path and the path as Claude gave it:
/// reading the shown path again finds the same stored path, unless control
/// characters were escaped in it.
fn check_target(target: &Target) {
    assert_eq!(
        files::normalise_path(&target.stored).as_deref(),
        Ok(target.stored.as_str())
    );
    assert!(target.shown.starts_with(claude::ROOT));
    if !target.shown.contains('\\') {
        let again = claude::target(&target.shown).expect("a shown path is accepted again");
        assert_eq!(again.stored, target.stored);
    }
}

/// The stored paths of `_files` under `dir`, each sized by its length.
fn files_under(request: &Value, dir: &Target) -> Vec<(String, u64)> {
    let prefix = files::under(&dir.stored);
    let Some(Value::Array(items)) = request.get("_files") else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(Value::as_str)
        .filter_map(|raw| claude::target(raw).ok())
        .filter(|t| t.stored != dir.stored && t.stored.starts_with(&prefix))
        .map(|t| {
            let size = t.shown.len() as u64 * 1000;
            (t.stored, size)
        })
        .collect()
}
