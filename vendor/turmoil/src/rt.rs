use std::future::Future;
use std::mem;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use rand::rngs::SmallRng;
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;
use tokio::task::LocalSet;
use tokio::time::{sleep, Duration, Instant};

use super::Result;

// To support re-creation, we need to store a factory of the future that
// represents the software. This is somewhat annoying in that it requires
// boxxing to avoid generics.
type Software<'a> = Box<dyn Fn() -> Pin<Box<dyn Future<Output = Result>>> + 'a>;

/// Runtime kinds.
pub enum Kind<'a> {
    /// A runtime for executing test code.
    Client,

    /// A runtime that is running simulated host software.
    Host { software: Software<'a> },
}

/// Runtime configuration.
#[derive(Clone, Default)]
pub struct Config {
    /// Whether io is enabled on the runtime.
    pub enable_io: bool,

    /// Rng used to seed the tokio runtime.
    ///
    /// Only used if the `tokio_unstable` cfg flag is set.
    #[cfg_attr(not(tokio_unstable), expect(dead_code))]
    pub rng: Option<SmallRng>,
}

/// Per host simulated runtime.
///
/// The tokio runtime is paused (see [`Builder::start_paused`]), which gives us
/// control over when and how to advance time. In particular, see [`Rt::tick`],
/// which lets the runtime do a bit more work.
pub struct Rt<'a> {
    pub kind: Kind<'a>,

    /// Handle to the Tokio runtime driving this simulated host. Each runtime
    /// may have a different sense of "now" which simulates clock skew.
    tokio: Runtime,

    /// Local task set used for running !Send tasks.
    local: LocalSet,

    /// A user readable name to identify the node.
    pub nodename: Arc<str>,

    /// Optional handle to a host's software. When software finishes, the handle is
    /// consumed to check for error, which is propagated up to fail the simulation.
    handle: Option<JoinHandle<Result>>,

    /// Runtime configuration.
    config: Config,

    /// The runtime's clock, as last read (PATCH: wake hints).
    clock: Instant,

    /// How many instants strictly inside a watched tick a timer woke one of
    /// the host's tasks (PATCH: wake hints; see [`Rt::tick`]).
    unhinted: u64,

    /// Whether the host must run at the next step whatever its hints and
    /// messages say: its software was (re)started and has not run since, or
    /// [`crate::Sim::wake_all`] said so (PATCH: wake hints).
    pub(crate) must_run: bool,

    /// How far this runtime's clock is behind the simulation's: the steps it
    /// was not run in, having nothing to do (PATCH: wake hints).
    pub(crate) lag: Duration,

    /// When its earliest hinted timer fires, as of its last run (PATCH: wake
    /// hints; see `sim::fire_at`).
    pub(crate) fire_at: Option<Duration>,

    /// Set by the waker the `LocalSet` holds between runs (see
    /// [`Rt::tick_after`]).
    woke: Arc<AtomicBool>,

    /// The flagging waker last made, and the waker it wraps: made again only
    /// when the runtime's own waker changes.
    flagged: Option<(Waker, Waker)>,
}

impl<'a> Rt<'a> {
    pub(crate) fn client<F>(nodename: Arc<str>, client: F, mut config: Config) -> Self
    where
        F: Future<Output = Result> + 'static,
    {
        let (tokio, local) = init(&mut config);
        let clock = Self::read_clock(&tokio);

        let handle = with(&tokio, &local, || tokio::task::spawn_local(client));

        Self {
            kind: Kind::Client,
            tokio,
            local,
            nodename,
            handle: Some(handle),
            config,
            clock,
            unhinted: 0,
            must_run: true,
            lag: Duration::ZERO,
            fire_at: None,
            woke: Arc::default(),
            flagged: None,
        }
    }

    pub(crate) fn host<F, Fut>(nodename: Arc<str>, software: F, mut config: Config) -> Self
    where
        F: Fn() -> Fut + 'a,
        Fut: Future<Output = Result> + 'static,
    {
        let (tokio, local) = init(&mut config);
        let clock = Self::read_clock(&tokio);

        let software: Software = Box::new(move || Box::pin(software()));
        let handle = with(&tokio, &local, || tokio::task::spawn_local(software()));

        Self {
            kind: Kind::Host { software },
            tokio,
            local,
            nodename,
            handle: Some(handle),
            config,
            clock,
            unhinted: 0,
            must_run: true,
            lag: Duration::ZERO,
            fire_at: None,
            woke: Arc::default(),
            flagged: None,
        }
    }

    pub(crate) fn is_client(&self) -> bool {
        matches!(self.kind, Kind::Client)
    }

    fn is_host(&self) -> bool {
        matches!(self.kind, Kind::Host { .. })
    }

    pub(crate) fn is_software_running(&self) -> bool {
        self.handle.is_some()
    }

    pub(crate) fn now(&self) -> Instant {
        self.clock
    }

    /// Reads the runtime's clock (PATCH: wake hints; [`Rt::now`] keeps what
    /// it last read, as the clock moves only while the runtime runs).
    fn read_clock(tokio: &Runtime) -> Instant {
        let _guard = tokio.enter();
        Instant::now()
    }

    // This method is called by [`Sim::run`], which iterates through all the
    // runtimes and ticks each one. The magic of this method is described in the
    // documentation for [`LocalSet::run_until`], but it may not be entirely
    // obvious how things fit together.
    //
    // A [`LocalSet`] tracks the tasks to run, which may in turn spawn more
    // tasks. `run_until` drives a top level task to completion, but not its
    // children. If you look below, you may be confused. The task we run here
    // just sleeps and has no children! However, it's the _same `LocalSet`_ that
    // is used to run software on the host.
    //
    // In this way, every time `tick` is called, the following unfolds:
    //
    // 1. Time advances on the runtime
    // 2. We schedule a new task that simply sleeps
    // 3. Other tasks on the `LocalSet` get a chance to run
    // 4. The sleep finishes
    // 5. The runtime pauses
    //
    // Returns whether the software has finished successfully or the error
    // that caused failure. Subsequent calls do not return the error as it is
    // expected to fail the simulation.
    //
    // With `watch` (PATCH: wake hints), the instants strictly inside the tick
    // at which a timer woke one of the host's local tasks are counted: in a
    // tick that jumps to `Sim::idle_until`, such a timer was not hinted.
    pub(crate) fn tick(&mut self, duration: Duration, watch: bool) -> Result<bool> {
        self.tick_after(Duration::ZERO, duration, watch, || {})
    }

    /// [`Rt::tick`] for a host that fell `lag` behind (PATCH: wake hints):
    /// its clock first jumps over the lag (tokio's `advance`, no task runs),
    /// then `deliver` hands it the step's messages, then it runs its tick, all
    /// in one `block_on`. Cheaper than a catch-up that sleeps through the lag,
    /// and the same run when no timer fires inside the lag, which only an
    /// unhinted timer can: the runtime's `LocalSet` holds, between runs, a
    /// waker that flags any wake of a local task, so such a timer is counted
    /// with the unhinted wakes. (A hinted timer due exactly at the lag's end
    /// would be flagged too: the caller catches such a host up the old way.)
    pub(crate) fn tick_after(
        &mut self,
        lag: Duration,
        duration: Duration,
        watch: bool,
        deliver: impl FnOnce(),
    ) -> Result<bool> {
        let window = watch.then(|| {
            let start = self.now() + lag;
            (start, start + duration)
        });
        let mut last = None;
        let unhinted = &mut self.unhinted;
        let local = &self.local;
        let woke = self.woke.clone();
        let flagged = &mut self.flagged;
        self.tokio.block_on(async {
            if !lag.is_zero() {
                woke.store(false, Ordering::Relaxed);
                tokio::time::advance(lag).await;
                if woke.load(Ordering::Relaxed) {
                    *unhinted += 1;
                }
            }
            deliver();
            let run = local.run_until(async {
                let sleep = sleep(duration);
                tokio::pin!(sleep);
                // The `run_until` future is polled first whenever the
                // runtime wakes with a local task woken, before that task
                // runs, so it sees the clock at each instant a timer woke
                // one (the runtime also wakes, with no task woken, as its
                // timer wheel cascades: those instants are not seen).
                std::future::poll_fn(|cx| {
                    if let Some((start, end)) = window {
                        let now = Instant::now();
                        if now > start && now < end && last != Some(now) {
                            last = Some(now);
                            *unhinted += 1;
                        }
                    }
                    sleep.as_mut().poll(cx)
                })
                .await
            });
            let run = std::pin::pin!(run);
            Flagged {
                future: run,
                flag: woke.clone(),
                cached: flagged,
            }
            .await
        });
        self.must_run = false;
        self.clock = Self::read_clock(&self.tokio);

        // pull for software completion
        match &self.handle {
            Some(handle) if handle.is_finished() => {
                // Consume handle to extract task result
                if let Some(h) = self.handle.take() {
                    match self.tokio.block_on(h) {
                        // If the host was crashed the JoinError is cancelled, which
                        // needs to be handled to not fail the simulation.
                        Err(je) if je.is_cancelled() => {}
                        res => res??,
                    }
                };
                Ok(true)
            }
            Some(_) => Ok(false),
            None => Ok(true),
        }
    }

    /// How many instants inside watched ticks a timer woke this host's
    /// runtime (PATCH: wake hints).
    pub(crate) fn unhinted_wakes(&self) -> u64 {
        self.unhinted
    }

    pub(crate) fn crash(&mut self) {
        if !self.is_host() {
            panic!("can only crash host's software");
        }

        if self.handle.take().is_some() {
            self.cancel_tasks();
        };
    }

    pub(crate) fn bounce(&mut self) {
        if !self.is_host() {
            panic!("can only bounce host's software");
        }

        self.cancel_tasks();

        if let Kind::Host { software } = &self.kind {
            let handle = with(&self.tokio, &self.local, || {
                tokio::task::spawn_local(software())
            });
            self.handle.replace(handle);
            self.must_run = true;
        };
    }

    /// Cancel all tasks within the [`Rt`] by dropping the current tokio
    /// [`Runtime`].
    ///
    /// Dropping the runtime blocks the calling thread until all futures have
    /// completed, which is desired here to ensure host software completes and
    /// all resources are dropped.
    ///
    /// Both the [`Runtime`] and [`LocalSet`] are replaced with new instances.
    fn cancel_tasks(&mut self) {
        let (tokio, local) = init(&mut self.config);
        self.fire_at = None;

        self.clock = Self::read_clock(&tokio);
        _ = mem::replace(&mut self.tokio, tokio);
        drop(mem::replace(&mut self.local, local));
    }
}

fn init(config: &mut Config) -> (Runtime, LocalSet) {
    let mut tokio_builder = tokio::runtime::Builder::new_current_thread();

    #[cfg(tokio_unstable)]
    tokio_builder.unhandled_panic(tokio::runtime::UnhandledPanic::ShutdownRuntime);

    if config.enable_io {
        tokio_builder.enable_io();
    }

    #[cfg(tokio_unstable)]
    if let Some(rng) = &mut config.rng {
        let bytes: [u8; 32] = rand::Rng::random(rng);
        let seed = tokio::runtime::RngSeed::from_bytes(&bytes);
        tokio_builder.rng_seed(seed);
    }

    let tokio = tokio_builder
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();

    tokio.block_on(async {
        // Sleep to "round" `Instant::now()` to the closest `ms`
        tokio::time::sleep(Duration::from_millis(1)).await;
    });

    (tokio, new_local())
}

fn new_local() -> LocalSet {
    #[cfg(not(tokio_unstable))]
    let local = LocalSet::new();

    #[cfg(tokio_unstable)]
    let mut local = LocalSet::new();

    #[cfg(tokio_unstable)]
    local.unhandled_panic(tokio::runtime::UnhandledPanic::ShutdownRuntime);

    local
}

fn with<R>(tokio: &Runtime, local: &LocalSet, f: impl FnOnce() -> R) -> R {
    tokio.block_on(async { local.run_until(async { f() }).await })
}

/// A future polled with a waker that also sets `flag` (PATCH: wake hints):
/// what it registers with others (the `LocalSet` its `run_until` belongs to)
/// reports a wake even after the poll that registered it is over.
struct Flagged<'a, F> {
    future: Pin<&'a mut F>,
    flag: Arc<AtomicBool>,
    /// The runtime's waker and the flagging one made for it.
    cached: &'a mut Option<(Waker, Waker)>,
}

struct FlagWaker {
    flag: Arc<AtomicBool>,
    inner: Waker,
}

impl Wake for FlagWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.flag.store(true, Ordering::Relaxed);
        self.inner.wake_by_ref();
    }
}

impl<F: Future> Future for Flagged<'_, F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        let fresh = match this.cached {
            Some((inner, _)) => !inner.will_wake(cx.waker()),
            None => true,
        };
        if fresh {
            let flagged = Waker::from(Arc::new(FlagWaker {
                flag: this.flag.clone(),
                inner: cx.waker().clone(),
            }));
            *this.cached = Some((cx.waker().clone(), flagged));
        }
        let waker = &this.cached.as_ref().expect("made above").1;
        this.future.as_mut().poll(&mut Context::from_waker(waker))
    }
}
