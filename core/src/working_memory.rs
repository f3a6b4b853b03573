//! Rules of working memory: the parts an entry is made
//! of, what each part may hold, how a write is sanitised, RFC 7396 merge
//! patches, the configuration in force, and the hydrated node.
//!
//! Every part is stored on its own; these rules run on each write, so a
//! stored part is always clean and composition only has to assemble.

use serde_json::{Map, Value, json};

use crate::error::quoted;
use crate::jsonb::JsonType;
use crate::{Error, Result};

/// The node id of a session's global entry (the `__global__`).
pub const GLOBAL_NODE: &str = "__global__";

/// Most messages a `messages` part keeps (the newest).
pub const MAX_MESSAGES: usize = 200;

/// Keys stripped from graph nodes by default (`agent_memory.strip_node_keys`).
pub const DEFAULT_STRIP_KEYS: &str = "builder,builderPayload";

/// One independently stored section of a working-memory entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Part {
    Session,
    ProjectStructure,
    NodeContext,
    FetchedContext,
    WorkingHistory,
    Messages,
    LastUserMessage,
    Config,
}

/// The JSON type a part holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Object,
    Array,
    String,
}

impl Part {
    /// Every part, in the order of the contract.
    pub const ALL: [Part; 8] = [
        Part::Session,
        Part::ProjectStructure,
        Part::NodeContext,
        Part::FetchedContext,
        Part::WorkingHistory,
        Part::Messages,
        Part::LastUserMessage,
        Part::Config,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Part::Session => "session",
            Part::ProjectStructure => "project_structure",
            Part::NodeContext => "node_context",
            Part::FetchedContext => "fetched_context",
            Part::WorkingHistory => "working_history",
            Part::Messages => "messages",
            Part::LastUserMessage => "last_user_message",
            Part::Config => "config",
        }
    }

    pub fn parse(name: &str) -> Result<Part> {
        Part::ALL.into_iter().find(|part| part.name() == name).ok_or_else(|| {
            Error::invalid(format!("unknown working-memory part {}", quoted(name)))
                .with_detail(format!("the parts are {}", Part::ALL.map(Part::name).join(", ")))
        })
    }

    pub fn shape(self) -> Shape {
        match self {
            Part::WorkingHistory | Part::LastUserMessage => Shape::String,
            Part::Messages => Shape::Array,
            _ => Shape::Object,
        }
    }

    /// The value of a part that was never set.
    pub fn empty(self) -> Value {
        match self {
            Part::Session => json!({
                "session_id": "", "project_id": "", "active_node_id": "", "timestamp": ""
            }),
            Part::ProjectStructure => empty_structure(),
            Part::NodeContext | Part::FetchedContext => json!({}),
            Part::WorkingHistory | Part::LastUserMessage => json!(""),
            Part::Messages => json!([]),
            Part::Config => default_config(),
        }
    }
}

fn empty_graph() -> Value {
    json!({ "nodes": [], "edges": [] })
}

fn empty_structure() -> Value {
    json!({ "project_graph": empty_graph(), "elements_graph": empty_graph() })
}

/// The configuration defaults.
pub fn default_config() -> Value {
    json!({
        "history_length": 20,
        "include_project_structure": true,
        "include_context": true,
        "include_working_history": true,
        "auto_refresh_interval": 0
    })
}

fn json_type(value: &Value) -> JsonType {
    match value {
        Value::Null => JsonType::Null,
        Value::Bool(_) => JsonType::Boolean,
        Value::Number(_) => JsonType::Number,
        Value::String(_) => JsonType::String,
        Value::Array(_) => JsonType::Array,
        Value::Object(_) => JsonType::Object,
    }
}

fn type_name(value: &Value) -> &'static str {
    json_type(value).name()
}

/// A config field that is no `what`: of another type, or a number that
/// is not one (a fraction where an integer is needed) or is past a
/// double's range.
fn not_a_config_number(key: &str, what: &str, value: &Value) -> Error {
    match value.as_f64() {
        None if value.is_number() => {
            Error::invalid(format!("config.{key} {value} is out of range"))
        }
        Some(_) => Error::invalid(format!("config.{key} must be {what}, not {value}")),
        None => Error::invalid(format!("config.{key} must be {what}, not {}", type_name(value))),
    }
}

fn wrong_type(part: Part, what: &str, value: &Value) -> Error {
    Error::invalid(format!(
        "working-memory part {} must be {what}, not {}",
        quoted(part.name()),
        type_name(value)
    ))
}

impl Part {
    /// Whether a value of this part is stored exactly as written once its
    /// JSON type is right (no clamping, stripping or checking inside), so
    /// a write can hand the jsonb over without decoding it.
    pub fn stored_as_written(self) -> bool {
        matches!(
            self,
            Part::NodeContext | Part::FetchedContext | Part::WorkingHistory | Part::LastUserMessage
        )
    }
}

/// Check that a value of `json_type` fits `part` (what [`sanitise`] checks
/// first, for a value not decoded).
pub fn check_type(part: Part, json_type: JsonType) -> Result<()> {
    let fits = matches!(
        (part.shape(), json_type),
        (Shape::Object, JsonType::Object)
            | (Shape::Array, JsonType::Array)
            | (Shape::String, JsonType::String)
    );
    if fits {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "working-memory part {} must be {}, not {}",
            quoted(part.name()),
            part.shape().described(),
            json_type.name()
        )))
    }
}

impl Shape {
    fn described(self) -> &'static str {
        match self {
            Shape::Object => "a JSON object",
            Shape::Array => "a JSON array",
            Shape::String => "a JSON string",
        }
    }
}

/// The keys stripped from graph nodes, from the setting's comma list.
pub fn strip_keys(setting: &str) -> Vec<String> {
    setting.split(',').map(str::trim).filter(|k| !k.is_empty()).map(str::to_owned).collect()
}

/// Check and clean a value written to `part`: the right JSON type, messages
/// cut to the newest [`MAX_MESSAGES`], graph nodes without builder
/// payloads, the configuration type-checked and clamped. The result is what
/// is stored.
pub fn sanitise(part: Part, value: Value, strip: &[String]) -> Result<Value> {
    check_type(part, json_type(&value))?;
    match part {
        Part::Messages => {
            let Value::Array(mut messages) = value else {
                return Err(wrong_type(part, "a JSON array", &value));
            };
            if messages.len() > MAX_MESSAGES {
                messages.drain(..messages.len() - MAX_MESSAGES);
            }
            Ok(Value::Array(messages))
        }
        Part::ProjectStructure => sanitise_structure(value, strip),
        Part::Config => sanitise_config(value),
        Part::Session => sanitise_session(value),
        _ => Ok(value),
    }
}

fn sanitise_structure(value: Value, strip: &[String]) -> Result<Value> {
    let Value::Object(mut structure) = value else {
        return Err(wrong_type(Part::ProjectStructure, "a JSON object", &value));
    };
    for (key, graph) in structure.iter_mut() {
        if key != "project_graph" && key != "elements_graph" {
            return Err(Error::invalid(format!(
                "project_structure has no section {}",
                quoted(key)
            ))
            .with_detail("its sections are project_graph and elements_graph"));
        }
        let Value::Object(graph) = graph else {
            return Err(Error::invalid(format!(
                "project_structure.{key} must be an object with nodes and edges"
            )));
        };
        for field in ["nodes", "edges"] {
            match graph.get_mut(field) {
                None => {
                    graph.insert(field.to_owned(), json!([]));
                }
                Some(Value::Array(items)) => {
                    if field == "nodes" {
                        for node in items.iter_mut() {
                            if let Value::Object(node) = node {
                                for key in strip {
                                    node.remove(key);
                                }
                            }
                        }
                    }
                }
                Some(other) => {
                    return Err(Error::invalid(format!(
                        "project_structure.{key}.{field} must be an array, not {}",
                        type_name(other)
                    )));
                }
            }
        }
    }
    for key in ["project_graph", "elements_graph"] {
        structure.entry(key).or_insert_with(empty_graph);
    }
    Ok(Value::Object(structure))
}

fn sanitise_session(value: Value) -> Result<Value> {
    let Value::Object(session) = value else {
        return Err(wrong_type(Part::Session, "a JSON object", &value));
    };
    for (key, field) in &session {
        if !["project_id", "active_node_id"].contains(&key.as_str()) {
            return Err(Error::invalid(format!(
                "the session part cannot set {}",
                quoted(key)
            ))
            .with_detail("only project_id and active_node_id are written; session_id and timestamp come from the session"));
        }
        if !(field.is_string() || field.is_null()) {
            return Err(Error::invalid(format!(
                "session.{key} must be a string or null, not {}",
                type_name(field)
            )));
        }
    }
    Ok(Value::Object(session))
}

fn sanitise_config(value: Value) -> Result<Value> {
    let Value::Object(config) = value else {
        return Err(wrong_type(Part::Config, "a JSON object", &value));
    };
    let mut clean = Map::new();
    for (key, field) in config {
        let checked = match key.as_str() {
            "history_length" => {
                let n = field
                    .as_f64()
                    .filter(|n| n.fract() == 0.0)
                    .ok_or_else(|| not_a_config_number("history_length", "an integer", &field))?;
                json!(n.clamp(1.0, MAX_MESSAGES as f64) as i64)
            }
            "auto_refresh_interval" => {
                let n = field.as_f64().ok_or_else(|| {
                    not_a_config_number("auto_refresh_interval", "a number", &field)
                })?;
                if n < 0.0 { json!(0) } else { field }
            }
            "include_project_structure" | "include_context" | "include_working_history" => {
                if !field.is_boolean() {
                    return Err(Error::invalid(format!(
                        "config.{key} must be a boolean, not {}",
                        type_name(&field)
                    )));
                }
                field
            }
            _ => {
                return Err(Error::invalid(format!("unknown config setting {}", quoted(&key)))
                    .with_detail("the settings are history_length, include_project_structure, include_context, include_working_history, auto_refresh_interval"));
            }
        };
        clean.insert(key, checked);
    }
    Ok(Value::Object(clean))
}

/// RFC 7396 JSON merge patch: objects merge key by key, `null` removes a
/// key, anything else replaces.
pub fn merge_patch(target: &Value, patch: &Value) -> Value {
    let Value::Object(changes) = patch else {
        return patch.clone();
    };
    let mut merged = match target {
        Value::Object(fields) => fields.clone(),
        _ => Map::new(),
    };
    for (key, change) in changes {
        if change.is_null() {
            merged.remove(key);
        } else {
            let current = merged.get(key).cloned().unwrap_or(Value::Null);
            merged.insert(key.clone(), merge_patch(&current, change));
        }
    }
    Value::Object(merged)
}

/// A patch for `part`: object parts take an object (merged); other parts
/// take a whole new value.
pub fn check_patch(part: Part, patch: &Value) -> Result<()> {
    if part.shape() == Shape::Object && !patch.is_object() {
        return Err(Error::invalid(format!(
            "a patch of working-memory part {} must be a JSON object, not {}",
            quoted(part.name()),
            type_name(patch)
        )));
    }
    Ok(())
}

/// What a read shows of a part: the stored value, else the empty value of
/// the contract; the configuration always with its defaults filled in.
pub fn shown(part: Part, stored: Option<Value>) -> Value {
    match part {
        Part::Config => effective_config(stored.as_ref()),
        _ => stored.unwrap_or_else(|| part.empty()),
    }
}

/// The configuration in force: the defaults overlaid with what is stored.
pub fn effective_config(stored: Option<&Value>) -> Value {
    match stored {
        Some(stored) => merge_patch(&default_config(), stored),
        None => default_config(),
    }
}

/// The hydrated node (`node_context` of an entry built from the
/// graph): the node as `graph_read` shows it, with its body as `content`
/// and the entries of a frontmatter block opening the body as `meta`. A
/// block that does not read as frontmatter stays in the content, with an
/// empty `meta`: hydration never fails on what a user wrote.
pub fn node_context(node: Value) -> Value {
    let Value::Object(mut node) = node else {
        return node;
    };
    let body = match node.remove("body") {
        Some(Value::String(body)) => body,
        _ => String::new(),
    };
    let (meta, content) = match crate::graph::markdown::parse_meta(&body) {
        Ok((meta, content)) => (meta, content.to_owned()),
        Err(_) => (Map::new(), body),
    };
    node.insert("content".to_owned(), Value::String(content));
    node.insert("meta".to_owned(), Value::Object(meta));
    Value::Object(node)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn undecoded_values_are_checked_like_decoded_ones() {
        for part in Part::ALL {
            for (value, json_type) in [
                (json!({}), JsonType::Object),
                (json!([]), JsonType::Array),
                (json!("s"), JsonType::String),
                (json!(1), JsonType::Number),
                (json!(null), JsonType::Null),
            ] {
                let decoded = sanitise(part, value, &strip());
                let undecoded = check_type(part, json_type);
                assert_eq!(decoded.is_ok(), undecoded.is_ok(), "{part:?} {json_type:?}");
                if let (Err(a), Err(b)) = (decoded, undecoded) {
                    assert_eq!(a.message, b.message);
                }
            }
        }
    }

    #[test]
    fn node_context_splits_frontmatter_from_the_body() {
        let node = json!({"id": "n1", "title": "T", "body": "---\nstatus: draft\nrank: 3\n---\nText [[n2]]\n", "refs": ["n2"]});
        assert_eq!(
            node_context(node),
            json!({"id": "n1", "title": "T", "refs": ["n2"], "content": "Text [[n2]]\n",
                   "meta": {"status": "draft", "rank": 3}})
        );
        let plain = node_context(json!({"id": "n2", "body": "just text"}));
        assert_eq!(plain["content"], "just text");
        assert_eq!(plain["meta"], json!({}));
        let broken = node_context(json!({"id": "n3", "body": "---\nunclosed: yes\n"}));
        assert_eq!(broken["content"], "---\nunclosed: yes\n");
        assert_eq!(broken["meta"], json!({}));
    }

    fn strip() -> Vec<String> {
        strip_keys(DEFAULT_STRIP_KEYS)
    }

    #[test]
    fn parts_by_name() {
        for part in Part::ALL {
            assert_eq!(Part::parse(part.name()).unwrap(), part);
        }
        let error = Part::parse("memories").unwrap_err();
        assert_eq!(error.kind, ErrorKind::InvalidParameter);
        assert!(error.detail.unwrap().contains("last_user_message"));
    }

    #[test]
    fn empty_parts_have_the_documented_values() {
        let snapshot: Map<String, Value> =
            Part::ALL.iter().map(|p| (p.name().to_owned(), p.empty())).collect();
        assert_eq!(
            Value::Object(snapshot),
            json!({
                "session": { "session_id": "", "project_id": "", "active_node_id": "", "timestamp": "" },
                "project_structure": {
                    "project_graph": { "nodes": [], "edges": [] },
                    "elements_graph": { "nodes": [], "edges": [] }
                },
                "node_context": {},
                "fetched_context": {},
                "working_history": "",
                "messages": [],
                "last_user_message": "",
                "config": {
                    "history_length": 20,
                    "include_project_structure": true,
                    "include_context": true,
                    "include_working_history": true,
                    "auto_refresh_interval": 0
                }
            })
        );
    }

    #[test]
    fn a_read_shows_the_stored_value_or_the_empty_one() {
        assert_eq!(shown(Part::NodeContext, None), json!({}));
        assert_eq!(shown(Part::NodeContext, Some(json!({"a": 1}))), json!({"a": 1}));
        // The configuration always has its defaults filled in.
        let config = shown(Part::Config, Some(json!({"history_length": 5})));
        assert_eq!(config["history_length"], json!(5));
        assert_eq!(config["include_context"], json!(true));
        assert_eq!(shown(Part::Config, None), Part::Config.empty());
    }

    #[test]
    fn each_part_takes_its_json_type() {
        assert!(sanitise(Part::NodeContext, json!({"a": 1}), &strip()).is_ok());
        assert!(sanitise(Part::WorkingHistory, json!("text"), &strip()).is_ok());
        assert!(sanitise(Part::Messages, json!([]), &strip()).is_ok());
        for (part, value) in [
            (Part::NodeContext, json!([1])),
            (Part::WorkingHistory, json!({"a": 1})),
            (Part::Messages, json!("m")),
            (Part::LastUserMessage, json!(null)),
            (Part::Config, json!(3)),
        ] {
            let error = sanitise(part, value, &strip()).unwrap_err();
            assert_eq!(error.kind, ErrorKind::InvalidParameter, "{part:?}");
        }
    }

    #[test]
    fn messages_keep_the_newest_200() {
        let many: Vec<Value> = (0..250).map(|i| json!({"i": i})).collect();
        let kept = sanitise(Part::Messages, Value::Array(many), &strip()).unwrap();
        let kept = kept.as_array().unwrap();
        assert_eq!(kept.len(), 200);
        assert_eq!(kept[0], json!({"i": 50}));
        assert_eq!(kept[199], json!({"i": 249}));
    }

    #[test]
    fn graph_nodes_lose_builder_payloads() {
        let structure = json!({
            "project_graph": {
                "nodes": [{"id": "n1", "builder": {"x": 1}, "builderPayload": "big", "label": "A"}, "plain"],
                "edges": [{"from": "n1", "to": "n2", "builder": "kept on edges"}]
            }
        });
        let clean = sanitise(Part::ProjectStructure, structure, &strip()).unwrap();
        assert_eq!(
            clean,
            json!({
                "project_graph": {
                    "nodes": [{"id": "n1", "label": "A"}, "plain"],
                    "edges": [{"from": "n1", "to": "n2", "builder": "kept on edges"}]
                },
                "elements_graph": { "nodes": [], "edges": [] }
            })
        );
        assert_eq!(strip_keys(" a, ,b "), vec!["a".to_owned(), "b".to_owned()]);
        assert!(sanitise(Part::ProjectStructure, json!({"other": {}}), &strip()).is_err());
        assert!(
            sanitise(Part::ProjectStructure, json!({"project_graph": {"nodes": {}}}), &strip())
                .is_err()
        );
    }

    #[test]
    fn config_is_checked_and_clamped() {
        let clean = sanitise(
            Part::Config,
            json!({"history_length": 500, "auto_refresh_interval": -3, "include_context": false}),
            &strip(),
        )
        .unwrap();
        assert_eq!(
            clean,
            json!({"history_length": 200, "auto_refresh_interval": 0, "include_context": false})
        );
        assert_eq!(
            sanitise(Part::Config, json!({"history_length": 0}), &strip()).unwrap(),
            json!({"history_length": 1})
        );
        for bad in [
            json!({"history_length": "20"}),
            json!({"history_length": 2.5}),
            json!({"include_context": "no"}),
            json!({"auto_refresh_interval": true}),
            json!({"colour": "blue"}),
        ] {
            assert!(sanitise(Part::Config, bad.clone(), &strip()).is_err(), "{bad}");
        }
        // A number past a double's range is named as such.
        let huge: Value = serde_json::from_str(r#"{"auto_refresh_interval": 1e400}"#).unwrap();
        assert_eq!(
            sanitise(Part::Config, huge, &strip()).unwrap_err().message,
            "config.auto_refresh_interval 1e+400 is out of range"
        );
        assert_eq!(
            sanitise(Part::Config, json!({"history_length": 2.5}), &strip()).unwrap_err().message,
            "config.history_length must be an integer, not 2.5"
        );
        let config = effective_config(Some(&json!({"history_length": 5})));
        assert_eq!(config["history_length"], json!(5));
        assert_eq!(config["include_context"], json!(true));
        assert_eq!(effective_config(None), default_config());
    }

    #[test]
    fn the_session_part_sets_only_its_own_fields() {
        assert!(
            sanitise(Part::Session, json!({"project_id": "p", "active_node_id": null}), &strip())
                .is_ok()
        );
        assert!(sanitise(Part::Session, json!({"session_id": "other"}), &strip()).is_err());
        assert!(sanitise(Part::Session, json!({"project_id": 3}), &strip()).is_err());
    }

    #[test]
    fn merge_patches_follow_rfc_7396() {
        // The examples of RFC 7396, appendix A.
        let cases = [
            (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
            (json!({"a": "b"}), json!({"b": "c"}), json!({"a": "b", "b": "c"})),
            (json!({"a": "b"}), json!({"a": null}), json!({})),
            (json!({"a": "b", "b": "c"}), json!({"a": null}), json!({"b": "c"})),
            (json!({"a": ["b"]}), json!({"a": "c"}), json!({"a": "c"})),
            (json!({"a": "c"}), json!({"a": ["b"]}), json!({"a": ["b"]})),
            (
                json!({"a": {"b": "c"}}),
                json!({"a": {"b": "d", "c": null}}),
                json!({"a": {"b": "d"}}),
            ),
            (json!({"a": [{"b": "c"}]}), json!({"a": [1]}), json!({"a": [1]})),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a": "b"}), json!(["c"]), json!(["c"])),
            (json!({"a": "foo"}), json!(null), json!(null)),
            (json!({"a": "foo"}), json!("bar"), json!("bar")),
            (json!({"e": null}), json!({"a": 1}), json!({"e": null, "a": 1})),
            (json!([1, 2]), json!({"a": "b", "c": null}), json!({"a": "b"})),
            (json!({}), json!({"a": {"bb": {"ccc": null}}}), json!({"a": {"bb": {}}})),
        ];
        for (target, patch, result) in cases {
            assert_eq!(merge_patch(&target, &patch), result, "{target} + {patch}");
        }
        assert!(check_patch(Part::Config, &json!([])).is_err());
        assert!(check_patch(Part::Messages, &json!([])).is_ok());
    }
}
