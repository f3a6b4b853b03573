//! Recall by meaning with and without pgvector. With pgvector installed,
//! `recall_enable_embeddings` makes an HNSW index per kind, and recall
//! finds a large scope's nearest items through it; without pgvector,
//! recall compares a scope's items itself, up to a bound past which it
//! refuses. Either way its best items are checked against the exact top
//! 10 computed here. The PostgreSQL 18 of `make test PG=18` ships
//! pgvector, so both paths are tested there and on 15.
//!
//! Prints `recall vectors: pgvector <version>: …` or `recall vectors: no
//! pgvector: …`.

use agent_memory_integration::{drop_database, fresh_database};
use postgres::Client;

const DB: &str = "am_it_recall_vectors";
const DIMENSION: usize = 8;
/// Owners o2.. hold NODES nodes each; o1, the one recalled, BIG_NODES.
const OWNERS: usize = 20;
const NODES: usize = 300;
const BIG_NODES: usize = 3000;

/// A fixed pseudo-random embedding for item `seed`, elements in [-1, 1).
fn embedding(seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    (0..DIMENSION)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((state >> 33) as f64 / (1u64 << 31) as f64 * 2.0 - 1.0) as f32
        })
        .collect()
}

fn literal(values: &[f32]) -> String {
    let items: Vec<String> = values.iter().map(|v| v.to_string()).collect();
    format!("{{{}}}", items.join(","))
}

/// OWNERS owners of NODES nodes each, every node embedded.
fn store(client: &mut Client) {
    client
        .batch_execute(&format!(
            "INSERT INTO agent_memory.graph_nodes (owner, node_id, title, description, body)
             SELECT 'o' || o, 'n' || i, 'Node ' || i, 'of owner ' || o, 'body ' || i
             FROM generate_series(1, {OWNERS}) o, generate_series(1, {NODES}) i
             UNION ALL
             SELECT 'o1', 'n' || i, 'Node ' || i, 'of owner 1', 'body ' || i
             FROM generate_series({NODES} + 1, {BIG_NODES}) i;
             SELECT agent_memory.recall_enable_embeddings({DIMENSION});"
        ))
        .expect("store the nodes");
    let mut transaction = client.transaction().expect("begin");
    let statement = transaction
        .prepare("SELECT agent_memory.recall_embed('node', $1, $2, $3::text::real[])")
        .expect("prepare");
    for owner in 1..=OWNERS {
        for node in 1..=if owner == 1 { BIG_NODES } else { NODES } {
            let seed = (owner * 1000 + node) as u64;
            let stored: bool = transaction
                .query_one(
                    &statement,
                    &[&format!("o{owner}"), &format!("n{node}"), &literal(&embedding(seed))],
                )
                .expect("recall_embed")
                .get(0);
            assert!(stored);
        }
    }
    transaction.commit().expect("commit");
    client.batch_execute("ANALYZE agent_memory.graph_nodes").expect("analyze");
}

/// The refs and similarities recall gives owner o1 for `query`, its exact
/// comparison bounded at `bound` items.
fn recall(client: &mut Client, query: &[f32], bound: i32) -> Result<Vec<(String, f64)>, String> {
    client
        .batch_execute(&format!("SET agent_memory.max_exact_recall = {bound}"))
        .expect("set the bound");
    client
        .query(
            "SELECT ref, (signals -> 'meaning' ->> 'similarity')::float8
             FROM agent_memory.recall(NULL, owner => 'o1', kinds => '{node}', k => 10,
                                      embedding => $1::text::real[])",
            &[&literal(query)],
        )
        .map(|rows| rows.iter().map(|r| (r.get(0), r.get(1))).collect())
        .map_err(|e| {
            e.as_db_error().map(|d| d.code().code().to_string()).unwrap_or_else(|| e.to_string())
        })
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (norm(a) * norm(b))
}

/// The exact top 10 (refs and similarities to `query`, above 0) of owner
/// `o<owner>`'s `nodes` nodes, computed here.
fn exact_top_10(query: &[f32], owner: usize, nodes: usize) -> Vec<(String, f64)> {
    exact_top(query, owner, nodes, 10)
}

/// The exact top `n`, as exact_top_10.
fn exact_top(query: &[f32], owner: usize, nodes: usize, n: usize) -> Vec<(String, f64)> {
    let mut exact: Vec<(String, f64)> = (1..=nodes)
        .map(|node| {
            let stored = embedding((owner * 1000 + node) as u64);
            (format!("n{node}"), f64::from(cosine(query, &stored)))
        })
        .filter(|(_, similarity)| *similarity > 0.0)
        .collect();
    exact.sort_by(|a, b| b.1.total_cmp(&a.1));
    exact.truncate(n);
    exact
}

/// How many of the `exact` top 10 `found` holds (at least `least`), each
/// with its exact similarity.
fn assert_found(found: &[(String, f64)], exact: &[(String, f64)], least: usize) -> usize {
    let common = found.iter().filter(|(r, _)| exact.iter().any(|(e, _)| e == r)).count();
    assert!(common >= least, "found {common} of the exact top 10: {found:?} against {exact:?}");
    for (r, similarity) in found {
        if let Some((_, exact_similarity)) = exact.iter().find(|(e, _)| e == r) {
            assert!((similarity - exact_similarity).abs() < 1e-4, "{r}");
        }
    }
    common
}

fn index_scans(client: &mut Client) -> i64 {
    client.batch_execute("SELECT pg_stat_clear_snapshot()").expect("clear the statistics snapshot");
    client
        .query_one(
            "SELECT coalesce(sum(idx_scan), 0)::int8 FROM pg_stat_user_indexes
             WHERE indexrelname = 'graph_nodes_embedding_idx'",
            &[],
        )
        .expect("index scans")
        .get(0)
}

#[test]
fn a_scope_past_the_bound_is_searched_through_pgvector_or_refused() {
    let mut client = fresh_database(DB);
    let version: Option<String> = client
        .query_one("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'", &[])
        .ok()
        .map(|row| row.get(0));
    if version.is_some() {
        client.batch_execute("CREATE EXTENSION vector").expect("create extension vector");
    }
    store(&mut client);
    let query = embedding(7);
    let exact = exact_top_10(&query, 1, BIG_NODES);
    let compared = recall(&mut client, &query, 100_000).expect("recall");
    assert_found(&compared, &exact, 10);

    let Some(version) = version else {
        let enabled: String = client
            .query_one("SELECT agent_memory.recall_enable_embeddings(8)::text", &[])
            .unwrap()
            .get(0);
        assert_eq!(enabled, r#"{"index": null, "dimension": 8}"#);
        assert_eq!(recall(&mut client, &query, 100), Err("54000".to_string()));
        println!(
            "recall vectors: no pgvector: the exact top 10 of {BIG_NODES} nodes; past the bound recall is refused (54000)"
        );
        drop_database(DB);
        return;
    };

    let scans = index_scans(&mut client);
    let through_index = recall(&mut client, &query, 100).expect("recall through the index");
    // The statistics collector reports with a delay.
    let mut used = 0;
    for _ in 0..50 {
        used = index_scans(&mut client) - scans;
        if used > 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(used > 0, "the HNSW index was not used");
    let found = assert_found(&through_index, &exact, 8);
    // A node whose text changed is not found by its old embedding.
    let best = &exact[0].0;
    client
        .execute(
            "UPDATE agent_memory.graph_nodes SET body = 'rewritten' WHERE owner = 'o1' AND node_id = $1",
            &[best],
        )
        .expect("rewrite the best node");
    let after = recall(&mut client, &query, 100).expect("recall after the rewrite");
    assert!(after.iter().all(|(r, _)| r != best), "{best} was found stale");
    assert!(after.len() >= 8);

    // An index scan cut short (here by pgvector's own bounds, as a scope
    // small among many others cuts it) leaves recall comparing the
    // scope's items itself: all 10 right.
    let small_exact = exact_top_10(&query, 2, NODES);
    client
        .batch_execute(
            "SET hnsw.ef_search = 10; SET hnsw.max_scan_tuples = 10;
             SET agent_memory.max_exact_recall = 1000",
        )
        .expect("bound the index scan");
    let small = client
        .query(
            "SELECT ref, (signals -> 'meaning' ->> 'similarity')::float8
             FROM agent_memory.recall(NULL, owner => 'o2', kinds => '{node}', k => 10,
                                      embedding => $1::text::real[])",
            &[&literal(&query)],
        )
        .expect("recall a small scope")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect::<Vec<(String, f64)>>();
    assert_eq!(small.len(), 10);
    assert_found(&small, &small_exact, 10);

    // A kind past the bound keeps what the index found, and the others
    // are still compared: scope f1's files, which the bounded index scan
    // misses behind 60 nearer files of scope f2, are all found beside
    // owner o2's nodes (300, past a bound of 100).
    let f1_files: Vec<Vec<f32>> =
        (1..).map(embedding).filter(|stored| cosine(&query, stored) > 0.0).take(3).collect();
    let mut transaction = client.transaction().expect("begin");
    // Nearer than any of f1's, and each its own (pgvector keeps equal
    // vectors as one element of its graph).
    let crowd: Vec<Vec<f32>> = (0..60)
        .map(|i| {
            let mut near = query.clone();
            near[i % DIMENSION] += 0.001 * (i / DIMENSION + 1) as f32;
            near
        })
        .collect();
    for (scope, embeddings) in [("f1", &f1_files), ("f2", &crowd)] {
        for (i, stored) in embeddings.iter().enumerate() {
            let path = format!("/f{i}");
            transaction
                .query_one(
                    "SELECT agent_memory.memory_tool($1, jsonb_build_object(
                       'command', 'append', 'path', $2::text, 'content', 'file ' || $2))",
                    &[&scope, &path],
                )
                .expect("write a file");
            let stored: bool = transaction
                .query_one(
                    "SELECT agent_memory.recall_embed('file', $1, $2, $3::text::real[])",
                    &[&scope, &path, &literal(stored)],
                )
                .expect("embed a file")
                .get(0);
            assert!(stored);
        }
    }
    transaction.commit().expect("commit the files");
    client.batch_execute("SET agent_memory.max_exact_recall = 100").expect("set the bound");
    let kinds: Vec<String> = client
        .query(
            "SELECT kind FROM agent_memory.recall(NULL, owner => 'o2', scope => 'f1',
                                                 kinds => '{node,file}', k => 100,
                                                 embedding => $1::text::real[])",
            &[&literal(&query)],
        )
        .expect("recall nodes past the bound and files")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(kinds.iter().filter(|kind| *kind == "file").count(), 3, "{kinds:?}");
    client
        .batch_execute("RESET hnsw.ef_search; RESET hnsw.max_scan_tuples")
        .expect("reset the bound");

    // Recall by meaning alone reads the index for k + 10 a kind first, and
    // deeper when that could miss one of the best k: here the nearest 22
    // are a year old (recency near its floor of 0.5), so the best 10 are
    // the nearest 7 and the 3 fresh ones just past the old, which only the
    // deeper read reaches.
    let nearest = exact_top(&query, 1, BIG_NODES, 25);
    let (old, fresh) = nearest.split_at(22);
    let old_refs: Vec<&String> = old.iter().map(|(r, _)| r).collect();
    client
        .execute(
            "UPDATE agent_memory.graph_nodes SET updated_at = now() - interval '1 year'
             WHERE owner = 'o1' AND node_id = ANY ($1)",
            &[&old_refs],
        )
        .expect("age the nearest 22");
    let past_old = recall(&mut client, &query, 100).expect("recall past the old ones");
    let best: Vec<(String, f64)> = old[..7].iter().chain(fresh).cloned().collect();
    let best_found = assert_found(&past_old, &best, 8);
    assert!(
        past_old.iter().any(|(r, _)| fresh.iter().any(|(f, _)| f == r)),
        "no fresh item past the first read: {past_old:?}"
    );

    // The iterative scan was the call's only: the setting is back after.
    let iterative: String =
        client.query_one("SELECT current_setting('hnsw.iterative_scan')", &[]).unwrap().get(0);
    assert_eq!(iterative, "off");
    println!(
        "recall vectors: pgvector {version}: through the HNSW index, {found} of the exact top 10 of {BIG_NODES} nodes among {}, a stale one never; a scope the index scan falls short of, all 10; past 22 old ones, {best_found} of the best 10",
        BIG_NODES + (OWNERS - 1) * NODES
    );
    drop_database(DB);
}

/// A fresh database `name` when the server offers pgvector (not yet
/// created in it); otherwise prints what is skipped, drops the database and
/// gives None.
fn database_offering_pgvector(name: &str, skipped: &str) -> Option<Client> {
    let mut client = fresh_database(name);
    let offered = client
        .query_opt("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'", &[])
        .expect("available extensions")
        .is_some();
    if offered {
        return Some(client);
    }
    println!("recall vectors: no pgvector: {skipped}");
    drop(client);
    drop_database(name);
    None
}

/// As database_offering_pgvector, with pgvector created in it and recall
/// taking embeddings of 3 numbers.
fn database_with_pgvector(name: &str, skipped: &str) -> Option<Client> {
    let mut client = database_offering_pgvector(name, skipped)?;
    client
        .batch_execute(
            "CREATE EXTENSION vector;
             SELECT agent_memory.recall_enable_embeddings(3);",
        )
        .expect("pgvector, embeddings of 3 numbers");
    Some(client)
}

/// pgvector in a schema whose name holds quotes and the very placeholders
/// recall's statement is built with: recall by meaning still finds the
/// nearest node, through the index and exactly, and no part of the name
/// is read as SQL.
#[test]
fn pgvector_in_a_schema_of_any_name_is_quoted() {
    const ODD_DB: &str = "am_it_recall_odd_schema";
    let Some(mut client) = database_offering_pgvector(ODD_DB, "no schema of pgvector to quote")
    else {
        return;
    };
    client
        .batch_execute(
            r#"CREATE SCHEMA "v""__SCHEMA__"" x __VECTOR__ __DIMENSION__";
               CREATE EXTENSION vector SCHEMA "v""__SCHEMA__"" x __VECTOR__ __DIMENSION__";
               SELECT agent_memory.recall_enable_embeddings(3);
               SELECT agent_memory.graph_create('odd', 'North', 'the north one', '', ARRAY['__root__'], node_id => 'north');
               SELECT agent_memory.graph_create('odd', 'East', 'the east one', '', ARRAY['__root__'], node_id => 'east');
               SELECT agent_memory.recall_embed('node', 'odd', 'north', '{0,1,0}');
               SELECT agent_memory.recall_embed('node', 'odd', 'east', '{1,0,0}');"#,
        )
        .expect("pgvector in an oddly named schema, two nodes embedded");
    // The refs recall finds nearest, or the error it gives.
    let nearest = |client: &mut Client| -> Vec<String> {
        client
            .query(
                "SELECT ref FROM agent_memory.recall(NULL, owner => 'odd', kinds => '{node}',
                                                     embedding => '{0.1,0.9,0}')",
                &[],
            )
            .map(|rows| rows.iter().map(|row| row.get(0)).collect())
            .unwrap_or_else(|e| vec![e.to_string()])
    };
    assert_eq!(nearest(&mut client), ["north", "east"]);
    // In a parallel plan's workers and leader no setting may change; recall
    // is not run there.
    client
        .batch_execute(
            "SELECT set_config(CASE WHEN current_setting('server_version_num')::int >= 160000
                                    THEN 'debug_parallel_query' ELSE 'force_parallel_mode' END,
                               'on', false)",
        )
        .expect("force parallel query");
    let parallel = nearest(&mut client);
    assert_eq!(parallel, ["north", "east"], "recall with parallel query forced");
    println!(
        "recall vectors: pgvector in a schema named with quotes and placeholders: found, also with parallel query forced"
    );
    drop_database(ODD_DB);
}

/// A kind left out of recall is not found through pgvector either, and
/// the search leaves hnsw.iterative_scan as it found it.
#[test]
fn pgvector_finds_no_kind_left_out_of_recall() {
    const LEFT_OUT_DB: &str = "am_it_recall_left_out";
    let Some(mut client) =
        database_with_pgvector(LEFT_OUT_DB, "no kind left out to search through it")
    else {
        return;
    };
    client
        .batch_execute(
            "SELECT agent_memory.graph_create('left', 'North', 'the north one', '', ARRAY['__root__'], node_id => 'north');
             SELECT agent_memory.recall_embed('node', 'left', 'north', '{0,1,0}');",
        )
        .expect("pgvector, a node embedded");
    let nearest = |client: &mut postgres::Transaction<'_>| -> Vec<String> {
        client
            .query(
                "SELECT ref FROM agent_memory.recall(NULL, owner => 'left', embedding => '{0.1,0.9,0}')",
                &[],
            )
            .expect("recall by meaning")
            .iter()
            .map(|row| row.get(0))
            .collect()
    };
    let mut transaction = client.transaction().expect("begin");
    assert_eq!(nearest(&mut transaction), ["north"]);
    transaction
        .batch_execute(
            "SET LOCAL hnsw.iterative_scan = strict_order;
             SET LOCAL agent_memory.recall_kinds = 'kv, message, file';
             SELECT agent_memory.recall_rebuild();",
        )
        .expect("leave nodes out of recall");
    assert_eq!(nearest(&mut transaction), Vec::<String>::new());
    let setting: String = transaction
        .query_one("SELECT current_setting('hnsw.iterative_scan')", &[])
        .expect("the setting")
        .get(0);
    assert_eq!(setting, "strict_order");
    let embedded: bool = transaction
        .query_one("SELECT agent_memory.recall_embed('node', 'left', 'north', '{1,0,0}')", &[])
        .expect("recall_embed")
        .get(0);
    assert!(!embedded, "an embedding stored on a kind left out");
    transaction.rollback().expect("rollback");
    println!("recall vectors: pgvector: a kind left out of recall is not found by meaning");
    drop_database(LEFT_OUT_DB);
}

/// By meaning alone through pgvector's index, recall marks the snippets
/// of the texts its first read returned; an item it reads again (found by
/// words too, or where the scope is compared exactly) has its snippet made
/// of its row. Both give the same snippet of the same item, with the words
/// marked when there are words, and the first words when there are none.
#[test]
fn pgvector_snippets_are_those_of_the_words() {
    const SNIPPETS_DB: &str = "am_it_recall_snippets";
    let Some(mut client) =
        database_with_pgvector(SNIPPETS_DB, "no texts returned by its index read")
    else {
        return;
    };
    client
        .batch_execute(
            "SELECT agent_memory.graph_create('snip', 'Travel', 'how the owner likes to fly',
                    'A window seat on every long flight, and an aisle seat on short hops.',
                    ARRAY['__root__'], node_id => 'travel');
             SELECT agent_memory.graph_create('snip', 'Meals', 'what the owner eats',
                    'No fish at dinner; a vegetarian meal on the flight when there is one.',
                    ARRAY['__root__'], node_id => 'meals');
             SELECT agent_memory.graph_create('snip', 'Pets', 'the cat',
                    'The cat is fed at seven, and again on Saturday evening.',
                    ARRAY['__root__'], node_id => 'pets');
             SELECT agent_memory.recall_embed('node', 'snip', 'travel', '{1,0.1,0}');
             SELECT agent_memory.recall_embed('node', 'snip', 'meals', '{0.9,0.3,0}');
             SELECT agent_memory.recall_embed('node', 'snip', 'pets', '{0,0.2,1}');",
        )
        .expect("pgvector, three nodes embedded");
    let snippets = |client: &mut Client, call: &str| -> Vec<(String, String)> {
        client
            .query(&format!("SELECT ref, snippet FROM agent_memory.{call}"), &[])
            .unwrap_or_else(|e| panic!("{call}: {e}"))
            .iter()
            .map(|row| (row.get(0), row.get(1)))
            .collect()
    };
    let by_words =
        snippets(&mut client, "recall('seat on the flight', owner => 'snip') ORDER BY ref");
    assert_eq!(by_words.len(), 2, "{by_words:?}");
    assert!(by_words.iter().all(|(_, snippet)| snippet.contains("**flight**")), "{by_words:?}");
    // Two of three through the index: the kind is not short of k, so no
    // exact read follows and the texts the index read returned are marked.
    let mut by_meaning = snippets(
        &mut client,
        "recall('seat on the flight', owner => 'snip', k => 2, embedding => '{1,0.2,0}',
                weights => '{\"keyword\": 0}')",
    );
    by_meaning.sort();
    assert_eq!(by_meaning, by_words, "marked from the index read's texts");
    let mut hybrid = snippets(
        &mut client,
        "recall('seat on the flight', owner => 'snip', k => 2, embedding => '{1,0.2,0}')",
    );
    hybrid.sort();
    assert_eq!(hybrid, by_words, "found by words and by meaning");
    // No words: each snippet is its text's first words, the same whether
    // the index read returned it or the exact read made it read again.
    let first_words =
        snippets(&mut client, "recall(NULL, owner => 'snip', k => 2, embedding => '{0,0.2,1}')");
    let exactly =
        snippets(&mut client, "recall(NULL, owner => 'snip', k => 10, embedding => '{0,0.2,1}')");
    assert_eq!(first_words[0].0, "pets", "{first_words:?}");
    assert!(first_words[0].1.starts_with("Pets\nthe cat\nThe cat is fed"), "{first_words:?}");
    assert!(!first_words[0].1.contains("**"), "{first_words:?}");
    assert_eq!(exactly.len(), 3, "{exactly:?}");
    assert_eq!(exactly[..2], first_words[..], "the exact read's snippets");
    println!(
        "recall vectors: pgvector: the snippets of the texts its index read returned are those of the rows read again"
    );
    drop_database(SNIPPETS_DB);
}
