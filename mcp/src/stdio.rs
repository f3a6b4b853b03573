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
//! refusals, so the two never interleave.

use std::fmt;

use rmcp::model::{ClientJsonRpcMessage, ClientRequest, GetMeta, ProtocolVersion};
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::mpsc;
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
    input: &mut R,
    line: &mut Vec<u8>,
    limit: usize,
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
    /// A notification, passed on once the session has begun.
    Notification,
    /// A response or error from the client, passed on once the session has
    /// begun.
    Response,
}

#[derive(Debug, PartialEq)]
struct Request {
    /// rmcp begins the session with it: an `initialize`, or a request that
    /// carries the metadata of protocol 2026-07-28.
    begins_session: bool,
}

/// What the whole `line` is: a message for rmcp, or one answered here.
fn classify(line: &[u8]) -> Message {
    let message = line.strip_prefix(UTF8_BOM).unwrap_or(line);
    // The parse rmcp makes: what it reads is its own to answer.
    let error = match serde_json::from_slice::<ClientJsonRpcMessage>(message) {
        Ok(ClientJsonRpcMessage::Request(request)) => {
            return Message::Request(Request {
                begins_session: begins_session(&request.request),
            });
        }
        Ok(ClientJsonRpcMessage::Notification(_)) => return Message::Notification,
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
            meta.missing_required_keys(&ProtocolVersion::V_2026_07_28)
                .is_empty()
                && meta
                    .protocol_version()
                    .is_some_and(|version| ProtocolVersion::KNOWN_VERSIONS.contains(&version))
        }
    }
}

/// The error that answers a line longer than `LONGEST_LINE`, of which
/// `beginning` was kept.
fn refusal_of_too_long(beginning: &[u8]) -> String {
    let message = beginning.strip_prefix(UTF8_BOM).unwrap_or(beginning);
    invalid_request(
        id_of(message),
        &format!("the message is longer than {LONGEST_LINE} bytes"),
    )
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
                members.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

/// The stream rmcp reads and the one it writes, and the task that writes
/// stdout (done once rmcp has closed its side and every line is out).
pub fn transport() -> ((DuplexStream, DuplexStream), JoinHandle<()>) {
    const BUFFER: usize = 1 << 16;
    let (to_server, server_reads) = tokio::io::duplex(BUFFER);
    let (server_writes, from_server) = tokio::io::duplex(BUFFER);
    // Every line stdout gets, whole: rmcp's and the refusals.
    let (lines_out, mut lines_to_write) = mpsc::unbounded_channel::<String>();

    let errors = lines_out.clone();
    tokio::spawn(async move {
        let mut to_server = to_server;
        let mut stdin = BufReader::new(tokio::io::stdin());
        let mut line = Vec::new();
        // rmcp ends the whole server when what it reads first is not a
        // request: notifications and responses wait for the session.
        let mut session_begun = false;
        loop {
            let message = match read_line(&mut stdin, &mut line, LONGEST_LINE).await {
                Ok(Line::End) | Err(_) => break,
                Ok(Line::TooLong) => Message::Refused(refusal_of_too_long(&line)),
                Ok(Line::Whole) if line.iter().all(u8::is_ascii_whitespace) => continue,
                Ok(Line::Whole) => classify(&line),
            };
            match message {
                Message::Refused(refusal) => {
                    tracing::warn!("a message on stdin refused: {refusal}");
                    let _ = errors.send(refusal);
                    continue;
                }
                Message::Notification | Message::Response if !session_begun => {
                    tracing::warn!(
                        "a message on stdin dropped: a notification or response before initialize: {}",
                        String::from_utf8_lossy(&line).trim_end()
                    );
                    continue;
                }
                Message::Request(request) => session_begun |= request.begins_session,
                Message::Notification | Message::Response => {}
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

    tokio::spawn(async move {
        let mut lines = BufReader::new(from_server).lines();
        while let Ok(Some(line)) = lines.next_line().await {
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
            (
                r#"{"jsonrpc":"2.0","id":16,"method":"tools/call","params":"x"}"#,
                16.into(),
            ),
            (r#"{"jsonrpc":"1.0","id":13,"method":"ping"}"#, 13.into()),
            (r#"{"id":"fourteen","method":"ping"}"#, "fourteen".into()),
            (r#"{"jsonrpc":"2.0","id":15}"#, 15.into()),
            (
                r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
                serde_json::Value::Null,
            ),
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
            Message::Request(Request {
                begins_session: false
            })
        );
        let initialize = br#"{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
        assert_eq!(
            classify(initialize),
            Message::Request(Request {
                begins_session: true
            })
        );
        // Without the metadata of 2026-07-28, rmcp refuses a call before
        // initialize and keeps waiting.
        let call = br#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
        assert!(matches!(
            classify(call),
            Message::Request(Request {
                begins_session: false,
                ..
            })
        ));
        assert_eq!(
            classify(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Message::Notification
        );
        assert_eq!(
            classify(
                br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"x"}}"#
            ),
            Message::Notification
        );
        assert_eq!(
            classify(br#"{"jsonrpc":"2.0","id":5,"result":{}}"#),
            Message::Response
        );
        assert_eq!(
            classify(br#"{"jsonrpc":"2.0","id":5,"error":{"code":1,"message":"m"}}"#),
            Message::Response
        );
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
        assert_eq!(
            (&refusal["id"], &refusal["error"]["code"]),
            (&5.into(), &(-32600).into())
        );

        // Invalid UTF-8 inside a string.
        let mut invalid =
            br#"{"jsonrpc": "2.0", "id": "six", "method": "ping", "params": {"x": ""#.to_vec();
        invalid.extend(b"\xff\xfe");
        invalid.extend(b"\"}}\n");
        let refusal = answer(refusal_of(&invalid));
        assert_eq!(
            (&refusal["id"], &refusal["error"]["code"]),
            (&"six".into(), &(-32600).into())
        );

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
        let input = b"{\"id\": 3, \"params\": \""
            .chain(endless)
            .chain(&b"\"}\n"[..])
            .chain(PING);
        let mut input = BufReader::new(input);
        let mut line = Vec::new();
        let limit = 1 << 20;

        assert_eq!(
            read_line(&mut input, &mut line, limit).await.unwrap(),
            Line::TooLong
        );
        assert!(
            line.capacity() <= KEPT_OF_A_LONG_LINE.max(limit),
            "{}",
            line.capacity()
        );
        assert_eq!(answer(Some(refusal_of_too_long(&line)))["id"], 3);

        assert_eq!(
            read_line(&mut input, &mut line, limit).await.unwrap(),
            Line::Whole
        );
        assert_eq!(line, PING);
        assert!(line.capacity() <= KEPT_CAPACITY, "{}", line.capacity());
        assert_eq!(
            read_line(&mut input, &mut line, limit).await.unwrap(),
            Line::End
        );
    }

    #[tokio::test]
    async fn the_memory_of_a_long_line_is_given_back() {
        let long = vec![b' '; 1 << 20];
        let mut input = BufReader::new(long.chain(PING));
        let mut line = Vec::new();
        assert_eq!(
            read_line(&mut input, &mut line, 2 << 20).await.unwrap(),
            Line::Whole
        );
        assert!(line.capacity() >= 1 << 20);
        assert_eq!(
            read_line(&mut input, &mut line, 2 << 20).await.unwrap(),
            Line::End
        );
        assert!(line.capacity() <= KEPT_CAPACITY, "{}", line.capacity());
    }
}
