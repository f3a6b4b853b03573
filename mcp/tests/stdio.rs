//! The server over stdio, spawned as the client would, on lines it answers
//! without a database (none is reachable at the DSN it is given).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::Duration;

use serde_json::{Value, json};

const PATIENCE: Duration = Duration::from_secs(20);

struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Server {
    fn start() -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_agent-memory-mcp"))
            .args([
                "--dsn",
                "host=/nonexistent port=1 user=nobody dbname=nothing connect_timeout=1",
                "--scope",
                "s",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the server starts");
        let stdout = child.stdout.take().expect("stdout");
        let (sender, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Server { child, stdin, lines }
    }

    fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).expect("written");
        stdin.write_all(b"\n").expect("written");
        stdin.flush().expect("flushed");
    }

    fn receive(&self) -> Value {
        let line = self.lines.recv_timeout(PATIENCE).expect("an answer");
        serde_json::from_str(&line).expect("JSON")
    }

    fn initialize(&mut self) {
        self.send(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"}}})
            .to_string(),
        );
        let answer = self.receive();
        assert_eq!(answer["id"], 0, "{answer}");
        assert!(answer["result"]["serverInfo"].is_object(), "{answer}");
        self.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    }

    fn ping(&mut self, id: i64) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "ping"}).to_string());
        let answer = self.receive();
        assert_eq!((&answer["id"], &answer["result"]), (&id.into(), &json!({})));
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn invalid_requests_are_answered_with_their_id() {
    let mut server = Server::start();
    server.initialize();
    for (line, id) in [
        (r#"{"jsonrpc":"2.0","id":16,"method":"tools/call","params":"x"}"#, json!(16)),
        (r#"{"jsonrpc":"1.0","id":13,"method":"ping"}"#, json!(13)),
        (r#"{"id":14,"method":"ping"}"#, json!(14)),
        (r#"{"jsonrpc":"2.0","id":"fifteen"}"#, json!("fifteen")),
        ("[1]", Value::Null),
    ] {
        server.send(line);
        let answer = server.receive();
        assert_eq!(answer["jsonrpc"], "2.0", "{line}: {answer}");
        assert_eq!(answer.get("id"), Some(&id), "{line}: {answer}");
        assert_eq!(answer["error"]["code"], -32600, "{line}: {answer}");
    }
    server.ping(1);
}

#[test]
fn notifications_and_responses_before_initialize_are_dropped() {
    let mut server = Server::start();
    server.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    server.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":0}}"#);
    server.send(r#"{"jsonrpc":"2.0","id":5,"result":{}}"#);
    server.send(r#"{"jsonrpc":"2.0","id":6,"error":{"code":1,"message":"m"}}"#);
    server.ping(1);
    server.initialize();
    server.ping(2);
}

#[test]
fn params_that_do_not_fit_the_method_are_invalid_params() {
    let mut server = Server::start();
    server.initialize();
    for line in [
        r#"{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":5}}"#,
        r#"{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"memory","arguments":[1]}}"#,
        r#"{"jsonrpc":"2.0","id":17,"method":"resources/read","params":{}}"#,
    ] {
        server.send(line);
        let answer = server.receive();
        assert_eq!(answer["id"], 17, "{line}: {answer}");
        assert_eq!(answer["error"]["code"], -32602, "{line}: {answer}");
    }
    server.send(r#"{"jsonrpc":"2.0","id":18,"method":"no/such/method","params":{}}"#);
    assert_eq!(server.receive()["error"]["code"], -32601);
    server.ping(1);
}

#[test]
fn a_client_that_does_not_read_stops_being_read() {
    let mut server = Server::start();
    server.initialize();
    // Each line gets an answer several times its size: far more answers
    // than the server queues for stdout.
    const LINES: usize = 100_000;
    let mut stdin = server.stdin.take().expect("stdin");
    let (done, finished) = channel();
    let writer = std::thread::spawn(move || {
        for id in 0..LINES {
            let line = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id}}}\n");
            if stdin.write_all(line.as_bytes()).is_err() {
                break;
            }
        }
        let _ = done.send(());
        stdin
    });
    // Nothing read from stdout: the server stops reading stdin, and the
    // writer waits.
    assert_eq!(finished.recv_timeout(Duration::from_secs(3)), Err(RecvTimeoutError::Timeout));
    // Once the answers are read, every line gets its own, in order.
    for id in 0..LINES {
        let line = server.lines.recv_timeout(PATIENCE).expect("an answer");
        let answer: Value = serde_json::from_str(&line).expect("JSON");
        assert_eq!(answer["id"], id, "{answer}");
        assert_eq!(answer["error"]["code"], -32600, "{answer}");
    }
    server.stdin = Some(writer.join().expect("the writer"));
    server.ping(1);
}
