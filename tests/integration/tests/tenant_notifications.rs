//! Notifications under tenant isolation: each tenant's changes go to its
//! own channel (`notify_channel()`), which no other tenant can name.
//!
//! Two roles each LISTEN on their own channel and on the shared
//! `agent_memory`; each writes working memory. Every payload a listener
//! receives must be one of its own changes, none may name the other's
//! session or node, neither can read the secret that names the channels,
//! and a payload one sends on the shared channel reaches no other tenant's
//! listener. Prints `notify: N payloads checked, 0 of another tenant`.

use agent_memory_integration::{connect, drop_database, fresh_database, received_notifications};
use postgres::Client;

const DB: &str = "am_it_tenant_notify";
const ALICE: &str = "it_notify_alice";
const BOB: &str = "it_notify_bob";

fn as_tenant(role: &str) -> Client {
    let mut client = connect(DB);
    client
        .batch_execute(&format!("SET agent_memory.tenant_isolation = on; SET ROLE {role}"))
        .expect("become the tenant");
    client
}

fn channel(client: &mut Client) -> String {
    client.query_one("SELECT agent_memory.notify_channel()", &[]).expect("notify_channel").get(0)
}

#[test]
fn a_tenant_hears_only_its_own_changes_on_a_channel_no_other_can_name() {
    let mut admin = fresh_database(DB);
    admin
        .batch_execute(&format!(
            "DROP ROLE IF EXISTS {ALICE}; DROP ROLE IF EXISTS {BOB};
             CREATE ROLE {ALICE}; CREATE ROLE {BOB};
             GRANT agent_memory_writer TO {ALICE}, {BOB};"
        ))
        .expect("create the two roles");
    let shared: String =
        admin.query_one("SELECT agent_memory.notify_channel()", &[]).unwrap().get(0);
    assert_eq!(shared, "agent_memory", "without isolation, one shared channel");

    let mut alice = as_tenant(ALICE);
    let mut bob = as_tenant(BOB);
    let (alice_channel, bob_channel) = (channel(&mut alice), channel(&mut bob));
    assert_ne!(alice_channel, bob_channel);
    for name in [&alice_channel, &bob_channel] {
        assert!(name.starts_with("agent_memory_") && name.len() == 53, "{name}");
    }
    // A tenant acting for an application tenant gets yet another channel.
    alice.batch_execute("SET agent_memory.tenant = 'acme'").unwrap();
    let acme = channel(&mut alice);
    alice.batch_execute("RESET agent_memory.tenant").unwrap();
    assert!(acme != alice_channel && acme != bob_channel);

    // Neither can read the secret the names come from.
    for (who, client) in [("alice", &mut alice), ("bob", &mut bob)] {
        let error = client
            .query("SELECT secret FROM agent_memory.notify_secret", &[])
            .expect_err("the secret is the owner's");
        assert_eq!(error.code().map(|c| c.code()), Some("42501"), "{who} reading the secret");
    }

    alice.batch_execute(&format!("LISTEN agent_memory; LISTEN \"{alice_channel}\"")).unwrap();
    bob.batch_execute(&format!("LISTEN agent_memory; LISTEN \"{bob_channel}\"")).unwrap();

    let mut writer_a = as_tenant(ALICE);
    let mut writer_b = as_tenant(BOB);
    writer_a
        .batch_execute(
            "SELECT agent_memory.create_session('alice', session_id => 'sess-a');
             SELECT agent_memory.wm_set('sess-a', 'node_context', '{\"secret\": 1}', 'secret-node-of-alice');
             SELECT agent_memory.wm_set('sess-a', 'working_history', '\"notes\"');",
        )
        .unwrap();
    writer_b
        .batch_execute(
            "SELECT agent_memory.create_session('bob', session_id => 'sess-b');
             SELECT agent_memory.wm_set('sess-b', 'node_context', '{\"mine\": 1}', 'node-of-bob');",
        )
        .unwrap();
    // A forged event on the shared channel and on a guessed tenant channel.
    writer_b
        .batch_execute(
            "SELECT pg_notify('agent_memory', '{\"session_id\": \"sess-a\", \"forged\": true}');
             SELECT pg_notify('agent_memory_0000000000000000000000000000000000000000', '{\"forged\": true}');",
        )
        .unwrap();

    let heard_a = received_notifications(&mut alice);
    let heard_b = received_notifications(&mut bob);
    let mut checked = 0;
    let mut foreign = 0;
    for (who, heard, own_channel, own_session, other_session) in [
        ("alice", &heard_a, &alice_channel, "sess-a", "sess-b"),
        ("bob", &heard_b, &bob_channel, "sess-b", "sess-a"),
    ] {
        for (channel, payload) in heard.iter() {
            checked += 1;
            if channel != own_channel {
                // Only the forger's shared-channel event can arrive there.
                assert_eq!(channel, "agent_memory", "{who} heard {channel}");
                assert_eq!(
                    payload["forged"], true,
                    "{who}: only forged events on the shared channel"
                );
                continue;
            }
            let text = payload.to_string();
            if text.contains(other_session)
                || text.contains("node-of-bob") && who == "alice"
                || text.contains("secret-node-of-alice") && who == "bob"
            {
                foreign += 1;
            }
            assert_eq!(payload["session_id"], own_session, "{who}: {payload}");
        }
    }
    let own = |heard: &Vec<(String, serde_json::Value)>, channel: &str| {
        heard.iter().filter(|(c, _)| c == channel).count()
    };
    assert_eq!(own(&heard_a, &alice_channel), 2, "alice hears her two changes: {heard_a:?}");
    assert_eq!(own(&heard_b, &bob_channel), 1, "bob hears his change: {heard_b:?}");
    assert_eq!(foreign, 0);
    println!("notify: {checked} payloads checked, {foreign} of another tenant");

    drop((alice, bob, writer_a, writer_b));
    admin.batch_execute(&format!("DROP OWNED BY {ALICE}, {BOB}")).ok();
    drop(admin);
    drop_database(DB);
    let mut admin = connect("postgres");
    admin
        .batch_execute(&format!("DROP ROLE IF EXISTS {ALICE}; DROP ROLE IF EXISTS {BOB}"))
        .unwrap();
}
