//! The floor under the scale benchmark's Redis figures: the same keys written and read by
//! `redis-cli --pipe`, with no console, no script and no check in between, measured in the
//! same run as the console's commands (redis-server's CPU from `/proc`). Issue 22's targets
//! (preheat <= 2 s, a read <= 0.5 s of Redis CPU for 100,000 products) are set against what
//! the key layout itself costs: these say how much of a figure is the layout's and how much
//! the console's.

use super::harness::RedisServer;
use super::harness::procstat::cpu_seconds;
use seckill_console::redis::ProductKeys;
use std::io::Write;
use std::process::{Command, Stdio};

/// Streams per XREAD or EXISTS, as the cut sends them on a single server.
const STREAMS_PER_COMMAND: usize = 100;

/// Appends one command in RESP.
fn command(out: &mut Vec<u8>, args: &[&str]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
}

/// The meta hash's fields as a preheat gives them to `first.lua` (the script adds `rev` and
/// `expire_at`).
fn meta_fields<'a>(stock: &'a str, limit: &'a str) -> [&'a str; 12] {
    [
        "initial",
        stock,
        "limit",
        limit,
        "deducted",
        "0",
        "epoch",
        "1796486291101",
        "bucket_capacity",
        "200",
        "bucket_rate",
        "0.0013889",
    ]
}

/// The writes of a first preheat of every product, one command each and no script: the meta
/// hash (the fields a preheat writes), the two witnesses with their placeholder, the empty
/// stream, the four expiries and, last, the stock with its own.
pub fn writes(keys: &[ProductKeys], stock: i64, limit: i64, expire_at_ms: i64) -> Vec<u8> {
    let (stock, limit, at) = (
        stock.to_string(),
        limit.to_string(),
        expire_at_ms.to_string(),
    );
    let stock_event = format!("{stock}|");
    let mut out = Vec::new();
    for k in keys {
        let mut hset = vec!["HSET", k.meta.as_str()];
        hset.extend(meta_fields(&stock, &limit));
        hset.extend(["rev", "1", "expire_at", &at]);
        command(&mut out, &hset);
        command(&mut out, &["HSET", &k.buyers, "", "0"]);
        command(&mut out, &["HSET", &k.ledger, "", "-"]);
        command(
            &mut out,
            &["XADD", &k.events, "MAXLEN", "0", "*", "a", &stock_event],
        );
        for key in [&k.meta, &k.buyers, &k.ledger, &k.events] {
            command(&mut out, &["PEXPIREAT", key, &at]);
        }
        command(&mut out, &["SET", &k.stock, &stock, "PXAT", &at]);
    }
    out
}

/// The reads of one cut of never-sold products, as `status` sends them: each product's newest
/// event, stock, meta hash and the two witnesses' types, then a hundred streams to an XREAD
/// (did any move?) and to an EXISTS (an empty stream is there?).
pub fn reads(keys: &[ProductKeys]) -> Vec<u8> {
    let mut out = Vec::new();
    for k in keys {
        command(&mut out, &["XREVRANGE", &k.events, "+", "-", "COUNT", "1"]);
        command(&mut out, &["GET", &k.stock]);
        command(&mut out, &["HRANDFIELD", &k.meta, "64", "WITHVALUES"]);
        command(&mut out, &["TYPE", &k.buyers]);
        command(&mut out, &["TYPE", &k.ledger]);
    }
    for batch in keys.chunks(STREAMS_PER_COMMAND) {
        let mut xread = vec!["XREAD", "COUNT", "1", "STREAMS"];
        xread.extend(batch.iter().map(|k| k.events.as_str()));
        xread.extend(batch.iter().map(|_| "0-0"));
        command(&mut out, &xread);
        let mut exists = vec!["EXISTS"];
        exists.extend(batch.iter().map(|k| k.events.as_str()));
        command(&mut out, &exists);
    }
    out
}

/// `first.lua` once per product through EVALSHA, with the arguments a preheat gives it.
pub fn first_calls(
    sha: &str,
    keys: &[ProductKeys],
    stock: i64,
    limit: i64,
    expire_at_ms: i64,
) -> Vec<u8> {
    let (stock, limit, at) = (
        stock.to_string(),
        limit.to_string(),
        expire_at_ms.to_string(),
    );
    let mut out = Vec::new();
    for k in keys {
        let mut call = vec!["EVALSHA", sha, "5"];
        call.extend(k.script_keys());
        call.extend([stock.as_str(), at.as_str()]);
        call.extend(meta_fields(&stock, &limit));
        command(&mut out, &call);
    }
    out
}

/// Sends `commands` through `redis-cli --pipe` and returns redis-server's CPU seconds spent
/// meanwhile; panics (this is a benchmark) when a reply is an error.
pub fn piped_cpu(server: &RedisServer, commands: &[u8]) -> f64 {
    let pid = server.pid().expect("redis-server pid");
    let port = server
        .addr()
        .rsplit(':')
        .next()
        .unwrap_or_default()
        .to_string();
    let cpu0 = cpu_seconds(pid);
    let mut child = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port, "--pipe"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("redis-cli --pipe");
    let mut stdin = child.stdin.take().expect("stdin");
    // Written from a thread of its own: redis-cli answers on stdout only at the end, but a
    // pipe's buffer would fill before then and the two would wait on each other.
    let data = commands.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&data));
    let out = child.wait_with_output().expect("redis-cli --pipe");
    writer.join().expect("writer").expect("write to redis-cli");
    let cpu = cpu_seconds(pid) - cpu0;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("errors: 0"),
        "redis-cli --pipe: {text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    cpu
}

/// The SHA1 of `first.lua` as the server has it loaded (SCRIPT LOAD of the file).
pub fn load_first(server: &RedisServer) -> String {
    let body = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/first.lua"))
        .expect("lua/first.lua");
    server.cli(&["SCRIPT", "LOAD", &body]).trim().to_string()
}
