//! Small readers of Redis replies shared by the readers of each key type.

use redis::{RedisError, Value};

/// The bytes of a string-like reply.
pub fn bytes(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::BulkString(b) => Some(b.clone()),
        Value::SimpleString(s) => Some(s.clone().into_bytes()),
        Value::Int(i) => Some(i.to_string().into_bytes()),
        Value::VerbatimString { text, .. } => Some(text.clone().into_bytes()),
        _ => None,
    }
}

/// The text of a string-like reply (lossy).
pub fn text(v: &Value) -> Option<String> {
    bytes(v).map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// Field/value pairs of a flat array (RESP2) or a map (RESP3).
pub fn pairs(v: &Value) -> Vec<(Vec<u8>, Vec<u8>)> {
    match v {
        Value::Array(items) => items
            .chunks(2)
            .filter_map(|p| match p {
                [k, v] => Some((bytes(k)?, bytes(v)?)),
                _ => None,
            })
            .collect(),
        Value::Map(m) => m
            .iter()
            .filter_map(|(k, v)| Some((bytes(k)?, bytes(v)?)))
            .collect(),
        _ => Vec::new(),
    }
}

/// True for the error Redis answers when a command meets a key of another type.
pub fn is_wrong_type(e: &RedisError) -> bool {
    e.code() == Some("WRONGTYPE")
}
