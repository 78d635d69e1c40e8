//! The language-neutral test vectors of the scripts (`tests/vectors/scripts.json`, its `format`
//! field describes it), replayed against a private redis-server: every case runs the very file
//! app servers load (`lua/<script>.lua`, read at test time) by EVALSHA, and its reply and every
//! key the database holds afterwards must be the vector's. Every failing case is reported.

use crate::harness::RedisServer;
use redis::Value;
use redis::aio::MultiplexedConnection;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Vectors {
    /// Documentation only: how to read the file.
    #[allow(dead_code)]
    format: Vec<String>,
    prefix: String,
    keys: Vec<String>,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    name: String,
    #[serde(default)]
    #[allow(dead_code)]
    note: Option<String>,
    script: String,
    keys_before: BTreeMap<String, Typed>,
    argv: Vec<String>,
    reply: Reply,
    keys_after: BTreeMap<String, Typed>,
}

/// A key's type and value. `Other` only describes what a dump found (a list, a set...).
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
enum Typed {
    String(String),
    Hash(BTreeMap<String, String>),
    Stream(Vec<Vec<String>>),
    Other(String),
}

#[derive(Deserialize, Serialize, Debug, PartialEq)]
#[serde(untagged)]
enum Reply {
    Int(i64),
    /// An array of integers and texts (`window.lua`: `[1, rev]`, `[4, "frozen", marker]`).
    Array(Vec<serde_json::Value>),
    Error {
        error_prefix: String,
    },
}

/// What the script answered.
#[derive(Debug)]
enum Got {
    Int(i64),
    Array(Vec<serde_json::Value>),
    Error(String),
    Other(String),
}

impl Got {
    fn matches(&self, want: &Reply) -> bool {
        match (self, want) {
            (Got::Int(a), Reply::Int(b)) => a == b,
            (Got::Array(a), Reply::Array(b)) => a == b,
            (Got::Error(text), Reply::Error { error_prefix }) => text.starts_with(error_prefix),
            _ => false,
        }
    }

    fn shown(&self) -> String {
        match self {
            Got::Int(n) => n.to_string(),
            Got::Array(a) => json(a),
            Got::Error(text) => format!("error {text:?}"),
            Got::Other(v) => format!("unexpected reply {v}"),
        }
    }
}

fn json<T: Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string(v).expect("serializable")
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Okay => Some("OK".to_string()),
        _ => None,
    }
}

fn items(v: &Value) -> Option<&[Value]> {
    match v {
        Value::Array(a) | Value::Set(a) => Some(a),
        _ => None,
    }
}

async fn run(con: &mut MultiplexedConnection, args: &[&str]) -> Result<Value, String> {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query_async::<Value>(con)
        .await
        .map_err(|e| format!("{args:?}: {e}"))
}

/// The text of an error reply as the server sent it: its code, a blank, its message.
fn error_text(code: Option<&str>, detail: Option<&str>) -> String {
    match (code, detail) {
        (Some(c), Some(d)) => format!("{c} {d}"),
        (Some(c), None) => c.to_string(),
        (None, Some(d)) => d.to_string(),
        (None, None) => String::new(),
    }
}

fn got_of(v: Value) -> Got {
    match v {
        Value::Int(n) => Got::Int(n),
        Value::ServerError(e) => Got::Error(error_text(Some(e.code()), e.details())),
        Value::Array(ref a) => {
            let items: Option<Vec<serde_json::Value>> = a
                .iter()
                .map(|x| match x {
                    Value::Int(n) => Some(serde_json::Value::from(*n)),
                    other => text(other).map(serde_json::Value::from),
                })
                .collect();
            items.map_or_else(|| Got::Other(format!("{v:?}")), Got::Array)
        }
        other => Got::Other(format!("{other:?}")),
    }
}

/// Replaces every `{event:N}` by the id of entry N of the events stream.
fn resolve(value: &str, ids: &[String]) -> Result<String, String> {
    const OPEN: &str = "{event:";
    let mut out = String::new();
    let mut rest = value;
    while let Some(at) = rest.find(OPEN) {
        out.push_str(&rest[..at]);
        let tail = &rest[at + OPEN.len()..];
        let close = tail
            .find('}')
            .ok_or_else(|| format!("unclosed placeholder in {value:?}"))?;
        let n: usize = tail[..close]
            .parse()
            .map_err(|_| format!("bad placeholder in {value:?}"))?;
        let id = ids.get(n).ok_or_else(|| {
            format!(
                "{value:?} names event {n}, the events stream has {} entries",
                ids.len()
            )
        })?;
        out.push_str(id);
        rest = &tail[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn resolve_typed(t: &Typed, ids: &[String]) -> Result<Typed, String> {
    Ok(match t {
        Typed::String(s) => Typed::String(resolve(s, ids)?),
        Typed::Hash(h) => Typed::Hash(
            h.iter()
                .map(|(f, v)| Ok((f.clone(), resolve(v, ids)?)))
                .collect::<Result<_, String>>()?,
        ),
        Typed::Stream(entries) => Typed::Stream(
            entries
                .iter()
                .map(|e| e.iter().map(|v| resolve(v, ids)).collect())
                .collect::<Result<_, String>>()?,
        ),
        Typed::Other(o) => Typed::Other(o.clone()),
    })
}

/// Writes keys_before: the streams first (Redis gives their ids), then the rest with their
/// placeholders resolved against the events stream's ids.
async fn write_before(
    con: &mut MultiplexedConnection,
    v: &Vectors,
    before: &BTreeMap<String, Typed>,
) -> Result<(), String> {
    let mut event_ids = Vec::new();
    for (short, t) in before {
        let Typed::Stream(entries) = t else { continue };
        let key = format!("{}{short}", v.prefix);
        if entries.is_empty() {
            run(con, &["XADD", &key, "MAXLEN", "0", "*", "a", "0|"]).await?;
        }
        for e in entries {
            if e.is_empty() || e.len() % 2 != 0 {
                return Err(format!(
                    "stream entry {e:?} of {short} is not field/value pairs"
                ));
            }
            let mut args = vec!["XADD", key.as_str(), "*"];
            args.extend(e.iter().map(String::as_str));
            let id = run(con, &args).await?;
            if short == "events" {
                event_ids.push(text(&id).ok_or_else(|| format!("XADD answered {id:?}"))?);
            }
        }
    }
    for (short, t) in before {
        let key = format!("{}{short}", v.prefix);
        match resolve_typed(t, &event_ids)? {
            Typed::Stream(_) => {}
            Typed::String(s) => {
                run(con, &["SET", &key, &s]).await?;
            }
            Typed::Hash(h) => {
                if h.is_empty() {
                    return Err(format!("hash {short} is empty: Redis cannot hold it"));
                }
                let mut args = vec!["HSET", key.as_str()];
                for (f, val) in &h {
                    args.push(f);
                    args.push(val);
                }
                run(con, &args).await?;
            }
            Typed::Other(o) => return Err(format!("{short}: a vector cannot write a {o}")),
        }
    }
    Ok(())
}

/// Every key of the database, by short name (the prefix taken off), and the events stream's
/// entry ids.
async fn dump(
    con: &mut MultiplexedConnection,
    v: &Vectors,
) -> Result<(BTreeMap<String, Typed>, Vec<String>), String> {
    let all = run(con, &["KEYS", "*"]).await?;
    let mut out = BTreeMap::new();
    let mut event_ids = Vec::new();
    for k in items(&all).unwrap_or_default() {
        let key = text(k).ok_or_else(|| format!("KEYS answered {k:?}"))?;
        let short = key.strip_prefix(&v.prefix).unwrap_or(&key).to_string();
        let kind = text(&run(con, &["TYPE", &key]).await?).unwrap_or_default();
        let typed = match kind.as_str() {
            "string" => {
                let got = run(con, &["GET", &key]).await?;
                Typed::String(text(&got).unwrap_or_default())
            }
            "hash" => {
                let got = run(con, &["HGETALL", &key]).await?;
                let mut h = BTreeMap::new();
                match &got {
                    Value::Map(pairs) => {
                        for (f, val) in pairs {
                            h.insert(text(f).unwrap_or_default(), text(val).unwrap_or_default());
                        }
                    }
                    other => {
                        for pair in items(other).unwrap_or_default().chunks(2) {
                            let f = text(&pair[0]).unwrap_or_default();
                            let val = pair.get(1).and_then(text).unwrap_or_default();
                            h.insert(f, val);
                        }
                    }
                }
                Typed::Hash(h)
            }
            "stream" => {
                let got = run(con, &["XRANGE", &key, "-", "+"]).await?;
                let mut entries = Vec::new();
                for e in items(&got).unwrap_or_default() {
                    let parts = items(e).unwrap_or_default();
                    let id = parts.first().and_then(text).unwrap_or_default();
                    let fields = parts
                        .get(1)
                        .and_then(items)
                        .unwrap_or_default()
                        .iter()
                        .map(|x| text(x).unwrap_or_default())
                        .collect();
                    if short == "events" {
                        event_ids.push(id);
                    }
                    entries.push(fields);
                }
                Typed::Stream(entries)
            }
            other => Typed::Other(other.to_string()),
        };
        out.insert(short, typed);
    }
    Ok((out, event_ids))
}

fn shown(t: Option<&Typed>) -> String {
    t.map_or_else(|| "absent".to_string(), json)
}

/// One case; Err holds what went wrong, in lines.
async fn replay(
    con: &mut MultiplexedConnection,
    v: &Vectors,
    shas: &BTreeMap<String, String>,
    case: &Case,
) -> Result<(), Vec<String>> {
    let one = |e: String| vec![e];
    let sha = shas
        .get(&case.script)
        .ok_or_else(|| one(format!("no script named {:?}", case.script)))?;
    run(con, &["FLUSHALL", "SYNC"]).await.map_err(one)?;
    write_before(con, v, &case.keys_before)
        .await
        .map_err(|e| one(format!("keys_before: {e}")))?;

    let keys: Vec<String> = v.keys.iter().map(|k| format!("{}{k}", v.prefix)).collect();
    let mut call = redis::cmd("EVALSHA");
    call.arg(sha).arg(keys.len()).arg(&keys).arg(&case.argv);
    let got = match call.query_async::<Value>(con).await {
        Ok(value) => got_of(value),
        Err(e) if e.code().is_some() => Got::Error(error_text(e.code(), e.detail())),
        Err(e) => return Err(one(format!("EVALSHA failed: {e}"))),
    };

    let mut problems = Vec::new();
    if !got.matches(&case.reply) {
        problems.push(format!(
            "reply: expected {}, found {}",
            json(&case.reply),
            got.shown()
        ));
    }
    let (found, ids) = dump(con, v).await.map_err(one)?;
    let names: BTreeSet<&String> = found.keys().chain(case.keys_after.keys()).collect();
    for name in names {
        let found_one = found.get(name);
        let want = case.keys_after.get(name).map(|t| resolve_typed(t, &ids));
        match want {
            Some(Err(e)) => problems.push(format!(
                "{name}: expected {} but {e}; found {}",
                shown(case.keys_after.get(name)),
                shown(found_one)
            )),
            Some(Ok(w)) if Some(&w) == found_one => {}
            want => problems.push(format!(
                "{name}: expected {}, found {}",
                shown(want.and_then(Result::ok).as_ref()),
                shown(found_one)
            )),
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// What the file must keep covering: each documented reply of the two scripts app servers call
/// has at least one case (a reply code lost in an edit of the file fails here).
fn coverage(v: &Vectors) -> Vec<String> {
    let mut seen: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for c in &v.cases {
        let label = match &c.reply {
            Reply::Int(n) if *n > 0 => ">0".to_string(),
            Reply::Int(n) => n.to_string(),
            Reply::Array(a) => json(a),
            Reply::Error { .. } => "error".to_string(),
        };
        seen.entry(c.script.as_str()).or_default().insert(label);
    }
    let required: [(&str, &[&str]); 2] = [
        (
            "deduct",
            &[">0", "0", "-1", "-2", "-3", "-4", "-5", "-7", "-8", "error"],
        ),
        ("restore", &[">0", "0", "-1", "-4", "-6", "error"]),
    ];
    let mut out = Vec::new();
    for (script, codes) in required {
        for code in codes {
            if !seen.get(script).is_some_and(|s| s.contains(*code)) {
                out.push(format!("no case of {script} answers {code}"));
            }
        }
    }
    out
}

#[tokio::test]
async fn scripts_answer_as_their_test_vectors_say() {
    let path = root().join("tests").join("vectors").join("scripts.json");
    let raw = std::fs::read_to_string(&path).expect("read tests/vectors/scripts.json");
    let v: Vectors = serde_json::from_str(&raw).expect("tests/vectors/scripts.json parses");

    let server = RedisServer::start();
    let client = redis::Client::open(server.url()).expect("redis url");
    let mut con = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect to the private redis-server");

    let scripts: BTreeSet<&str> = v.cases.iter().map(|c| c.script.as_str()).collect();
    let mut shas = BTreeMap::new();
    for script in scripts {
        let file = Path::new("lua").join(format!("{script}.lua"));
        let body = std::fs::read_to_string(root().join(&file))
            .unwrap_or_else(|e| panic!("read {}: {e}", file.display()));
        let sha = run(&mut con, &["SCRIPT", "LOAD", &body])
            .await
            .unwrap_or_else(|e| panic!("SCRIPT LOAD {}: {e}", file.display()));
        shas.insert(script.to_string(), text(&sha).expect("a digest"));
    }

    let mut failures = coverage(&v);
    let mut names = BTreeSet::new();
    for case in &v.cases {
        if !names.insert(case.name.as_str()) {
            failures.push(format!("two cases are named {:?}", case.name));
        }
        if matches!(case.reply, Reply::Error { .. }) && case.keys_after != case.keys_before {
            failures.push(format!(
                "case {:?}: an error reply writes nothing, keys_after must be keys_before",
                case.name
            ));
        }
        if let Err(problems) = replay(&mut con, &v, &shas, case).await {
            failures.push(format!(
                "case {:?} ({} {}):\n    {}",
                case.name,
                case.script,
                json(&case.argv),
                problems.join("\n    ")
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} test vectors failed:\n{}",
        failures.len(),
        v.cases.len(),
        failures.join("\n")
    );
}
