//! Rules of the bounded message history that need no database: what a
//! message may be, which keep applies, and which messages a repack keeps
//! without splitting a tool call from its results.
//!
//! A thread's messages live in a ring of `keep` slots (see sql/schema.sql).
//! Appends overwrite the oldest slot; a change of `keep`, or results that
//! went with an overwritten call, repack the ring, and [`plan_keeping`]
//! decides that repack.

use std::collections::HashSet;

use serde_json::Value;

use crate::error::{Error, Result, quoted};

/// Largest `keep` accepted: a repack reads the whole window.
pub const MAX_KEEP: i32 = 10_000;

/// The roles a message may have.
pub const ROLES: [&str; 4] = ["system", "user", "assistant", "tool"];

/// Check a role name.
pub fn check_role(role: &str) -> Result<()> {
    if ROLES.contains(&role) {
        Ok(())
    } else {
        Err(Error::invalid(format!("unknown role {}", quoted(role)))
            .with_hint("A role is one of system, user, assistant, tool."))
    }
}

/// The `lim` of a read: at least 1.
pub fn checked_limit(lim: Option<i32>) -> Result<i32> {
    match lim {
        Some(l) if l >= 1 => Ok(l),
        Some(l) => Err(Error::invalid(format!("lim must be at least 1, not {l}"))),
        None => Err(Error::null("lim")),
    }
}

/// The keep in force: the call's, else the setting's; at least 1.
pub fn resolve_keep(keep: Option<i32>, setting: i32) -> Result<i32> {
    match keep {
        None => Ok(setting),
        Some(k) if k < 1 => Err(Error::invalid(format!("keep must be at least 1, not {k}"))),
        Some(k) if k > MAX_KEEP => {
            Err(Error::invalid(format!("keep must be at most {MAX_KEEP}, not {k}")))
        }
        Some(k) => Ok(k),
    }
}

/// Check content and metadata; returns the metadata's idempotency key.
/// Content and metadata (as JSON text) are each at most `max_bytes`, and
/// the key at most MAX_ID_CHARS characters, as the ids it stands beside.
pub fn check_message(content: &str, metadata: &Value, max_bytes: usize) -> Result<Option<String>> {
    if content.len() > max_bytes {
        return Err(Error::limit(format!(
            "message content is {} bytes, over agent_memory.max_message_bytes ({max_bytes})",
            content.len()
        )));
    }
    let Some(fields) = metadata.as_object() else {
        return Err(Error::invalid("metadata must be a JSON object"));
    };
    if !fields.is_empty() {
        let metadata_bytes = json_text_bytes(metadata);
        if metadata_bytes > max_bytes {
            return Err(Error::limit(format!(
                "message metadata is {metadata_bytes} bytes, over agent_memory.max_message_bytes ({max_bytes})"
            )));
        }
    }
    match fields.get("idempotency_key") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(key)) if key.chars().count() > crate::args::MAX_ID_CHARS => {
            Err(Error::invalid(format!(
                "metadata.idempotency_key is longer than {} characters",
                crate::args::MAX_ID_CHARS
            )))
        }
        Some(Value::String(key)) if !key.is_empty() => Ok(Some(key.clone())),
        Some(_) => Err(Error::invalid("metadata.idempotency_key must be a non-empty string")),
    }
}

/// The length of `value` written as compact JSON text, counted without
/// building the text.
fn json_text_bytes(value: &Value) -> usize {
    struct Counted(usize);
    impl std::io::Write for Counted {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counted = Counted(0);
    // Writing a Value to a writer that never fails cannot fail.
    let _ = serde_json::to_writer(&mut counted, value);
    counted.0
}

/// The idempotency key of metadata that [`check_message`] passed.
pub fn idempotency_key(metadata: &Value) -> Option<&str> {
    metadata.get("idempotency_key").and_then(Value::as_str)
}

/// The ids of the tool calls an assistant message makes: `metadata.tool_calls`
/// as an array of ids, or of objects with an `id` (the OpenAI shape).
pub fn tool_call_ids(metadata: &Value) -> Vec<String> {
    metadata.get("tool_calls").map(call_ids).unwrap_or_default()
}

/// The ids in a `tool_calls` value (see [`tool_call_ids`]); none unless it
/// is an array.
pub fn call_ids(calls: &Value) -> Vec<String> {
    let Some(calls) = calls.as_array() else {
        return Vec::new();
    };
    calls
        .iter()
        .filter_map(|call| match call {
            Value::String(id) => Some(id.clone()),
            Value::Object(fields) => fields.get("id").and_then(Value::as_str).map(String::from),
            _ => None,
        })
        .collect()
}

/// The call a message answers when it is a tool result: a `tool` message
/// with a string `metadata.tool_call_id`. A thread keeps a tool result only
/// while it holds the call, and a read window shows it only with the call.
pub fn answered_call_of<'m>(role: &str, metadata: &'m Value) -> Option<&'m str> {
    if role == "tool" { answered_call(metadata) } else { None }
}

/// The call a tool message answers: `metadata.tool_call_id`.
pub fn answered_call(metadata: &Value) -> Option<&str> {
    metadata.get("tool_call_id").and_then(Value::as_str)
}

/// One message of a batch (`append_messages`), checked.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchMessage<'a> {
    pub role: &'a str,
    pub content: &'a str,
    /// The metadata object; None when absent or null (it is then `{}`).
    pub metadata: Option<&'a Value>,
    pub idempotency_key: Option<String>,
}

impl BatchMessage<'_> {
    /// Whether the message can go with others in one statement: it is not
    /// part of a tool call (whose pairing an append checks one by one) and
    /// has no idempotency key (which an append looks up first).
    pub fn is_plain(&self) -> bool {
        self.role != "tool"
            && self.idempotency_key.is_none()
            && self.metadata.is_none_or(|m| m.get("tool_calls").is_none())
    }
}

/// The fields a batch message may have. `seq` and `created_at`, which
/// `messages_json` returns, are accepted and ignored, so that its output can
/// be appended as it is: the appended messages get new ones.
const BATCH_FIELDS: [&str; 5] = ["role", "content", "metadata", "seq", "created_at"];

/// Check a batch of messages: a JSON array of `{role, content, metadata}`
/// objects, each checked as `append_message` checks its arguments. An error
/// names the message by its index (from 0).
pub fn parse_batch(messages: &Value, max_bytes: usize) -> Result<Vec<BatchMessage<'_>>> {
    let Some(items) = messages.as_array() else {
        return Err(Error::invalid("messages must be a JSON array")
            .with_hint(r#"Pass [{"role": "user", "content": "..."}, ...], oldest first."#));
    };
    items
        .iter()
        .enumerate()
        .map(|(index, item)| parse_batch_item(item, max_bytes).map_err(|e| at_index(e, index)))
        .collect()
}

fn parse_batch_item(item: &Value, max_bytes: usize) -> Result<BatchMessage<'_>> {
    let Some(fields) = item.as_object() else {
        return Err(Error::invalid("a message must be a JSON object"));
    };
    if let Some(unknown) = fields.keys().find(|k| !BATCH_FIELDS.contains(&k.as_str())) {
        return Err(Error::invalid(format!("unknown field {}", quoted(unknown)))
            .with_hint("A message has role, content and metadata."));
    }
    let text = |name: &str| match fields.get(name) {
        Some(Value::String(s)) => Ok(s.as_str()),
        None | Some(Value::Null) => Err(Error::invalid(format!("{name} is missing"))),
        Some(_) => Err(Error::invalid(format!("{name} must be a string"))),
    };
    let role = text("role")?;
    check_role(role)?;
    let content = text("content")?;
    let metadata = fields.get("metadata").filter(|m| !m.is_null());
    let empty = Value::Object(Default::default());
    let idempotency_key = check_message(content, metadata.unwrap_or(&empty), max_bytes)?;
    Ok(BatchMessage { role, content, metadata, idempotency_key })
}

/// Prefix an error's message with the index of the message it is about.
fn at_index(mut error: Error, index: usize) -> Error {
    error.message = format!("messages[{index}]: {}", error.message);
    error
}

/// A stored message, as a repack sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    pub slot: i32,
    pub seq: i64,
    /// Ids of the tool calls it makes (assistant messages).
    pub calls: Vec<String>,
    /// The call it answers (tool messages).
    pub answers: Option<String>,
}

/// What a repack does: remove `removed` slots, and move each kept message
/// from its slot to a new one (0, 1, … in seq order).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Repack {
    pub removed: Vec<i32>,
    pub moves: Vec<(i32, i32)>,
}

/// Plan a repack that keeps the newest `most` messages, then drops every
/// kept tool result whose call is not kept, so that the thread holds no
/// result without its call. A result answers the newest call of its id
/// before it: a later call that reuses the id does not keep it. The kept
/// messages take slots 0, 1, … in seq order, whatever slots were empty.
pub fn plan_keeping(stored: &[Stored], most: usize) -> Repack {
    let mut by_seq: Vec<&Stored> = stored.iter().collect();
    by_seq.sort_by_key(|m| m.seq);
    let cut = by_seq.len().saturating_sub(most);
    let (dropped, kept) = by_seq.split_at(cut);
    let mut kept_calls: HashSet<&str> = HashSet::new();
    let mut repack =
        Repack { removed: dropped.iter().map(|m| m.slot).collect(), moves: Vec::new() };
    let mut next_slot = 0;
    for m in kept {
        let orphan = m.answers.as_deref().is_some_and(|call| !kept_calls.contains(call));
        if orphan {
            repack.removed.push(m.slot);
        } else {
            repack.moves.push((m.slot, next_slot));
            next_slot += 1;
        }
        kept_calls.extend(m.calls.iter().map(String::as_str));
    }
    repack
}

/// Plan a repack under `keep` that leaves one slot for a message about to
/// be appended. A tool result (answering call `answers`) is stored only
/// where the thread holds its call, so the slot is left only when the call
/// stays; where it goes either way, the newest `keep` stay and the result
/// is not stored. Where only the slot would push the call out, it goes:
/// the call stays only with its result.
pub fn plan_with_room(stored: &[Stored], keep: usize, answers: Option<&str>) -> Repack {
    let with_room = plan_keeping(stored, keep.saturating_sub(1));
    let Some(call) = answers else {
        return with_room;
    };
    let holds_call = |plan: &Repack| {
        plan.moves.iter().any(|&(slot, _)| {
            stored.iter().any(|m| m.slot == slot && m.calls.iter().any(|c| c == call))
        })
    };
    if holds_call(&with_room) {
        return with_room;
    }
    let without_room = plan_keeping(stored, keep);
    if holds_call(&without_room) { with_room } else { without_room }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;
    use serde_json::json;

    #[test]
    fn a_read_takes_at_least_one_message() {
        assert_eq!(checked_limit(Some(1)).unwrap(), 1);
        assert_eq!(checked_limit(Some(500)).unwrap(), 500);
        assert_eq!(checked_limit(Some(0)).unwrap_err().kind, ErrorKind::InvalidParameter);
        assert_eq!(checked_limit(None).unwrap_err().kind, ErrorKind::NullValue);
    }

    fn msg(slot: i32, seq: i64) -> Stored {
        Stored { slot, seq, calls: vec![], answers: None }
    }

    #[test]
    fn a_batch_is_an_array_of_checked_messages_in_order() {
        let batch = json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello", "metadata": {"tone": "warm"}},
            {"role": "user", "content": "again", "metadata": null, "seq": 7, "created_at": "x"},
        ]);
        let parsed = parse_batch(&batch, 100).unwrap();
        assert_eq!(
            parsed.iter().map(|m| (m.role, m.content)).collect::<Vec<_>>(),
            [("user", "hi"), ("assistant", "hello"), ("user", "again")]
        );
        assert_eq!(parsed[1].metadata, Some(&json!({"tone": "warm"})));
        assert_eq!(parsed[2].metadata, None);
        assert!(parsed.iter().all(BatchMessage::is_plain));
        assert_eq!(parse_batch(&json!([]), 100).unwrap(), vec![]);
    }

    #[test]
    fn tool_messages_and_idempotency_keys_are_not_plain() {
        let batch = json!([
            {"role": "assistant", "content": "", "metadata": {"tool_calls": ["c1"]}},
            {"role": "tool", "content": "42", "metadata": {"tool_call_id": "c1"}},
            {"role": "user", "content": "ok", "metadata": {"idempotency_key": "k1"}},
        ]);
        let parsed = parse_batch(&batch, 100).unwrap();
        assert!(parsed.iter().all(|m| !m.is_plain()));
        assert_eq!(parsed[2].idempotency_key.as_deref(), Some("k1"));
    }

    #[test]
    fn a_bad_message_is_named_by_its_index() {
        let refused = |batch: Value| parse_batch(&batch, 10).unwrap_err();
        let e = refused(json!({"role": "user"}));
        assert_eq!(e.message, "messages must be a JSON array");
        let e = refused(json!([{"role": "user", "content": "a"}, "text"]));
        assert_eq!(e.message, "messages[1]: a message must be a JSON object");
        let e = refused(json!([{"role": "robot", "content": "a"}]));
        assert_eq!(e.message, "messages[0]: unknown role \"robot\"");
        let e = refused(json!([{"role": "user"}]));
        assert_eq!(e.message, "messages[0]: content is missing");
        let e = refused(json!([{"role": "user", "content": 3}]));
        assert_eq!(e.message, "messages[0]: content must be a string");
        let e = refused(json!([{"role": "user", "content": "a", "node_id": "n"}]));
        assert_eq!(e.message, "messages[0]: unknown field \"node_id\"");
        let e = refused(json!([{"role": "user", "content": "a", "metadata": []}]));
        assert_eq!(e.message, "messages[0]: metadata must be a JSON object");
        let e = refused(
            json!([{"role": "user", "content": "a"}, {"role": "user", "content": "too long, surely"}]),
        );
        assert_eq!(e.kind, ErrorKind::LimitExceeded);
        assert!(e.message.starts_with("messages[1]: message content is 16 bytes"));
    }

    #[test]
    fn metadata_and_its_key_are_bounded_as_content_is() {
        let metadata = json!({"note": "0123456789"});
        assert_eq!(json_text_bytes(&metadata), 21);
        assert_eq!(json_text_bytes(&json!({"é": [1, null]})), 15);
        assert!(check_message("short", &metadata, 21).is_ok());
        let e = check_message("short", &metadata, 20).unwrap_err();
        assert_eq!(e.kind, ErrorKind::LimitExceeded);
        assert_eq!(
            e.message,
            "message metadata is 21 bytes, over agent_memory.max_message_bytes (20)"
        );
        // An empty object is no metadata: content alone meets the limit.
        assert!(check_message("12345", &json!({}), 5).is_ok());
        let key = "k".repeat(crate::args::MAX_ID_CHARS);
        let kept = check_message("a", &json!({ "idempotency_key": key }), 1 << 20).unwrap();
        assert_eq!(kept.as_deref(), Some(key.as_str()));
        let longer = "é".repeat(crate::args::MAX_ID_CHARS + 1);
        let e = check_message("a", &json!({ "idempotency_key": longer }), 1 << 20).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidParameter);
        assert_eq!(e.message, "metadata.idempotency_key is longer than 256 characters");
    }

    #[test]
    fn roles_are_the_four_known_ones() {
        for role in ROLES {
            assert!(check_role(role).is_ok());
        }
        let err = check_role("robot").unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidParameter);
        assert!(err.message.contains("\"robot\""));
    }

    #[test]
    fn keep_comes_from_the_call_or_the_setting() {
        assert_eq!(resolve_keep(None, 200).unwrap(), 200);
        assert_eq!(resolve_keep(Some(5), 200).unwrap(), 5);
        assert_eq!(resolve_keep(Some(500), 200).unwrap(), 500);
        assert_eq!(resolve_keep(Some(0), 200).unwrap_err().kind, ErrorKind::InvalidParameter);
        assert!(resolve_keep(Some(MAX_KEEP + 1), 200).is_err());
    }

    #[test]
    fn content_over_the_limit_and_non_object_metadata_are_refused() {
        assert_eq!(
            check_message("12345", &json!({}), 4).unwrap_err().kind,
            ErrorKind::LimitExceeded
        );
        assert!(check_message("1234", &json!({}), 4).is_ok());
        assert_eq!(
            check_message("x", &json!([1]), 4).unwrap_err().kind,
            ErrorKind::InvalidParameter
        );
    }

    #[test]
    fn the_idempotency_key_must_be_a_non_empty_string() {
        assert_eq!(
            check_message("x", &json!({"idempotency_key": "k1"}), 100).unwrap(),
            Some("k1".to_string())
        );
        assert_eq!(check_message("x", &json!({"other": 1}), 100).unwrap(), None);
        assert!(check_message("x", &json!({"idempotency_key": 7}), 100).is_err());
        assert!(check_message("x", &json!({"idempotency_key": ""}), 100).is_err());
        // What the check passed is what a write reads back.
        for metadata in
            [json!({"idempotency_key": "k1"}), json!({"idempotency_key": null}), json!({})]
        {
            assert_eq!(
                idempotency_key(&metadata).map(str::to_string),
                check_message("x", &metadata, 100).unwrap()
            );
        }
    }

    #[test]
    fn tool_call_ids_come_as_strings_or_objects() {
        let meta = json!({"tool_calls": ["a", {"id": "b", "type": "function"}, 3]});
        assert_eq!(tool_call_ids(&meta), vec!["a", "b"]);
        assert!(tool_call_ids(&json!({"tool_calls": "a"})).is_empty());
        assert_eq!(call_ids(&json!([{"id": "c"}])), vec!["c"]);
        assert_eq!(answered_call(&json!({"tool_call_id": "a"})), Some("a"));
    }

    #[test]
    fn a_repack_keeps_the_newest_and_renumbers_them_in_order() {
        // Ring of 4 that wrapped: slots hold seqs 5, 6, 3, 4.
        let stored = [msg(0, 5), msg(1, 6), msg(2, 3), msg(3, 4)];
        let plan = plan_keeping(&stored, 2);
        assert_eq!(plan.removed, vec![2, 3]);
        assert_eq!(plan.moves, vec![(0, 0), (1, 1)]);
    }

    #[test]
    fn a_repack_without_room_closes_the_gaps() {
        // Ring of 4 whose slot 2 was emptied: seqs 5, 2, -, 4.
        let stored = [msg(0, 5), msg(1, 2), msg(3, 4)];
        let plan = plan_keeping(&stored, 4);
        assert!(plan.removed.is_empty());
        assert_eq!(plan.moves, vec![(1, 0), (3, 1), (0, 2)]);
        assert_eq!(plan_keeping(&stored, 2).removed, vec![1]);
    }

    #[test]
    fn a_larger_keep_drops_nothing() {
        let stored = [msg(0, 3), msg(1, 1), msg(2, 2)];
        let plan = plan_keeping(&stored, 9);
        assert!(plan.removed.is_empty());
        assert_eq!(plan.moves, vec![(1, 0), (2, 1), (0, 2)]);
    }

    #[test]
    fn results_of_a_dropped_call_go_with_it() {
        let call = Stored { slot: 0, seq: 1, calls: vec!["c1".into(), "c2".into()], answers: None };
        let answer =
            |slot, seq, id: &str| Stored { slot, seq, calls: vec![], answers: Some(id.into()) };
        let stored = [call, answer(1, 2, "c1"), answer(2, 3, "c2"), msg(3, 4)];
        // Room for 2 of the 4: seq 1 drops, so its results (2 and 3) drop too.
        let plan = plan_keeping(&stored, 2);
        assert_eq!(plan.removed, vec![0, 1, 2]);
        assert_eq!(plan.moves, vec![(3, 0)]);
        // A result whose call is kept stays.
        let stored = [
            msg(0, 1),
            Stored { slot: 1, seq: 2, calls: vec!["c9".into()], answers: None },
            answer(2, 3, "c9"),
        ];
        let plan = plan_keeping(&stored, 2);
        assert_eq!(plan.removed, vec![0]);
        assert_eq!(plan.moves, vec![(1, 0), (2, 1)]);
        // A result whose call the thread never held goes too.
        let stored = [msg(0, 1), answer(1, 2, "c7"), msg(2, 3)];
        let plan = plan_keeping(&stored, 9);
        assert_eq!(plan.removed, vec![1]);
        assert_eq!(plan.moves, vec![(0, 0), (2, 1)]);
    }

    #[test]
    fn a_later_call_of_the_same_id_keeps_only_its_own_results() {
        let call = |slot, seq| Stored { slot, seq, calls: vec!["call_0".into()], answers: None };
        let answer =
            |slot, seq| Stored { slot, seq, calls: vec![], answers: Some("call_0".into()) };
        // Two turns that both name their call call_0.
        let stored = [call(0, 1), answer(1, 2), call(2, 3), answer(3, 4)];
        // The first call drops: its result goes, the second turn stays.
        let plan = plan_keeping(&stored, 3);
        assert_eq!(plan.removed, vec![0, 1]);
        assert_eq!(plan.moves, vec![(2, 0), (3, 1)]);
        // Room for all: nothing goes.
        assert!(plan_keeping(&stored, 4).removed.is_empty());
    }

    fn calling(slot: i32, seq: i64, call: &str) -> Stored {
        Stored { calls: vec![call.into()], ..msg(slot, seq) }
    }

    #[test]
    fn room_is_left_for_a_result_only_while_its_call_stays() {
        // A call, then four messages; a result comes with keep 3.
        let stored = [calling(0, 1, "c1"), msg(1, 2), msg(2, 3), msg(3, 4), msg(4, 5)];
        // The call goes either way: the newest three stay, no room.
        let plan = plan_with_room(&stored, 3, Some("c1"));
        assert_eq!(plan.removed, vec![0, 1]);
        assert_eq!(plan.moves, vec![(2, 0), (3, 1), (4, 2)]);
        // Another message takes a slot: the newest two stay.
        assert_eq!(plan_with_room(&stored, 3, None).moves, vec![(3, 0), (4, 1)]);
        // The call stays with room left: room for its result.
        let plan = plan_with_room(&stored, 6, Some("c1"));
        assert!(plan.removed.is_empty());
        // The call would stay only in the slot its result needs: it goes.
        let plan = plan_with_room(&stored, 5, Some("c1"));
        assert_eq!(plan.removed, vec![0]);
        assert_eq!(plan.moves.len(), 4);
        // A call the thread does not hold: the newest `keep` stay.
        assert_eq!(plan_with_room(&stored, 2, Some("c9")).moves, vec![(3, 0), (4, 1)]);
    }
}
