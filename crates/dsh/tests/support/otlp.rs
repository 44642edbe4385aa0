//! A tiny OTLP/HTTP receiver on loopback: decodes each protobuf export and
//! keeps its spans.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use prost::Message;

/// One received span, flattened.
#[derive(Clone, Debug)]
pub(crate) struct Span {
    pub(crate) name: String,
    pub(crate) trace_id: String,
    pub(crate) span_id: String,
    pub(crate) parent: String,
    /// Each attribute's value as text, whatever its type.
    pub(crate) attributes: BTreeMap<String, String>,
    /// Each attribute's value as it was typed on the wire.
    pub(crate) typed: BTreeMap<String, Typed>,
    pub(crate) events: Vec<(String, BTreeMap<String, String>)>,
    /// Each event's attributes as they were typed on the wire, in the order of `events`.
    pub(crate) typed_events: Vec<BTreeMap<String, Typed>>,
    pub(crate) links: Vec<(String, String)>,
    pub(crate) service: String,
}

/// The receiver; spans arrive on a background thread.
pub(crate) struct Receiver {
    pub(crate) endpoint: String,
    spans: Arc<Mutex<Vec<Span>>>,
    paths: Arc<Mutex<Vec<String>>>,
}

/// An attribute value as OTLP typed it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Typed {
    String(String),
    Int(i64),
    Double(f64),
    Bool(bool),
    Array(Vec<Typed>),
    /// A kind the tests do not expect (bytes, key-value lists), or none.
    Other(String),
}

impl Typed {
    /// A string array, as the conventions' `string[]`.
    pub(crate) fn strings(items: &[&str]) -> Self {
        Self::Array(items.iter().map(|item| Self::String((*item).to_owned())).collect())
    }
}

fn typed(value: Option<&opentelemetry_proto::tonic::common::v1::AnyValue>) -> Typed {
    match value.and_then(|value| value.value.as_ref()) {
        Some(AnyValue::StringValue(text)) => Typed::String(text.clone()),
        Some(AnyValue::IntValue(number)) => Typed::Int(*number),
        Some(AnyValue::DoubleValue(number)) => Typed::Double(*number),
        Some(AnyValue::BoolValue(flag)) => Typed::Bool(*flag),
        Some(AnyValue::ArrayValue(array)) => Typed::Array(array.values.iter().map(|item| typed(Some(item))).collect()),
        Some(other) => Typed::Other(format!("{other:?}")),
        None => Typed::Other(String::new()),
    }
}

fn typed_attributes(list: &[opentelemetry_proto::tonic::common::v1::KeyValue]) -> BTreeMap<String, Typed> {
    list.iter()
        .map(|pair| (pair.key.clone(), typed(pair.value.as_ref())))
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn text(value: Option<&opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match value.and_then(|value| value.value.as_ref()) {
        Some(AnyValue::StringValue(text)) => text.clone(),
        Some(AnyValue::IntValue(number)) => number.to_string(),
        Some(AnyValue::BoolValue(flag)) => flag.to_string(),
        Some(AnyValue::DoubleValue(number)) => number.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

fn attributes(list: &[opentelemetry_proto::tonic::common::v1::KeyValue]) -> BTreeMap<String, String> {
    list.iter()
        .map(|pair| (pair.key.clone(), text(pair.value.as_ref())))
        .collect()
}

impl Receiver {
    pub(crate) fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let spans = Arc::new(Mutex::new(Vec::new()));
        let paths = Arc::new(Mutex::new(Vec::new()));
        let (keep, seen) = (spans.clone(), paths.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { break };
                let (keep, seen) = (keep.clone(), seen.clone());
                std::thread::spawn(move || serve(stream, &keep, &seen));
            }
        });
        Self { endpoint, spans, paths }
    }

    /// The spans received so far.
    pub(crate) fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap().clone()
    }

    /// The request paths received so far.
    pub(crate) fn paths(&self) -> Vec<String> {
        self.paths.lock().unwrap().clone()
    }

    /// Waits (bounded) until `done` holds for the spans received.
    pub(crate) fn wait_for(&self, done: impl Fn(&[Span]) -> bool) -> Vec<Span> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let spans = self.spans();
            if done(&spans) || Instant::now() > deadline {
                return spans;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn serve(stream: TcpStream, keep: &Mutex<Vec<Span>>, seen: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or_default().to_owned();
        let mut length = 0;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        seen.lock().unwrap().push(path);
        if let Ok(request) = ExportTraceServiceRequest::decode(&body[..]) {
            let mut spans = keep.lock().unwrap();
            for resource in request.resource_spans {
                let service = resource
                    .resource
                    .as_ref()
                    .map(|resource| attributes(&resource.attributes))
                    .and_then(|attributes| attributes.get("service.name").cloned())
                    .unwrap_or_default();
                for scope in resource.scope_spans {
                    for span in scope.spans {
                        spans.push(Span {
                            name: span.name,
                            trace_id: hex(&span.trace_id),
                            span_id: hex(&span.span_id),
                            parent: hex(&span.parent_span_id),
                            attributes: attributes(&span.attributes),
                            typed: typed_attributes(&span.attributes),
                            events: span
                                .events
                                .iter()
                                .map(|event| (event.name.clone(), attributes(&event.attributes)))
                                .collect(),
                            typed_events: span
                                .events
                                .iter()
                                .map(|event| typed_attributes(&event.attributes))
                                .collect(),
                            links: span
                                .links
                                .iter()
                                .map(|link| (hex(&link.trace_id), hex(&link.span_id)))
                                .collect(),
                            service: service.clone(),
                        });
                    }
                }
            }
        }
        let reply = "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
        if writer.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}
