//! Stopping a run cleanly. Ctrl-C (SIGINT), SIGTERM (what Slurm and most schedulers send
//! before a kill) and SIGHUP (a closed terminal) all ask the training loop to finish its step,
//! write a checkpoint and exit with 128 + the signal's number; the run continues exactly with
//! `--resume`. A second signal while the checkpoint is written aborts at once. SIGUSR2 asks
//! for the same clean stop but never aborts, however often it comes: it is the signal a
//! `sweep` child gets when its sweep dies (`PR_SET_PDEATHSIG`), which the kernel may deliver
//! once for each thread of the dying sweep.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR2};

/// A request to stop, shared between the signal handlers and the loop.
#[derive(Debug, Clone, Default)]
pub struct StopSignal {
    /// The signal's number; 0 while none came.
    signal: Arc<AtomicUsize>,
    /// Set with `signal`: the second signal's handler exits when it finds it set.
    seen: Arc<AtomicBool>,
}

impl StopSignal {
    /// A request that only [`StopSignal::request`] makes (library use and tests).
    pub fn manual() -> Self {
        Self::default()
    }

    /// Handles SIGINT, SIGTERM, SIGHUP and SIGUSR2 for this process from now on.
    pub fn install() -> io::Result<Self> {
        let stop = Self::default();
        for signal in [SIGINT, SIGTERM, SIGHUP] {
            // Registered first, so it sees the flag as the previous signal left it: the
            // first signal only sets it, a second one exits.
            signal_hook::flag::register_conditional_shutdown(
                signal,
                128 + signal,
                stop.seen.clone(),
            )?;
            signal_hook::flag::register_usize(signal, stop.signal.clone(), signal as usize)?;
            signal_hook::flag::register(signal, stop.seen.clone())?;
        }
        // A stop request with no abort on repeats (see the module doc); registered after the
        // others, so a SIGUSR2 after a Ctrl-C does not abort either.
        signal_hook::flag::register_usize(SIGUSR2, stop.signal.clone(), SIGUSR2 as usize)?;
        Ok(stop)
    }

    /// Asks for a stop as `signal` would.
    pub fn request(&self, signal: i32) {
        self.signal.store(signal as usize, Ordering::SeqCst);
        self.seen.store(true, Ordering::SeqCst);
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
    fn a_request_is_seen_with_its_signal() {
        let stop = StopSignal::manual();
        assert_eq!(stop.requested(), None);
        let shared = stop.clone();
        shared.request(SIGTERM);
        assert_eq!(stop.requested(), Some(SIGTERM));
        assert_eq!(signal_name(SIGTERM), "SIGTERM");
    }
}
