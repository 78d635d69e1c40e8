//! One Redis server: a multiplexed connection, opened lazily and replaced after a connection
//! error, so a restart or a failover heals without restarting the console.

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, Cmd, Pipeline, RedisError, RedisResult, Value};
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

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
        let _one_at_a_time = self.reconnect.lock().await;
        if let Some(c) = self.cached() {
            return Ok(c);
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
            Ok(result) => result?,
            Err(_) => {
                return Err(RedisError::from(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("connecting to {} timed out", self.addr),
                )));
            }
        };
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        if let Ok(mut slot) = self.current.write() {
            *slot = Some((generation, conn.clone()));
        }
        Ok((generation, conn))
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
