//! One argument type per tool: the struct a call's arguments are read into
//! is also, through its derived schema, the parameters the model sees.
//!
//! [`Arguments`] keeps that schema and checks every call against it before
//! deserializing, so a bad argument gets the tool's own exact words (which
//! argument, what was expected, what came) instead of a serde message, and
//! the checks cannot drift from the schema the model was shown.

use std::marker::PhantomData;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::{ToolError, json_kind, parameters_schema, wording};

/// How one tool words its argument errors. Each tool implements it in its
/// own wording module, so its texts stay in one place.
pub trait ArgumentWording {
    /// The arguments are not a JSON object; `kind` says what they are
    /// (`a string`, `null`, …).
    fn not_object(&self, kind: &str) -> String;
    /// A required argument is absent.
    fn missing(&self, field: &str) -> String;
    /// An argument has the wrong JSON type. `expected` reads like `a
    /// string`; `got` like `a number`, or is the number itself when a
    /// number is not a non-negative integer.
    fn wrong_type(&self, field: &str, expected: &str, got: &str) -> String;
    /// A text argument that must say something is empty or white space.
    fn empty(&self, field: &str) -> String;
    /// A count above its schema's `maximum`.
    fn too_large(&self, field: &str, maximum: u64, got: u64) -> String {
        wording::argument_too_large(field, maximum, got)
    }
}

/// A tool's argument type `T` with its schema, checked on every call.
///
/// `T` derives both `JsonSchema` (property order is field order, descriptions
/// come from the tool's wording module) and `Deserialize`. What may vary per
/// mounted instance is set by value when the tool is built: a property's
/// description ([`describe`](Self::describe)), or a property the model is not
/// shown but that is still read and checked when sent
/// ([`hide`](Self::hide)).
///
/// ```
/// use dsh_tools::{ArgumentWording, Arguments};
///
/// #[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
/// struct Greet {
///     /// Who to greet.
///     name: String,
///     /// Shout it.
///     loud: Option<bool>,
/// }
///
/// struct Words;
/// impl ArgumentWording for Words {
///     fn not_object(&self, kind: &str) -> String { format!("greet arguments must be an object, got {kind}") }
///     fn missing(&self, field: &str) -> String { format!("greet argument \"{field}\" is required") }
///     fn wrong_type(&self, field: &str, expected: &str, got: &str) -> String {
///         format!("greet argument \"{field}\" must be {expected}, got {got}")
///     }
///     fn empty(&self, field: &str) -> String { format!("greet argument \"{field}\" must not be empty") }
/// }
///
/// let arguments = Arguments::<Greet>::new().non_blank("name");
/// assert_eq!(arguments.parameters()["required"], serde_json::json!(["name"]));
/// let greet = arguments.parse(serde_json::json!({"name": "Ada"}), &Words).unwrap();
/// assert_eq!((greet.name.as_str(), greet.loud), ("Ada", None));
/// let error = arguments.parse(serde_json::json!({"name": "Ada", "loud": "yes"}), &Words).unwrap_err();
/// assert_eq!(error.to_string(), "greet argument \"loud\" must be a boolean, got a string");
/// ```
pub struct Arguments<T> {
    fields: Vec<Field>,
    parameters: Value,
    target: PhantomData<fn() -> T>,
}

// By hand: the argument type itself need not be `Debug`.
impl<T> std::fmt::Debug for Arguments<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Arguments")
            .field("fields", &self.fields)
            .field("parameters", &self.parameters)
            .finish()
    }
}

/// One property of the schema, as the checks need it.
#[derive(Debug)]
struct Field {
    name: String,
    kind: Kind,
    required: bool,
    non_blank: bool,
}

/// What a property's schema allows.
#[derive(Debug)]
enum Kind {
    /// `{"type": "string"}`.
    Text,
    /// `{"type": "boolean"}`.
    Flag,
    /// `{"type": "integer", "minimum": 0}`, with its `maximum` if any.
    Count { maximum: Option<u64> },
    /// Anything else: left to `Deserialize`.
    Other,
}

impl Kind {
    fn of(property: &Value) -> Self {
        match property.get("type").and_then(Value::as_str) {
            Some("string") => Self::Text,
            Some("boolean") => Self::Flag,
            Some("integer") if property.get("minimum").and_then(Value::as_u64) == Some(0) => Self::Count {
                maximum: property.get("maximum").and_then(Value::as_u64),
            },
            _ => Self::Other,
        }
    }
}

impl<T: JsonSchema + DeserializeOwned> Arguments<T> {
    /// `T`'s schema, as [`parameters_schema`] derives it, and its checks.
    pub fn new() -> Self {
        let parameters = parameters_schema::<T>();
        let required: Vec<&str> = parameters
            .get("required")
            .and_then(Value::as_array)
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let fields = parameters
            .get("properties")
            .and_then(Value::as_object)
            .map(|properties| {
                properties
                    .iter()
                    .map(|(name, property)| Field {
                        name: name.clone(),
                        kind: Kind::of(property),
                        required: required.contains(&name.as_str()),
                        non_blank: false,
                    })
                    .collect()
            })
            .unwrap_or_default();
        Self {
            fields,
            parameters,
            target: PhantomData,
        }
    }
}

impl<T: JsonSchema + DeserializeOwned> Default for Arguments<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: DeserializeOwned> Arguments<T> {
    /// Sets the description the model reads for `field` (a wording or a
    /// route chosen at mount).
    #[must_use]
    pub fn describe(mut self, field: &str, text: &str) -> Self {
        let property = self.properties_mut().and_then(|properties| properties.get_mut(field));
        debug_assert!(property.is_some(), "`{field}` is not an argument");
        if let Some(Value::Object(property)) = property {
            property.insert("description".to_owned(), Value::from(text));
        }
        self
    }

    /// Leaves `field` out of the parameters the model sees. A call that
    /// sends it anyway is still checked and read, so the tool can refuse
    /// what that instance does not offer in its own words.
    #[must_use]
    pub fn hide(mut self, field: &str) -> Self {
        let removed = self
            .properties_mut()
            .and_then(|properties| properties.shift_remove(field));
        debug_assert!(removed.is_some(), "`{field}` is not an argument");
        if let Some(Value::Array(required)) = self.parameters.get_mut("required") {
            required.retain(|name| name.as_str() != Some(field));
        }
        self
    }

    /// Refuses an empty or white-space-only value for the text argument `field`.
    #[must_use]
    pub fn non_blank(mut self, field: &str) -> Self {
        let field = self.fields.iter_mut().find(|candidate| candidate.name == field);
        debug_assert!(
            field.as_ref().is_some_and(|field| matches!(field.kind, Kind::Text)),
            "not a text argument"
        );
        if let Some(field) = field {
            field.non_blank = true;
        }
        self
    }

    /// The parameter schema the model sees.
    pub fn parameters(&self) -> &Value {
        &self.parameters
    }

    /// Checks `args` and reads them into `T`, moving their strings.
    ///
    /// Arguments are checked in schema order, each for presence, type and
    /// (when asked) content, and the first problem is reported in
    /// the tool's words (`words`). Keys the schema does not declare are ignored.
    /// `null` is not an absent argument: it is a value of the wrong type.
    pub fn parse(&self, args: Value, words: &dyn ArgumentWording) -> Result<T, ToolError> {
        let Value::Object(object) = &args else {
            return Err(ToolError::invalid_arguments(words.not_object(json_kind(&args))));
        };
        for field in &self.fields {
            field.check(object, words)?;
        }
        serde_json::from_value(args)
            .map_err(|error| ToolError::invalid_arguments(wording::arguments_unreadable(&error.to_string())))
    }

    fn properties_mut(&mut self) -> Option<&mut Map<String, Value>> {
        self.parameters.get_mut("properties").and_then(Value::as_object_mut)
    }
}

impl Field {
    fn check(&self, object: &Map<String, Value>, words: &dyn ArgumentWording) -> Result<(), ToolError> {
        // A scan instead of a hashed lookup: argument objects are tiny.
        let Some(value) = object
            .iter()
            .find_map(|(key, value)| (*key == self.name).then_some(value))
        else {
            return if self.required {
                Err(ToolError::invalid_arguments(words.missing(&self.name)))
            } else {
                Ok(())
            };
        };
        let wrong =
            |expected: &str, got: &str| ToolError::invalid_arguments(words.wrong_type(&self.name, expected, got));
        match (&self.kind, value) {
            (Kind::Text, Value::String(text)) if self.non_blank && text.trim().is_empty() => {
                Err(ToolError::invalid_arguments(words.empty(&self.name)))
            }
            (Kind::Text, Value::String(_)) | (Kind::Flag, Value::Bool(_)) | (Kind::Other, _) => Ok(()),
            (Kind::Text, other) => Err(wrong(wording::EXPECTED_STRING, json_kind(other))),
            (Kind::Flag, other) => Err(wrong(wording::EXPECTED_BOOLEAN, json_kind(other))),
            (Kind::Count { maximum }, Value::Number(number)) => match number.as_u64() {
                Some(count) => match maximum {
                    Some(maximum) if count > *maximum => Err(ToolError::invalid_arguments(
                        words.too_large(&self.name, *maximum, count),
                    )),
                    _ => Ok(()),
                },
                None => Err(wrong(wording::EXPECTED_COUNT, &number.to_string())),
            },
            (Kind::Count { .. }, other) => Err(wrong(wording::EXPECTED_COUNT, json_kind(other))),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    #[derive(Debug, Deserialize, JsonSchema)]
    struct Args {
        /// A name.
        name: String,
        /// A flag.
        #[serde(default)]
        flag: bool,
        /// A count.
        #[schemars(range(min = 0, max = 10))]
        count: Option<u64>,
    }

    struct Words;

    impl ArgumentWording for Words {
        fn not_object(&self, kind: &str) -> String {
            format!("not an object: {kind}")
        }
        fn missing(&self, field: &str) -> String {
            format!("missing {field}")
        }
        fn wrong_type(&self, field: &str, expected: &str, got: &str) -> String {
            format!("{field}: want {expected}, got {got}")
        }
        fn empty(&self, field: &str) -> String {
            format!("{field} is empty")
        }
    }

    fn error(arguments: &Arguments<Args>, args: Value) -> String {
        arguments.parse(args, &Words).unwrap_err().to_string()
    }

    #[test]
    fn every_check_names_the_argument_in_the_tools_words() {
        let arguments = Arguments::<Args>::new().non_blank("name");
        assert_eq!(error(&arguments, json!([1])), "not an object: an array");
        assert_eq!(error(&arguments, json!({"flag": true})), "missing name");
        assert_eq!(
            error(&arguments, json!({"name": 1})),
            "name: want a string, got a number"
        );
        assert_eq!(error(&arguments, json!({"name": " \n"})), "name is empty");
        assert_eq!(
            error(&arguments, json!({"name": "n", "flag": null})),
            "flag: want a boolean, got null"
        );
        assert_eq!(
            error(&arguments, json!({"name": "n", "count": -1})),
            "count: want a non-negative integer, got -1"
        );
        assert_eq!(
            error(&arguments, json!({"name": "n", "count": 11})),
            "argument \"count\" must be at most 10, got 11"
        );
        // The first problem in schema order wins, whatever the key order.
        assert_eq!(
            error(&arguments, json!({"flag": 1, "name": 2})),
            "name: want a string, got a number"
        );
    }

    #[test]
    fn valid_arguments_are_read_and_undeclared_keys_ignored() {
        let arguments = Arguments::<Args>::new();
        let args = arguments
            .parse(json!({"name": "", "count": 3, "other": [null]}), &Words)
            .unwrap();
        assert_eq!((args.name.as_str(), args.flag, args.count), ("", false, Some(3)));
    }

    #[test]
    fn hide_and_describe_change_what_the_model_sees_not_what_is_read() {
        let arguments = Arguments::<Args>::new().describe("name", "Who.").hide("flag");
        assert_eq!(
            serde_json::to_string(arguments.parameters()).unwrap(),
            r#"{"type":"object","properties":{"name":{"type":"string","description":"Who."},"count":{"type":"integer","format":"uint64","minimum":0,"description":"A count.","maximum":10}},"required":["name"]}"#
        );
        assert_eq!(
            error(&arguments, json!({"name": "n", "flag": "yes"})),
            "flag: want a boolean, got a string"
        );
        assert!(
            arguments
                .parse(json!({"name": "n", "flag": true}), &Words)
                .unwrap()
                .flag
        );
    }
}
