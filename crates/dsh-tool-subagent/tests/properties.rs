//! Properties: whatever the model sends and whatever the child reports, the
//! tool answers with a result or a clear `Error: …`, and never panics.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Fixture;
use dsh_subagent_api::StopReason;
use proptest::prelude::*;
use serde_json::{Map, Value};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().build().unwrap()
}

/// Text with the awkward parts of Unicode well represented.
fn odd_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "\\PC{0,40}",
        Just(String::new()),
        Just(" \t\n\u{a0}\u{2028}".to_owned()),
        Just("\u{0}\u{feff}\u{202e}e\u{301}\u{1f600}\u{10ffff}".to_owned()),
        (1..200_000_usize).prop_map(|n| "é".repeat(n / 2)),
    ]
}

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from), // non-finite becomes null
        odd_text().prop_map(Value::String),
    ]
}

fn any_json() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(8, 128, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::vec((odd_text(), inner), 0..8)
                .prop_map(|entries| Value::Object(entries.into_iter().collect())),
        ]
    })
}

/// Argument objects near the valid shape: the declared keys with any values.
fn near_args() -> impl Strategy<Value = Value> {
    let field = prop_oneof![json_leaf(), any_json()];
    (
        prop::option::of(field.clone()),
        prop::option::of(field.clone()),
        prop::option::of(prop_oneof![any::<bool>().prop_map(Value::Bool), field]),
        prop::collection::vec((odd_text(), any_json()), 0..3),
    )
        .prop_map(|(description, prompt, background, extra)| {
            let mut object: Map<String, Value> = extra.into_iter().collect();
            for (key, value) in [
                ("description", description),
                ("prompt", prompt),
                ("run_in_background", background),
            ] {
                match value {
                    Some(value) => object.insert(key.to_owned(), value),
                    None => object.remove(key),
                };
            }
            Value::Object(object)
        })
}

/// A value nested `depth` levels deep, in an array or an object.
fn deep(depth: usize, in_object: bool) -> Value {
    let mut value = Value::from("bottom");
    for _ in 0..depth {
        value = if in_object {
            Value::Object([("prompt".to_owned(), value)].into_iter().collect())
        } else {
            Value::Array(vec![value])
        };
    }
    value
}

/// Whether the tool must accept these arguments (docs/contract.md, "Parameters").
fn valid(args: &Value) -> bool {
    let Some(object) = args.as_object() else { return false };
    let text = |key: &str| matches!(object.get(key), Some(Value::String(text)) if !text.trim().is_empty());
    let background_ok = matches!(object.get("run_in_background"), None | Some(Value::Bool(false)));
    text("description") && text("prompt") && background_ok
}

fn check_call(fixture: &Fixture, args: Value) -> Result<(), TestCaseError> {
    let expect_ok = valid(&args);
    let result = runtime().block_on(fixture.call(args));
    let code = result.error.as_ref().and_then(|error| error.code().map(str::to_owned));
    prop_assert_ne!(code.as_deref(), Some("TOOL_PANICKED"), "{}", result.text);
    if expect_ok {
        prop_assert!(!result.is_error, "{}", result.text);
        prop_assert_eq!(&result.text, dsh_subagent_testing::scripted::DEFAULT_REPLY);
    } else {
        prop_assert!(result.is_error);
        prop_assert!(result.text.starts_with("Error: "), "{}", result.text);
        // Bad arguments are named as such; a background request on an
        // instance without background support says so.
        prop_assert!(
            matches!(code.as_deref(), Some("INVALID_ARGUMENTS" | "BACKGROUND_DISABLED")),
            "{}",
            result.text
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn any_json_gets_a_result_or_a_clear_error(args in any_json()) {
        let fixture = Fixture::new(|b| b);
        check_call(&fixture, args)?;
    }

    #[test]
    fn near_valid_arguments_get_a_result_or_a_clear_error(args in near_args()) {
        let fixture = Fixture::new(|b| b);
        check_call(&fixture, args)?;
    }

    /// Depth up to 1,000: eight times what `serde_json` lets a parsed document
    /// reach (128). Far deeper values overflow a 2 MB test-thread stack in
    /// `serde_json::Value`'s own recursive `Clone` (found at ~3,000 levels in
    /// a debug build; proptest clones its inputs); the tool never clones its
    /// arguments.
    #[test]
    fn deep_nesting_is_an_error_not_a_crash(depth in 1..1_000_usize, in_object in any::<bool>()) {
        let fixture = Fixture::new(|b| b);
        let args = if in_object { deep(depth, true) } else {
            serde_json::json!({"description": "d", "prompt": deep(depth, false)})
        };
        check_call(&fixture, args)?;
    }

    #[test]
    fn any_child_outcome_renders_by_the_contract(
        reason in prop_oneof![
            Just("completed".to_owned()), Just("aborted".to_owned()), Just("error".to_owned()),
            Just("max-tokens".to_owned()), Just("refusal".to_owned()), odd_text(),
        ],
        reply in odd_text(),
        diagnostic in prop::option::of(odd_text()),
    ) {
        let stop_reason = StopReason::parse(&reason);
        let fixture = Fixture::new(|b| {
            let b = b.stop_reason(stop_reason.clone()).reply(reply.clone());
            match &diagnostic { Some(d) => b.diagnostic(d.clone()), None => b }
        });
        let result = runtime().block_on(fixture.delegate());
        let stats = fixture.provider.stats();
        prop_assert_eq!((stats.disposes(), stats.live()), (1, 0));
        // Within the default budget, and over it its head and tail (this
        // instance has no task registry, so the rest is not kept).
        let budget = dsh_tools::ResultLimit::DEFAULT.bytes();
        let within = |text: &str, allowance: usize| {
            dsh_tools::budget::head_and_tail(text, allowance, None).map_or_else(|| text.to_owned(), |cut| cut.text)
        };
        if stop_reason.is_completed() {
            prop_assert!(!result.is_error);
            prop_assert_eq!(&result.text, &within(&reply, budget));
        } else {
            prop_assert!(result.is_error);
            let bounded = diagnostic.map(dsh_subagent_api::bound_diagnostic);
            let message = dsh_tool_subagent::wording::stopped_run(&stop_reason, bounded.as_deref(), &reply);
            let headline = format!("Error: {}", dsh_tool_subagent::wording::stop_headline(&stop_reason));
            if headline.len() <= budget / 4 {
                // A headline longer than the head a cut keeps (a provider's
                // own, very long stop reason) is cut too.
                prop_assert!(result.text.starts_with(&headline), "{}", result.text);
            }
            let expected = format!("Error: {}", within(&message, budget - "Error: ".len()));
            prop_assert_eq!(&result.text, &expected);
        }
        prop_assert!(result.text.len() <= budget, "{}", result.text.len());
    }
}
