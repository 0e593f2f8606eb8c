//! A tiny HTTP/1.1 client for Firecracker's API socket.
//!
//! Firecracker is configured with a handful of `PUT` requests carrying JSON
//! bodies over a unix socket; it answers `204 No Content` on success and a
//! 4xx/5xx with `{"fault_message": "..."}` otherwise. That is all this
//! speaks: one request per connection, a request writer and a status parser
//! with a deadline, and hard caps on what it reads, so an odd or hostile
//! peer on the socket ends in a clear error instead of a hang.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The most header bytes accepted in a response.
const MAX_HEAD: usize = 16 * 1024;
/// The most body bytes accepted in a response.
const MAX_BODY: usize = 64 * 1024;

/// Sends `PUT path` with a JSON body and waits for the answer.
///
/// Succeeds on a 2xx status. Fails, with a message naming the request, on any
/// other status (quoting Firecracker's `fault_message` when there is one), on
/// a response that is not HTTP, on one larger than the caps, on a connection
/// closed early, and when `timeout` passes.
pub fn put(sock: &Path, path: &str, body: &Value, timeout: Duration) -> Result<(), String> {
    let what = format!("PUT {path}");
    // The path is ours, but never let it break the request line.
    if !path.starts_with('/') || path.bytes().any(|b| b <= b' ' || b >= 0x7f) {
        return Err(format!("{what}: not a valid request path"));
    }
    let deadline = Instant::now() + timeout;
    // The socket file appears when the server binds it, a moment before it
    // listens: a refused connection is retried until the deadline.
    let mut s = loop {
        match UnixStream::connect(sock) {
            Ok(s) => break s,
            Err(e)
                if e.kind() == std::io::ErrorKind::ConnectionRefused
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => return Err(format!("{what}: cannot connect to {}: {e}", sock.display())),
        }
    };
    let payload = serde_json::to_vec(body).map_err(|e| format!("{what}: {e}"))?;
    let mut req = format!(
        "PUT {path} HTTP/1.1\r\nHost: localhost\r\nAccept: application/json\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        payload.len()
    )
    .into_bytes();
    req.extend_from_slice(&payload);
    s.set_write_timeout(Some(timeout.max(Duration::from_millis(1))))
        .map_err(|e| format!("{what}: {e}"))?;
    s.write_all(&req)
        .map_err(|e| format!("{what}: writing the request: {e}"))?;
    let resp = read_response(&mut s, deadline).map_err(|e| format!("{what}: {e}"))?;
    if (200..300).contains(&resp.status) {
        return Ok(());
    }
    let fault = serde_json::from_slice::<Value>(&resp.body)
        .ok()
        .and_then(|v| {
            v.get("fault_message")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| String::from_utf8_lossy(&resp.body).trim().to_owned());
    Err(format!(
        "{what}: Firecracker answered {} {}{}",
        resp.status,
        crate::display::visible_short(&resp.reason, 60),
        if fault.is_empty() {
            String::new()
        } else {
            format!(": {}", crate::display::visible_short(&fault, 300))
        }
    ))
}

/// A parsed response.
#[derive(Debug)]
struct Response {
    status: u16,
    reason: String,
    body: Vec<u8>,
}

/// Reads more bytes into `buf`, honouring the deadline. Returns how many were
/// read (0 = the peer closed).
fn fill(s: &mut UnixStream, buf: &mut Vec<u8>, deadline: Instant) -> Result<usize, String> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err("no answer in time".into());
    }
    s.set_read_timeout(Some(left)).map_err(|e| e.to_string())?;
    let mut chunk = [0u8; 4096];
    match s.read(&mut chunk) {
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            Ok(n)
        }
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            Err("no answer in time".into())
        }
        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => fill(s, buf, deadline),
        Err(e) => Err(format!("reading the answer: {e}")),
    }
}

fn read_response(s: &mut UnixStream, deadline: Instant) -> Result<Response, String> {
    let mut buf = Vec::new();
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        if buf.len() > MAX_HEAD {
            return Err(format!(
                "the answer's headers are longer than {MAX_HEAD} bytes"
            ));
        }
        if fill(s, &mut buf, deadline)? == 0 {
            return Err(if buf.is_empty() {
                "the connection was closed without an answer".into()
            } else {
                "the connection was closed in the middle of the answer's headers".into()
            });
        }
    };
    let head = std::str::from_utf8(&buf[..head_end])
        .map_err(|_| "the answer is not HTTP (its headers are not text)".to_owned())?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let (status, reason) = parse_status(status_line).ok_or_else(|| {
        format!(
            "the answer is not HTTP: {:?}",
            crate::display::visible_short(status_line, 80)
        )
    })?;
    let mut length: Option<usize> = None;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            return Err(format!(
                "the answer has a malformed header: {:?}",
                crate::display::visible_short(line, 80)
            ));
        };
        let name = name.trim();
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            let n: usize = value
                .parse()
                .ok()
                .filter(|_| value.bytes().all(|b| b.is_ascii_digit()))
                .ok_or_else(|| {
                    format!(
                        "the answer has a bad Content-Length: {:?}",
                        crate::display::visible_short(value, 40)
                    )
                })?;
            if length.is_some_and(|l| l != n) {
                return Err("the answer has two different Content-Length headers".into());
            }
            length = Some(n);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(format!(
                "the answer uses Transfer-Encoding {:?}, which Firecracker does not send",
                crate::display::visible_short(value, 40)
            ));
        }
    }
    let mut body = buf.split_off(head_end + 4);
    match length {
        Some(n) if n > MAX_BODY => {
            return Err(format!(
                "the answer's body ({n} bytes) is larger than {MAX_BODY}"
            ))
        }
        Some(n) => {
            while body.len() < n {
                if fill(s, &mut body, deadline)? == 0 {
                    return Err(format!(
                        "the connection was closed after {} of {n} body bytes",
                        body.len()
                    ));
                }
            }
            body.truncate(n);
        }
        // No length: a 204 has no body; anything else runs to the close.
        None if status == 204 || status == 304 || (100..200).contains(&status) => body.clear(),
        None => loop {
            if body.len() > MAX_BODY {
                return Err(format!("the answer's body is larger than {MAX_BODY}"));
            }
            if fill(s, &mut body, deadline)? == 0 {
                break;
            }
        },
    }
    Ok(Response {
        status,
        reason,
        body,
    })
}

/// `HTTP/1.x NNN reason` → (NNN, reason).
fn parse_status(line: &str) -> Option<(u16, String)> {
    let rest = line
        .strip_prefix("HTTP/1.1 ")
        .or_else(|| line.strip_prefix("HTTP/1.0 "))?;
    let (code, reason) = rest.split_once(' ').unwrap_or((rest, ""));
    if code.len() != 3 || !code.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let status: u16 = code.parse().ok()?;
    (100..600)
        .contains(&status)
        .then(|| (status, reason.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    /// Serves one connection: reads the request, writes `reply` in small
    /// pieces (to exercise reassembly), then holds or closes. Returns the
    /// socket path and a handle giving back the request bytes.
    fn serve(
        reply: &'static [u8],
        hold: Duration,
    ) -> (
        tempfile::TempDir,
        std::path::PathBuf,
        std::thread::JoinHandle<Vec<u8>>,
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("api.sock");
        let l = UnixListener::bind(&path).expect("bind");
        let h = std::thread::spawn(move || {
            let (mut c, _) = l.accept().expect("accept");
            c.set_read_timeout(Some(Duration::from_secs(5))).ok();
            let mut req = Vec::new();
            let mut b = [0u8; 1024];
            // The request is small: read until its body is complete.
            loop {
                let n = c.read(&mut b).unwrap_or(0);
                req.extend_from_slice(&b[..n]);
                if n == 0 {
                    break;
                }
                if let Some(i) = req.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&req[..i]).to_lowercase();
                    let len: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length: "))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    if req.len() >= i + 4 + len {
                        break;
                    }
                }
            }
            for piece in reply.chunks((reply.len() / 16).max(7)) {
                let _ = c.write_all(piece);
                std::thread::sleep(Duration::from_millis(1));
            }
            std::thread::sleep(hold);
            req
        });
        (dir, path, h)
    }

    fn body() -> Value {
        serde_json::json!({"vcpu_count": 2, "mem_size_mib": 512})
    }

    #[test]
    fn no_content_is_success_and_the_request_is_well_formed() {
        let (_d, p, h) = serve(
            b"HTTP/1.1 204 No Content\r\nServer: Firecracker API\r\n\r\n",
            Duration::ZERO,
        );
        put(&p, "/machine-config", &body(), Duration::from_secs(5)).expect("ok");
        let req = String::from_utf8(h.join().expect("join")).expect("utf-8");
        let (head, b) = req.split_once("\r\n\r\n").expect("head");
        assert!(
            head.starts_with("PUT /machine-config HTTP/1.1\r\n"),
            "{head}"
        );
        assert!(
            head.contains(&format!("\r\nContent-Length: {}", b.len())),
            "{head}"
        );
        assert!(
            head.contains("\r\nContent-Type: application/json"),
            "{head}"
        );
        let v: Value = serde_json::from_str(b).expect("json body");
        assert_eq!(v, body());
    }

    #[test]
    fn a_fault_message_is_quoted() {
        let (_d, p, _h) = serve(
            b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: 46\r\n\r\n{\"fault_message\":\"Invalid kernel image path!\"}  trailing bytes are not read",
            Duration::ZERO,
        );
        let e = put(&p, "/boot-source", &body(), Duration::from_secs(5)).expect_err("400");
        assert!(e.contains("PUT /boot-source"), "{e}");
        assert!(
            e.contains("400 Bad Request: Invalid kernel image path!"),
            "{e}"
        );
    }

    #[test]
    fn a_body_without_length_runs_to_the_close() {
        let (_d, p, _h) = serve(
            b"HTTP/1.0 500 Oops\r\n\r\n{\"fault_message\":\"boom\"}",
            Duration::ZERO,
        );
        let e = put(&p, "/actions", &body(), Duration::from_secs(5)).expect_err("500");
        assert!(e.ends_with("500 Oops: boom"), "{e}");
    }

    #[test]
    fn garbage_is_not_http() {
        let (_d, p, _h) = serve(b"SSH-2.0-OpenSSH_9.2\r\n\r\n", Duration::ZERO);
        let e = put(&p, "/actions", &body(), Duration::from_secs(5)).expect_err("garbage");
        assert!(e.contains("not HTTP"), "{e}");
        let (_d, p, _h) = serve(b"HTTP/1.1 2x4 Hm\r\n\r\n", Duration::ZERO);
        let e = put(&p, "/actions", &body(), Duration::from_secs(5)).expect_err("bad code");
        assert!(e.contains("not HTTP"), "{e}");
        let (_d, p, _h) = serve(b"HTTP/1.1 204 OK\r\nno colon here\r\n\r\n", Duration::ZERO);
        let e = put(&p, "/actions", &body(), Duration::from_secs(5)).expect_err("bad header");
        assert!(e.contains("malformed header"), "{e}");
        let (_d, p, _h) = serve(
            b"HTTP/1.1 204 OK\r\nContent-Length: -1\r\n\r\n",
            Duration::ZERO,
        );
        let e = put(&p, "/actions", &body(), Duration::from_secs(5)).expect_err("bad length");
        assert!(e.contains("bad Content-Length"), "{e}");
        let (_d, p, _h) = serve(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            Duration::ZERO,
        );
        let e = put(&p, "/actions", &body(), Duration::from_secs(5)).expect_err("chunked");
        assert!(e.contains("Transfer-Encoding"), "{e}");
    }

    #[test]
    fn a_silent_peer_times_out() {
        let (_d, p, _h) = serve(b"", Duration::from_secs(3));
        let t0 = Instant::now();
        let e = put(&p, "/actions", &body(), Duration::from_millis(300)).expect_err("silent");
        assert!(e.contains("no answer in time"), "{e}");
        assert!(t0.elapsed() < Duration::from_secs(2));
    }

    #[test]
    fn an_early_close_and_a_short_body_are_reported() {
        let (_d, p, _h) = serve(b"", Duration::ZERO);
        let e = put(&p, "/actions", &body(), Duration::from_secs(5)).expect_err("closed");
        assert!(e.contains("closed without an answer"), "{e}");
        let (_d, p, _h) = serve(
            b"HTTP/1.1 400 Bad\r\nContent-Length: 100\r\n\r\nshort",
            Duration::ZERO,
        );
        let e = put(&p, "/actions", &body(), Duration::from_secs(5)).expect_err("short");
        assert!(e.contains("after 5 of 100 body bytes"), "{e}");
    }

    #[test]
    fn oversized_answers_are_refused() {
        static HUGE_HEAD: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
        let head = HUGE_HEAD.get_or_init(|| {
            let mut v = b"HTTP/1.1 204 OK\r\n".to_vec();
            v.extend(std::iter::repeat_n(b'x', 20_000));
            v
        });
        let (_d, p, _h) = serve(head, Duration::ZERO);
        let e = put(&p, "/actions", &body(), Duration::from_secs(5)).expect_err("huge");
        assert!(e.contains("headers are longer"), "{e}");
        let (_d, p, _h) = serve(
            b"HTTP/1.1 400 Bad\r\nContent-Length: 999999\r\n\r\n",
            Duration::ZERO,
        );
        let e = put(&p, "/actions", &body(), Duration::from_secs(5)).expect_err("big body");
        assert!(e.contains("larger than"), "{e}");
    }

    #[test]
    fn no_socket_is_a_clear_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let e = put(
            &dir.path().join("nope.sock"),
            "/actions",
            &body(),
            Duration::from_secs(1),
        )
        .expect_err("no socket");
        assert!(e.contains("cannot connect"), "{e}");
        let e = put(
            &dir.path().join("nope.sock"),
            "/a b",
            &body(),
            Duration::from_secs(1),
        )
        .expect_err("bad path");
        assert!(e.contains("not a valid request path"), "{e}");
    }
}
