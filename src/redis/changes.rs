//! Which products of an activity changed, told by Redis itself: client-side caching on one
//! dedicated RESP3 connection per primary. Redis pushes the name of every key of the activity
//! that is written, deleted, expired or evicted, and a null after a FLUSHALL; the live view
//! reads again only the products named, and a quiet activity costs it no command at all.
//!
//! Two modes ([`Mode`]). By key (`CLIENT TRACKING ON`, Redis's default mode): the reader
//! registers a product's five keys (one `EXISTS` on the tracking connection) just before it
//! reads them, and Redis pushes a key's name once, at its first write after that; a product
//! selling all the time costs one push per refresh rather than one per sale. Redis keeps each
//! registered key in its tracking table (about 130 bytes a key, measured on Redis 7 with
//! 500,000 keys: 66 MB), so this mode is used up to a budget of keys and on a single primary
//! only (a cluster's slots move under a reshard, and a key registered on its old owner is not
//! tracked on its new one). By prefix (`CLIENT TRACKING ON BCAST PREFIX <prefix>:{<activity>:`):
//! nothing kept in Redis per key, but a push to every reader at every event-loop pass that
//! wrote a key of the activity: about one per sale at a thousand sales a second (3 to 10 us of
//! Redis's CPU each, measured with four readers on this machine).
//!
//! Why this and not a change marker the scripts bump: a marker shared by many products must
//! sit in one slot, which a cluster forbids a script to touch beside the product's own keys,
//! and a marker per product is what the streams already are (asking 100,000 of them is the
//! cost this replaces). Tracking needs nothing from the app servers' scripts and sees what the
//! streams cannot (a key evicted, deleted or set by hand). What Redis does for it on the sale
//! path is a prefix lookup per written key (`scripts/bench live` measures `deduct.lua` with and
//! without a tracking client).
//!
//! What it cannot tell, the caller must assume moved: everything before a watch was opened,
//! and everything while one was lost (a disconnection, a restart that may have loaded an
//! older snapshot, a failover to another primary). A sync is a barrier: the PING sent on each
//! watch comes back after every push Redis wrote before it, and Redis writes a key's push
//! before the reply to the command that wrote it; so a write whose reply any client has seen
//! before the sync is in what the sync returns.

use super::node::Node;
use super::peers::{self, Heard};
use super::{ProductKeys, RedisStore};
use redis::aio::MultiplexedConnection;
use redis::{PushInfo, PushKind, RedisResult, Value};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Key suffixes whose writes say nothing about the product's state: the consoles' own
/// checkpoints (written under `books-<digest>`, then renamed to `books`) and the dry runs'
/// lock.
fn ignored(suffix: &str) -> bool {
    suffix.starts_with("books") || suffix == "lock"
}

/// How long a refusal of tracking (an ACL without it, a Redis before 6) stands before the
/// watches are tried again.
const RETRY_AFTER: Duration = Duration::from_secs(60);

/// How the pushes are asked for (see the module's documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Every key under the activity's prefix, at every write.
    Prefix,
    /// The keys registered with [`ChangeFeed::register`], once each after its registration.
    Keys,
}

/// Messages of the other readers kept between two syncs.
const MAX_HEARD: usize = 1_000;

/// Products registered in one pipeline.
const REGISTER_CHUNK: usize = 1_000;

/// What changed since the last sync.
#[derive(Debug, PartialEq, Eq)]
pub enum Changes {
    /// The products whose keys were written, on every primary.
    Moved(HashSet<String>),
    /// Anything may have changed: a watch was opened or lost, or a node was flushed.
    Everything,
}

/// What one watch's pushes said since it was last drained.
#[derive(Debug, Default)]
struct Inbox {
    products: HashSet<String>,
    /// A node flushed: every product may have changed.
    flushed: bool,
    /// The connection is gone: what happened since is unknown until a new watch is opened.
    lost: bool,
    /// What the activity's other readers said ([`peers`]), on the watch subscribed to it.
    heard: Vec<Heard>,
}

/// One primary's tracking connection.
struct Watch {
    conn: MultiplexedConnection,
    inbox: Arc<Mutex<Inbox>>,
}

/// The tracking watches of one activity's keys, one per primary.
pub struct ChangeFeed {
    /// `<key prefix>:{<activity>:`: the start of every key of the activity's products.
    prefix: String,
    /// The channel of the activity's readers ([`peers::channel`]).
    channel: String,
    /// The primary whose watch listens on `channel` (one is enough: a PUBLISH reaches the
    /// subscribers of every node); None until one does, or while the server refuses it.
    listening: Option<String>,
    /// The server refused the channel (an ACL without it): the reader reads alone.
    deaf: bool,
    /// What was heard on the channel, drained by the last sync.
    heard: Vec<Heard>,
    mode: Mode,
    watches: HashMap<String, Watch>,
    /// Why tracking is off, and since when (tried again after [`RETRY_AFTER`]).
    refused: Option<(Instant, String)>,
}

impl std::fmt::Debug for ChangeFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeFeed")
            .field("prefix", &self.prefix)
            .field("mode", &self.mode)
            .field("watches", &self.watches.keys().collect::<Vec<_>>())
            .field("refused", &self.refused())
            .finish()
    }
}

/// The product a pushed key belongs to, when it is one of `prefix`'s and says something about
/// the product (not a checkpoint).
fn product_of(prefix: &str, key: &[u8]) -> Option<String> {
    let rest = key.strip_prefix(prefix.as_bytes())?;
    let rest = std::str::from_utf8(rest).ok()?;
    let (product, suffix) = rest.split_once("}:")?;
    (!ignored(suffix)).then(|| product.to_string())
}

/// Files one push in the inbox.
fn file(prefix: &str, channel: &str, inbox: &Mutex<Inbox>, info: PushInfo) {
    let Ok(mut inbox) = inbox.lock() else {
        return;
    };
    match info.kind {
        PushKind::Invalidate => match info.data.first() {
            Some(Value::Array(keys)) => {
                for key in keys {
                    if let Value::BulkString(k) = key
                        && let Some(p) = product_of(prefix, k)
                    {
                        inbox.products.insert(p);
                    }
                }
            }
            // A null: the node was flushed.
            _ => inbox.flushed = true,
        },
        PushKind::Disconnection => inbox.lost = true,
        PushKind::Message => {
            if let [Value::BulkString(ch), Value::BulkString(payload)] = info.data.as_slice()
                && ch.as_slice() == channel.as_bytes()
                && payload.len() <= peers::MAX_MESSAGE
                && let Some(h) = peers::parse(payload)
            {
                inbox.heard.push(h);
            }
        }
        _ => {}
    }
}

/// True for a refusal that will stand (no permission, no such command, no RESP3): the server
/// answered, so trying each refresh would only repeat it.
fn refused(err: &redis::RedisError) -> bool {
    !super::node::is_connection_error(err)
}

impl ChangeFeed {
    /// Watches the keys of the products of `activity` under `key_prefix`.
    pub fn new(key_prefix: &str, activity: &str, mode: Mode) -> Self {
        ChangeFeed {
            prefix: format!("{key_prefix}:{{{activity}:"),
            channel: peers::channel(key_prefix, activity),
            listening: None,
            deaf: false,
            heard: Vec::new(),
            mode,
            watches: HashMap::new(),
            refused: None,
        }
    }

    /// Why tracking is off (refused by the server), if it is.
    pub fn refused(&self) -> Option<&str> {
        self.refused.as_ref().map(|(_, why)| why.as_str())
    }

    async fn open(&self, node: &Node) -> RedisResult<Watch> {
        let inbox: Arc<Mutex<Inbox>> = Arc::default();
        let prefix = self.prefix.clone();
        let channel = self.channel.clone();
        let filed = inbox.clone();
        let sender = move |info: PushInfo| {
            file(&prefix, &channel, &filed, info);
            Ok::<(), ()>(())
        };
        let mut conn = node.push_connection(sender).await?;
        let mut on = redis::cmd("CLIENT");
        on.arg("TRACKING").arg("ON");
        if self.mode == Mode::Prefix {
            on.arg("BCAST").arg("PREFIX").arg(&self.prefix);
        }
        on.query_async::<()>(&mut conn).await?;
        Ok(Watch { conn, inbox })
    }

    /// Has one watch listen on the activity's readers' channel (again, when its node went).
    async fn listen(&mut self) {
        if self
            .listening
            .as_ref()
            .is_some_and(|a| self.watches.contains_key(a))
        {
            return;
        }
        self.listening = None;
        if self.deaf {
            return;
        }
        let Some(addr) = self.watches.keys().min().cloned() else {
            return;
        };
        let Some(w) = self.watches.get_mut(&addr) else {
            return;
        };
        match w.conn.subscribe(&self.channel).await {
            Ok(()) => self.listening = Some(addr),
            Err(e) => {
                // Refused (an ACL without the channel): the reader reads alone, as before.
                tracing::info!(
                    "the readers' channel is refused ({}): this reader does its safety reads alone",
                    super::describe(&e)
                );
                self.deaf = !super::node::is_connection_error(&e);
            }
        }
    }

    /// What the activity's other readers said since the last call (drained by the syncs).
    pub fn heard(&mut self) -> Vec<Heard> {
        std::mem::take(&mut self.heard)
    }

    /// Says `messages` on the activity's readers' channel (never in read-only mode: a PUBLISH
    /// writes no key, but a read-only console sends nothing but reads). Best effort: a message
    /// lost only has the others read for themselves.
    pub async fn say(&mut self, redis: &RedisStore, messages: &[String]) {
        if redis.read_only() || messages.is_empty() {
            return;
        }
        let Some(w) = self
            .listening
            .as_ref()
            .and_then(|a| self.watches.get_mut(a))
        else {
            return;
        };
        let mut pipe = redis::pipe();
        for m in messages {
            pipe.cmd("PUBLISH").arg(&self.channel).arg(m).ignore();
        }
        if let Err(e) = pipe.query_async::<()>(&mut w.conn).await {
            tracing::debug!(
                "publishing to the readers' channel failed ({})",
                super::describe(&e)
            );
        }
    }

    /// True when this feed hears the activity's other readers.
    pub fn listening(&self) -> bool {
        self.listening.is_some()
    }

    /// How this feed asks for the pushes.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// By key: has Redis push the next write of each of these products' keys (their five
    /// keys read by one `EXISTS` on the tracking connection). Called before the products are
    /// read, so a write after their read is pushed whatever the read found. A product of
    /// another primary than the one watched, or a registration that fails, loses the watch:
    /// the next sync reads as without the pushes, and the one after reads everything.
    pub async fn register(&mut self, keys: &[ProductKeys]) {
        if self.mode != Mode::Keys || keys.is_empty() {
            return;
        }
        let mut watches = self.watches.values_mut();
        let (Some(w), None) = (watches.next(), watches.next()) else {
            self.lose();
            return;
        };
        for chunk in keys.chunks(REGISTER_CHUNK) {
            let mut pipe = redis::pipe();
            for k in chunk {
                pipe.cmd("EXISTS")
                    .arg(&k.stock)
                    .arg(&k.meta)
                    .arg(&k.buyers)
                    .arg(&k.ledger)
                    .arg(&k.events)
                    .ignore();
            }
            if let Err(e) = pipe.query_async::<()>(&mut w.conn).await {
                tracing::debug!(
                    "registering keys for tracking failed ({}): the next refresh reads every product",
                    super::describe(&e)
                );
                self.lose();
                return;
            }
        }
    }

    /// Marks every watch lost: the next sync reads as without the pushes and opens them again.
    fn lose(&mut self) {
        for w in self.watches.values() {
            if let Ok(mut inbox) = w.inbox.lock() {
                inbox.lost = true;
            }
        }
    }

    /// The products Redis named since the last sync, up to now (a barrier, as [`Self::sync`]),
    /// left for the next sync to drain; None when that is not known (a watch missing or lost,
    /// a node flushed): the caller asks as it would without the pushes.
    pub async fn peek(&mut self, redis: &RedisStore) -> Option<HashSet<String>> {
        let primaries = redis.primaries();
        if self.refused.is_some()
            || primaries.len() != self.watches.len()
            || primaries
                .iter()
                .any(|n| !self.watches.contains_key(&n.addr))
        {
            return None;
        }
        let pings = self.watches.values_mut().map(|w| async move {
            redis::cmd("PING")
                .query_async::<Value>(&mut w.conn)
                .await
                .is_ok()
        });
        if !futures::future::join_all(pings)
            .await
            .into_iter()
            .all(|ok| ok)
        {
            return None;
        }
        let mut moved = HashSet::new();
        for w in self.watches.values() {
            let inbox = w.inbox.lock().ok()?;
            if inbox.flushed || inbox.lost {
                return None;
            }
            moved.extend(inbox.products.iter().cloned());
        }
        Some(moved)
    }

    /// What changed on every primary since the last sync; None while tracking is not
    /// available (refused by the server, or a primary not answering): the caller reads as it
    /// would without it.
    pub async fn sync(&mut self, redis: &RedisStore) -> Option<Changes> {
        if let Some((at, _)) = &self.refused {
            if at.elapsed() < RETRY_AFTER {
                return None;
            }
            self.refused = None;
        }
        let primaries = redis.primaries();
        let mut everything = false;
        // Watches of nodes no longer primaries go (their products are read whole after a
        // change of the node set anyway).
        let before = self.watches.len();
        self.watches
            .retain(|addr, _| primaries.iter().any(|n| &n.addr == addr));
        everything |= self.watches.len() != before;
        for node in &primaries {
            if self.watches.contains_key(&node.addr) {
                continue;
            }
            match self.open(node).await {
                Ok(w) => {
                    self.watches.insert(node.addr.clone(), w);
                    everything = true;
                }
                Err(e) => {
                    if refused(&e) {
                        tracing::info!(
                            node = %node.addr,
                            "client tracking refused ({}): the live view asks each product's stream instead",
                            super::describe(&e)
                        );
                        self.refused = Some((Instant::now(), super::describe(&e)));
                    }
                    self.watches.clear();
                    return None;
                }
            }
        }
        // The barrier: every push written before each PING's reply is filed once it is back.
        let pings = self.watches.iter_mut().map(|(addr, w)| async move {
            let ok = redis::cmd("PING")
                .query_async::<Value>(&mut w.conn)
                .await
                .is_ok();
            (addr.clone(), ok)
        });
        let lost: Vec<String> = futures::future::join_all(pings)
            .await
            .into_iter()
            .filter(|(_, ok)| !ok)
            .map(|(addr, _)| addr)
            .collect();
        if !lost.is_empty() {
            for addr in lost {
                self.watches.remove(&addr);
            }
            return None;
        }
        let mut moved = HashSet::new();
        let mut lost = Vec::new();
        for (addr, w) in &self.watches {
            let drained = match w.inbox.lock() {
                Ok(mut inbox) => std::mem::take(&mut *inbox),
                Err(_) => Inbox {
                    lost: true,
                    ..Inbox::default()
                },
            };
            everything |= drained.flushed;
            if drained.lost {
                lost.push(addr.clone());
            }
            moved.extend(drained.products);
            self.heard.extend(drained.heard);
        }
        // Nobody drains them (a reader that stopped asking): only the latest are worth keeping.
        if self.heard.len() > MAX_HEARD {
            self.heard.drain(..self.heard.len() - MAX_HEARD);
        }
        if !lost.is_empty() {
            // Lost after its PING came back: opened again, and everything read, next time.
            for addr in lost {
                self.watches.remove(&addr);
            }
            return None;
        }
        self.listen().await;
        Some(if everything {
            Changes::Everything
        } else {
            Changes::Moved(moved)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pushed_key_names_its_product_unless_it_is_a_checkpoint() {
        let p = "seckill:{big:";
        assert_eq!(
            product_of(p, b"seckill:{big:p1}:stock").as_deref(),
            Some("p1")
        );
        assert_eq!(
            product_of(p, b"seckill:{big:p-2_x}:events").as_deref(),
            Some("p-2_x")
        );
        assert_eq!(product_of(p, b"seckill:{big:p1}:books"), None);
        assert_eq!(product_of(p, b"seckill:{big:p1}:books-866b15"), None);
        assert_eq!(product_of(p, b"seckill:{big:p1}:lock"), None);
        // Another activity whose id starts alike.
        assert_eq!(product_of(p, b"seckill:{bigger:p1}:stock"), None);
        assert_eq!(product_of(p, b"other:{big:p1}:stock"), None);
        assert_eq!(product_of(p, b"seckill:{big:\xff}:stock"), None);
    }

    #[test]
    fn the_readers_channel_is_heard_and_nothing_else() {
        let inbox = Mutex::new(Inbox::default());
        let message = |ch: &str, payload: Vec<u8>| PushInfo {
            kind: PushKind::Message,
            data: vec![
                Value::BulkString(ch.as_bytes().to_vec()),
                Value::BulkString(payload),
            ],
        };
        let hello = peers::hello_message(7).into_bytes();
        file("p", "ch", &inbox, message("ch", hello.clone()));
        // Another channel, a stray payload, one longer than any reader sends.
        file("p", "ch", &inbox, message("other", hello));
        file("p", "ch", &inbox, message("ch", b"hello".to_vec()));
        let mut long = peers::hello_message(8).into_bytes();
        long.resize(peers::MAX_MESSAGE + 1, b' ');
        file("p", "ch", &inbox, message("ch", long));
        assert_eq!(inbox.lock().expect("inbox").heard, vec![Heard::Hello(7)]);
    }

    #[test]
    fn a_flush_or_a_lost_connection_means_everything() {
        let p = "seckill:{a:";
        let inbox = Mutex::new(Inbox::default());
        file(
            p,
            "ch",
            &inbox,
            PushInfo {
                kind: PushKind::Invalidate,
                data: vec![Value::Array(vec![
                    Value::BulkString(b"seckill:{a:x}:meta".to_vec()),
                    Value::BulkString(b"seckill:{a:y}:books".to_vec()),
                ])],
            },
        );
        {
            let i = inbox.lock().expect("inbox");
            assert_eq!(i.products, HashSet::from(["x".to_string()]));
            assert!(!i.flushed && !i.lost);
        }
        file(
            p,
            "ch",
            &inbox,
            PushInfo {
                kind: PushKind::Invalidate,
                data: vec![Value::Nil],
            },
        );
        assert!(inbox.lock().expect("inbox").flushed);
        let inbox = Mutex::new(Inbox::default());
        file(
            p,
            "ch",
            &inbox,
            PushInfo {
                kind: PushKind::Disconnection,
                data: vec![],
            },
        );
        assert!(inbox.lock().expect("inbox").lost);
    }
}
