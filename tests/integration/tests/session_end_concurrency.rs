//! Sessions ended and created again while other connections write to them:
//! four writers loop over key-value, message and working-memory writes to
//! four session ids while two other connections end those sessions and
//! create them again (some with an idle timeout of 20 ms, so that the next
//! creation replaces an expired session), for a bounded time. The only error a writer may see is
//! P0002 (the session is gone, or the creator has not finished yet): never a
//! deadlock, a serialization failure, or a unique or foreign-key violation.
//! Afterwards nothing belongs to a session that does not exist and every
//! session's word counter matches its entries.

use std::collections::BTreeMap;
use std::thread;
use std::time::{Duration, Instant};

use agent_memory_integration::{connect, drop_database, fresh_database};

const DB: &str = "am_it_session_end";
const IDS: [&str; 4] = ["e1", "e2", "e3", "e4"];
const RUN: Duration = Duration::from_secs(4);

/// Count how a call ended: `ok`, or its SQLSTATE (the whole error when it
/// has none).
fn tally(seen: &mut BTreeMap<String, usize>, result: Result<u64, postgres::Error>) {
    let outcome = match result {
        Ok(_) => "ok".to_string(),
        Err(e) => e.code().map(|c| c.code().to_string()).unwrap_or_else(|| e.to_string()),
    };
    *seen.entry(outcome).or_default() += 1;
}

#[test]
fn ending_and_creating_sessions_under_writers_raises_nothing_but_not_found() {
    let mut setup = fresh_database(DB);
    for id in IDS {
        setup.execute("SELECT agent_memory.create_session('u', session_id => $1)", &[&id]).unwrap();
    }
    let until = Instant::now() + RUN;

    let writers: Vec<_> = (0..4)
        .map(|w| {
            thread::spawn(move || {
                let mut client = connect(DB);
                let mut seen: BTreeMap<String, usize> = BTreeMap::new();
                let mut i = 0usize;
                while Instant::now() < until {
                    let id = IDS[(w + i) % IDS.len()];
                    let key = format!("k{}", i % 7);
                    let result = match i % 3 {
                        0 => client.execute(
                            "SELECT agent_memory.kv_set($1, $2, to_jsonb($3::text))",
                            &[&id, &key, &format!("writer {w} wrote {i}")],
                        ),
                        1 => client.execute(
                            "SELECT agent_memory.append_message($1, 'user', $2, keep => 5)",
                            &[&id, &format!("writer {w} says {i}")],
                        ),
                        _ => client.execute(
                            "SELECT agent_memory.wm_set($1, 'working_history', to_jsonb($2::text))",
                            &[&id, &format!("writer {w} step {i}")],
                        ),
                    };
                    tally(&mut seen, result);
                    i += 1;
                }
                seen
            })
        })
        .collect();
    let enders: Vec<_> = (0..2)
        .map(|e| {
            thread::spawn(move || {
                let mut client = connect(DB);
                let mut seen: BTreeMap<String, usize> = BTreeMap::new();
                let mut i = 0usize;
                while Instant::now() < until {
                    let id = IDS[(e * 2 + i) % IDS.len()];
                    let result = if i.is_multiple_of(2) {
                        client.execute("SELECT agent_memory.end_session($1)", &[&id])
                    } else {
                        // Every other creation expires almost at once, so the
                        // next one replaces an expired session.
                        let idle = if i % 4 == 1 { "20 milliseconds" } else { "1 hour" };
                        client.execute(
                            "SELECT agent_memory.create_session('u', session_id => $1, idle_timeout => $2::text::interval)",
                            &[&id, &idle],
                        )
                    };
                    tally(&mut seen, result);
                    i += 1;
                }
                seen
            })
        })
        .collect();

    let mut writes: BTreeMap<String, usize> = BTreeMap::new();
    for writer in writers {
        for (k, n) in writer.join().expect("writer thread panicked") {
            *writes.entry(k).or_default() += n;
        }
    }
    let mut lifecycle: BTreeMap<String, usize> = BTreeMap::new();
    for ender in enders {
        for (k, n) in ender.join().expect("ender thread panicked") {
            *lifecycle.entry(k).or_default() += n;
        }
    }

    let orphans: i64 = setup
        .query_one(
            "SELECT (SELECT count(*) FROM agent_memory.kv_entries k
                     WHERE NOT EXISTS (SELECT FROM agent_memory.sessions s WHERE s.session_id = k.session_id))
                  + (SELECT count(*) FROM agent_memory.thread_messages m
                     WHERE NOT EXISTS (SELECT FROM agent_memory.sessions s WHERE s.session_id = m.session_id))
                  + (SELECT count(*) FROM agent_memory.wm_parts p
                     WHERE NOT EXISTS (SELECT FROM agent_memory.sessions s WHERE s.session_id = p.session_id))",
            &[],
        )
        .unwrap()
        .get(0);
    let miscounted: i64 = setup
        .query_one(
            "SELECT count(*) FROM agent_memory.sessions s
             WHERE s.kv_words <> (SELECT coalesce(sum(k.words), 0) FROM agent_memory.kv_entries k
                                  WHERE k.session_id = s.session_id)",
            &[],
        )
        .unwrap()
        .get(0);
    drop(setup);
    drop_database(DB);

    println!("session_end: writes {writes:?}, ends and creations {lifecycle:?}");
    let unexpected: Vec<_> =
        writes.keys().chain(lifecycle.keys()).filter(|k| *k != "ok" && *k != "P0002").collect();
    assert!(
        unexpected.is_empty(),
        "errors other than P0002 reached callers: writes {writes:?}, ends and creations {lifecycle:?}"
    );
    assert!(
        writes.get("ok").copied().unwrap_or(0) > 0 && lifecycle.get("ok").copied().unwrap_or(0) > 0,
        "the race did not run: {writes:?} {lifecycle:?}"
    );
    assert_eq!(orphans, 0, "rows left without their session");
    assert_eq!(miscounted, 0, "word counters that do not match their entries");
}
