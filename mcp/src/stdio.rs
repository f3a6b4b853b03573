//! stdio with two things more than rmcp's own, which skips these lines in
//! silence and leaves the client waiting: a line that is not JSON at all
//! gets JSON-RPC's parse error (-32700) back, and a message longer than
//! rmcp reads gets an invalid request error (-32600) with its id. The
//! server keeps reading. Anything else goes to rmcp, which answers a
//! malformed request itself (-32600, -32601).
//!
//! One task owns stdout and writes whole lines only, rmcp's and the parse
//! errors, so the two never interleave.

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// A parse error, as JSON-RPC 2.0 answers a message it could not parse.
pub const PARSE_ERROR: &str = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the message is not JSON"}}"#;

/// The longest line rmcp reads.
const LONGEST_LINE: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;

/// The error that answers `line` here, or None for a line rmcp reads.
fn refusal_of(line: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Request {
        id: Option<serde_json::Value>,
    }
    if line.len() <= LONGEST_LINE {
        // JSON that is not a valid message: rmcp says what is wrong with it.
        return serde_json::from_slice::<serde::de::IgnoredAny>(line)
            .is_err()
            .then(|| PARSE_ERROR.to_owned());
    }
    let id = match serde_json::from_slice::<Request>(line) {
        Ok(request) => request.id,
        Err(error) if error.is_data() => None,
        Err(_) => return Some(PARSE_ERROR.to_owned()),
    };
    Some(
        serde_json::json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": -32600, "message": format!("the message is longer than {LONGEST_LINE} bytes")},
        })
        .to_string(),
    )
}

/// The stream rmcp reads and the one it writes, and the task that writes
/// stdout (done once rmcp has closed its side and every line is out).
pub fn transport() -> ((DuplexStream, DuplexStream), JoinHandle<()>) {
    const BUFFER: usize = 1 << 16;
    let (to_server, server_reads) = tokio::io::duplex(BUFFER);
    let (server_writes, from_server) = tokio::io::duplex(BUFFER);
    // Every line stdout gets, whole: rmcp's and the parse errors.
    let (lines_out, mut lines_to_write) = mpsc::unbounded_channel::<String>();

    let errors = lines_out.clone();
    tokio::spawn(async move {
        let mut to_server = to_server;
        let mut stdin = BufReader::new(tokio::io::stdin());
        let mut line = Vec::new();
        loop {
            line.clear();
            match stdin.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            if let Some(refusal) = refusal_of(&line) {
                tracing::warn!("a message on stdin refused: {refusal}");
                let _ = errors.send(refusal);
                continue;
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

    #[test]
    fn lines_that_are_not_json_get_a_parse_error() {
        assert_eq!(refusal_of(b"not json\n").as_deref(), Some(PARSE_ERROR));
        assert_eq!(
            refusal_of(b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"ping\"}\n"),
            None
        );
        assert_eq!(refusal_of(b"[1, 2]\n"), None);
    }

    #[test]
    fn lines_too_long_get_an_error_with_their_id() {
        let mut line =
            br#"{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"x": ""#.to_vec();
        line.extend(std::iter::repeat_n(b'x', LONGEST_LINE));
        line.extend(b"\"}}\n");
        let refusal: serde_json::Value = serde_json::from_str(&refusal_of(&line).unwrap()).unwrap();
        assert_eq!(refusal["id"], 7);
        assert_eq!(refusal["error"]["code"], -32600);
    }
}
