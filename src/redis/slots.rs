//! Redis Cluster slot arithmetic and the slot map read from CLUSTER SLOTS.

use redis::Value;

/// The number of hash slots of a Redis Cluster.
pub const SLOT_COUNT: usize = 16384;

/// CRC16/XMODEM, the checksum Redis Cluster hashes keys with.
fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in data {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The slot of a key, honouring the first non-empty `{...}` hash tag.
pub fn key_slot(key: &[u8]) -> u16 {
    let hashed = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    crc16(hashed) % SLOT_COUNT as u16
}

/// One range of slots and the nodes that serve it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotRange {
    pub start: u16,
    pub end: u16,
    pub primary: String,
    pub replicas: Vec<String>,
}

/// Parses a CLUSTER SLOTS reply into ranges. Nodes are `host:port`. Entries that do not have the
/// expected shape are skipped rather than trusted.
pub fn parse_cluster_slots(reply: &Value) -> Vec<SlotRange> {
    let Value::Array(entries) = reply else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries {
        let Value::Array(fields) = entry else {
            continue;
        };
        let (Some(start), Some(end)) = (
            fields.first().and_then(as_int),
            fields.get(1).and_then(as_int),
        ) else {
            continue;
        };
        let nodes: Vec<String> = fields.iter().skip(2).filter_map(node_addr).collect();
        let Some((primary, replicas)) = nodes.split_first() else {
            continue;
        };
        let (Ok(start), Ok(end)) = (u16::try_from(start), u16::try_from(end)) else {
            continue;
        };
        if start > end || usize::from(end) >= SLOT_COUNT {
            continue;
        }
        out.push(SlotRange {
            start,
            end,
            primary: primary.clone(),
            replicas: replicas.to_vec(),
        });
    }
    out
}

fn as_int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

fn as_text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

fn node_addr(v: &Value) -> Option<String> {
    let Value::Array(parts) = v else {
        return None;
    };
    let host = parts.first().and_then(as_text)?;
    let port = parts.get(1).and_then(as_int)?;
    if host.is_empty() || !(1..=65535).contains(&port) {
        return None;
    }
    Some(join_host_port(&host, port))
}

/// `host:port`, with brackets around IPv6 hosts.
pub fn join_host_port(host: &str, port: i64) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_redis() {
        // Each value is what CLUSTER KEYSLOT answers on a real server (redis-server 7 in
        // cluster mode); 12739 is also the published CRC16/XMODEM check value of "123456789".
        for (key, slot) in [
            (&b""[..], 0),
            (b"foo", 12182),
            (b"bar", 5061),
            (b"123456789", 12739),
            (b"user1000", 3443),
            // Only what is inside the first `{...}` is hashed.
            (b"{user1000}.following", 3443),
            (b"{user1000}.followers", 3443),
            (b"foo{bar}{zap}", 5061),
            // The tag runs to the first `}`: here it is `{bar`.
            (b"foo{{bar}}", 4015),
            (b"{bar", 4015),
            // An empty first tag hashes the whole key; a later tag does not count.
            (b"{}", 15257),
            (b"foo{}", 5542),
            (b"foo{}{bar}", 8363),
            // A product's keys share its tag, whatever the prefix and the suffix.
            (b"seckill:{a1:p1}:stock", 1439),
            (b"other:{a1:p1}:ledger", 1439),
            (b"a1:p1", 1439),
        ] {
            assert_eq!(
                key_slot(key),
                slot,
                "CLUSTER KEYSLOT {}",
                String::from_utf8_lossy(key)
            );
        }
    }

    #[test]
    fn parses_cluster_slots() {
        let node = |h: &str, p: i64| {
            Value::Array(vec![
                Value::BulkString(h.as_bytes().to_vec()),
                Value::Int(p),
                Value::BulkString(b"id".to_vec()),
            ])
        };
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(5460),
                node("127.0.0.1", 7000),
                node("127.0.0.1", 7003),
            ]),
            Value::Array(vec![Value::Int(1), Value::Nil]),
        ]);
        let ranges = parse_cluster_slots(&reply);
        assert_eq!(ranges.len(), 1);
        assert_eq!(ranges[0].primary, "127.0.0.1:7000");
        assert_eq!(ranges[0].replicas, vec!["127.0.0.1:7003".to_string()]);
    }
}
