//! The HTTP/1.1 and server-sent-event plumbing of the loopback model
//! servers the tests run `dsh` against: read one request's body, write one
//! event.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

use serde_json::Value;

/// Writes one server-sent event carrying `data`.
pub(crate) fn event(stream: &mut TcpStream, data: &Value) {
    let _ = write!(stream, "data: {data}\n\n");
}

/// The body of one HTTP/1.1 request (`content-length` framed).
pub(crate) fn read_request(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(body)
}
