//! Recall's quality on a labelled set (`data/recall_set.json`): over 200
//! memories of one user, of every kind, and questions worded otherwise
//! than what they ask for (other inflections, word order, partial phrases,
//! an agent's questions), each with the memories that answer it. A few
//! questions share no word with their answer: words alone cannot find
//! those, and they stay in the set for the meaning signal to be measured.
//!
//! Prints `recall quality: keyword recall@5 R over N questions (R' over the
//! M that share a word with their answer), MRR X` and requires recall@5 of
//! at least 0.8 over all of them.

use std::collections::HashMap;

use agent_memory_integration::{drop_database, fresh_database};
use postgres::Client;
use serde_json::Value;

const DB: &str = "am_it_recall_quality";
const SET: &str = include_str!("../data/recall_set.json");

/// Where recall reports a memory: (kind, key, ref).
type Address = (String, String, String);

/// Store every memory of the set as the user's agent would, and return the
/// id of the memory at each address.
fn store(client: &mut Client, memories: &[Value]) -> HashMap<Address, String> {
    for session in 1..=5 {
        client
            .execute(
                "SELECT agent_memory.create_session('ann', session_id => $1)",
                &[&format!("ann-{session}")],
            )
            .expect("create the session");
    }
    let mut addresses = HashMap::new();
    for memory in memories {
        let text = |field: &str| memory[field].as_str().unwrap_or_default().to_string();
        let id = text("id");
        let session = text("session");
        let address = match memory["kind"].as_str().expect("a kind") {
            "kv" => {
                let key = text("key");
                client
                    .execute(
                        "SELECT agent_memory.kv_set($1, $2, $3::text::jsonb)",
                        &[&session, &key, &memory["value"].to_string()],
                    )
                    .expect("kv_set");
                ("kv".to_string(), session, key)
            }
            "message" => {
                let seq: i64 = client
                    .query_one(
                        "SELECT agent_memory.append_message($1, $2, $3)",
                        &[&session, &text("role"), &text("content")],
                    )
                    .expect("append_message")
                    .get(0);
                ("message".to_string(), session, seq.to_string())
            }
            "node" => {
                let node = text("node_id");
                client
                    .execute(
                        "SELECT agent_memory.graph_create('ann', $1, $2, $3, ARRAY['__root__'], node_id => $4)",
                        &[&text("title"), &text("description"), &text("body"), &node],
                    )
                    .expect("graph_create");
                ("node".to_string(), "ann".to_string(), node)
            }
            "file" => {
                let path = text("path");
                let request = serde_json::json!({
                    "path": path, "command": "append", "content": text("content")
                });
                let answer: String = client
                    .query_one(
                        "SELECT agent_memory.memory_tool('ann', $1::text::jsonb)::text",
                        &[&request.to_string()],
                    )
                    .expect("memory_tool")
                    .get(0);
                assert!(answer.contains(r#""ok":true"#), "{answer}");
                ("file".to_string(), "ann".to_string(), path)
            }
            "working_memory" => {
                let node = text("node_id");
                client
                    .execute(
                        "SELECT agent_memory.wm_set($1, 'fetched_context', $2::text::jsonb, $3)",
                        &[&session, &memory["value"].to_string(), &node],
                    )
                    .expect("wm_set");
                ("working_memory".to_string(), session, format!("{node}/fetched_context"))
            }
            other => panic!("unknown kind {other}"),
        };
        assert!(
            addresses.insert(address, id.clone()).is_none(),
            "two memories at one address ({id})"
        );
    }
    addresses
}

#[test]
fn keyword_recall_finds_four_answers_in_five_among_the_top_five() {
    let set: Value = serde_json::from_str(SET).expect("the labelled set is JSON");
    let memories = set["memories"].as_array().expect("memories");
    let questions = set["questions"].as_array().expect("questions");
    assert!(memories.len() >= 200 && questions.len() >= 60);

    let mut client = fresh_database(DB);
    let addresses = store(&mut client, memories);

    let (mut recall_sum, mut lexical_sum, mut lexical, mut reciprocal_sum) = (0.0, 0.0, 0, 0.0);
    let mut misses = Vec::new();
    for question in questions {
        let query = question["query"].as_str().expect("a query");
        let expected: Vec<&str> = question["expected"]
            .as_array()
            .expect("expected")
            .iter()
            .map(|id| id.as_str().expect("an id"))
            .collect();
        let found: Vec<String> = client
            .query(
                "SELECT kind, key, ref FROM agent_memory.recall($1, user_id => 'ann', owner => 'ann',
                                                               scope => 'ann', k => 5)",
                &[&query],
            )
            .expect("recall")
            .iter()
            .map(|row| {
                let address: Address = (row.get(0), row.get(1), row.get(2));
                addresses.get(&address).cloned().unwrap_or_else(|| {
                    panic!("recall returned {address:?}, which the set did not store")
                })
            })
            .collect();
        let hits = expected.iter().filter(|id| found.iter().any(|f| f == *id)).count();
        let recall = hits as f64 / expected.len() as f64;
        recall_sum += recall;
        if question["lexical"].as_bool() == Some(true) {
            lexical += 1;
            lexical_sum += recall;
        }
        if let Some(first) = found.iter().position(|f| expected.contains(&f.as_str())) {
            reciprocal_sum += 1.0 / (first + 1) as f64;
        }
        if hits < expected.len() {
            misses.push(format!("{query:?}: expected {expected:?}, found {found:?}"));
        }
    }
    drop(client);
    drop_database(DB);

    let n = questions.len() as f64;
    let recall_at_5 = recall_sum / n;
    println!(
        "recall quality: keyword recall@5 {recall_at_5:.3} over {} questions ({:.3} over the {lexical} that share a word with their answer), MRR {:.3}",
        questions.len(),
        lexical_sum / f64::from(lexical),
        reciprocal_sum / n
    );
    for miss in &misses {
        println!("  missed {miss}");
    }
    assert!(recall_at_5 >= 0.8, "keyword recall@5 is {recall_at_5:.3}, below 0.8");
}
