//! Stopping a run cleanly. Ctrl-C (SIGINT), SIGTERM (what Slurm and most schedulers send
//! before a kill) and SIGHUP (a closed terminal) all ask the training loop to finish its step,
//! write a checkpoint and exit with 128 + the first signal's number; the run continues
//! exactly with `--resume`. Signals that come within [`REPEAT_WINDOW`] of the first are the
//! same stop, however many and whichever of the three; a second one later than that is
//! deliberate and aborts at once, saying so, without the checkpoint. SIGUSR2 asks for the
//! same clean stop but never aborts, however often it comes: it is the signal a `sweep`
//! child gets when its sweep dies (`PR_SET_PDEATHSIG`), which the kernel may deliver once
//! for each thread of the dying sweep.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR2};

/// Signals that come within this long of the first one are the same stop, not an abort. A
/// scheduler's cancel often arrives more than once at the same moment: Slurm's `scancel`
/// signals every process of the task, so `train` gets one SIGTERM from Slurm and one from
/// the `sweep task` that passes its own on; a runner and its children stopped together do
/// the same. A person who means to abort sends the second signal after seeing the first
/// one's message, well after this.
pub const REPEAT_WINDOW: Duration = Duration::from_secs(1);

/// What a signal does, given when the first one came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnSignal {
    /// The first: stop after this step, with a checkpoint.
    Stop,
    /// A repeat within [`REPEAT_WINDOW`] of the first, or a SIGUSR2: the same stop.
    Same,
    /// A later, deliberate second signal: exit at once, without a checkpoint.
    Abort,
}

/// The rule of the module doc: `first_at` is when the first stop signal came (`None`: none
/// yet), `now` is when this one comes; `abortable` is false for SIGUSR2.
pub fn on_signal(first_at: Option<Duration>, now: Duration, abortable: bool) -> OnSignal {
    match first_at {
        None => OnSignal::Stop,
        Some(first) if abortable && now.saturating_sub(first) > REPEAT_WINDOW => OnSignal::Abort,
        Some(_) => OnSignal::Same,
    }
}

/// A request to stop, shared between the signal handlers and the loop.
#[derive(Debug, Clone)]
pub struct StopSignal {
    /// The signal's number; 0 while none came.
    signal: Arc<AtomicUsize>,
    /// When the first abortable stop signal came, in nanoseconds since `origin`, plus one;
    /// 0 while none came.
    first_at: Arc<AtomicU64>,
    /// The clock's zero.
    origin: Instant,
}

impl Default for StopSignal {
    fn default() -> Self {
        StopSignal {
            signal: Arc::default(),
            first_at: Arc::default(),
            origin: Instant::now(),
        }
    }
}

impl StopSignal {
    /// A request that only [`StopSignal::request`] makes (library use and tests).
    pub fn manual() -> Self {
        Self::default()
    }

    /// Handles SIGINT, SIGTERM, SIGHUP and SIGUSR2 for this process from now on.
    pub fn install() -> io::Result<Self> {
        let stop = Self::default();
        for signal in [SIGINT, SIGTERM, SIGHUP, SIGUSR2] {
            let handler = stop.clone();
            // SAFETY: the handler only reads the monotonic clock (clock_gettime, which is
            // async-signal-safe), does atomic loads and stores, and on an abort calls
            // write(2) and _exit(2), both async-signal-safe; it allocates nothing and takes
            // no lock.
            #[allow(unsafe_code)]
            unsafe {
                signal_hook::low_level::register(signal, move || handler.on(signal))?;
            }
        }
        Ok(stop)
    }

    /// What the handler of `signal` does: record the stop, or abort on a later second signal.
    fn on(&self, signal: i32) {
        let now = self.origin.elapsed();
        let abortable = signal != SIGUSR2;
        let first_at = match self.first_at.load(Ordering::SeqCst) {
            0 => None,
            stamp => Some(Duration::from_nanos(stamp - 1)),
        };
        match on_signal(first_at, now, abortable) {
            OnSignal::Stop => {
                let _ = self.signal.compare_exchange(
                    0,
                    signal as usize,
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                );
                if abortable {
                    let stamp = u64::try_from(now.as_nanos()).unwrap_or(u64::MAX - 1) + 1;
                    let _ = self.first_at.compare_exchange(
                        0,
                        stamp,
                        Ordering::SeqCst,
                        Ordering::SeqCst,
                    );
                }
            }
            OnSignal::Same => {}
            OnSignal::Abort => {
                const MESSAGE: &[u8] =
                    b"\nsecond signal: aborting without a checkpoint (the last one stays)\n";
                // SAFETY: write(2) on stderr from a buffer that lives for the whole program.
                #[allow(unsafe_code)]
                unsafe {
                    libc::write(2, MESSAGE.as_ptr().cast(), MESSAGE.len());
                }
                signal_hook::low_level::exit(128 + signal);
            }
        }
    }

    /// Asks for a stop as `signal` would, but never aborts: a request in code (a library
    /// user, a test) is never an emergency.
    pub fn request(&self, signal: i32) {
        let _ =
            self.signal
                .compare_exchange(0, signal as usize, Ordering::SeqCst, Ordering::SeqCst);
    }

    /// The signal that asked for a stop, if one did.
    pub fn requested(&self) -> Option<i32> {
        match self.signal.load(Ordering::SeqCst) {
            0 => None,
            signal => Some(signal as i32),
        }
    }
}

/// The signal's name for messages: "SIGTERM".
pub fn signal_name(signal: i32) -> String {
    match signal {
        SIGINT => "Ctrl-C (SIGINT)".into(),
        SIGTERM => "SIGTERM".into(),
        SIGHUP => "SIGHUP".into(),
        SIGUSR2 => "SIGUSR2 (the sweep that started it died)".into(),
        other => format!("signal {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_within_the_window_are_one_stop_and_a_later_one_aborts() {
        let at = Duration::from_millis;
        assert_eq!(on_signal(None, at(5000), true), OnSignal::Stop);
        assert_eq!(on_signal(None, at(5000), false), OnSignal::Stop);
        // Slurm's SIGTERM and the one `sweep task` passes on, a few milliseconds apart.
        assert_eq!(on_signal(Some(at(5000)), at(5003), true), OnSignal::Same);
        assert_eq!(on_signal(Some(at(5000)), at(6000), true), OnSignal::Same);
        assert_eq!(on_signal(Some(at(5000)), at(6001), true), OnSignal::Abort);
        // SIGUSR2 never aborts.
        assert_eq!(on_signal(Some(at(5000)), at(60_000), false), OnSignal::Same);
    }

    #[test]
    fn the_first_signal_is_the_one_reported() {
        let stop = StopSignal::manual();
        stop.request(SIGTERM);
        stop.request(SIGINT);
        assert_eq!(stop.requested(), Some(SIGTERM));
    }

    #[test]
    fn a_request_is_seen_with_its_signal() {
        let stop = StopSignal::manual();
        assert_eq!(stop.requested(), None);
        let shared = stop.clone();
        shared.request(SIGTERM);
        assert_eq!(stop.requested(), Some(SIGTERM));
        assert_eq!(signal_name(SIGTERM), "SIGTERM");
    }
}
