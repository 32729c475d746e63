//! A minimal RESP2 client: just enough to drive a test server without
//! depending on `redis-cli` or on the crate under test.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

/// A reply from the server, as sent over RESP2.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// `+OK`-style status reply.
    Simple(String),
    /// `-ERR ...` error reply (the message without the leading `-`).
    Error(String),
    /// `:42` integer reply.
    Int(i64),
    /// Bulk string; `None` is the null bulk string (`$-1`).
    Bulk(Option<Vec<u8>>),
    /// Array of replies; `None` is the null array (`*-1`).
    Array(Option<Vec<Reply>>),
}

impl Reply {
    /// Renders the reply roughly the way `redis-cli --no-raw` would, minus
    /// the decorations: strings verbatim, integers in decimal, nulls as
    /// `(nil)`, array elements one per line (nested arrays flattened).
    pub fn render(&self) -> String {
        match self {
            Reply::Simple(s) => s.clone(),
            Reply::Error(e) => format!("(error) {e}"),
            Reply::Int(n) => n.to_string(),
            Reply::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
            Reply::Bulk(None) | Reply::Array(None) => "(nil)".to_owned(),
            Reply::Array(Some(items)) => items
                .iter()
                .map(Reply::render)
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

/// Encodes a command as a RESP array of bulk strings.
pub(crate) fn encode(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

fn read_line(r: &mut impl BufRead) -> io::Result<String> {
    let mut buf = Vec::new();
    r.read_until(b'\n', &mut buf)?;
    if !buf.ends_with(b"\r\n") {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "connection closed mid-reply",
        ));
    }
    buf.truncate(buf.len() - 2);
    String::from_utf8(buf).map_err(|e| invalid(format!("non-UTF-8 header line: {e}")))
}

fn parse_int(s: &str) -> io::Result<i64> {
    s.parse()
        .map_err(|_| invalid(format!("bad integer in reply: {s:?}")))
}

/// Reads one complete (possibly nested) reply.
pub(crate) fn read_reply(r: &mut impl BufRead) -> io::Result<Reply> {
    let line = read_line(r)?;
    let (kind, rest) = line.split_at_checked(1).unwrap_or(("", ""));
    match kind {
        "+" => Ok(Reply::Simple(rest.to_owned())),
        "-" => Ok(Reply::Error(rest.to_owned())),
        ":" => Ok(Reply::Int(parse_int(rest)?)),
        "$" => {
            let Ok(len) = usize::try_from(parse_int(rest)?) else {
                return Ok(Reply::Bulk(None));
            };
            let mut data = vec![0; len + 2];
            r.read_exact(&mut data)?;
            if !data.ends_with(b"\r\n") {
                return Err(invalid("bulk string not terminated by CRLF".into()));
            }
            data.truncate(len);
            Ok(Reply::Bulk(Some(data)))
        }
        "*" => {
            let Ok(n) = usize::try_from(parse_int(rest)?) else {
                return Ok(Reply::Array(None));
            };
            let items = (0..n).map(|_| read_reply(r)).collect::<io::Result<_>>()?;
            Ok(Reply::Array(Some(items)))
        }
        _ => Err(invalid(format!("unexpected reply line: {line:?}"))),
    }
}

/// One TCP connection to a server on the loopback interface.
pub(crate) struct Connection {
    reader: BufReader<TcpStream>,
}

impl Connection {
    /// Connects with `timeout` applied to connecting, reading and writing.
    pub(crate) fn open(port: u16, timeout: Duration) -> io::Result<Self> {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let stream = TcpStream::connect_timeout(&addr, timeout)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        Ok(Self {
            reader: BufReader::new(stream),
        })
    }

    /// Sends one command and reads its reply. Server errors come back as
    /// `Ok(Reply::Error(_))`; only transport/protocol failures are `Err`.
    pub(crate) fn call(&mut self, args: &[&str]) -> io::Result<Reply> {
        self.reader.get_mut().write_all(&encode(args))?;
        read_reply(&mut self.reader)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(bytes: &[u8]) -> Reply {
        read_reply(&mut &bytes[..]).expect("valid RESP")
    }

    #[test]
    fn encodes_bulk_array() {
        assert_eq!(
            encode(&["SET", "k", ""]),
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n"
        );
    }

    #[test]
    fn parses_every_kind() {
        assert_eq!(parse(b"+OK\r\n"), Reply::Simple("OK".into()));
        assert_eq!(parse(b"-ERR no\r\n"), Reply::Error("ERR no".into()));
        assert_eq!(parse(b":-7\r\n"), Reply::Int(-7));
        assert_eq!(parse(b"$-1\r\n"), Reply::Bulk(None));
        assert_eq!(
            parse(b"$4\r\na\r\nb\r\n"),
            Reply::Bulk(Some(b"a\r\nb".to_vec()))
        );
        assert_eq!(parse(b"*-1\r\n"), Reply::Array(None));
        let nested = parse(b"*3\r\n:1\r\n*2\r\n$1\r\nx\r\n$-1\r\n+y\r\n");
        assert_eq!(nested.render(), "1\nx\n(nil)\ny");
    }

    #[test]
    fn truncated_reply_is_an_error() {
        assert!(read_reply(&mut &b"$5\r\nab"[..]).is_err());
        assert!(read_reply(&mut &b"+OK"[..]).is_err());
        assert!(read_reply(&mut &b"?\r\n"[..]).is_err());
    }
}
