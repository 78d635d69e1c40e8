//! Configuration: defaults < file (`--config`, TOML) < environment (`SECKILL_*`) < flags.
//! Every layer is validated with errors that name the bad value and where it came from.

use crate::error::{Error, Result};
use crate::redact::SecretUrl;
use crate::redis::{KeySpace, RedisTarget};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One layer of settings; `None` means "not set here".
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Layer {
    pub redis: Option<String>,
    pub redis_cluster: Option<StringOrList>,
    /// Sentinels (`host:port` or URLs with their own credentials / `rediss://`).
    pub redis_sentinel: Option<StringOrList>,
    /// The master's name in Sentinel.
    pub sentinel_master: Option<String>,
    pub db: Option<String>,
    pub read_only: Option<bool>,
    pub json: Option<bool>,
    pub actor: Option<String>,
    pub prefix: Option<String>,
    pub connect_timeout_ms: Option<u64>,
    pub response_timeout_ms: Option<u64>,
    pub grace_secs: Option<u64>,
    pub redis_ca: Option<PathBuf>,
    pub refresh_secs: Option<f64>,
    pub compensation_alert_secs: Option<u64>,
    pub outbox_alert_secs: Option<u64>,
    pub key_ttl_days: Option<u64>,
    /// The share of Redis's time, in percent, a live reader's first read (or a read of every
    /// product after a failover) may take (default 15).
    pub warm_share_pct: Option<u64>,
    /// The operator's time zone: an IANA name or `local`.
    pub tz: Option<String>,
}

/// `redis_cluster` may be written as "a,b,c" or as ["a", "b", "c"].
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum StringOrList {
    One(String),
    Many(Vec<String>),
}

impl StringOrList {
    fn urls(&self) -> Vec<String> {
        match self {
            StringOrList::One(s) => split_list(s),
            StringOrList::Many(v) => v
                .iter()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect(),
        }
    }
}

/// A Sentinel as given: `host:port` becomes `redis://host:port`; a URL stays as it is.
fn sentinel_url(s: &str) -> String {
    if s.contains("://") {
        s.to_string()
    } else {
        format!("redis://{s}")
    }
}

fn split_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

/// The resolved configuration.
#[derive(Clone, Debug)]
pub struct Config {
    pub redis: RedisTarget,
    pub db: SecretUrl,
    /// True when no database was configured and the embedded SQLite file is used.
    pub db_is_default: bool,
    /// True when no layer named a Redis target and the default `redis://127.0.0.1:6379` is
    /// used, and when no layer named a prefix.
    pub redis_is_default: bool,
    pub prefix_is_default: bool,
    pub read_only: bool,
    pub json: bool,
    pub actor: String,
    pub keys: KeySpace,
    pub connect_timeout: Duration,
    pub response_timeout: Duration,
    /// Deductions without an order younger than this are in flight; older ones are orphaned.
    pub grace: Duration,
    pub redis_ca: Option<PathBuf>,
    pub refresh: Duration,
    pub compensation_alert: Duration,
    pub outbox_alert: Duration,
    /// Days after an activity ends that its keys expire (set by preheat, kept by fixes);
    /// 0: never.
    pub key_ttl_days: u32,
    /// A live reader's first read takes at most this share of Redis's time, in percent.
    pub warm_share_pct: u8,
    /// Where text tables and the TUI show times.
    pub tz: crate::domain::zone::Zone,
}

/// Reads a config file; a missing, unreadable or malformed file is bad input naming the file.
pub fn read_file(path: &Path) -> Result<Layer> {
    let shown = path.display();
    let meta = std::fs::metadata(path)
        .map_err(|e| Error::bad_input(format!("config file '{shown}' cannot be read: {e}")))?;
    if meta.len() > 1024 * 1024 {
        return Err(Error::bad_input(format!(
            "config file '{shown}' is {} bytes; a config file is at most 1 MiB",
            meta.len()
        )));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::bad_input(format!("config file '{shown}' cannot be read: {e}")))?;
    parse_file(&shown.to_string(), &text)
}

/// Parses config file text.
pub fn parse_file(name: &str, text: &str) -> Result<Layer> {
    toml::from_str::<Layer>(text).map_err(|e| {
        Error::bad_input(format!(
            "config file '{name}' is invalid{}: {}",
            crate::domain::import::toml_location(text, &e),
            crate::redact::redact_text(e.message())
        ))
    })
}

/// The embedded default database: a SQLite file in the user's data directory.
pub fn default_db_path() -> PathBuf {
    dirs::data_dir()
        .or_else(dirs::home_dir)
        .unwrap_or_else(std::env::temp_dir)
        .join("seckill-console")
        .join("seckill.db")
}

fn default_actor() -> String {
    ["USER", "LOGNAME", "USERNAME"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
        .or_else(user_of_this_uid)
        .unwrap_or_else(|| "unknown".to_string())
}

/// The account name of the process's uid (cron jobs and systemd units often run without
/// `$USER`): looked up in /etc/passwd, else `uid:<n>`, so the audit trail still names who.
#[cfg(unix)]
fn user_of_this_uid() -> Option<String> {
    let uid = rustix::process::getuid().as_raw();
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    Some(name_in_passwd(&passwd, uid).unwrap_or_else(|| format!("uid:{uid}")))
}

#[cfg(not(unix))]
fn user_of_this_uid() -> Option<String> {
    None
}

/// The name of `uid` in the text of an /etc/passwd file (`name:x:uid:gid:...`).
fn name_in_passwd(passwd: &str, uid: u32) -> Option<String> {
    passwd.lines().find_map(|line| {
        let mut f = line.split(':');
        let name = f.next()?;
        let _password = f.next()?;
        let id: u32 = f.next()?.parse().ok()?;
        (id == uid && !name.is_empty()).then(|| name.to_string())
    })
}

/// A warning for each setting that an empty variable left on the built-in default (`var`
/// reads the environment). An empty variable counts as unset (compose files write
/// `VAR: ${X:-}`); where nothing else names the setting, the console would otherwise run on
/// the default Redis, database or prefix unawares, as with a misspelt variable.
pub fn empty_variable_warnings(
    config: &Config,
    uses_redis: bool,
    var: impl Fn(&str) -> Option<String>,
) -> Vec<String> {
    let empty = |name: &str| var(name).is_some_and(|v| v.trim().is_empty());
    let said = |name: &str, what: String| {
        format!("{name} is set but empty, which counts as unset: the console uses {what}")
    };
    let mut out = Vec::new();
    if uses_redis && config.redis_is_default {
        for name in [
            "SECKILL_REDIS_URL",
            "SECKILL_REDIS_CLUSTER",
            "SECKILL_REDIS_SENTINEL",
        ] {
            if empty(name) {
                out.push(said(name, format!("the default Redis {DEFAULT_REDIS}")));
            }
        }
    }
    if config.db_is_default && empty("SECKILL_DATABASE_URL") {
        out.push(said(
            "SECKILL_DATABASE_URL",
            format!("the embedded SQLite file {}", default_db_path().display()),
        ));
    }
    if uses_redis && config.prefix_is_default && empty("SECKILL_PREFIX") {
        out.push(said(
            "SECKILL_PREFIX",
            format!(
                "the default key prefix {}",
                crate::redis::keys::DEFAULT_PREFIX
            ),
        ));
    }
    out
}

/// A Sentinel master name given where no layer names Sentinels: the name would be ignored and
/// the console would go to `--redis` or the default server, another Redis than the one meant.
fn master_needs_sentinels(
    master: Option<&str>,
    any_sentinels: bool,
    redis_given: bool,
) -> Result<()> {
    if master.is_some_and(|m| !m.trim().is_empty()) && !any_sentinels {
        return Err(Error::bad_input(format!(
            "--sentinel-master is given without --redis-sentinel (or SECKILL_REDIS_SENTINEL is empty): the console would use {} instead of the master the Sentinels name; give the Sentinels, e.g. --redis-sentinel 10.0.0.1:26379,10.0.0.2:26379",
            if redis_given {
                "--redis / --redis-cluster"
            } else {
                DEFAULT_REDIS
            }
        )));
    }
    Ok(())
}

/// The Redis the console uses when no layer names one.
pub const DEFAULT_REDIS: &str = "redis://127.0.0.1:6379";

/// Merges layers, lowest first, into a validated configuration.
pub fn resolve(layers: &[Layer]) -> Result<Config> {
    let mut redis: Option<RedisTarget> = None;
    let mut sentinels: Option<Vec<String>> = None;
    // Whether any layer named Sentinels (one above may have replaced them with a plain target).
    let mut any_sentinels = false;
    let mut data_url: Option<String> = None;
    let mut merged = Layer::default();
    for layer in layers {
        if layer.redis.is_some() && layer.redis_cluster.is_some() {
            return Err(Error::bad_input(
                "both a Redis URL and Redis Cluster seeds are set at the same level: choose --redis or --redis-cluster",
            ));
        }
        if let Some(url) = &layer.redis {
            // Behind Sentinel, a Redis URL is the data nodes' template (credentials, TLS).
            data_url = Some(url.trim().to_string());
            redis = Some(RedisTarget::Standalone(SecretUrl::new(url.trim())));
        }
        if let Some(list) = &layer.redis_sentinel {
            if layer.redis_cluster.is_some() {
                return Err(Error::bad_input(
                    "both Sentinels and Redis Cluster seeds are set at the same level: choose --redis-sentinel or --redis-cluster",
                ));
            }
            let urls: Vec<String> = list.urls().iter().map(|u| sentinel_url(u)).collect();
            if urls.is_empty() {
                return Err(Error::bad_input(
                    "the Sentinel list is empty: give host:port[,host:port...], e.g. 10.0.0.1:26379,10.0.0.2:26379",
                ));
            }
            sentinels = Some(urls);
            any_sentinels = true;
        } else if layer.redis.is_some() || layer.redis_cluster.is_some() {
            // A plain target set above the Sentinels wins over them.
            sentinels = None;
        }
        if let Some(seeds) = &layer.redis_cluster {
            let urls = seeds.urls();
            if urls.is_empty() {
                return Err(Error::bad_input(
                    "Redis Cluster seeds are empty: give one or more URLs, e.g. redis://10.0.0.1:7000,redis://10.0.0.2:7000",
                ));
            }
            redis = Some(RedisTarget::Cluster(
                urls.into_iter().map(SecretUrl::new).collect(),
            ));
        }
        macro_rules! take {
            ($($f:ident),*) => { $( if layer.$f.is_some() { merged.$f = layer.$f.clone(); } )* };
        }
        take!(
            db,
            read_only,
            json,
            actor,
            prefix,
            connect_timeout_ms,
            response_timeout_ms,
            grace_secs,
            redis_ca,
            refresh_secs,
            compensation_alert_secs,
            outbox_alert_secs,
            key_ttl_days,
            warm_share_pct,
            tz,
            sentinel_master
        );
    }

    master_needs_sentinels(
        merged.sentinel_master.as_deref(),
        any_sentinels,
        redis.is_some(),
    )?;
    if let Some(list) = sentinels {
        let master = merged
            .sentinel_master
            .as_deref()
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .ok_or_else(|| {
                Error::bad_input(
                    "--redis-sentinel needs --sentinel-master NAME (the name in the Sentinels' configuration, e.g. mymaster)",
                )
            })?;
        if master.len() > 200 || master.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(Error::bad_input(format!(
                "Sentinel master name '{}' is invalid: use the name without spaces",
                master.escape_debug()
            )));
        }
        redis = Some(RedisTarget::Sentinel(crate::redis::SentinelTarget {
            sentinels: list.into_iter().map(SecretUrl::new).collect(),
            master: master.to_string(),
            data: SecretUrl::new(data_url.unwrap_or_else(|| DEFAULT_REDIS.into())),
        }));
    }
    let (db, db_is_default) = match merged.db {
        Some(url) => (SecretUrl::new(url.trim()), false),
        None => (
            SecretUrl::new(format!("sqlite://{}", default_db_path().display())),
            true,
        ),
    };
    let actor = merged.actor.unwrap_or_else(default_actor);
    if actor.is_empty() || actor.len() > 128 || actor.chars().any(char::is_control) {
        return Err(Error::bad_input(format!(
            "actor '{}' is invalid: use 1 to 128 printable characters",
            actor.escape_debug()
        )));
    }
    let keys = KeySpace::new(
        merged
            .prefix
            .as_deref()
            .unwrap_or(crate::redis::keys::DEFAULT_PREFIX),
    )?;
    let ms = |name: &str, v: Option<u64>, default: u64| -> Result<Duration> {
        let v = v.unwrap_or(default);
        if v == 0 || v > 600_000 {
            return Err(Error::bad_input(format!(
                "{name} {v} is out of range: use 1 to 600000 milliseconds"
            )));
        }
        Ok(Duration::from_millis(v))
    };
    let refresh = merged.refresh_secs.unwrap_or(1.0);
    if !(0.1..=3600.0).contains(&refresh) {
        return Err(Error::bad_input(format!(
            "refresh {} is out of range: use 0.1 to 3600 seconds",
            crate::error::echoed(refresh)
        )));
    }
    let tz = match &merged.tz {
        Some(t) => crate::domain::zone::Zone::parse(t)?,
        None => crate::domain::zone::Zone::Local,
    };
    let key_ttl_days = merged.key_ttl_days.unwrap_or(7);
    let key_ttl_days = u32::try_from(key_ttl_days)
        .ok()
        .filter(|d| *d <= 3650)
        .ok_or_else(|| {
            Error::bad_input(format!(
                "key_ttl_days {key_ttl_days} is out of range: use 0 (keys never expire) to 3650 days"
            ))
        })?;
    let warm_share_pct = merged.warm_share_pct.unwrap_or(15);
    let warm_share_pct = u8::try_from(warm_share_pct)
        .ok()
        .filter(|p| (1..=100).contains(p))
        .ok_or_else(|| {
            Error::bad_input(format!(
                "warm_share_pct {warm_share_pct} is out of range: use 1 to 100 (percent of Redis's time a live reader's first read may take; default 15)"
            ))
        })?;
    let prefix_is_default = merged.prefix.is_none();
    Ok(Config {
        redis_is_default: redis.is_none(),
        redis: redis.unwrap_or_else(|| RedisTarget::Standalone(SecretUrl::new(DEFAULT_REDIS))),
        db,
        db_is_default,
        prefix_is_default,
        read_only: merged.read_only.unwrap_or(false),
        json: merged.json.unwrap_or(false),
        actor,
        keys,
        connect_timeout: ms("connect timeout", merged.connect_timeout_ms, 2000)?,
        response_timeout: ms("response timeout", merged.response_timeout_ms, 1000)?,
        grace: Duration::from_secs(merged.grace_secs.unwrap_or(60)),
        redis_ca: merged.redis_ca,
        refresh: Duration::from_secs_f64(refresh),
        compensation_alert: Duration::from_secs(merged.compensation_alert_secs.unwrap_or(30)),
        outbox_alert: Duration::from_secs(merged.outbox_alert_secs.unwrap_or(60)),
        key_ttl_days,
        warm_share_pct,
        tz,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_variable_that_leaves_a_default_is_named() {
        let env = |set: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                set.iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        let defaults = resolve(&[Layer::default()]).expect("defaults");
        let said = empty_variable_warnings(
            &defaults,
            true,
            env(&[
                ("SECKILL_REDIS_URL", ""),
                ("SECKILL_PREFIX", " "),
                ("SECKILL_DATABASE_URL", ""),
            ]),
        );
        assert_eq!(said.len(), 3, "{said:?}");
        assert!(
            said[0].starts_with("SECKILL_REDIS_URL is set but empty")
                && said[0].ends_with("the default Redis redis://127.0.0.1:6379"),
            "{said:?}"
        );
        assert!(said[1].contains("the embedded SQLite file"), "{said:?}");
        assert!(
            said[2].ends_with("the default key prefix seckill"),
            "{said:?}"
        );
        // A setting another layer gives is not the default: nothing to say.
        let file = Layer {
            redis: Some("redis://10.0.0.5:6379".into()),
            prefix: Some("shop".into()),
            db: Some("sqlite:///tmp/x.db".into()),
            ..Layer::default()
        };
        let given = resolve(&[file]).expect("a file's settings");
        assert!(
            empty_variable_warnings(
                &given,
                true,
                env(&[
                    ("SECKILL_REDIS_URL", ""),
                    ("SECKILL_PREFIX", ""),
                    ("SECKILL_DATABASE_URL", "")
                ])
            )
            .is_empty()
        );
        // A variable with a value, or none at all: nothing either.
        assert!(
            empty_variable_warnings(
                &defaults,
                true,
                env(&[("SECKILL_REDIS_URL", "redis://x:1")])
            )
            .is_empty()
        );
        assert!(empty_variable_warnings(&defaults, true, env(&[])).is_empty());
    }

    #[test]
    fn the_actor_without_user_is_the_uid_name() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\n# comment\nbroken\nops:x:1001:1001::/home/ops:/bin/sh\n";
        assert_eq!(name_in_passwd(passwd, 0).as_deref(), Some("root"));
        assert_eq!(name_in_passwd(passwd, 1001).as_deref(), Some("ops"));
        assert_eq!(name_in_passwd(passwd, 7), None);
        assert_eq!(name_in_passwd("", 0), None);
    }

    #[test]
    fn a_master_name_without_sentinels_is_refused() {
        let e = resolve(&[Layer {
            sentinel_master: Some("mymaster".into()),
            ..Layer::default()
        }])
        .expect_err("no Sentinels");
        assert!(e.message.contains("--redis-sentinel"), "{}", e.message);
        assert_eq!(e.kind, crate::error::ErrorKind::BadInput);
        // Sentinels in the file, a plain target on the command line: the flag wins, as before.
        let file = Layer {
            redis_sentinel: Some(StringOrList::One("10.0.0.1:26379".into())),
            sentinel_master: Some("mymaster".into()),
            ..Layer::default()
        };
        let flags = Layer {
            redis: Some("redis://10.0.0.9:6379".into()),
            ..Layer::default()
        };
        let c = resolve(&[file, flags]).expect("the plain target wins");
        assert!(matches!(c.redis, RedisTarget::Standalone(_)));
    }

    #[test]
    fn sentinels_with_a_master_name_and_a_data_template() {
        let layer = Layer {
            redis_sentinel: Some(StringOrList::One(
                "10.0.0.1:26379, rediss://s:pw@10.0.0.2:26380".into(),
            )),
            sentinel_master: Some("mymaster".into()),
            redis: Some("redis://app:secret@ignored:1".into()),
            ..Layer::default()
        };
        let c = resolve(std::slice::from_ref(&layer)).expect("valid");
        let RedisTarget::Sentinel(t) = &c.redis else {
            panic!("{:?}", c.redis);
        };
        assert_eq!(t.master, "mymaster");
        assert_eq!(t.sentinels[0].expose(), "redis://10.0.0.1:26379");
        assert_eq!(t.sentinels[1].expose(), "rediss://s:pw@10.0.0.2:26380");
        assert_eq!(t.data.expose(), "redis://app:secret@ignored:1");
        assert!(!c.redis.label().contains("pw"), "{}", c.redis.label());
        let no_name = Layer {
            sentinel_master: None,
            ..layer.clone()
        };
        let e = resolve(&[no_name]).expect_err("a master name is needed");
        assert!(e.message.contains("--sentinel-master"), "{}", e.message);
        let spaced = Layer {
            sentinel_master: Some("my master".into()),
            ..layer.clone()
        };
        assert!(resolve(&[spaced]).is_err());
        // A plain URL set above the Sentinels wins over them.
        let flag = Layer {
            redis: Some("redis://127.0.0.1:7000".into()),
            ..Layer::default()
        };
        let c = resolve(&[layer, flag]).expect("valid");
        assert!(
            matches!(c.redis, RedisTarget::Standalone(_)),
            "{:?}",
            c.redis
        );
    }

    #[test]
    fn later_layers_win() {
        let file = parse_file(
            "f",
            "redis = \"redis://file:1\"\nactor = \"file\"\ngrace_secs = 5",
        )
        .expect("valid");
        // The flags and environment variables come as one layer (clap reads both).
        let flags = Layer {
            actor: Some("flag".into()),
            redis_cluster: Some(StringOrList::One("redis://a:1, redis://b:2".into())),
            ..Layer::default()
        };
        let c = resolve(&[file, flags]).expect("valid");
        assert_eq!(c.actor, "flag");
        assert_eq!(c.grace, Duration::from_secs(5));
        match c.redis {
            RedisTarget::Cluster(seeds) => assert_eq!(seeds.len(), 2),
            other => panic!("expected cluster, got {other:?}"),
        }
    }

    #[test]
    fn defaults_are_the_embedded_ones() {
        let c = resolve(&[]).expect("valid");
        assert!(c.db_is_default);
        assert!(c.db.expose().starts_with("sqlite://"));
        assert_eq!(c.keys.prefix(), "seckill");
        assert_eq!(c.grace, Duration::from_secs(60));
    }

    #[test]
    fn the_warm_share_is_a_percent() {
        assert_eq!(resolve(&[]).expect("valid").warm_share_pct, 15);
        let layer = |pct: u64| Layer {
            warm_share_pct: Some(pct),
            ..Layer::default()
        };
        assert_eq!(resolve(&[layer(40)]).expect("valid").warm_share_pct, 40);
        for bad in [0, 101, 300] {
            let e = resolve(&[layer(bad)]).expect_err("out of range");
            assert!(
                e.to_string()
                    .contains(&format!("warm_share_pct {bad} is out of range")),
                "{e}"
            );
        }
    }

    #[test]
    fn bad_values_are_named() {
        let e = parse_file("c.toml", "redis_url = \"x\"").expect_err("unknown key");
        assert!(
            e.message.contains("c.toml") && e.message.contains("redis_url"),
            "{}",
            e.message
        );
        let e = resolve(&[Layer {
            prefix: Some("a{b".into()),
            ..Layer::default()
        }])
        .expect_err("bad prefix");
        assert!(e.message.contains("'a{b'"), "{}", e.message);
    }

    #[test]
    fn config_errors_do_not_leak_passwords() {
        let e = parse_file("c.toml", "redis = 5\n# redis://u:hunter2@h").expect_err("wrong type");
        assert!(!e.message.contains("hunter2"));
    }

    proptest::proptest! {
        /// Whatever the text: what resolves keeps every setting within its documented bounds,
        /// and a file that does not parse is bad input naming the file.
        #[test]
        fn accepted_config_stays_within_bounds(s in "\\PC{0,300}") {
            use proptest::prop_assert;
            match parse_file("fuzz.toml", &s) {
                Ok(layer) => {
                    if let Ok(c) = resolve(&[layer]) {
                        let ms = Duration::from_millis(1)..=Duration::from_millis(600_000);
                        prop_assert!(ms.contains(&c.connect_timeout), "{:?}", c);
                        prop_assert!(ms.contains(&c.response_timeout), "{:?}", c);
                        let refresh = Duration::from_millis(100)..=Duration::from_secs(3600);
                        prop_assert!(refresh.contains(&c.refresh), "{:?}", c);
                        prop_assert!(c.key_ttl_days <= 3650, "{:?}", c);
                        let actor = &c.actor;
                        prop_assert!((1..=128).contains(&actor.len()), "{:?}", c);
                        prop_assert!(!actor.contains(char::is_control), "{:?}", c);
                        prop_assert!(KeySpace::new(c.keys.prefix()).is_ok(), "{:?}", c);
                    }
                }
                Err(e) => {
                    prop_assert!(e.kind == crate::error::ErrorKind::BadInput, "{:?}", e);
                    prop_assert!(e.message.contains("config file 'fuzz.toml'"), "{}", e.message);
                }
            }
        }

        /// Timeouts, refresh and key expiry are taken exactly when within their bounds, and
        /// refused naming the setting and the value when not.
        #[test]
        fn numbers_are_taken_within_bounds_and_named_outside(
            connect in proptest::prop_oneof![0u64..=2, 0u64..1_000_000],
            response in proptest::prop_oneof![0u64..=2, 0u64..1_000_000],
            refresh in proptest::prop_oneof![0.0f64..0.2, 0.0f64..5000.0],
            ttl in 0u64..5000,
        ) {
            use proptest::{prop_assert, prop_assert_eq};
            let text = format!(
                "connect_timeout_ms = {connect}\nresponse_timeout_ms = {response}\n\
                 refresh_secs = {refresh:?}\nkey_ttl_days = {ttl}\nactor = \"ops\"\n"
            );
            let layer = parse_file("c.toml", &text).map_err(|e| {
                proptest::test_runner::TestCaseError::fail(e.message)
            })?;
            let ms_ok = |v: u64| (1..=600_000).contains(&v);
            let mut bad = Vec::new();
            if !ms_ok(connect) {
                bad.push(format!("connect timeout {connect} is out of range"));
            }
            if !ms_ok(response) {
                bad.push(format!("response timeout {response} is out of range"));
            }
            if !(0.1..=3600.0).contains(&refresh) {
                bad.push(format!(
                    "refresh {} is out of range",
                    crate::error::echoed(refresh)
                ));
            }
            if ttl > 3650 {
                bad.push(format!("key_ttl_days {ttl} is out of range"));
            }
            match resolve(&[layer]) {
                Ok(c) => {
                    prop_assert!(bad.is_empty(), "accepted despite {:?}", bad);
                    prop_assert_eq!(c.connect_timeout, Duration::from_millis(connect));
                    prop_assert_eq!(c.response_timeout, Duration::from_millis(response));
                    prop_assert_eq!(c.refresh, Duration::from_secs_f64(refresh));
                    prop_assert_eq!(u64::from(c.key_ttl_days), ttl);
                }
                Err(e) => {
                    prop_assert!(e.kind == crate::error::ErrorKind::BadInput, "{:?}", e);
                    prop_assert!(
                        bad.iter().any(|b| e.message.contains(b)),
                        "{} (bad: {:?})",
                        e.message,
                        bad
                    );
                }
            }
        }
    }
}
