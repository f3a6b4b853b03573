//! stdio with more than rmcp's own, which skips some lines in silence,
//! answers others without their id, and stops serving at a notification
//! that comes first. Such lines are handled here, and the server keeps
//! reading:
//!
//! - a line that is not JSON at all gets JSON-RPC's parse error (-32700);
//! - JSON that is not a valid JSON-RPC message (a wrong version, no
//!   method, params that are not an object), or that rmcp's stricter parse
//!   refuses (nested deeper than serde_json's 128 levels, invalid UTF-8
//!   inside a string), gets an invalid request error (-32600) with the id a
//!   lenient parse finds;
//! - a message longer than rmcp reads gets an invalid request error with
//!   its id, read from its beginning; only that beginning is kept, so one
//!   endless line cannot fill the memory;
//! - a notification or response before the session has begun is dropped
//!   (and logged).
//!
//! Anything else goes to rmcp, which answers requests itself.
//!
//! One task owns stdout and writes whole lines only, rmcp's and the
//! refusals, so the two never interleave. What waits for it is bounded:
//! while more than `QUEUED_BYTES_CAP` bytes are queued for stdout, or
//! `IN_FLIGHT_CAP` requests are running, stdin is not read, so a client
//! that does not read its answers cannot grow the server's memory.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, ClientRequest, GetMeta, ProtocolVersion,
};
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;

/// A parse error, as JSON-RPC 2.0 answers a message it could not parse.
pub const PARSE_ERROR: &str = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the message is not JSON"}}"#;

/// The longest line rmcp reads, its newline included.
const LONGEST_LINE: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;

/// How much of a line too long to pass on is kept: enough for the id that
/// usually comes first.
const KEPT_OF_A_LONG_LINE: usize = 64 << 10;

/// The capacity the line buffer keeps between lines; a longer line's
/// memory is given back once it is handled.
const KEPT_CAPACITY: usize = 64 << 10;

/// The UTF-8 byte order mark, which rmcp ignores before a message.
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// What one read of a line gave.
#[derive(Debug, PartialEq)]
enum Line {
    /// A whole line (or the last bytes before the end), in the buffer.
    Whole,
    /// A line longer than `limit`: the buffer holds its beginning only, the
    /// rest was read and dropped through its newline.
    TooLong,
    /// The input ended.
    End,
}

/// Reads the next line into `line` (cleared first), holding at most
/// `limit` bytes of it: a longer line is read to its end but only its
/// beginning kept.
async fn read_line<R: AsyncBufRead + Unpin>(
    input: &mut R, line: &mut Vec<u8>, limit: usize,
) -> std::io::Result<Line> {
    line.clear();
    if line.capacity() > KEPT_CAPACITY {
        line.shrink_to(KEPT_CAPACITY);
    }
    let mut too_long = false;
    loop {
        let available = input.fill_buf().await?;
        if available.is_empty() {
            return Ok(match (too_long, line.is_empty()) {
                (true, _) => Line::TooLong,
                (false, true) => Line::End,
                (false, false) => Line::Whole,
            });
        }
        let newline = available.iter().position(|byte| *byte == b'\n');
        let taken = newline.map_or(available.len(), |at| at + 1);
        if !too_long {
            if line.len() + taken <= limit {
                line.extend_from_slice(&available[..taken]);
            } else {
                too_long = true;
                let room = KEPT_OF_A_LONG_LINE.saturating_sub(line.len());
                line.extend_from_slice(&available[..taken.min(room)]);
                line.truncate(KEPT_OF_A_LONG_LINE);
                line.shrink_to(KEPT_OF_A_LONG_LINE);
            }
        }
        input.consume(taken);
        if newline.is_some() {
            return Ok(if too_long { Line::TooLong } else { Line::Whole });
        }
    }
}

/// What a whole line on stdin is, as the server handles it.
#[derive(Debug, PartialEq)]
enum Message {
    /// Answered here with this error: rmcp would skip the line in silence,
    /// or answer it without its id.
    Refused(String),
    /// A request, passed on to rmcp.
    Request(Request),
    /// A notification, passed on once the session has begun; a
    /// cancellation names the request it cancels.
    Notification { cancels: Option<String> },
    /// A response or error from the client, passed on once the session has
    /// begun.
    Response,
}

#[derive(Debug, PartialEq)]
struct Request {
    /// The id as JSON text, as rmcp writes it back in the answer.
    id: String,
    /// rmcp begins the session with it: an `initialize`, or a request that
    /// carries the metadata of protocol 2026-07-28.
    begins_session: bool,
    /// rmcp answers it once it is done; `subscriptions/listen` stays open.
    answered: bool,
}

/// What the whole `line` is: a message for rmcp, or one answered here.
fn classify(line: &[u8]) -> Message {
    let message = line.strip_prefix(UTF8_BOM).unwrap_or(line);
    // The parse rmcp makes: what it reads is its own to answer.
    let error = match serde_json::from_slice::<ClientJsonRpcMessage>(message) {
        Ok(ClientJsonRpcMessage::Request(request)) => {
            return Message::Request(Request {
                id: json_text(&request.id),
                begins_session: begins_session(&request.request),
                answered: !matches!(request.request, ClientRequest::SubscriptionsListenRequest(_)),
            });
        }
        Ok(ClientJsonRpcMessage::Notification(notification)) => {
            let cancels = match &notification.notification {
                ClientNotification::CancelledNotification(cancelled) => {
                    cancelled.params.request_id.as_ref().map(json_text)
                }
                _ => None,
            };
            return Message::Notification { cancels };
        }
        Ok(ClientJsonRpcMessage::Response(_) | ClientJsonRpcMessage::Error(_)) => {
            return Message::Response;
        }
        Err(error) => error,
    };
    match error.classify() {
        // JSON that is not a JSON-RPC message rmcp knows (a wrong version,
        // no method, params that are not an object): rmcp would answer it
        // without its id.
        serde_json::error::Category::Data | serde_json::error::Category::Io => {
            Message::Refused(invalid_request(
                id_of(message),
                &format!("the message is not a valid request: {error}"),
            ))
        }
        // Input rmcp cannot parse (not JSON, too deep, invalid UTF-8) it
        // skips in silence.
        serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
            if serde_json::from_slice::<IgnoredAny>(message).is_err() {
                return Message::Refused(PARSE_ERROR.to_owned());
            }
            Message::Refused(invalid_request(
                id_of(message),
                &format!("the message cannot be read: {error}"),
            ))
        }
    }
}

/// Whether rmcp, still waiting for its session to begin, begins it with
/// `request`. It answers a ping or a discovery and keeps waiting; any other
/// request begins the session when it carries complete metadata of a
/// protocol it knows (this server supports every one rmcp knows), and is
/// refused otherwise.
fn begins_session(request: &ClientRequest) -> bool {
    match request {
        ClientRequest::InitializeRequest(_) => true,
        ClientRequest::PingRequest(_) | ClientRequest::DiscoverRequest(_) => false,
        request => {
            let meta = request.get_meta();
            meta.missing_required_keys(&ProtocolVersion::V_2026_07_28).is_empty()
                && meta
                    .protocol_version()
                    .is_some_and(|version| ProtocolVersion::KNOWN_VERSIONS.contains(&version))
        }
    }
}

/// A value as JSON text: how ids are compared.
fn json_text<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// The error that answers a line longer than `LONGEST_LINE`, of which
/// `beginning` was kept.
fn refusal_of_too_long(beginning: &[u8]) -> String {
    let message = beginning.strip_prefix(UTF8_BOM).unwrap_or(beginning);
    invalid_request(id_of(message), &format!("the message is longer than {LONGEST_LINE} bytes"))
}

fn invalid_request(id: serde_json::Value, message: &str) -> String {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": -32600, "message": message},
    })
    .to_string()
}

/// The id of a message, read leniently: from an object's beginning even
/// when the rest is cut off or malformed, skipping other members without
/// checking their depth or UTF-8. Null when none is found.
fn id_of(message: &[u8]) -> serde_json::Value {
    members_of(message).id.unwrap_or(serde_json::Value::Null)
}

/// The id (as JSON text) of the request a line rmcp writes answers, or None
/// for a notification or a request of the server's.
fn answered_id(line: &str) -> Option<String> {
    let members = members_of(line.as_bytes());
    match members.method {
        true => None,
        false => members.id.map(|id| id.to_string()),
    }
}

fn members_of(message: &[u8]) -> Members {
    let mut members = Members::default();
    let mut deserializer = serde_json::Deserializer::from_slice(message);
    // An error after the id was found (the rest cut off) leaves it found.
    let _ = MembersFinder(&mut members).deserialize(&mut deserializer);
    members
}

/// The members of a message this module reads.
#[derive(Default)]
struct Members {
    /// The id, a string or number.
    id: Option<serde_json::Value>,
    /// Whether it has a method: it is a request or a notification.
    method: bool,
}

/// Visits an object's members, keeping what `Members` holds.
struct MembersFinder<'a>(&'a mut Members);

impl<'de> DeserializeSeed<'de> for MembersFinder<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for MembersFinder<'_> {
    type Value = ();

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a JSON-RPC message")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut members: A) -> Result<(), A::Error> {
        while let Some(key) = members.next_key::<String>()? {
            if key == "id" && self.0.id.is_none() {
                // An id that is not a plain value (nested too deep, say) is
                // no id to answer with.
                match members.next_value::<serde_json::Value>() {
                    Ok(id) if id.is_string() || id.is_number() => self.0.id = Some(id),
                    Ok(_) => {}
                    Err(error) => return Err(error),
                }
            } else {
                if key == "method" {
                    self.0.method = true;
                }
                members.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

/// How much may wait to be written to stdout before stdin is no longer
/// read: a client that does not read its answers stops being read itself,
/// instead of growing the server's memory.
const QUEUED_BYTES_CAP: usize = 4 << 20;

/// How many requests may be passed on and not yet answered before stdin is
/// no longer read: each holds its answer in memory once it is done.
const IN_FLIGHT_CAP: usize = 64;

/// What waits for the client: the bytes queued for stdout, and the
/// requests passed on to rmcp and not yet answered.
#[derive(Debug)]
struct Backlog {
    queued_bytes: usize,
    queued_bytes_cap: usize,
    in_flight: HashSet<String>,
    in_flight_cap: usize,
}

impl Backlog {
    fn new(queued_bytes_cap: usize, in_flight_cap: usize) -> Backlog {
        Backlog { queued_bytes: 0, queued_bytes_cap, in_flight: HashSet::new(), in_flight_cap }
    }

    /// Whether another line may be queued for stdout.
    fn output_has_room(&self) -> bool {
        self.queued_bytes < self.queued_bytes_cap
    }

    /// Whether stdin may be read: the answers fit.
    fn input_has_room(&self) -> bool {
        self.output_has_room() && self.in_flight.len() < self.in_flight_cap
    }

    fn queued(&mut self, bytes: usize) {
        self.queued_bytes += bytes;
    }

    fn written(&mut self, bytes: usize) {
        self.queued_bytes = self.queued_bytes.saturating_sub(bytes);
    }

    fn passed_on(&mut self, id: String) {
        self.in_flight.insert(id);
    }

    /// The request was answered, or cancelled (it gets no answer then).
    fn done(&mut self, id: &str) {
        self.in_flight.remove(id);
    }
}

/// The backlog shared by the tasks that read stdin, read rmcp's output and
/// write stdout, each waiting on the others for room.
struct Flow {
    backlog: std::sync::Mutex<Backlog>,
    changed: Notify,
}

impl Flow {
    fn new(backlog: Backlog) -> Flow {
        Flow { backlog: std::sync::Mutex::new(backlog), changed: Notify::new() }
    }

    fn update(&self, change: impl FnOnce(&mut Backlog)) {
        change(&mut self.backlog.lock().unwrap_or_else(|e| e.into_inner()));
        self.changed.notify_waiters();
    }

    /// Waits until the backlog is `ready`.
    async fn until(&self, ready: impl Fn(&Backlog) -> bool) {
        loop {
            let changed = self.changed.notified();
            let mut changed = std::pin::pin!(changed);
            changed.as_mut().enable();
            if ready(&self.backlog.lock().unwrap_or_else(|e| e.into_inner())) {
                return;
            }
            changed.await;
        }
    }
}

/// The stream rmcp reads and the one it writes, and the task that writes
/// stdout (done once rmcp has closed its side and every line is out).
pub fn transport() -> ((DuplexStream, DuplexStream), JoinHandle<()>) {
    const BUFFER: usize = 1 << 16;
    let (to_server, server_reads) = tokio::io::duplex(BUFFER);
    let (server_writes, from_server) = tokio::io::duplex(BUFFER);
    // Every line stdout gets, whole: rmcp's and the refusals. What it
    // holds is bounded by the backlog's caps.
    let (lines_out, mut lines_to_write) = mpsc::unbounded_channel::<String>();
    let flow = Arc::new(Flow::new(Backlog::new(QUEUED_BYTES_CAP, IN_FLIGHT_CAP)));

    let errors = lines_out.clone();
    let stdin_flow = flow.clone();
    tokio::spawn(async move {
        let flow = stdin_flow;
        let mut to_server = to_server;
        let mut stdin = BufReader::new(tokio::io::stdin());
        let mut line = Vec::new();
        // rmcp ends the whole server when what it reads first is not a
        // request: notifications and responses wait for the session.
        let mut session_begun = false;
        loop {
            // Backpressure: while the client leaves its answers unread, or
            // many requests are running, its next lines stay in the pipe.
            flow.until(Backlog::input_has_room).await;
            let message = match read_line(&mut stdin, &mut line, LONGEST_LINE).await {
                Ok(Line::End) | Err(_) => break,
                Ok(Line::TooLong) => Message::Refused(refusal_of_too_long(&line)),
                Ok(Line::Whole) if line.iter().all(u8::is_ascii_whitespace) => continue,
                Ok(Line::Whole) => classify(&line),
            };
            match message {
                Message::Refused(refusal) => {
                    tracing::warn!("a message on stdin refused: {refusal}");
                    flow.update(|backlog| backlog.queued(refusal.len() + 1));
                    let _ = errors.send(refusal);
                    continue;
                }
                Message::Notification { .. } | Message::Response if !session_begun => {
                    tracing::warn!(
                        "a message on stdin dropped: a notification or response before initialize: {}",
                        String::from_utf8_lossy(&line).trim_end()
                    );
                    continue;
                }
                Message::Request(request) => {
                    session_begun |= request.begins_session;
                    if request.answered {
                        flow.update(|backlog| backlog.passed_on(request.id));
                    }
                }
                Message::Notification { cancels: Some(id) } => {
                    flow.update(|backlog| backlog.done(&id))
                }
                Message::Notification { cancels: None } | Message::Response => {}
            }
            if !line.ends_with(b"\n") {
                line.push(b'\n');
            }
            if to_server.write_all(&line).await.is_err() {
                break;
            }
        }
        // Dropping to_server ends rmcp's input: the server stops.
    });

    let output_flow = flow.clone();
    tokio::spawn(async move {
        let flow = output_flow;
        let mut lines = BufReader::new(from_server).lines();
        loop {
            // While stdout is full, rmcp's output waits in rmcp.
            flow.until(Backlog::output_has_room).await;
            let Ok(Some(line)) = lines.next_line().await else {
                break;
            };
            let answered = answered_id(&line);
            flow.update(|backlog| {
                backlog.queued(line.len() + 1);
                if let Some(id) = &answered {
                    backlog.done(id);
                }
            });
            if lines_out.send(line).is_err() {
                break;
            }
        }
    });

    // Ends when both senders are gone: stdin's reader and rmcp's output.
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = lines_to_write.recv().await {
            let written = async {
                stdout.write_all(line.as_bytes()).await?;
                stdout.write_all(b"\n").await?;
                stdout.flush().await
            };
            if written.await.is_err() {
                break;
            }
            flow.update(|backlog| backlog.written(line.len() + 1));
        }
    });
    ((server_reads, server_writes), writer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    const PING: &[u8] = b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"ping\"}\n";

    /// The error that answers `line` here, if any.
    fn refusal_of(line: &[u8]) -> Option<String> {
        match classify(line) {
            Message::Refused(refusal) => Some(refusal),
            _ => None,
        }
    }

    fn answer(refusal: Option<String>) -> serde_json::Value {
        serde_json::from_str(&refusal.expect("an answer")).expect("JSON")
    }

    #[test]
    fn lines_that_are_not_json_get_a_parse_error() {
        assert_eq!(refusal_of(b"not json\n").as_deref(), Some(PARSE_ERROR));
        assert_eq!(refusal_of(PING), None);
    }

    #[test]
    fn json_that_is_no_valid_message_gets_an_invalid_request_error_with_its_id() {
        for (line, id) in [
            (r#"{"jsonrpc":"2.0","id":16,"method":"tools/call","params":"x"}"#, 16.into()),
            (r#"{"jsonrpc":"1.0","id":13,"method":"ping"}"#, 13.into()),
            (r#"{"id":"fourteen","method":"ping"}"#, "fourteen".into()),
            (r#"{"jsonrpc":"2.0","id":15}"#, 15.into()),
            (r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#, serde_json::Value::Null),
            ("[1, 2]", serde_json::Value::Null),
            ("5", serde_json::Value::Null),
        ] {
            let refusal = answer(refusal_of(line.as_bytes()));
            assert_eq!(refusal["jsonrpc"], "2.0", "{line}");
            assert_eq!(refusal["id"], id, "{line}");
            assert_eq!(refusal["error"]["code"], -32600, "{line}");
        }
    }

    #[test]
    fn messages_are_classified() {
        assert_eq!(
            classify(PING),
            Message::Request(Request { id: "1".into(), begins_session: false, answered: true })
        );
        let initialize = br#"{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
        assert_eq!(
            classify(initialize),
            Message::Request(Request { id: r#""i""#.into(), begins_session: true, answered: true })
        );
        // Without the metadata of 2026-07-28, rmcp refuses a call before
        // initialize and keeps waiting.
        let call = br#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
        assert!(matches!(classify(call), Message::Request(Request { begins_session: false, .. })));
        assert_eq!(
            classify(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Message::Notification { cancels: None }
        );
        assert_eq!(
            classify(
                br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"x"}}"#
            ),
            Message::Notification {
                cancels: Some(r#""x""#.into())
            }
        );
        assert_eq!(classify(br#"{"jsonrpc":"2.0","id":5,"result":{}}"#), Message::Response);
        assert_eq!(
            classify(br#"{"jsonrpc":"2.0","id":5,"error":{"code":1,"message":"m"}}"#),
            Message::Response
        );
    }

    #[test]
    fn answers_are_told_from_the_servers_notifications_and_requests() {
        assert_eq!(
            answered_id(r#"{"jsonrpc":"2.0","id":7,"result":{"content":[]}}"#).as_deref(),
            Some("7")
        );
        assert_eq!(
            answered_id(r#"{"jsonrpc":"2.0","id":"a\"b","error":{"code":-32602,"message":"m"}}"#),
            Some(json_text(&"a\"b"))
        );
        assert_eq!(
            answered_id(
                r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{}}"#
            ),
            None
        );
        assert_eq!(answered_id(r#"{"jsonrpc":"2.0","id":0,"method":"roots/list"}"#), None);
        // The id rmcp writes back is the id as the request's classification
        // keeps it.
        let Message::Request(request) = classify(PING) else {
            panic!("a request");
        };
        assert_eq!(answered_id(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#), Some(request.id));
    }

    #[test]
    fn the_backlog_stops_input_over_its_caps() {
        let mut backlog = Backlog::new(100, 2);
        assert!(backlog.input_has_room());
        backlog.queued(60);
        assert!(backlog.input_has_room() && backlog.output_has_room());
        backlog.queued(60);
        assert!(!backlog.input_has_room() && !backlog.output_has_room());
        backlog.written(60);
        assert!(backlog.input_has_room());

        backlog.passed_on("1".into());
        backlog.passed_on("1".into());
        assert!(backlog.input_has_room());
        backlog.passed_on("2".into());
        assert!(!backlog.input_has_room());
        // Room for more answers does not make room for more requests.
        assert!(backlog.output_has_room());
        backlog.done("2");
        assert!(backlog.input_has_room());
        // An answer to no request in flight (answered twice, cancelled
        // before) changes nothing.
        backlog.done("9");
        assert_eq!(backlog.in_flight.len(), 1);
        backlog.written(1000);
        assert_eq!(backlog.queued_bytes, 0);
    }

    #[tokio::test]
    async fn a_task_waiting_for_room_wakes_when_lines_are_written() {
        let flow = Arc::new(Flow::new(Backlog::new(10, 1)));
        flow.update(|backlog| backlog.queued(20));
        let waiting = tokio::spawn({
            let flow = flow.clone();
            async move { flow.until(Backlog::input_has_room).await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        flow.update(|backlog| backlog.written(15));
        tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .expect("woken")
            .expect("no panic");
    }

    #[test]
    fn a_byte_order_mark_before_a_message_is_left_to_rmcp() {
        let mut line = UTF8_BOM.to_vec();
        line.extend(PING);
        assert_eq!(refusal_of(&line), None);
    }

    #[test]
    fn json_rmcp_cannot_read_gets_an_invalid_request_error_with_its_id() {
        // Params nested deeper than serde_json's limit.
        let deep = format!(
            r#"{{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {}1{}}}"#,
            r#"{"a": "#.repeat(130),
            "}".repeat(130)
        );
        let refusal = answer(refusal_of(deep.as_bytes()));
        assert_eq!((&refusal["id"], &refusal["error"]["code"]), (&5.into(), &(-32600).into()));

        // Invalid UTF-8 inside a string.
        let mut invalid =
            br#"{"jsonrpc": "2.0", "id": "six", "method": "ping", "params": {"x": ""#.to_vec();
        invalid.extend(b"\xff\xfe");
        invalid.extend(b"\"}}\n");
        let refusal = answer(refusal_of(&invalid));
        assert_eq!((&refusal["id"], &refusal["error"]["code"]), (&"six".into(), &(-32600).into()));

        // Arrays nested 200 levels: no id to answer with.
        let nested = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let refusal = answer(refusal_of(nested.as_bytes()));
        assert_eq!(
            (&refusal["id"], &refusal["error"]["code"]),
            (&serde_json::Value::Null, &(-32600).into())
        );
    }

    #[test]
    fn lines_too_long_get_an_error_with_their_id() {
        let beginning =
            br#"{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"x": "xxxx"#;
        let refusal = answer(Some(refusal_of_too_long(beginning)));
        assert_eq!(refusal["id"], 7);
        assert_eq!(refusal["error"]["code"], -32600);
    }

    #[tokio::test]
    async fn a_line_too_long_is_dropped_without_being_held() {
        // 64 MiB with no newline, then the newline and a ping.
        let endless = tokio::io::repeat(b'x').take(64 << 20);
        let input = b"{\"id\": 3, \"params\": \"".chain(endless).chain(&b"\"}\n"[..]).chain(PING);
        let mut input = BufReader::new(input);
        let mut line = Vec::new();
        let limit = 1 << 20;

        assert_eq!(read_line(&mut input, &mut line, limit).await.unwrap(), Line::TooLong);
        assert!(line.capacity() <= KEPT_OF_A_LONG_LINE.max(limit), "{}", line.capacity());
        assert_eq!(answer(Some(refusal_of_too_long(&line)))["id"], 3);

        assert_eq!(read_line(&mut input, &mut line, limit).await.unwrap(), Line::Whole);
        assert_eq!(line, PING);
        assert!(line.capacity() <= KEPT_CAPACITY, "{}", line.capacity());
        assert_eq!(read_line(&mut input, &mut line, limit).await.unwrap(), Line::End);
    }

    #[tokio::test]
    async fn the_memory_of_a_long_line_is_given_back() {
        let long = vec![b' '; 1 << 20];
        let mut input = BufReader::new(long.chain(PING));
        let mut line = Vec::new();
        assert_eq!(read_line(&mut input, &mut line, 2 << 20).await.unwrap(), Line::Whole);
        assert!(line.capacity() >= 1 << 20);
        assert_eq!(read_line(&mut input, &mut line, 2 << 20).await.unwrap(), Line::End);
        assert!(line.capacity() <= KEPT_CAPACITY, "{}", line.capacity());
    }
}
