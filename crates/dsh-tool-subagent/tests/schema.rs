//! What the model sees: names, descriptions and parameter schemas (docs/contract.md, "Descriptions" and "Parameters").
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Fixture, mounted_parameters};
use dsh_tool_subagent::{Wording, wording};

/// The reference schema (docs/contract.md, "Parameters"), with the standalone prompt description.
const REFERENCE_STANDALONE: &str = r#"{
  "type": "object",
  "properties": {
    "description": {
      "type": "string",
      "description": "A short (3-5 word) description of the delegated task, for display."
    },
    "prompt": {
      "type": "string",
      "description": "The complete, self-contained task for the subagent. It does not share this conversation's context, so include everything it needs."
    }
  },
  "required": [
    "description",
    "prompt"
  ]
}"#;

#[test]
fn the_schema_is_byte_identical_to_the_reference_for_both_wordings() {
    let standalone = serde_json::to_string_pretty(&mounted_parameters(false)).unwrap();
    assert_eq!(standalone, REFERENCE_STANDALONE);
    let inherited = serde_json::to_string_pretty(&mounted_parameters(true)).unwrap();
    assert_eq!(
        inherited,
        REFERENCE_STANDALONE.replace(wording::STANDALONE_PROMPT, wording::INHERITED_PROMPT)
    );
}

#[test]
fn full_schemas_are_pinned() {
    insta::assert_json_snapshot!("schema_standalone", mounted_parameters(false));
    insta::assert_json_snapshot!("schema_inherited", mounted_parameters(true));
}

#[test]
fn descriptions_are_pinned() {
    insta::assert_snapshot!("description_standalone", Wording::Standalone.description());
    insta::assert_snapshot!("description_inherited", Wording::Inherited.description());
    insta::assert_snapshot!("prompt_standalone", Wording::Standalone.prompt_description());
    insta::assert_snapshot!("prompt_inherited", Wording::Inherited.prompt_description());
}

#[test]
fn fresh_conversation_wording_says_the_child_does_not_see_this_conversation() {
    let description = Wording::Standalone.description();
    assert!(description.contains("does not see this conversation"));
    assert!(
        Wording::Standalone
            .prompt_description()
            .contains("include everything it needs")
    );
}

#[test]
fn inherited_wording_uses_the_reference_capitals() {
    let description = Wording::Inherited.description();
    assert!(description.contains("INHERITS this conversation"));
    assert!(!description.contains("does not see this conversation"));
    assert!(Wording::Inherited.prompt_description().contains("completed turns"));
}

#[tokio::test]
async fn the_registered_tool_shows_exactly_description_and_prompt() {
    let fixture = Fixture::new(|b| b);
    let specs = fixture.tools.specs();
    assert_eq!(specs.len(), 1);
    let spec = &specs[0];
    assert_eq!(spec.name, "subagent");
    assert_eq!(spec.description, wording::STANDALONE_DESCRIPTION);
    let properties: Vec<_> = spec.parameters["properties"].as_object().unwrap().keys().collect();
    assert_eq!(properties, ["description", "prompt"]);
    assert!(!spec.description.contains("task_output"));
    assert!(spec.parameters.get("additionalProperties").is_none());
}

#[tokio::test]
async fn a_fork_like_provider_mounts_the_inherited_wording() {
    let fixture = Fixture::new(|b| b.inherits_parent_context(true));
    let spec = &fixture.tools.specs()[0];
    assert_eq!(spec.description, wording::INHERITED_DESCRIPTION);
    assert_eq!(spec.parameters, mounted_parameters(true));
}
