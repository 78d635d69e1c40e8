//! Small readers of Redis replies shared by the readers of each key type.

use super::keys::ProductKeys;
use redis::{ErrorKind, RedisError, RedisResult, Value};

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

/// Field/value pairs of a flat array (RESP2), a map (RESP3), or an array of two-element
/// arrays (RESP3's answer to HRANDFIELD ... WITHVALUES).
pub fn pairs(v: &Value) -> Vec<(Vec<u8>, Vec<u8>)> {
    match v {
        Value::Array(items) if items.iter().any(|i| matches!(i, Value::Array(_))) => items
            .iter()
            .filter_map(|i| match i {
                Value::Array(p) => match p.as_slice() {
                    [k, v] => Some((bytes(k)?, bytes(v)?)),
                    _ => None,
                },
                _ => None,
            })
            .collect(),
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

/// A multi-key command refused because its slot is migrating and its keys are split between
/// the two nodes (TRYAGAIN, also as named by [`super::errors::naming_the_slot`]).
pub fn is_try_again(e: &RedisError) -> bool {
    e.code() == Some("TRYAGAIN")
}

/// A script's integer reply.
pub fn int_reply(v: Value) -> RedisResult<i64> {
    match v {
        Value::Int(i) => Ok(i),
        other => Err(RedisError::from((
            ErrorKind::UnexpectedReturnType,
            "script returned a non-integer",
            format!("{other:?}"),
        ))),
    }
}

/// A reply code the contract does not define.
pub fn unexpected(code: i64) -> RedisError {
    RedisError::from((
        ErrorKind::UnexpectedReturnType,
        "script returned an unknown code",
        code.to_string(),
    ))
}

/// A reply of a shape the contract does not define.
pub fn unknown_reply(what: &str, v: &impl std::fmt::Debug) -> RedisError {
    RedisError::from((
        ErrorKind::UnexpectedReturnType,
        "a script returned an unknown reply",
        format!("{what}: {v:?}"),
    ))
}

/// A product's five script keys, owned (for pipelined batches).
pub fn script_keys(k: &ProductKeys) -> Vec<String> {
    k.script_keys().iter().map(|s| s.to_string()).collect()
}
