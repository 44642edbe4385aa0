//! The canonical key of a request: what the model is asked (model,
//! messages, tools, sampling parameters), with the parts that differ from
//! one run of the same task to the next put in a normal form, so a replay
//! finds the recorded answer whatever ids, paths and times this run made.
//!
//! Normalised (docs/cassettes.md, "Matching"):
//! - tool-call ids (`tool_calls[].id`, `tool_call_id`) become `call#1`,
//!   `call#2`, … by first appearance in the request;
//! - UUIDs anywhere in a text (agent, child and task ids) become `<id#1>`, …;
//! - a directory right under the system's temporary directory (or `/tmp`)
//!   becomes `<tmp#1>`, …;
//! - RFC 3339 timestamps become `<time>`;
//! - `stream_options` is dropped (how usage is reported, not what is asked);
//! - object keys are sorted.

use std::collections::HashMap;

use serde_json::{Map, Value};

/// The canonical form of a request body.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Key(String);

impl Key {
    /// The key of `body` (the OpenAI wire JSON of a request).
    #[cfg(test)]
    pub(crate) fn of(body: &Value) -> Key {
        Key::from_canonical(&canonical(body))
    }

    /// The key of a body already in canonical form.
    pub(crate) fn from_canonical(canonical: &Value) -> Key {
        Key(canonical.to_string())
    }
}

/// `body` in the canonical form described above.
pub(crate) fn canonical(body: &Value) -> Value {
    let mut names = Names::default();
    let mut body = body.clone();
    if let Value::Object(map) = &mut body {
        map.remove("stream_options");
        if let Some(Value::Array(messages)) = map.get_mut("messages") {
            for message in messages {
                names.tool_call_ids(message);
            }
        }
    }
    sorted(names.texts(body))
}

/// The ordinals given to volatile values met so far in one request.
#[derive(Default)]
struct Names {
    calls: HashMap<String, usize>,
    ids: HashMap<String, usize>,
    temps: HashMap<String, usize>,
}

impl Names {
    fn tool_call_ids(&mut self, message: &mut Value) {
        if let Some(Value::Array(calls)) = message.get_mut("tool_calls") {
            for call in calls {
                if let Some(id) = call.get_mut("id") {
                    self.call(id);
                }
            }
        }
        if let Some(id) = message.get_mut("tool_call_id") {
            self.call(id);
        }
    }

    fn call(&mut self, id: &mut Value) {
        if let Value::String(text) = id {
            let next = self.calls.len() + 1;
            let ordinal = *self.calls.entry(text.clone()).or_insert(next);
            *text = format!("call#{ordinal}");
        }
    }

    fn texts(&mut self, value: Value) -> Value {
        match value {
            Value::String(text) => Value::String(self.text(&text)),
            Value::Array(items) => Value::Array(items.into_iter().map(|item| self.texts(item)).collect()),
            Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, self.texts(v))).collect()),
            other => other,
        }
    }

    /// `text` with its UUIDs, temporary directories and timestamps named.
    fn text(&mut self, text: &str) -> String {
        let temp_roots = temp_roots();
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(ch) = rest.chars().next() {
            if let Some(len) = uuid_len(rest) {
                let next = self.ids.len() + 1;
                let ordinal = *self.ids.entry(rest[..len].to_ascii_lowercase()).or_insert(next);
                out.push_str(&format!("<id#{ordinal}>"));
                rest = &rest[len..];
                continue;
            }
            if let Some(len) = timestamp_len(rest) {
                out.push_str("<time>");
                rest = &rest[len..];
                continue;
            }
            if let Some(len) = temp_dir_len(rest, &temp_roots) {
                let next = self.temps.len() + 1;
                let ordinal = *self.temps.entry(rest[..len].to_owned()).or_insert(next);
                out.push_str(&format!("<tmp#{ordinal}>"));
                rest = &rest[len..];
                continue;
            }
            out.push(ch);
            rest = &rest[ch.len_utf8()..];
        }
        out
    }
}

/// Object keys sorted, recursively.
fn sorted(value: Value) -> Value {
    match value {
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect::<Map<_, _>>())
        }
        other => other,
    }
}

/// The length of a UUID (8-4-4-4-12 hex digits) at the start of `text`.
fn uuid_len(text: &str) -> Option<usize> {
    const GROUPS: [usize; 5] = [8, 4, 4, 4, 12];
    let bytes = text.as_bytes();
    let mut at = 0;
    for (index, group) in GROUPS.iter().enumerate() {
        if index > 0 {
            if bytes.get(at) != Some(&b'-') {
                return None;
            }
            at += 1;
        }
        let digits = bytes.get(at..at + group)?;
        if !digits.iter().all(u8::is_ascii_hexdigit) {
            return None;
        }
        at += group;
    }
    // Not part of a longer run of hex digits.
    match bytes.get(at) {
        Some(next) if next.is_ascii_alphanumeric() => None,
        _ => Some(at),
    }
}

/// The length of an RFC 3339 timestamp (`2026-12-04T18:04:32`, a space
/// allowed for the `T`, optional fraction and zone) at the start of `text`.
fn timestamp_len(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let shape = b"dddd-dd-ddTdd:dd:dd";
    if bytes.len() < shape.len() {
        return None;
    }
    for (byte, want) in bytes.iter().zip(shape) {
        let ok = match want {
            b'd' => byte.is_ascii_digit(),
            b'T' => matches!(byte, b'T' | b't' | b' '),
            other => byte == other,
        };
        if !ok {
            return None;
        }
    }
    let mut at = shape.len();
    if bytes.get(at) == Some(&b'.') {
        at += 1;
        while bytes.get(at).is_some_and(u8::is_ascii_digit) {
            at += 1;
        }
    }
    match bytes.get(at) {
        Some(b'Z' | b'z') => at += 1,
        Some(b'+' | b'-') if bytes.get(at + 1..at + 6).is_some_and(is_zone) => at += 6,
        _ => {}
    }
    Some(at)
}

fn is_zone(bytes: &[u8]) -> bool {
    bytes.len() == 5 && bytes[0].is_ascii_digit() && bytes[1].is_ascii_digit() && bytes[2] == b':'
}

/// The temporary directories whose children are volatile: the system's
/// own, and `/tmp`.
fn temp_roots() -> Vec<String> {
    let mut roots = vec!["/tmp/".to_owned()];
    let system = std::env::temp_dir().to_string_lossy().trim_end_matches('/').to_owned() + "/";
    if system.len() > 1 && !roots.contains(&system) {
        roots.push(system);
    }
    roots
}

/// The length of `<root><name>` at the start of `text`, where `name` is the
/// first component under a temporary root.
fn temp_dir_len(text: &str, roots: &[String]) -> Option<usize> {
    let root = roots.iter().find(|root| text.starts_with(root.as_str()))?;
    let name = text[root.len()..]
        .bytes()
        .take_while(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-'))
        .count();
    (name > 0).then_some(root.len() + name)
}

/// Where two canonical requests first differ, in the order a reader checks
/// them: `model`, then `messages` one by one, then `tools`, then the rest.
/// `None` when they are equal.
pub(crate) fn first_difference(recorded: &Value, asked: &Value) -> Option<Difference> {
    let keys = ordered_keys(recorded, asked);
    for key in keys {
        let path = key.clone();
        if let Some(found) = differ(&path, recorded.get(&key), asked.get(&key)) {
            return Some(found);
        }
    }
    None
}

/// How close a recorded request is to one asked: whether the model is the
/// same, how many leading messages are equal, how much of the first
/// unequal message agrees (its leading bytes), and how many top-level
/// fields are equal.
pub(crate) fn closeness(recorded: &Value, asked: &Value) -> (bool, usize, usize, usize) {
    let equal = |key: &str| recorded.get(key) == asked.get(key);
    let (messages, agreeing) = match (recorded.get("messages"), asked.get("messages")) {
        (Some(Value::Array(a)), Some(Value::Array(b))) => {
            let same = a.iter().zip(b).take_while(|(x, y)| x == y).count();
            let agreeing = match (a.get(same), b.get(same)) {
                (Some(x), Some(y)) => common_prefix(&x.to_string(), &y.to_string()),
                _ => 0,
            };
            (same, agreeing)
        }
        _ => (0, 0),
    };
    let fields = asked
        .as_object()
        .map_or(0, |map| map.keys().filter(|key| equal(key)).count());
    (equal("model"), messages, agreeing, fields)
}

fn common_prefix(a: &str, b: &str) -> usize {
    a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
}

/// One place where two requests differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Difference {
    /// The JSON path, e.g. `messages[3].content`.
    pub(crate) path: String,
    /// What the recorded request holds there (`None`: nothing).
    pub(crate) recorded: Option<Value>,
    /// What the asked request holds there.
    pub(crate) asked: Option<Value>,
}

fn ordered_keys(a: &Value, b: &Value) -> Vec<String> {
    let mut keys: Vec<String> = ["model", "messages", "tools"].map(str::to_owned).to_vec();
    for map in [a.as_object(), b.as_object()].into_iter().flatten() {
        for key in map.keys() {
            if !keys.contains(key) {
                keys.push(key.clone());
            }
        }
    }
    keys
}

fn differ(path: &str, recorded: Option<&Value>, asked: Option<&Value>) -> Option<Difference> {
    match (recorded, asked) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let mut keys: Vec<&String> = a.keys().collect();
            keys.extend(b.keys().filter(|key| !a.contains_key(*key)));
            keys.into_iter()
                .find_map(|key| differ(&format!("{path}.{key}"), a.get(key), b.get(key)))
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) => {
            (0..a.len().max(b.len())).find_map(|index| differ(&format!("{path}[{index}]"), a.get(index), b.get(index)))
        }
        (a, b) if a == b => None,
        (a, b) => Some(Difference {
            path: path.to_owned(),
            recorded: a.cloned(),
            asked: b.cloned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn volatile_parts_are_named_and_keys_sorted() {
        let body = json!({
            "stream": true,
            "model": "m",
            "stream_options": {"include_usage": true},
            "messages": [
                {"role": "user", "content": "agent 0a1b2c3d-0000-4000-8000-00000000abcd at 2026-12-04T18:04:32.123Z in /tmp/.tmpXy12/a.txt"},
                {"role": "assistant", "content": "", "tool_calls": [{"id": "call_zz9", "type": "function", "function": {"name": "t", "arguments": "{\"agent\":\"0A1B2C3D-0000-4000-8000-00000000ABCD\"}"}}]},
                {"role": "tool", "tool_call_id": "call_zz9", "content": "ok 11111111-2222-4333-8444-555555555555"}
            ]
        });
        let key = canonical(&body);
        assert_eq!(
            key.to_string(),
            r#"{"messages":[{"content":"agent <id#1> at <time> in <tmp#1>/a.txt","role":"user"},{"content":"","role":"assistant","tool_calls":[{"function":{"arguments":"{\"agent\":\"<id#1>\"}","name":"t"},"id":"call#1","type":"function"}]},{"content":"ok <id#2>","role":"tool","tool_call_id":"call#1"}],"model":"m","stream":true}"#
        );
        // Another run of the same task: other ids, paths and times, one key.
        let again = serde_json::to_string(&body)
            .unwrap()
            .replace(
                "0a1b2c3d-0000-4000-8000-00000000abcd",
                "99999999-0000-4000-8000-000000000000",
            )
            .replace(
                "0A1B2C3D-0000-4000-8000-00000000ABCD",
                "99999999-0000-4000-8000-000000000000",
            )
            .replace("call_zz9", "call_1_0")
            .replace(".tmpXy12", ".tmpQQ")
            .replace("18:04:32.123Z", "09:00:00+01:00");
        let again: Value = serde_json::from_str(&again).unwrap();
        assert_eq!(Key::of(&again), Key::of(&body));
    }

    #[test]
    fn near_misses_are_not_normalised() {
        for text in [
            "0a1b2c3d-0000-4000-8000-00000000abcdef",
            "2026-12-04",
            "/tmpfile",
            "/tmp/",
        ] {
            assert_eq!(Names::default().text(text), text);
        }
    }

    #[test]
    fn the_first_difference_is_named_by_its_path() {
        let recorded = json!({"model": "m", "messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], "temperature": 0.5});
        let asked =
            json!({"model": "m", "messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "c"}]});
        let found = first_difference(&recorded, &asked).unwrap();
        assert_eq!(found.path, "messages[1].content");
        assert_eq!(found.recorded, Some(json!("b")));
        assert_eq!(found.asked, Some(json!("c")));
        let asked =
            json!({"model": "m", "messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]});
        let found = first_difference(&recorded, &asked).unwrap();
        assert_eq!((found.path.as_str(), found.asked), ("temperature", None));
        assert_eq!(first_difference(&recorded, &recorded), None);
        assert!(closeness(&recorded, &asked) > closeness(&json!({"model": "x"}), &asked));
    }
}
