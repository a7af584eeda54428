//! The operator's log lines in the simulation: a tracing layer collects what the shared
//! interpreter logs — level, message and fields, with the fields of the spans it was logged in
//! (`nodewright`, `node`, `package`, `stage` of the effect) — so scenarios can expect the log
//! lines an SRE reads.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber, span};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

use crate::time::SimTime;

/// One log line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LogLine {
    /// Virtual time.
    pub at: SimTime,
    /// `ERROR`, `WARN`, `INFO`, `DEBUG` or `TRACE`.
    pub level: String,
    /// The module that logged it (`nodewright_shell::interpret::objects`).
    pub target: String,
    /// The message.
    pub message: String,
    /// Fields of the line and of its enclosing spans (the line's own win).
    pub fields: BTreeMap<String, String>,
}

/// Where captured lines go; shared by the layer and the simulation.
#[derive(Clone, Debug, Default)]
pub struct LogSink {
    inner: Arc<Mutex<Sink>>,
}

#[derive(Debug, Default)]
struct Sink {
    now: SimTime,
    lines: Vec<LogLine>,
}

impl LogSink {
    fn lock(&self) -> std::sync::MutexGuard<'_, Sink> {
        // Plain data: a poisoned lock still holds valid lines.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` at virtual time `now` with every log line of this thread collected here.
    pub fn capture<T>(&self, now: SimTime, f: impl FnOnce() -> T) -> T {
        self.lock().now = now;
        let subscriber = tracing_subscriber::registry().with(Collect { sink: self.clone() });
        tracing::subscriber::with_default(subscriber, f)
    }

    /// The lines collected so far (taken).
    pub fn take(&self) -> Vec<LogLine> {
        std::mem::take(&mut self.lock().lines)
    }
}

/// Field values as text (Display values show as displayed, strings without quotes).
#[derive(Debug, Default)]
struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0.insert(field.name().into(), format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
}

/// The layer: keeps span fields in the span's extensions, turns events into [`LogLine`]s.
struct Collect {
    sink: LogSink,
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Collect {
    fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        for span in ctx
            .event_scope(event)
            .into_iter()
            .flat_map(|s| s.from_root())
        {
            if let Some(f) = span.extensions().get::<Fields>() {
                fields.extend(f.0.clone());
            }
        }
        let mut own = Fields::default();
        event.record(&mut own);
        let message = own.0.remove("message").unwrap_or_default();
        fields.extend(own.0);
        let meta = event.metadata();
        let mut sink = self.sink.lock();
        let at = sink.now;
        sink.lines.push(LogLine {
            at,
            level: meta.level().to_string(),
            target: meta.target().to_string(),
            message,
            fields,
        });
    }
}
