//! Eight connections write to one session's key-value memory at once. After
//! every commit the session's words stay within the budget, and no deadlock
//! or serialization error reaches a caller.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;

use agent_memory_integration::{drop_database, fresh_database};

const WRITERS: usize = 8;
const WRITES_PER_WRITER: usize = 150;
const BUDGET: i64 = 40;
const SESSION: &str = "shared";

/// A small deterministic generator (no dependency needed for test data).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % below
    }
}

fn words(n: u64) -> String {
    (0..n).map(|i| format!("w{i}")).collect::<Vec<_>>().join(" ")
}

const TOTAL: &str = "SELECT coalesce(sum(words), 0)::int8 FROM agent_memory.kv_entries
                     WHERE session_id = $1 AND expires_at > now()";

#[test]
fn eight_writers_never_push_a_session_over_its_word_budget() {
    let db = "am_it_concurrency";
    let mut setup = fresh_database(db);
    setup
        .execute("SELECT agent_memory.create_session('writer', session_id => $1)", &[&SESSION])
        .unwrap();

    let done = Arc::new(AtomicBool::new(false));
    let samples = Arc::new(AtomicU64::new(0));
    // A sampler reads the committed total over and over while writers run.
    let sampler = {
        let done = done.clone();
        let samples = samples.clone();
        thread::spawn(move || {
            let mut client = agent_memory_integration::connect(db);
            let mut worst = 0;
            while !done.load(Ordering::Relaxed) {
                let total: i64 = client.query_one(TOTAL, &[&SESSION]).unwrap().get(0);
                worst = worst.max(total);
                samples.fetch_add(1, Ordering::Relaxed);
            }
            worst
        })
    };

    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            thread::spawn(move || -> Result<(i64, usize), String> {
                let mut client = agent_memory_integration::connect(db);
                client
                    .batch_execute(&format!("SET agent_memory.kv_word_budget = {BUDGET}"))
                    .unwrap();
                let mut rng = Lcg(w as u64 + 1);
                let mut worst = 0;
                let mut evictions = 0;
                for i in 0..WRITES_PER_WRITER {
                    let n = 1 + rng.next(12);
                    let reply: serde_like::Reply = if i % 5 == 4 {
                        // A two-key batch now and then.
                        let entries = format!(
                            r#"{{"k{}": "{}", "k{}": "{}"}}"#,
                            rng.next(16),
                            words(n / 2 + 1),
                            16 + rng.next(4),
                            words(1)
                        );
                        let row = client
                            .query_one(
                                "SELECT (r->>'total_words')::int8, jsonb_array_length(r->'evicted')::int8
                                 FROM agent_memory.update_context($1, $2::text::jsonb) r",
                                &[&SESSION, &entries],
                            )
                            .map_err(|e| describe(w, i, &e))?;
                        serde_like::Reply(row.get(0), row.get(1))
                    } else {
                        let key = format!("k{}", rng.next(16));
                        let row = client
                            .query_one(
                                "SELECT (r->>'total_words')::int8, jsonb_array_length(r->'evicted')::int8
                                 FROM agent_memory.kv_set($1, $2, to_jsonb($3::text)) r",
                                &[&SESSION, &key, &words(n)],
                            )
                            .map_err(|e| describe(w, i, &e))?;
                        serde_like::Reply(row.get(0), row.get(1))
                    };
                    evictions += reply.1 as usize;
                    // What the write reported, and what is committed now.
                    let committed: i64 = client.query_one(TOTAL, &[&SESSION]).unwrap().get(0);
                    worst = worst.max(reply.0).max(committed);
                }
                Ok((worst, evictions))
            })
        })
        .collect();

    let mut worst = 0;
    let mut evictions = 0;
    for writer in writers {
        let (w, e) = writer.join().expect("writer thread").unwrap_or_else(|e| panic!("{e}"));
        worst = worst.max(w);
        evictions += e;
    }
    done.store(true, Ordering::Relaxed);
    let sampled_worst = sampler.join().expect("sampler thread");

    assert!(worst <= BUDGET, "a writer saw {worst} words, budget {BUDGET}");
    assert!(sampled_worst <= BUDGET, "the sampler saw {sampled_worst} words, budget {BUDGET}");
    assert!(evictions > 0, "the test never reached the budget");
    assert!(samples.load(Ordering::Relaxed) > 0);
    let final_total: i64 = setup.query_one(TOTAL, &[&SESSION]).unwrap().get(0);
    assert!(final_total <= BUDGET);
    eprintln!(
        "{} writes, {evictions} evictions, worst total {worst}, sampler worst {sampled_worst} over {} samples",
        WRITERS * WRITES_PER_WRITER,
        samples.load(Ordering::Relaxed)
    );
    drop(setup);
    drop_database(db);
}

fn describe(writer: usize, write: usize, e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => {
            format!("writer {writer}, write {write}: {} {}", db.code().code(), db.message())
        }
        None => format!("writer {writer}, write {write}: {e}"),
    }
}

/// The two numbers a write reports: total words and evictions.
mod serde_like {
    pub struct Reply(pub i64, pub i64);
}
