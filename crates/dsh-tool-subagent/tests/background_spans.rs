//! Where a one-shot background run's spans and lifecycle events go.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::exec;
use dsh_subagent::SubagentService;
use dsh_subagent_testing::scripted::ScriptedProvider;
use dsh_tasks::TaskRegistry;
use dsh_tool_subagent::{SubagentToolConfig, SubagentToolPlugin};
use dsh_tool_tasks::TaskToolsPlugin;
use dsh_tools::ToolRegistry;
use serde_json::json;

/// What a one-shot background run records: the spans (name, the names of
/// the spans they follow from, their `subagent.task_id`) and each lifecycle
/// event with the span it sits on.
mod spans {
    use std::sync::{Arc, Mutex};

    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Subscriber};
    use tracing_subscriber::layer::Context;
    use tracing_subscriber::registry::LookupSpan;

    #[derive(Clone, Debug, Default, PartialEq)]
    pub(super) struct Node {
        pub(super) name: String,
        pub(super) follows: Vec<String>,
        pub(super) task_id: Option<String>,
    }

    /// An event's message, and the name of the span it sits on (if any).
    pub(super) type Placed = (String, Option<String>);

    #[derive(Clone, Default)]
    pub(super) struct Capture {
        pub(super) spans: Arc<Mutex<Vec<Node>>>,
        pub(super) events: Arc<Mutex<Vec<Placed>>>,
    }

    struct Index(usize);

    struct Fields<'a>(&'a mut Node, &'a mut String);

    impl Visit for Fields<'_> {
        fn record_str(&mut self, field: &Field, value: &str) {
            match field.name() {
                "subagent.task_id" => self.0.task_id = Some(value.to_owned()),
                "message" => *self.1 = value.to_owned(),
                _ => {}
            }
        }
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            if field.name() == "message" {
                *self.1 = format!("{value:?}");
            }
        }
    }

    impl<S: Subscriber + for<'a> LookupSpan<'a>> tracing_subscriber::Layer<S> for Capture {
        fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
            let mut node = Node {
                name: attrs.metadata().name().to_owned(),
                ..Node::default()
            };
            attrs.record(&mut Fields(&mut node, &mut String::new()));
            let mut spans = self.spans.lock().unwrap();
            ctx.span(id).unwrap().extensions_mut().insert(Index(spans.len()));
            spans.push(node);
        }

        fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
            if let Some(index) = ctx.span(id).unwrap().extensions().get::<Index>() {
                values.record(&mut Fields(
                    &mut self.spans.lock().unwrap()[index.0],
                    &mut String::new(),
                ));
            }
        }

        fn on_follows_from(&self, id: &Id, follows: &Id, ctx: Context<'_, S>) {
            let origin = ctx.span(follows).unwrap().name().to_owned();
            if let Some(index) = ctx.span(id).unwrap().extensions().get::<Index>() {
                self.spans.lock().unwrap()[index.0].follows.push(origin);
            }
        }

        fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
            if event.metadata().target() != "dsh::gen_ai" {
                return;
            }
            let mut message = String::new();
            event.record(&mut Fields(&mut Node::default(), &mut message));
            let on = ctx.event_span(event).map(|span| span.name().to_owned());
            self.events.lock().unwrap().push((message, on));
        }
    }
}

/// A background child outlives the call that started it, so its task runs
/// in a `subagent.task` span of its own that follows from the call's
/// `execute_tool` span: the whole lifecycle, `settled` and `disposed`
/// included, sits on it, and the child's span is placed under it.
#[tokio::test]
async fn a_background_runs_lifecycle_sits_on_its_tasks_span() {
    use tracing_subscriber::layer::SubscriberExt;

    // The process-wide default, and this binary's only test: a scoped
    // subscriber can miss spans that tests on other threads register first.
    let capture = spans::Capture::default();
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(capture.clone())).unwrap();

    let service = SubagentService::new();
    let tools = ToolRegistry::new();
    let tasks = TaskRegistry::new();
    let provider = ScriptedProvider::builder("mock")
        .reply("background answer")
        .record_requests(true)
        .build();
    let _registration = service.register_provider(provider.clone()).unwrap();
    let _task_tools = TaskToolsPlugin::apply(&tasks, &tools).unwrap();
    let config = SubagentToolConfig::new("mock").enable_run_in_background(true);
    let _plugin = SubagentToolPlugin::apply_with_tasks(config, &service, &tools, &tasks).unwrap();
    let started = tools
        .call(
            "subagent",
            json!({"description": "d", "prompt": "do the thing", "run_in_background": true}),
            exec(),
        )
        .await;
    assert_eq!(started.text, "started background subagent task subagent-1");
    let output = tools
        .call("task_output", json!({"task_id": "subagent-1", "wait": true}), exec())
        .await;
    assert_eq!(output.text, "background answer\n[status: completed]");

    let spans = capture.spans.lock().unwrap().clone();
    let task: Vec<&spans::Node> = spans.iter().filter(|span| span.name == "subagent.task").collect();
    assert_eq!(
        task,
        [&spans::Node {
            name: "subagent.task".into(),
            follows: vec!["execute_tool".into()],
            task_id: Some("subagent-1".into()),
        }],
        "{spans:#?}"
    );
    let events = capture.events.lock().unwrap().clone();
    let on_task = Some("subagent.task".to_owned());
    assert_eq!(
        events,
        [
            ("subagent.started".to_owned(), on_task.clone()),
            ("subagent.published".to_owned(), on_task.clone()),
            ("subagent.settled".to_owned(), on_task.clone()),
            ("subagent.disposed".to_owned(), on_task),
        ]
    );
    // The provider is told to place the child's span under the task's.
    let request = provider.stats().last_request().unwrap();
    let origin = request
        .origin
        .span()
        .and_then(|span| span.metadata())
        .map(|meta| meta.name());
    assert!(
        matches!(request.origin, dsh_subagent_api::SpanOrigin::ChildOf(_)),
        "{:?}",
        request.origin
    );
    assert_eq!(origin, Some("subagent.task"));
}
