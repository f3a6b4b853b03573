//! The tools a model calls, each one statement of the extension.
//!
//! `memory` and `recall` take their definitions from the extension itself
//! (`memory_tool_definition`, `recall_tool_definition`), so the schema a
//! model sees is the one the extension checks. The others wrap one function
//! each and answer with the same envelope: `{ok: true, result}` or `{ok:
//! false, error: {message, code}}`. A tool is listed only when the operator
//! gave the memory it works on.

use serde_json::{Map, Value, json};

use crate::database::{Database, Failure};
use crate::options::Options;

/// A tool's answer: the envelope, and whether it is a refusal.
pub struct Answer {
    pub envelope: Value,
    pub is_error: bool,
}

impl Answer {
    fn ok(result: Value) -> Answer {
        Answer { envelope: json!({"ok": true, "result": result}), is_error: false }
    }

    /// An envelope the extension built: a refusal when `ok` is false.
    fn from_envelope(text: &str) -> Answer {
        match serde_json::from_str::<Value>(text) {
            Ok(envelope) => {
                let is_error = envelope.get("ok") != Some(&Value::Bool(true));
                Answer { envelope, is_error }
            }
            Err(error) => Answer::failure(&Failure::Refused {
                sqlstate: "XX000".into(),
                message: format!("the extension answered with text that is not JSON: {error}"),
            }),
        }
    }

    fn failure(failure: &Failure) -> Answer {
        Answer { envelope: failure.envelope(), is_error: true }
    }

    fn invalid(message: impl Into<String>) -> Answer {
        Answer {
            envelope: json!({"ok": false, "error": {"message": message.into(), "code": "EINVAL"}}),
            is_error: true,
        }
    }
}

/// A tool as MCP lists it.
pub struct Definition {
    pub name: String,
    pub description: String,
    pub input_schema: Map<String, Value>,
}

/// The definitions of the tools the operator's options enable.
pub async fn definitions(
    database: &Database, options: &Options,
) -> Result<Vec<Definition>, Failure> {
    let mut tools = Vec::new();
    if options.scope.is_some() {
        let text: String =
            database.value("SELECT agent_memory.memory_tool_definition()::text", &[]).await?;
        tools.push(from_extension(&text)?);
    }
    if options.names_some_memory() {
        let text: String =
            database.value("SELECT agent_memory.recall_tool_definition()::text", &[]).await?;
        tools.push(from_extension(&text)?);
    }
    if options.session.is_some() {
        tools.push(defined(
            "remember",
            "Remember a value under a key in this conversation's key-value memory, replacing what the key held. \
             Values expire with the session, or after ttl_seconds when given.",
            json!({
                "key": {"type": "string", "description": "The key, e.g. 'destination'"},
                "value": {"description": "Any JSON value"},
                "ttl_seconds": {"type": "number", "description": "Forget the value after this many seconds"}
            }),
            &["key", "value"],
        ));
        tools.push(defined(
            "forget",
            "Forget the value stored under a key in this conversation's key-value memory.",
            json!({"key": {"type": "string"}}),
            &["key"],
        ));
    }
    if options.owner.is_some() {
        tools.push(defined(
            "graph_read",
            "Read one node of the knowledge graph: title, description, body, refs, version and revision. \
             The root is '__root__'.",
            json!({"node_id": {"type": "string"}}),
            &["node_id"],
        ));
        tools.push(defined(
            "graph_create",
            "Create a node of the knowledge graph under its parents ('__root__' or node ids); returns its id.",
            json!({
                "title": {"type": "string"},
                "description": {"type": "string"},
                "body": {"type": "string"},
                "parents": {"type": "array", "items": {"type": "string"}, "description": "Default ['__root__']"},
                "node_id": {"type": "string", "description": "An id of your choosing; generated when absent"}
            }),
            &["title"],
        ));
        tools.push(defined(
            "graph_write",
            "Change a node of the knowledge graph; an absent field keeps its value. With a change_description \
             the previous state is kept as a version. With expected_revision the write happens only if the node \
             is still at that revision (read it again on ECONFLICT).",
            json!({
                "node_id": {"type": "string"},
                "title": {"type": "string"},
                "description": {"type": "string"},
                "body": {"type": "string"},
                "refs": {"type": "array", "items": {"type": "string"}},
                "change_description": {"type": "string"},
                "expected_revision": {"type": "integer"}
            }),
            &["node_id"],
        ));
        tools.push(defined(
            "graph_append",
            "Add text to a node's body on a new line, keeping the rest. With expected_revision the append happens \
             only if the node is still at that revision (read it again on ECONFLICT).",
            json!({
                "node_id": {"type": "string"},
                "content": {"type": "string"},
                "expected_revision": {"type": "integer"}
            }),
            &["node_id", "content"],
        ));
        tools.push(defined(
            "graph_delete",
            "Delete a node of the knowledge graph with its saved versions; its parents no longer list it. \
             Returns whether it was there.",
            json!({
                "node_id": {"type": "string"},
                "expected_revision": {"type": "integer"}
            }),
            &["node_id"],
        ));
        tools.push(defined(
            "graph_tree",
            "The knowledge graph as a tree: the root and each node's children.",
            json!({}),
            &[],
        ));
    }
    Ok(tools)
}

fn from_extension(text: &str) -> Result<Definition, Failure> {
    let bad = |what: &str| Failure::Refused {
        sqlstate: "XX000".into(),
        message: format!("the extension's tool definition has no {what}"),
    };
    let definition: Value = serde_json::from_str(text).map_err(|_| bad("JSON"))?;
    Ok(Definition {
        name: definition["name"].as_str().ok_or_else(|| bad("name"))?.to_owned(),
        description: definition["description"].as_str().unwrap_or_default().to_owned(),
        input_schema: definition["input_schema"]
            .as_object()
            .ok_or_else(|| bad("input_schema"))?
            .clone(),
    })
}

fn defined(name: &str, description: &str, properties: Value, required: &[&str]) -> Definition {
    let mut schema = Map::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), properties);
    schema.insert("required".into(), json!(required));
    schema.insert("additionalProperties".into(), json!(false));
    Definition { name: name.into(), description: description.into(), input_schema: schema }
}

/// Run tool `name` with the model's `arguments`; None for a tool that this
/// server does not offer.
pub async fn call(
    database: &Database, options: &Options, name: &str, arguments: Map<String, Value>,
) -> Option<Answer> {
    let arguments = Arguments(arguments);
    Some(match (name, &options.scope, &options.session, &options.owner) {
        ("memory", Some(scope), _, _) => {
            let request = Value::Object(arguments.0);
            envelope_of(
                database
                    .value::<String>(
                        "SELECT agent_memory.memory_tool($1, $2::jsonb)::text",
                        &[scope, &request],
                    )
                    .await,
            )
        }
        ("recall", ..) if options.names_some_memory() => {
            let request = Value::Object(arguments.0);
            envelope_of(
                database
                    .value::<String>(
                        "SELECT agent_memory.recall_tool($1::jsonb, $2, $3, $4, $5)::text",
                        &[
                            &request,
                            &options.session,
                            &options.user,
                            &options.owner,
                            &options.scope,
                        ],
                    )
                    .await,
            )
        }
        ("remember", _, Some(session), _) => remember(database, options, session, &arguments).await,
        ("forget", _, Some(session), _) => match arguments.text("key") {
            Err(answer) => answer,
            Ok(key) => result_of(
                database
                    .value::<bool>("SELECT agent_memory.kv_delete($1, $2)", &[session, &key])
                    .await
                    .map(|deleted| json!({"deleted": deleted})),
            ),
        },
        ("graph_read", _, _, Some(owner)) => match arguments.text("node_id") {
            Err(answer) => answer,
            Ok(node) => json_result(
                database
                    .value::<Option<String>>(
                        "SELECT agent_memory.graph_read($1, $2)::text",
                        &[owner, &node],
                    )
                    .await,
            ),
        },
        ("graph_create", _, _, Some(owner)) => graph_create(database, owner, &arguments).await,
        ("graph_write", _, _, Some(owner)) => graph_write(database, owner, &arguments).await,
        ("graph_append", _, _, Some(owner)) => graph_append(database, owner, &arguments).await,
        ("graph_delete", _, _, Some(owner)) => graph_delete(database, owner, &arguments).await,
        ("graph_tree", _, _, Some(owner)) => json_result(
            database
                .value::<Option<String>>("SELECT agent_memory.graph_tree($1)::text", &[owner])
                .await,
        ),
        _ => return None,
    })
}

async fn remember(
    database: &Database, options: &Options, session: &String, arguments: &Arguments,
) -> Answer {
    let parsed = (|| {
        Ok((
            arguments.text("key")?,
            arguments.required("value")?.clone(),
            arguments.optional_number("ttl_seconds")?,
        ))
    })();
    let (key, value, ttl) = match parsed {
        Ok(parsed) => parsed,
        Err(answer) => return answer,
    };
    const SET: &str =
        "SELECT agent_memory.kv_set($1, $2, $3::jsonb, $4 * interval '1 second')::text";
    let mut stored = database.value::<String>(SET, &[session, &key, &value, &ttl]).await;
    // A session that does not exist yet, or has expired: the operator named
    // its user, so it is the operator's session to (re)create.
    if let (Err(Failure::Refused { sqlstate, .. }), Some(user)) = (&stored, &options.user)
        && sqlstate == "P0002"
    {
        let created = database
            .value::<String>(
                "SELECT agent_memory.create_session($1, '{}'::jsonb, $2)",
                &[user, session],
            )
            .await;
        if let Err(failure) = created {
            return Answer::failure(&failure);
        }
        stored = database.value::<String>(SET, &[session, &key, &value, &ttl]).await;
    }
    json_result(stored.map(Some))
}

async fn graph_create(database: &Database, owner: &String, arguments: &Arguments) -> Answer {
    let parsed = (|| {
        Ok((
            arguments.text("title")?,
            arguments.optional_text("description")?,
            arguments.optional_text("body")?,
            arguments.optional_texts("parents")?,
            arguments.optional_text("node_id")?,
        ))
    })();
    let (title, description, body, parents, node) = match parsed {
        Ok(parsed) => parsed,
        Err(answer) => return answer,
    };
    let parents = parents.unwrap_or_else(|| vec!["__root__".to_owned()]);
    result_of(
        database
            .value::<String>(
                "SELECT agent_memory.graph_create($1, $2, coalesce($3, ''), coalesce($4, ''), $5, $6)",
                &[owner, &title, &description, &body, &parents, &node],
            )
            .await
            .map(|id| json!({"id": id})),
    )
}

async fn graph_write(database: &Database, owner: &String, arguments: &Arguments) -> Answer {
    let parsed = (|| {
        Ok((
            arguments.text("node_id")?,
            arguments.optional_text("title")?,
            arguments.optional_text("description")?,
            arguments.optional_text("body")?,
            arguments.optional_texts("refs")?,
            arguments.optional_text("change_description")?,
            arguments.optional_integer("expected_revision")?,
        ))
    })();
    let (node, title, description, body, refs, change, expected) = match parsed {
        Ok(parsed) => parsed,
        Err(answer) => return answer,
    };
    result_of(
        database
            .value::<i32>(
                "SELECT agent_memory.graph_write($1, $2, $3, $4, $5, $6, $7, $8)",
                &[owner, &node, &title, &description, &body, &refs, &change, &expected],
            )
            .await
            .map(|version| json!({"version": version})),
    )
}

async fn graph_append(database: &Database, owner: &String, arguments: &Arguments) -> Answer {
    let parsed = (|| {
        Ok((
            arguments.text("node_id")?,
            arguments.text("content")?,
            arguments.optional_integer("expected_revision")?,
        ))
    })();
    let (node, content, expected) = match parsed {
        Ok(parsed) => parsed,
        Err(answer) => return answer,
    };
    result_of(
        database
            .value::<i32>(
                "SELECT agent_memory.graph_append($1, $2, $3, $4)",
                &[owner, &node, &content, &expected],
            )
            .await
            .map(|version| json!({"version": version})),
    )
}

async fn graph_delete(database: &Database, owner: &String, arguments: &Arguments) -> Answer {
    let parsed =
        (|| Ok((arguments.text("node_id")?, arguments.optional_integer("expected_revision")?)))();
    let (node, expected) = match parsed {
        Ok(parsed) => parsed,
        Err(answer) => return answer,
    };
    result_of(
        database
            .value::<bool>(
                "SELECT agent_memory.graph_delete($1, $2, $3)",
                &[owner, &node, &expected],
            )
            .await
            .map(|deleted| json!({"deleted": deleted})),
    )
}

fn envelope_of(text: Result<String, Failure>) -> Answer {
    match text {
        Ok(text) => Answer::from_envelope(&text),
        Err(failure) => Answer::failure(&failure),
    }
}

fn result_of(result: Result<Value, Failure>) -> Answer {
    match result {
        Ok(result) => Answer::ok(result),
        Err(failure) => Answer::failure(&failure),
    }
}

/// A function's JSON result (as text, so that numbers keep their digits).
fn json_result(text: Result<Option<String>, Failure>) -> Answer {
    result_of(
        text.map(|text| {
            text.and_then(|text| serde_json::from_str(&text).ok()).unwrap_or(Value::Null)
        }),
    )
}

/// The model's arguments, read with a refusal the model can act on.
struct Arguments(Map<String, Value>);

impl Arguments {
    fn required(&self, name: &str) -> Result<&Value, Answer> {
        match self.0.get(name) {
            None | Some(Value::Null) => Err(Answer::invalid(format!("{name} is required"))),
            Some(value) => Ok(value),
        }
    }

    fn text(&self, name: &str) -> Result<String, Answer> {
        self.optional_text(name)?.ok_or_else(|| Answer::invalid(format!("{name} is required")))
    }

    fn optional_text(&self, name: &str) -> Result<Option<String>, Answer> {
        match self.0.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.clone())),
            Some(_) => Err(Answer::invalid(format!("{name} must be a string"))),
        }
    }

    fn optional_texts(&self, name: &str) -> Result<Option<Vec<String>>, Answer> {
        let wrong = || Answer::invalid(format!("{name} must be an array of strings"));
        match self.0.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| item.as_str().map(str::to_owned).ok_or_else(wrong))
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(_) => Err(wrong()),
        }
    }

    fn optional_number(&self, name: &str) -> Result<Option<f64>, Answer> {
        match self.0.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => value
                .as_f64()
                .map(Some)
                .ok_or_else(|| Answer::invalid(format!("{name} must be a number"))),
        }
    }

    fn optional_integer(&self, name: &str) -> Result<Option<i32>, Answer> {
        match self.0.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => value
                .as_i64()
                .and_then(|number| i32::try_from(number).ok())
                .map(Some)
                .ok_or_else(|| Answer::invalid(format!("{name} must be an integer"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arguments(value: Value) -> Arguments {
        Arguments(value.as_object().unwrap().clone())
    }

    #[test]
    fn a_refused_envelope_is_an_error() {
        let answer =
            Answer::from_envelope(r#"{"ok":false,"error":{"message":"x","code":"ENOENT"}}"#);
        assert!(answer.is_error);
        assert!(!Answer::from_envelope(r#"{"ok":true,"result":1}"#).is_error);
        assert!(Answer::from_envelope("not json").is_error);
    }

    #[test]
    fn wrong_arguments_are_refused_with_einval() {
        let given = arguments(json!({"key": 1, "parents": ["a", 2], "expected_revision": 1.5}));
        for refusal in [
            given.text("key").err(),
            given.text("missing").err(),
            given.optional_texts("parents").err(),
            given.optional_integer("expected_revision").err(),
        ] {
            let refusal = refusal.expect("refused");
            assert!(refusal.is_error);
            assert_eq!(refusal.envelope["error"]["code"], "EINVAL");
        }
        assert_eq!(given.optional_text("absent").ok(), Some(None));
    }
}
