//! The loop. It waits on one channel of Actions (keys from the input thread, snapshots from the
//! pollers, results from the executor), a tick and the termination signals; it never waits on
//! Redis or the database. Every Action queued at that moment is applied before the next frame,
//! and frames are at most one per `MIN_FRAME` (20 ms), so a burst of snapshots costs one redraw.

use super::action::Action;
use super::app::{App, AppConfig};
use super::executor::Executor;
use super::pollers::{self, Wake};
use super::services::Services;
use super::{event, logs, terminal, views};
use crate::ctx::Ctx;
use crate::domain::ActivityId;
use crate::error::{Error, Result};
use ratatui::Terminal;
use ratatui::backend::Backend;
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};
use tokio::sync::watch;

/// The header's clock and "stale" advance at this pace without any other event.
const TICK: Duration = Duration::from_secs(1);
/// At most one frame per this long (a burst of events collapses into one frame).
const MIN_FRAME: Duration = Duration::from_millis(20);
/// Actions applied per loop turn before a frame is drawn anyway.
const MAX_BATCH: usize = 2000;
/// On exit, how long a running dry run is given to stop and remove its shadow keys.
const DRY_RUN_GRACE: Duration = Duration::from_secs(10);

/// How the TUI starts.
#[derive(Clone, Debug, Default)]
pub struct TuiOptions {
    /// The activity shown first (else the live one, else the newest).
    pub activity: Option<ActivityId>,
}

/// Everything one run of the UI holds: the App, its channel, the executor, what wakes the
/// pollers. Shared by [`run`] (a terminal) and [`Headless`] (any backend).
struct Session {
    services: Arc<Services>,
    tx: UnboundedSender<Action>,
    rx: UnboundedReceiver<Action>,
    app: App,
    exec: Executor,
    wake: Option<Wake>,
}

impl Session {
    fn new(ctx: &Ctx, opts: TuiOptions) -> Self {
        let config = ctx.config.clone();
        let services = Arc::new(Services::new(Ctx {
            config: config.clone(),
        }));
        let (tx, rx) = mpsc::unbounded_channel();
        let (activity_tx, activity_rx) = watch::channel(opts.activity.clone());
        let (refresh_tx, refresh_rx) = watch::channel(0u64);
        let app = App::new(
            AppConfig::from_config(&config),
            opts.activity,
            Instant::now(),
        );
        let exec = Executor::new(services.clone(), tx.clone(), activity_tx, refresh_tx);
        Session {
            services,
            tx,
            rx,
            app,
            exec,
            wake: Some(Wake {
                activity: activity_rx,
                refresh: refresh_rx,
            }),
        }
    }

    /// Starts the pollers and runs the loop until the App quits; the pollers stop with it.
    async fn drive<B: Backend>(
        &mut self,
        term: &mut Terminal<B>,
        signals: &mut Signals,
        on_frame: &mut dyn FnMut(&App, &Terminal<B>),
    ) -> Result<()> {
        let Some(wake) = self.wake.take() else {
            return Err(Error::internal("the UI session was already run"));
        };
        let tasks = pollers::spawn(self.services.clone(), self.tx.clone(), wake);
        let r = event_loop(
            term,
            &mut self.app,
            &mut self.rx,
            &self.exec,
            signals,
            on_frame,
        )
        .await;
        for t in &tasks {
            t.abort();
        }
        r
    }
}

/// Opens the TUI on the configured Redis and database and runs it until the operator quits.
/// It opens even when neither answers; the header says so and the pollers keep trying.
pub async fn run(ctx: &Ctx, opts: TuiOptions) -> Result<()> {
    if ctx.config.json {
        return Err(Error::bad_input(
            "--json has no TUI: run a subcommand with --json (see `seckill-console --help`)",
        ));
    }
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err(Error::bad_input(
            "the TUI needs a terminal on stdin and stdout: run a subcommand instead (see `seckill-console --help`)",
        ));
    }
    let mut session = Session::new(ctx, opts);

    logs::capture(true);
    let result = match terminal::enter() {
        Ok((mut term, guard)) => {
            let outcome = match event::spawn(session.tx.clone()) {
                Ok(input) => {
                    let r = session
                        .drive(&mut term, &mut Signals::new(), &mut |_, _| {})
                        .await;
                    drop(input);
                    r
                }
                Err(e) => Err(Error::internal(format!(
                    "cannot read the terminal input: {e}"
                ))),
            };
            drop(guard);
            outcome
        }
        Err(e) => {
            terminal::restore();
            Err(Error::internal(format!("cannot set up the terminal: {e}")))
        }
    };
    logs::capture(false);
    // After the terminal is restored, so that the wait is explained on a normal screen.
    if session
        .app
        .views
        .dry_run
        .run
        .as_ref()
        .is_some_and(|r| r.running())
    {
        eprintln!(
            "stopping the dry run and removing its shadow keys (up to {} s) ...",
            DRY_RUN_GRACE.as_secs()
        );
    }
    let note = session.exec.shutdown(DRY_RUN_GRACE).await;
    let (lines, dropped) = logs::take();
    if dropped > 0 {
        eprintln!("({dropped} earlier log line(s) dropped)");
    }
    for line in lines {
        eprintln!("{line}");
    }
    if let Some(note) = note {
        eprintln!("{note}");
    }
    session.services.close().await;
    result?;
    match session.app.exit_error {
        Some(why) => Err(Error::internal(why)),
        None => Ok(()),
    }
}

/// The loop of [`run`] on any ratatui backend, without a terminal, its input thread or
/// signal handlers: the same pollers, executor, `App::update` and views. Actions sent with
/// [`Headless::sender`] stand in for keys ([`Action::ForceQuit`] ends it). For benchmarks and
/// tests that need the whole refresh cycle without a tty.
pub struct Headless {
    session: Session,
}

impl Headless {
    pub fn new(ctx: &Ctx, opts: TuiOptions) -> Self {
        Headless {
            session: Session::new(ctx, opts),
        }
    }

    /// Where to send Actions (keys, a resize, the quit).
    pub fn sender(&self) -> UnboundedSender<Action> {
        self.session.tx.clone()
    }

    /// Runs until the App quits; `on_frame` sees the App and the terminal after every frame
    /// drawn. Returns the App as it ended.
    pub async fn run<B: Backend>(
        mut self,
        term: &mut Terminal<B>,
        mut on_frame: impl FnMut(&App, &Terminal<B>),
    ) -> Result<App> {
        let r = self
            .session
            .drive(term, &mut Signals::none(), &mut on_frame)
            .await;
        let _ = self.session.exec.shutdown(DRY_RUN_GRACE).await;
        self.session.services.close().await;
        r.map(|()| self.session.app)
    }
}

async fn event_loop<B: Backend>(
    term: &mut Terminal<B>,
    app: &mut App,
    rx: &mut UnboundedReceiver<Action>,
    exec: &Executor,
    signals: &mut Signals,
    on_frame: &mut dyn FnMut(&App, &Terminal<B>),
) -> Result<()> {
    let draw_err = |e: B::Error| Error::internal(format!("cannot draw: {e}"));
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    if let Ok(size) = term.size() {
        apply(app, Action::Resize(size.width, size.height), exec);
    }
    term.draw(|f| views::render(f, app)).map_err(draw_err)?;
    app.dirty = false;
    on_frame(app, term);
    let mut last_frame = Instant::now();
    loop {
        let next_frame = tokio::time::Instant::from_std(last_frame + MIN_FRAME);
        let first = tokio::select! {
            a = rx.recv() => a,
            _ = tick.tick() => Some(Action::Tick(Instant::now())),
            _ = signals.recv() => Some(Action::ForceQuit),
            _ = tokio::time::sleep_until(next_frame), if app.dirty => None,
        };
        if let Some(a) = first {
            apply(app, a, exec);
        }
        let mut n = 0;
        while n < MAX_BATCH && !app.should_quit {
            match rx.try_recv() {
                Ok(a) => apply(app, a, exec),
                Err(_) => break,
            }
            n += 1;
        }
        if app.should_quit {
            return Ok(());
        }
        if app.dirty && last_frame.elapsed() >= MIN_FRAME {
            term.draw(|f| views::render(f, app)).map_err(draw_err)?;
            app.dirty = false;
            last_frame = Instant::now();
            on_frame(app, term);
        }
    }
}

fn apply(app: &mut App, action: Action, exec: &Executor) {
    // A key is answered on the clock of its arrival (a dialog's moment of ignored keys counts
    // from when it opened to when the key came, not to the last tick).
    if matches!(action, Action::Key(_)) {
        app.update(Action::Tick(Instant::now()));
    }
    for cmd in app.update(action) {
        exec.execute(cmd);
    }
}

/// SIGTERM, SIGHUP and SIGINT end the TUI through the normal path, so the terminal is
/// restored (in raw mode Ctrl-C is a key, handled by `keys`).
struct Signals {
    #[cfg(unix)]
    all: Vec<tokio::signal::unix::Signal>,
}

impl Signals {
    fn new() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let all = [
                SignalKind::terminate(),
                SignalKind::hangup(),
                SignalKind::interrupt(),
            ]
            .into_iter()
            .filter_map(|k| signal(k).ok())
            .collect();
            Signals { all }
        }
        #[cfg(not(unix))]
        Signals {}
    }

    /// No signal is watched (a headless run leaves signals to its host).
    fn none() -> Self {
        Signals {
            #[cfg(unix)]
            all: Vec::new(),
        }
    }

    async fn recv(&mut self) {
        #[cfg(unix)]
        {
            if self.all.is_empty() {
                return std::future::pending().await;
            }
            let waits = self.all.iter_mut().map(|s| Box::pin(s.recv()));
            let _ = futures::future::select_all(waits).await;
        }
        #[cfg(not(unix))]
        std::future::pending::<()>().await
    }
}
