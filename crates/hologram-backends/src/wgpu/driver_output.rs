//! Keeping driver chatter out of the user's terminal while adapters are probed.
//!
//! Opening a Vulkan instance and listing its adapters runs driver and layer code that writes to
//! the process's stderr. On Linux, Mesa's device-select layer connects to Wayland to learn the
//! desktop's GPU, and without a desktop session libwayland prints `error: XDG_RUNTIME_DIR is
//! invalid or not set in the environment.` on every probe: noise about nothing the user asked
//! for, in every program that merely checks which backend to use.
//!
//! While a probe runs, file descriptor 2 points at an unnamed temporary file; afterwards the
//! descriptor is restored and what was written is logged at debug level under
//! [`DRIVER_LOG_TARGET`] (`HOLOGRAM_LOG=debug` shows it in the CLI). With that log level on, or
//! with `HOLOGRAM_WGPU_SHOW_DRIVER_OUTPUT=1`, nothing is redirected, so the drivers' own output
//! stays live (for a driver that crashes while probing).
//!
//! Why not set `XDG_RUNTIME_DIR` (or `NODEVICE_SELECT`)? Changing the environment of a running,
//! multi-threaded process races with every thread reading it (`setenv` against `getenv` is
//! undefined behaviour in C), and it would leak into child processes and into the user's own
//! Vulkan code. The redirection is a pair of `dup2` calls, touches nothing else, and catches
//! every driver's chatter, not only this one message. Its cost: output that another thread
//! writes to stderr during a probe (a few milliseconds, once per process and API) reaches the
//! terminal late, through the log, instead of immediately.

/// The `tracing` target of driver output captured while probing adapters.
pub const DRIVER_LOG_TARGET: &str = "hologram::wgpu::driver";

/// Environment variable that leaves the drivers' output on stderr (`1`).
pub const SHOW_DRIVER_OUTPUT_ENV: &str = "HOLOGRAM_WGPU_SHOW_DRIVER_OUTPUT";

/// Runs `probe` with stderr captured (see the module documentation) and logs what the drivers
/// wrote.
pub(crate) fn quietly<T>(probe: impl FnOnce() -> T) -> T {
    let show = std::env::var(SHOW_DRIVER_OUTPUT_ENV).is_ok_and(|v| v.trim() == "1");
    if show || tracing::enabled!(target: DRIVER_LOG_TARGET, tracing::Level::DEBUG) {
        return probe();
    }
    imp::quietly(probe)
}

fn log_lines(text: &str) {
    for line in text.lines().map(str::trim_end).filter(|l| !l.is_empty()) {
        tracing::debug!(target: DRIVER_LOG_TARGET, "{line}");
    }
}

#[cfg(unix)]
mod imp {
    use std::fs::File;
    use std::io::{Read, Seek, SeekFrom};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::sync::Mutex;

    /// One capture at a time: captures of concurrent probes would restore each other's stderr.
    static CAPTURE: Mutex<()> = Mutex::new(());

    /// An unnamed file for the captured output: created private (0600) in the temporary
    /// directory and unlinked at once, so it disappears with its descriptor.
    fn unnamed_file() -> std::io::Result<File> {
        use std::os::unix::fs::OpenOptionsExt;
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let path = std::env::temp_dir().join(format!(
            "hologram-driver-output-{}-{nanos}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        std::fs::remove_file(&path)?;
        Ok(file)
    }

    /// Restores stderr when dropped, so a panicking probe cannot leave it redirected.
    struct Restore {
        saved: OwnedFd,
    }

    impl Drop for Restore {
        fn drop(&mut self) {
            // SAFETY: flushing C stdio streams and duplicating a descriptor we own onto 2 have no
            // memory-safety preconditions.
            unsafe {
                libc::fflush(std::ptr::null_mut());
                libc::dup2(self.saved.as_raw_fd(), 2);
            }
        }
    }

    pub(super) fn quietly<T>(probe: impl FnOnce() -> T) -> T {
        let _one = CAPTURE.lock().unwrap_or_else(|p| p.into_inner());
        let Ok(mut file) = unnamed_file() else {
            return probe();
        };
        // SAFETY: as in `Restore::drop`; the duplicate of 2 is close-on-exec, so a child started
        // during the probe does not inherit it.
        let saved = unsafe {
            libc::fflush(std::ptr::null_mut());
            libc::fcntl(2, libc::F_DUPFD_CLOEXEC, 3)
        };
        if saved < 0 {
            return probe();
        }
        // SAFETY: `saved` is a new descriptor that nothing else owns.
        let saved = unsafe { OwnedFd::from_raw_fd(saved) };
        let restore = Restore { saved };
        // SAFETY: `file` stays open until after stderr is restored.
        if unsafe { libc::dup2(file.as_raw_fd(), 2) } < 0 {
            return probe();
        }
        let out = probe();
        drop(restore);
        let mut text = Vec::new();
        if file.seek(SeekFrom::Start(0)).is_ok() && file.read_to_end(&mut text).is_ok() {
            super::log_lines(&String::from_utf8_lossy(&text));
        }
        out
    }
}

#[cfg(not(unix))]
mod imp {
    /// Windows and other targets: the drivers' output is left alone.
    pub(super) fn quietly<T>(probe: impl FnOnce() -> T) -> T {
        probe()
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn output_written_during_a_probe_does_not_reach_stderr_and_stderr_comes_back() {
        // A child process observes its own stderr, so the test sees what a terminal would.
        if std::env::var("HOLOGRAM_DRIVER_OUTPUT_CHILD").is_ok() {
            let v = quietly(|| {
                // SAFETY: writing a static buffer to descriptor 2.
                unsafe { libc::write(2, b"driver noise\n".as_ptr().cast(), 13) };
                eprintln!("more noise");
                7
            });
            assert_eq!(v, 7);
            eprintln!("after the probe");
            return;
        }
        let exe = std::env::current_exe().expect("test binary path");
        let out = std::process::Command::new(exe)
            .args([
                "--exact",
                "wgpu::driver_output::tests::output_written_during_a_probe_does_not_reach_stderr_and_stderr_comes_back",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("HOLOGRAM_DRIVER_OUTPUT_CHILD", "1")
            .env_remove(SHOW_DRIVER_OUTPUT_ENV)
            .output()
            .expect("run the child");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "child failed: {err}");
        assert!(!err.contains("noise"), "captured output leaked: {err}");
        assert!(
            err.contains("after the probe"),
            "stderr was not restored: {err}"
        );
    }
}
