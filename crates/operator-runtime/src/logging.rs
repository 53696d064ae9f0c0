//! Process-wide logging for the operator binaries: called once at the top of `main`, before
//! anything logs. No Kubernetes I/O; it installs the global `tracing` subscriber writing to
//! stdout (what `kubectl logs` shows).
//!
//! A JSON line is one object:
//! `{"timestamp", "level", "target", "message", "fields": {event fields}, "span": {fields of every
//! enclosing span, inner ones win}, "spans": [span names, outermost first]}`, so
//! `#[instrument(fields(namespace, name))]` on a reconcile puts the object on every line logged
//! inside it (`span.namespace`, `span.name`). We format it ourselves because tracing-subscriber's
//! JSON writes a span's own name under the key `name` next to its fields, so a field called `name`
//! (the object's name, the natural choice) came out as a duplicate key that parsers drop.

use std::fmt;
use std::io;
use std::str::FromStr;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::Directive;
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormattedFields, MakeWriter};
use tracing_subscriber::registry::LookupSpan;

/// How log lines are rendered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// One JSON object per line, for log collectors.
    Json,
    /// Human-readable lines, for a terminal.
    Text,
}

impl LogFormat {
    /// The spellings [`FromStr`] accepts, in the order error messages list them.
    pub const ACCEPTED: [&'static str; 2] = ["json", "text"];
}

impl FromStr for LogFormat {
    type Err = ParseLogFormatError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "json" => Ok(LogFormat::Json),
            "text" => Ok(LogFormat::Text),
            other => Err(ParseLogFormatError {
                given: other.to_owned(),
            }),
        }
    }
}

impl fmt::Display for LogFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LogFormat::Json => "json",
            LogFormat::Text => "text",
        })
    }
}

/// A `--log-format` value that is neither `json` nor `text`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown log format {given:?}: expected one of \"json\", \"text\"")]
pub struct ParseLogFormatError {
    pub given: String,
}

#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    /// The filter (e.g. `--log-filter` or `RUST_LOG`) did not parse; `directive` is the first
    /// comma-separated part that fails on its own, or the whole filter if none does.
    #[error("invalid log filter directive {directive:?} in {filter:?}: {source}")]
    Filter {
        filter: String,
        directive: String,
        #[source]
        source: tracing_subscriber::filter::ParseError,
    },
    /// A global subscriber was already installed (`init_logging` called twice, or a test harness
    /// installed one).
    #[error("a global log subscriber is already installed: {0}")]
    AlreadyInitialized(#[source] tracing::subscriber::SetGlobalDefaultError),
}

impl LoggingError {
    pub fn reason(&self) -> &'static str {
        match self {
            LoggingError::Filter { .. } => "InvalidLogFilter",
            LoggingError::AlreadyInitialized(_) => "LoggingAlreadyInitialized",
        }
    }
}

/// Install the global subscriber. `filter` is an `EnvFilter` directive list such as
/// `"info"` or `"info,etcd_cluster_operator=debug"`; a bad directive is an error naming it.
pub fn init_logging(filter: &str, format: LogFormat) -> Result<(), LoggingError> {
    let subscriber = build_subscriber(filter, format, io::stdout)?;
    tracing::subscriber::set_global_default(subscriber).map_err(LoggingError::AlreadyInitialized)
}

/// The subscriber `init_logging` installs, writing to `writer`; separate so tests can capture
/// the lines without touching the global default.
fn build_subscriber<W>(
    filter: &str,
    format: LogFormat,
    writer: W,
) -> Result<Box<dyn Subscriber + Send + Sync>, LoggingError>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let env_filter = parse_filter(filter)?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(env_filter)
        .with_writer(writer);
    Ok(match format {
        LogFormat::Json => Box::new(
            builder
                .fmt_fields(JsonFields::new())
                .event_format(JsonLines)
                .finish(),
        ),
        LogFormat::Text => Box::new(builder.with_ansi(false).finish()),
    })
}

fn parse_filter(filter: &str) -> Result<EnvFilter, LoggingError> {
    EnvFilter::builder().parse(filter).map_err(|source| {
        // The whole-string error does not say which part failed; find it so the message points
        // at the typo instead of the whole flag value.
        let directive = filter
            .split(',')
            .map(str::trim)
            .find(|part| !part.is_empty() && part.parse::<Directive>().is_err())
            .unwrap_or(filter)
            .to_owned();
        LoggingError::Filter {
            filter: filter.to_owned(),
            directive,
            source,
        }
    })
}

/// The JSON line format described in the module docs. Span fields are recorded by
/// [`JsonFields`], so each span's extensions hold its fields as a JSON object string.
struct JsonLines;

impl<S> FormatEvent<S, JsonFields> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, JsonFields>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let metadata = event.metadata();
        let mut fields = FieldMap::default();
        event.record(&mut fields);
        let message = fields.0.remove("message");

        let mut span_fields = Map::new();
        let mut span_names = Vec::new();
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                span_names.push(Value::from(span.name()));
                let extensions = span.extensions();
                let recorded = extensions
                    .get::<FormattedFields<JsonFields>>()
                    .map(|f| f.fields.as_str())
                    .unwrap_or_default();
                // An empty string means the span has no fields yet.
                if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(recorded) {
                    span_fields.extend(map);
                }
            }
        }

        let mut line = Map::new();
        line.insert(
            "timestamp".into(),
            k8s_openapi::jiff::Timestamp::now().to_string().into(),
        );
        line.insert("level".into(), metadata.level().as_str().into());
        line.insert("target".into(), metadata.target().into());
        if let Some(message) = message {
            line.insert("message".into(), message);
        }
        if !fields.0.is_empty() {
            line.insert("fields".into(), Value::Object(fields.0));
        }
        if !span_names.is_empty() {
            line.insert("span".into(), Value::Object(span_fields));
            line.insert("spans".into(), Value::Array(span_names));
        }
        let text = serde_json::to_string(&Value::Object(line)).map_err(|_| fmt::Error)?;
        writeln!(writer, "{text}")
    }
}

/// Collects an event's fields as JSON values, keeping numbers and booleans typed.
#[derive(Default)]
struct FieldMap(Map<String, Value>);

impl Visit for FieldMap {
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.0.insert(field.name().into(), value.to_string().into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        // `message` arrives as `format_args!`, whose Debug is its text.
        self.0
            .insert(field.name().into(), format!("{value:?}").into());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[test]
    fn log_format_parses_both_spellings_and_round_trips() {
        for (text, format) in [("json", LogFormat::Json), ("text", LogFormat::Text)] {
            assert_eq!(text.parse::<LogFormat>(), Ok(format));
            assert_eq!(format.to_string(), text);
        }
    }

    #[test]
    fn log_format_error_names_the_accepted_values() {
        for bad in ["JSON", "", "yaml", " json"] {
            let err = bad.parse::<LogFormat>().unwrap_err();
            assert_eq!(err.given, bad);
            let message = err.to_string();
            for accepted in LogFormat::ACCEPTED {
                assert!(message.contains(accepted), "{message}");
            }
        }
    }

    #[test]
    fn init_logging_rejects_a_bad_directive_naming_it() {
        let err = init_logging("info,my_crate=loud", LogFormat::Json).unwrap_err();
        match &err {
            LoggingError::Filter {
                directive, filter, ..
            } => {
                assert_eq!(directive, "my_crate=loud");
                assert_eq!(filter, "info,my_crate=loud");
            }
            other => panic!("expected a filter error, got {other:?}"),
        }
        assert!(err.to_string().contains("my_crate=loud"));
        assert_eq!(err.reason(), "InvalidLogFilter");
    }

    #[test]
    fn good_filters_parse() {
        for good in [
            "info",
            "info,etcd_cluster_operator=debug",
            "warn,kube=info",
            "",
        ] {
            assert!(parse_filter(good).is_ok(), "{good}");
        }
    }

    /// A `MakeWriter` collecting everything into one buffer.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl<'w> MakeWriter<'w> for Captured {
        type Writer = Captured;
        fn make_writer(&'w self) -> Self::Writer {
            self.clone()
        }
    }

    fn capture(filter: &str, format: LogFormat, log: impl FnOnce()) -> String {
        let captured = Captured::default();
        let subscriber = build_subscriber(filter, format, captured.clone()).unwrap();
        tracing::subscriber::with_default(subscriber, log);
        String::from_utf8(captured.0.lock().unwrap().clone()).unwrap()
    }

    fn json_lines(output: &str) -> Vec<serde_json::Value> {
        output
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn json_lines_carry_the_enclosing_span_fields_and_respect_the_filter() {
        let output = capture("warn,operator_runtime=info", LogFormat::Json, || {
            // the shape `#[instrument(fields(namespace, name))]` produces, recorded late
            let span = tracing::info_span!(
                "reconcile",
                namespace = "prod",
                name = tracing::field::Empty
            );
            let _entered = span.enter();
            span.record("name", "main");
            let step = tracing::info_span!("execute", name = "m2", attempt = 3u64);
            let _step = step.enter();
            tracing::info!(action = "AddLearner", healthy = true, "executing");
            tracing::debug!("filtered out by the directive");
        });
        let lines = json_lines(&output);
        assert_eq!(lines.len(), 1, "{output}");
        let line = &lines[0];
        assert_eq!(line["message"], "executing");
        assert_eq!(line["level"], "INFO");
        assert_eq!(line["target"], "operator_runtime::logging::tests");
        assert_eq!(line["fields"]["action"], "AddLearner");
        assert_eq!(line["fields"]["healthy"], true);
        assert_eq!(line["span"]["namespace"], "prod");
        // the inner span's field wins over the outer one of the same name
        assert_eq!(line["span"]["name"], "m2");
        assert_eq!(line["span"]["attempt"], 3);
        assert_eq!(line["spans"], serde_json::json!(["reconcile", "execute"]));
        assert!(line["timestamp"].as_str().unwrap().ends_with('Z'), "{line}");
    }

    #[test]
    fn json_span_field_called_name_is_not_lost() {
        let output = capture("info", LogFormat::Json, || {
            let span = tracing::info_span!("reconcile", namespace = "prod", name = "main");
            let _entered = span.enter();
            tracing::warn!("quorum lost");
        });
        let lines = json_lines(&output);
        assert_eq!(lines.len(), 1, "{output}");
        assert_eq!(lines[0]["span"]["name"], "main");
        assert_eq!(lines[0]["spans"][0], "reconcile");
        assert!(lines[0].get("fields").is_none(), "{output}");
    }

    #[test]
    fn json_line_outside_any_span_has_no_span_keys() {
        let output = capture("info", LogFormat::Json, || {
            tracing::info!(identity = "pod-a", "acquired the lease");
        });
        let lines = json_lines(&output);
        assert_eq!(lines.len(), 1, "{output}");
        assert!(lines[0].get("span").is_none(), "{output}");
        assert!(lines[0].get("spans").is_none(), "{output}");
        assert_eq!(lines[0]["fields"]["identity"], "pod-a");
    }

    #[test]
    fn text_lines_have_no_ansi_escapes() {
        let output = capture("info", LogFormat::Text, || {
            tracing::info!(member = "m1", "promoted");
        });
        assert!(output.contains("promoted"), "{output}");
        assert!(output.contains("member=\"m1\""), "{output}");
        assert!(!output.contains('\u{1b}'), "{output:?}");
    }
}
