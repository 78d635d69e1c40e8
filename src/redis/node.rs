//! One Redis server: a multiplexed connection, opened lazily and replaced after a connection
//! error, so a restart or a failover heals without restarting the console. A server that just
//! failed (a timeout, a refused or hung connect) fails the next calls at once for a moment
//! instead of each waiting out its own attempt: behind five pollers queued on a hung server, an
//! operator's write would otherwise wait 15-37 s to learn what the first timeout knew.

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, Cmd, Pipeline, RedisError, RedisResult, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant};

/// A connection to one server, shared by every task of the process.
pub struct Node {
    /// `host:port`, never with credentials.
    pub addr: String,
    client: Client,
    config: AsyncConnectionConfig,
    connect_timeout: Duration,
    current: RwLock<Option<(u64, MultiplexedConnection)>>,
    generation: AtomicU64,
    reconnect: tokio::sync::Mutex<()>,
    /// The last failure that says the server is unreachable or hung: when, and what it was.
    failed: Mutex<Option<(Instant, std::io::ErrorKind, String)>>,
}

impl Node {
    pub fn new(
        addr: String,
        client: Client,
        connect_timeout: Duration,
        response_timeout: Duration,
    ) -> Self {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(connect_timeout))
            .set_response_timeout(Some(response_timeout));
        Node {
            addr,
            client,
            config,
            connect_timeout,
            current: RwLock::new(None),
            generation: AtomicU64::new(0),
            reconnect: tokio::sync::Mutex::new(()),
            failed: Mutex::new(None),
        }
    }

    /// How many connections this node has opened: a new one means the last was lost (a
    /// restart, a failover, a timeout), and whatever was read before may have changed.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    /// The failure of a moment ago, as this call's error: the server is not asked again
    /// until [`Node::quiet_for`] has passed since it failed.
    fn recent_failure(&self) -> Option<RedisError> {
        let guard = self.failed.lock().ok()?;
        let (at, kind, why) = guard.as_ref()?;
        (at.elapsed() < self.quiet_for()).then(|| {
            RedisError::from(std::io::Error::new(
                *kind,
                format!("{why} (a moment ago; asked again shortly)"),
            ))
        })
    }

    /// How long a failure answers for the server: the connect timeout, so a server back up is
    /// found within about that.
    fn quiet_for(&self) -> Duration {
        self.connect_timeout
    }

    fn remember_failure(&self, err: &RedisError) {
        let kind = if err.is_timeout() {
            std::io::ErrorKind::TimedOut
        } else {
            std::io::ErrorKind::ConnectionRefused
        };
        if let Ok(mut slot) = self.failed.lock() {
            *slot = Some((Instant::now(), kind, err.to_string()));
        }
    }

    fn clear_failure(&self) {
        if let Ok(mut slot) = self.failed.lock() {
            *slot = None;
        }
    }

    fn cached(&self) -> Option<(u64, MultiplexedConnection)> {
        self.current.read().ok().and_then(|guard| guard.clone())
    }

    /// The live connection, opening one if there is none. Concurrent callers share one attempt.
    async fn connection(&self) -> RedisResult<(u64, MultiplexedConnection)> {
        if let Some(c) = self.cached() {
            return Ok(c);
        }
        if let Some(e) = self.recent_failure() {
            return Err(e);
        }
        let _one_at_a_time = self.reconnect.lock().await;
        if let Some(c) = self.cached() {
            return Ok(c);
        }
        // The attempt this caller waited behind failed: its answer is this caller's too.
        if let Some(e) = self.recent_failure() {
            return Err(e);
        }
        // The handshake (AUTH, HELLO) can hang on a stopped server even though the kernel
        // accepted the TCP connection, so the whole attempt gets a deadline.
        let deadline = self.connect_timeout + self.connect_timeout;
        let conn = match tokio::time::timeout(
            deadline,
            self.client
                .get_multiplexed_async_connection_with_config(&self.config),
        )
        .await
        {
            Ok(Ok(conn)) => conn,
            Ok(Err(e)) => {
                if is_connection_error(&e) {
                    self.remember_failure(&e);
                }
                return Err(e);
            }
            Err(_) => {
                let e = RedisError::from(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("connecting to {} timed out", self.addr),
                ));
                self.remember_failure(&e);
                return Err(e);
            }
        };
        self.clear_failure();
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        if let Ok(mut slot) = self.current.write() {
            *slot = Some((generation, conn.clone()));
        }
        Ok((generation, conn))
    }

    /// A connection of its own, in RESP3, whose pushes (client tracking's invalidations) go to
    /// `sender`; not shared with the node's commands, and not counted as one of its
    /// generations.
    pub async fn push_connection(
        &self,
        sender: impl redis::aio::AsyncPushSender,
    ) -> RedisResult<MultiplexedConnection> {
        let info = self.client.get_connection_info().clone();
        let settings = info
            .redis_settings()
            .clone()
            .set_protocol(redis::ProtocolVersion::RESP3);
        let client = Client::open(info.set_redis_settings(settings))?;
        let config = self.config.clone().set_push_sender(sender);
        let deadline = self.connect_timeout + self.connect_timeout;
        match tokio::time::timeout(
            deadline,
            client.get_multiplexed_async_connection_with_config(&config),
        )
        .await
        {
            Ok(conn) => conn,
            Err(_) => Err(RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("connecting to {} timed out", self.addr),
            ))),
        }
    }

    /// Drops the connection of `generation` after an I/O error; a newer one is kept.
    fn forget(&self, generation: u64) {
        if let Ok(mut slot) = self.current.write()
            && slot.as_ref().is_some_and(|(g, _)| *g == generation)
        {
            *slot = None;
        }
    }

    fn after_error(&self, generation: u64, err: &RedisError) {
        if is_connection_error(err) {
            self.forget(generation);
            // A reply that did not come in time: the server is hung or gone until a new
            // connection says otherwise.
            if err.is_timeout() {
                self.remember_failure(err);
            }
        }
    }

    /// Sends one command.
    pub async fn query(&self, cmd: &Cmd) -> RedisResult<Value> {
        let (generation, mut conn) = self.connection().await?;
        let result = cmd.query_async::<Value>(&mut conn).await;
        if let Err(e) = &result {
            self.after_error(generation, e);
        }
        result
    }

    /// Sends a pipeline; error replies come back as `Value::ServerError` items, not as an `Err`.
    pub async fn pipeline(&self, pipe: &Pipeline) -> RedisResult<Vec<Value>> {
        let (generation, mut conn) = self.connection().await?;
        let result = pipe.query_async::<Vec<Value>>(&mut conn).await;
        if let Err(e) = &result {
            self.after_error(generation, e);
        }
        result
    }
}

/// True for errors after which a fresh socket is worth opening: I/O errors and timeouts (the
/// server may have restarted, failed over or vanished; the next call finds out on a new socket).
pub fn is_connection_error(err: &RedisError) -> bool {
    // The read-only refusal travels as an I/O error (the only kind that carries a cause), but
    // nothing was sent and no connection is at fault: never retry it or refresh for it.
    if super::guard::as_refusal(err).is_some() {
        return false;
    }
    err.is_io_error()
        || err.is_timeout()
        || err.is_connection_dropped()
        || err.is_connection_refusal()
}
