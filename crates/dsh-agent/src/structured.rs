//! Structured output: a child-local tool that captures a schema-checked answer.

use std::sync::{Arc, Mutex, PoisonError};

use dsh_tools::{Tool, ToolError, ToolExecution, ToolOutput};
use futures::future::BoxFuture;
use serde_json::Value;

use crate::wording;

/// Where the captured value lands; read once the run has ended.
pub(crate) type Captured = Arc<Mutex<Option<Value>>>;

/// The tool a child calls, once, with its final answer as arguments that
/// must match the requested schema.
pub(crate) struct StructuredOutput {
    schema: Value,
    validator: jsonschema::Validator,
    captured: Captured,
}

impl StructuredOutput {
    /// A tool for `schema`; fails when the schema does not compile.
    pub(crate) fn new(schema: Value) -> Result<(Self, Captured), String> {
        let validator =
            jsonschema::validator_for(&schema).map_err(|error| wording::invalid_output_schema(&error.to_string()))?;
        let captured = Arc::new(Mutex::new(None));
        Ok((
            Self {
                schema,
                validator,
                captured: captured.clone(),
            },
            captured,
        ))
    }
}

impl Tool for StructuredOutput {
    fn name(&self) -> &str {
        wording::STRUCTURED_OUTPUT_TOOL
    }

    fn description(&self) -> &str {
        wording::STRUCTURED_OUTPUT_DESCRIPTION
    }

    fn parameters(&self) -> &Value {
        &self.schema
    }

    fn execute(&self, args: Value, _exec: ToolExecution) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            if let Some(error) = self.validator.iter_errors(&args).next() {
                return Err(ToolError::new(wording::structured_output_mismatch(
                    &wording::schema_violation(&error, &error.instance_path()),
                )));
            }
            let mut captured = self.captured.lock().unwrap_or_else(PoisonError::into_inner);
            if captured.is_some() {
                return Err(ToolError::new(wording::STRUCTURED_OUTPUT_TWICE));
            }
            *captured = Some(args);
            Ok(ToolOutput::text(wording::STRUCTURED_OUTPUT_ACK))
        })
    }
}
