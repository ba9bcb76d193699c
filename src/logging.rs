//! Diagnostics go through `tracing`; this is the one subscriber, set up by the binary.
//!
//! The lines keep the shape operators and scripts already read on a terminal: `error: …`,
//! `warning: …`, `note: …`. The sweep's daemon writes to `daemon.log` (or journald under
//! systemd) and turns on timestamps, since nobody watches those lines as they happen.
//! `NIGHTSHIFT_LOG` takes the usual filter directives (`debug`, `nightshift::engine=trace`).

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::EnvFilter;

static TIMESTAMPS: AtomicBool = AtomicBool::new(false);

/// Prefix every later line with the time (the daemon, whose output is a log file).
pub(crate) fn with_timestamps() {
    TIMESTAMPS.store(true, Ordering::Relaxed);
}

struct Plain;

fn word(level: &Level) -> &'static str {
    match *level {
        Level::ERROR => "error",
        Level::WARN => "warning",
        Level::INFO => "note",
        Level::DEBUG => "debug",
        Level::TRACE => "trace",
    }
}

impl<S, N> FormatEvent<S, N> for Plain
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        if TIMESTAMPS.load(Ordering::Relaxed) {
            SystemTime.format_time(&mut w)?;
            w.write_char(' ')?;
        }
        write!(w, "{}: ", word(event.metadata().level()))?;
        ctx.field_format().format_fields(w.by_ref(), event)?;
        writeln!(w)
    }
}

/// Install the subscriber (once; later calls do nothing). Lines go to standard error.
pub fn init() {
    let filter =
        EnvFilter::try_from_env("NIGHTSHIFT_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .event_format(Plain)
        .try_init();
}
