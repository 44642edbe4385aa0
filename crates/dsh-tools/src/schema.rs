//! The one schema-generation setting every dsh tool uses.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::Value;

/// The JSON schema of a tool's argument type `T`, as the model sees it.
///
/// One setting for the whole workspace, so output is identical however crate
/// features unify: JSON Schema draft 2020-12, subschemas inlined, no
/// `$schema`, and no root `title` or `description` (the tool description says
/// what the tool does; field doc comments describe the fields). Property order
/// is field order.
pub fn parameters_schema<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|settings| {
            settings.meta_schema = None;
            settings.inline_subschemas = true;
        })
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>();
    schema.remove("title");
    schema.remove("description");
    schema.to_value()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Arguments used to check the settings.
    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Args {
        /// Second in the alphabet, first in the struct.
        zeta: String,
        /// Optional flag.
        alpha: Option<bool>,
    }

    #[test]
    fn schema_keeps_field_order_and_has_no_root_metadata() {
        let schema = parameters_schema::<Args>();
        let text = serde_json::to_string(&schema).unwrap();
        assert_eq!(
            text,
            r#"{"type":"object","properties":{"zeta":{"type":"string","description":"Second in the alphabet, first in the struct."},"alpha":{"type":["boolean","null"],"description":"Optional flag."}},"required":["zeta"]}"#
        );
    }
}
