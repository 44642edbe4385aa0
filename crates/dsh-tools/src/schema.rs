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
/// is field order. An `Option` field is optional (absent from `required`) and
/// keeps its plain type: `Option<bool>` is `{"type": "boolean"}`.
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
    let mut value = schema.to_value();
    drop_null_from_optional_properties(&mut value);
    value
}

/// An optional argument is one the model may omit, not one it may send as
/// `null`: `{"type": ["boolean", "null"]}` on a property outside `required`
/// becomes `{"type": "boolean"}`, in nested objects too.
fn drop_null_from_optional_properties(schema: &mut Value) {
    let required: Vec<String> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default();
    let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) else {
        return;
    };
    for (name, property) in properties.iter_mut() {
        if !required.contains(name)
            && let Some(types) = property.get("type").and_then(Value::as_array)
            && types.len() == 2
            && types.contains(&Value::from("null"))
            && let Some(kind) = types.iter().find(|kind| kind.as_str() != Some("null")).cloned()
            && let Some(object) = property.as_object_mut()
        {
            object.insert("type".to_owned(), kind);
        }
        drop_null_from_optional_properties(property);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Arguments used to check the settings.
    #[derive(Debug, serde::Deserialize, JsonSchema)]
    struct Args {
        /// Second in the alphabet, first in the struct.
        zeta: String,
        /// Optional flag.
        alpha: Option<bool>,
    }

    #[test]
    fn schema_keeps_field_order_and_has_no_root_metadata() {
        // The type the schema comes from is the one arguments are read into.
        let args: Args = serde_json::from_value(serde_json::json!({"zeta": "z"})).unwrap();
        assert_eq!((args.zeta.as_str(), args.alpha), ("z", None));
        let schema = parameters_schema::<Args>();
        let text = serde_json::to_string(&schema).unwrap();
        assert_eq!(
            text,
            r#"{"type":"object","properties":{"zeta":{"type":"string","description":"Second in the alphabet, first in the struct."},"alpha":{"type":"boolean","description":"Optional flag."}},"required":["zeta"]}"#
        );
    }
}
