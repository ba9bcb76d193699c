//! The process's one tokio runtime. Every command, the daemon, the probes before a sweep and
//! the TLS proxies of remote hosts run on it: a connection pooled by a probe (bollard's, a
//! registry's) then serves the sweep on the runtime that made it, and no thread keeps a
//! runtime of its own. Made on first use: after the daemon has limited malloc's arenas, so
//! its workers obey the limit.

use std::future::Future;
use std::sync::OnceLock;
use tokio::runtime::Runtime;

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

/// The runtime, made on first use: a worker per core, I/O and timers on.
pub fn get() -> &'static Runtime {
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("nightshift")
            .build()
            // Without a runtime nothing can run at all: there is no smaller failure to report.
            .expect("the tokio runtime (threads, epoll, timers) could not be made")
    })
}

/// Wait on `f` from synchronous code (a command's entry point, a probe before the sweep).
/// Never from inside a task: that would block one of the runtime's workers.
pub fn block_on<F: Future>(f: F) -> F::Output {
    get().block_on(f)
}

/// Run `f` in the background on the process's runtime, from synchronous code or a task.
pub fn spawn<F>(f: F) -> tokio::task::JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    get().spawn(f)
}
