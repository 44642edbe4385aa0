//! The GenAI convention types that `tracing` fields cannot carry, given to
//! each span just before it is exported.
//!
//! A `tracing` field holds a string, an int, a float or a bool, never an
//! array, and `tracing-opentelemetry` maps each field to one attribute of its
//! own type. The conventions type `gen_ai.response.finish_reasons` as a
//! string array; the libraries record the call's one finish reason as a
//! string (they depend on `tracing` only), and the exporter sends it as the
//! one-element array here. Counts need nothing: they are recorded as `i64`
//! fields, which the layer exports as ints.

use opentelemetry::{Array, Value};
use opentelemetry_sdk::trace::SpanData;

/// The attributes the conventions type as string arrays, recorded as one string.
const STRING_ARRAYS: [&str; 1] = ["gen_ai.response.finish_reasons"];

/// `span` with each string-array attribute recorded as a string turned into
/// a one-element array; every other attribute as it was.
pub(super) fn typed(mut span: SpanData) -> SpanData {
    for attribute in &mut span.attributes {
        if STRING_ARRAYS.contains(&attribute.key.as_str())
            && let Value::String(text) = &attribute.value
        {
            attribute.value = Value::Array(Array::String(vec![text.clone()]));
        }
    }
    span
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::time::SystemTime;

    use opentelemetry::trace::{SpanContext, SpanId, SpanKind, Status};
    use opentelemetry::{InstrumentationScope, KeyValue};
    use opentelemetry_sdk::trace::{SpanEvents, SpanLinks};

    use super::*;

    fn span(attributes: Vec<KeyValue>) -> SpanData {
        SpanData {
            span_context: SpanContext::empty_context(),
            parent_span_id: SpanId::INVALID,
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: Cow::Borrowed("chat scripted"),
            start_time: SystemTime::UNIX_EPOCH,
            end_time: SystemTime::UNIX_EPOCH,
            attributes,
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: Status::Unset,
            instrumentation_scope: InstrumentationScope::builder("dsh").build(),
        }
    }

    #[test]
    fn a_finish_reason_becomes_a_string_array_and_nothing_else_changes() {
        let first = typed(span(vec![
            KeyValue::new("gen_ai.response.finish_reasons", "tool_calls"),
            KeyValue::new("gen_ai.usage.input_tokens", 12_i64),
            KeyValue::new("gen_ai.operation.name", "chat"),
        ]));
        assert_eq!(
            first.attributes,
            vec![
                KeyValue::new(
                    "gen_ai.response.finish_reasons",
                    Value::Array(Array::String(vec!["tool_calls".into()]))
                ),
                KeyValue::new("gen_ai.usage.input_tokens", 12_i64),
                KeyValue::new("gen_ai.operation.name", "chat"),
            ]
        );
        // Already an array (set by someone else): left alone.
        let array = Value::Array(Array::String(vec!["stop".into(), "length".into()]));
        let again = typed(span(vec![KeyValue::new(
            "gen_ai.response.finish_reasons",
            array.clone(),
        )]));
        assert_eq!(again.attributes[0].value, array);
    }
}
