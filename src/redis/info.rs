//! INFO and SLOWLOG replies as typed figures, for the Redis view and `ping`: the parsing of the
//! server's text belongs with the rest of the Redis protocol, not with a screen.

use super::node::Node;
use redis::Value;
use serde::Serialize;

/// SLOWLOG entries read per node.
pub const SLOWLOG_LEN: i64 = 10;

/// One entry of a node's slowlog; the arguments are reduced to the command name and its first
/// key, so that a slow AUTH or a value never shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlowEntry {
    pub id: i64,
    pub at_unix: i64,
    pub micros: i64,
    pub command: String,
}

/// The INFO figures the console shows.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct NodeStats {
    pub ops_per_sec: Option<f64>,
    pub used_memory: Option<String>,
    /// `none` when no limit is set.
    pub max_memory: Option<String>,
    pub version: Option<String>,
    pub memory: Memory,
    /// What the server says it is (`role` and `redis_mode` of INFO).
    pub server: Option<ServerRole>,
    /// A primary's replicas and how far each lags (INFO replication).
    pub replicas: Vec<Replica>,
    /// Replicas fresh enough to count for `min-replicas-to-write`; INFO shows it only when that
    /// setting is on.
    pub good_replicas: Option<u32>,
}

/// One replica as its primary's INFO lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Replica {
    pub addr: String,
    /// `online`, `wait_bgsave`, `send_bulk` ...
    pub state: String,
    /// Seconds since the replica last acknowledged the stream of writes.
    pub lag_secs: Option<i64>,
}

/// The replicas of an INFO reply (`slaveN:ip=...,port=...,state=...,offset=...,lag=...`).
fn replicas(fields: &[(String, String)]) -> Vec<Replica> {
    fields
        .iter()
        .filter(|(k, _)| {
            k.strip_prefix("slave")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(|(_, v)| {
            let part = |name: &str| {
                v.split(',')
                    .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
                    .unwrap_or("")
                    .to_string()
            };
            Replica {
                addr: format!("{}:{}", part("ip"), part("port")),
                state: part("state"),
                lag_secs: part("lag").parse().ok(),
            }
        })
        .collect()
}

/// What a server says it is: its replication role, or a Sentinel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerRole {
    Primary,
    /// A replica, with the `host:port` of its primary when INFO names it.
    Replica(Option<String>),
    Sentinel,
}

/// A node's memory as INFO tells it: what the preheat gate and the memory alerts decide on.
#[derive(Clone, Debug, PartialEq, Eq, Default, Serialize)]
pub struct Memory {
    pub used_bytes: Option<u64>,
    /// 0: no limit.
    pub max_bytes: Option<u64>,
    /// `maxmemory_policy` (`noeviction`, `volatile-lru`, `allkeys-lfu`, ...).
    pub policy: Option<String>,
    /// Keys evicted since the server started (or `CONFIG RESETSTAT`).
    pub evicted_keys: Option<u64>,
}

impl Memory {
    /// True when the policy may evict the contract's keys: every one of them carries an
    /// expiry, so a `volatile-*` policy may take them as well as an `allkeys-*` one.
    pub fn may_evict_ours(&self) -> bool {
        self.policy
            .as_deref()
            .is_some_and(|p| p.starts_with("allkeys-") || p.starts_with("volatile-"))
    }

    /// Used memory as a share of `maxmemory` (None without a limit).
    pub fn used_share(&self) -> Option<f64> {
        match (self.used_bytes, self.max_bytes) {
            (Some(used), Some(max)) if max > 0 => Some(used as f64 / max as f64),
            _ => None,
        }
    }

    /// Bytes left under `maxmemory` (None without a limit: the host's memory is the bound).
    pub fn free_bytes(&self) -> Option<u64> {
        match (self.used_bytes, self.max_bytes) {
            (Some(used), Some(max)) if max > 0 => Some(max.saturating_sub(used)),
            _ => None,
        }
    }

    /// `1.5M / 64M (2%), volatile-lru, 12 evicted`, for tables.
    pub fn summary(&self) -> String {
        let mut out = match (self.used_bytes, self.max_bytes) {
            (Some(u), Some(0)) => format!("{} / no limit", human_bytes(u)),
            (Some(u), Some(m)) => format!(
                "{} / {} ({:.0}%)",
                human_bytes(u),
                human_bytes(m),
                u as f64 * 100.0 / m as f64
            ),
            (Some(u), None) => human_bytes(u),
            _ => "-".to_string(),
        };
        if let Some(p) = &self.policy {
            out.push_str(&format!(", {p}"));
        }
        if let Some(e) = self.evicted_keys {
            out.push_str(&format!(", {e} evicted"));
        }
        out
    }
}

/// Bytes as `512B`, `1.5K`, `64.0M`, `2.00G`.
pub fn human_bytes(n: u64) -> String {
    const K: f64 = 1024.0;
    let f = n as f64;
    if f < K {
        format!("{n}B")
    } else if f < K * K {
        format!("{:.1}K", f / K)
    } else if f < K * K * K {
        format!("{:.1}M", f / K / K)
    } else {
        format!("{:.2}G", f / K / K / K)
    }
}

/// Reads INFO from one node (None when it does not answer).
pub async fn node_stats(node: &Node) -> Option<NodeStats> {
    let v = node.query(&redis::cmd("INFO")).await.ok()?;
    let text = redis::from_redis_value::<String>(v).ok()?;
    Some(stats_from_info(&text))
}

/// Reads the newest SLOWLOG entries of one node (empty when it does not answer).
pub async fn slowlog(node: &Node) -> Vec<SlowEntry> {
    let cmd = redis::cmd("SLOWLOG").arg("GET").arg(SLOWLOG_LEN).clone();
    match node.query(&cmd).await {
        Ok(v) => parse_slowlog(&v),
        Err(_) => Vec::new(),
    }
}

/// The figures of an INFO reply.
pub fn stats_from_info(text: &str) -> NodeStats {
    let fields = parse_info(text);
    let get = |k: &str| fields.iter().find(|(f, _)| f == k).map(|(_, v)| v.clone());
    NodeStats {
        ops_per_sec: get("instantaneous_ops_per_sec").and_then(|v| v.parse().ok()),
        used_memory: get("used_memory_human"),
        max_memory: get("maxmemory_human").map(|m| if m == "0B" { "none".to_string() } else { m }),
        version: get("redis_version").or_else(|| get("valkey_version")),
        memory: Memory {
            used_bytes: get("used_memory").and_then(|v| v.parse().ok()),
            max_bytes: get("maxmemory").and_then(|v| v.parse().ok()),
            policy: get("maxmemory_policy"),
            evicted_keys: get("evicted_keys").and_then(|v| v.parse().ok()),
        },
        server: server_role(&get("redis_mode"), &get("role"), || {
            get("master_host")
                .zip(get("master_port"))
                .map(|(h, p)| format!("{h}:{p}"))
        }),
        replicas: replicas(&fields),
        good_replicas: get("min_slaves_good_slaves").and_then(|v| v.parse().ok()),
    }
}

fn server_role(
    mode: &Option<String>,
    role: &Option<String>,
    primary: impl FnOnce() -> Option<String>,
) -> Option<ServerRole> {
    if mode.as_deref() == Some("sentinel") {
        return Some(ServerRole::Sentinel);
    }
    match role.as_deref() {
        Some("master") => Some(ServerRole::Primary),
        Some("slave" | "replica") => Some(ServerRole::Replica(primary())),
        _ => None,
    }
}

/// `field:value` lines of an INFO reply.
pub fn parse_info(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// Commands whose arguments may hold secrets: only their name is shown.
const SECRET_ARGS: &[&str] = &["AUTH", "HELLO", "MIGRATE", "CONFIG", "ACL", "CLIENT"];

/// SLOWLOG GET entries: `[id, unix time, micros, [args...], ...]`. Only the command name and
/// its first argument (the key) are kept: values and secrets stay out of the screen.
pub fn parse_slowlog(v: &Value) -> Vec<SlowEntry> {
    let Value::Array(entries) = v else {
        return Vec::new();
    };
    entries
        .iter()
        .filter_map(|e| {
            let Value::Array(fields) = e else {
                return None;
            };
            let int = |i: usize| match fields.get(i) {
                Some(Value::Int(n)) => Some(*n),
                _ => None,
            };
            let args: Vec<String> = match fields.get(3) {
                Some(Value::Array(a)) => a
                    .iter()
                    .filter_map(|x| match x {
                        Value::BulkString(b) => Some(String::from_utf8_lossy(b).to_string()),
                        Value::SimpleString(s) => Some(s.clone()),
                        _ => None,
                    })
                    .collect(),
                _ => Vec::new(),
            };
            let name = args.first().map(|a| a.to_uppercase()).unwrap_or_default();
            let command = match args.get(1) {
                Some(first) if !SECRET_ARGS.contains(&name.as_str()) => {
                    format!("{name} {}", crate::domain::stock::shown(first.as_bytes()))
                }
                _ => name,
            };
            Some(SlowEntry {
                id: int(0)?,
                at_unix: int(1)?,
                micros: int(2)?,
                command,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_primarys_replicas_and_their_lag_come_from_info() {
        let text = "# Replication\r\nrole:master\r\nconnected_slaves:2\r\nmin_slaves_good_slaves:1\r\nslave0:ip=10.0.0.2,port=6380,state=online,offset=99,lag=0\r\nslave1:ip=10.0.0.3,port=6381,state=wait_bgsave,offset=0,lag=31\r\nslave_read_only:1\r\n";
        let s = stats_from_info(text);
        assert_eq!(s.good_replicas, Some(1));
        assert_eq!(s.replicas.len(), 2, "slave_read_only is no replica");
        assert_eq!(s.replicas[0].addr, "10.0.0.2:6380");
        assert_eq!(
            (s.replicas[1].state.as_str(), s.replicas[1].lag_secs),
            ("wait_bgsave", Some(31))
        );
    }

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn slowlog_keeps_names_and_keys_only() {
        let v = Value::Array(vec![
            Value::Array(vec![
                Value::Int(7),
                Value::Int(1_700_000_000),
                Value::Int(15_000),
                Value::Array(vec![bulk("set"), bulk("seckill:{a:p}:stock"), bulk("42")]),
            ]),
            Value::Array(vec![
                Value::Int(8),
                Value::Int(1_700_000_001),
                Value::Int(20),
                Value::Array(vec![bulk("AUTH"), bulk("ops"), bulk("hunter2")]),
            ]),
            Value::Int(3),
        ]);
        let e = parse_slowlog(&v);
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].command, "SET seckill:{a:p}:stock");
        assert_eq!(e[1].command, "AUTH");
        assert!(!format!("{e:?}").contains("hunter2"));
        assert!(parse_slowlog(&Value::Nil).is_empty());
    }

    #[test]
    fn info_fields() {
        let f = parse_info(
            "# Server\r\nredis_version:7.2.4\r\n\r\n# Stats\r\ninstantaneous_ops_per_sec:12\r\n",
        );
        assert!(f.contains(&("redis_version".into(), "7.2.4".into())));
        assert!(f.contains(&("instantaneous_ops_per_sec".into(), "12".into())));
        let s = stats_from_info(
            "# Server\r\nredis_version:7.2.4\r\n# Memory\r\nused_memory_human:1.5M\r\nmaxmemory_human:0B\r\n# Stats\r\ninstantaneous_ops_per_sec:12\r\n",
        );
        assert_eq!(s.version.as_deref(), Some("7.2.4"));
        assert_eq!(s.ops_per_sec, Some(12.0));
        assert_eq!(s.used_memory.as_deref(), Some("1.5M"));
        assert_eq!(s.max_memory.as_deref(), Some("none"));
        assert_eq!(s.server, None);
    }

    #[test]
    fn memory_and_role_figures() {
        let s = stats_from_info(
            "# Server\r\nredis_mode:standalone\r\n# Memory\r\nused_memory:3000000\r\nmaxmemory:4000000\r\nmaxmemory_policy:volatile-lru\r\n# Stats\r\nevicted_keys:17\r\n# Replication\r\nrole:slave\r\nmaster_host:10.0.0.1\r\nmaster_port:6380\r\n",
        );
        assert_eq!(s.memory.used_bytes, Some(3_000_000));
        assert_eq!(s.memory.evicted_keys, Some(17));
        assert!(s.memory.may_evict_ours());
        assert_eq!(s.memory.free_bytes(), Some(1_000_000));
        assert_eq!(s.memory.used_share(), Some(0.75));
        assert_eq!(
            s.server,
            Some(ServerRole::Replica(Some("10.0.0.1:6380".into())))
        );
        assert_eq!(
            s.memory.summary(),
            "2.9M / 3.8M (75%), volatile-lru, 17 evicted"
        );
        let sentinel = stats_from_info("redis_mode:sentinel\r\n");
        assert_eq!(sentinel.server, Some(ServerRole::Sentinel));
        let noevict =
            stats_from_info("maxmemory:0\r\nmaxmemory_policy:noeviction\r\nrole:master\r\n");
        assert!(!noevict.memory.may_evict_ours());
        assert_eq!(noevict.memory.free_bytes(), None);
        assert_eq!(noevict.server, Some(ServerRole::Primary));
    }
}
