//! The report's JSON Schema (`report/schema/report-v2.schema.json`, draft
//! 2020-12) and a validator for the subset of it the file uses, so that CI
//! tools, and this project's tests, can check a report without a JSON
//! Schema engine.
//!
//! The subset: `type` (one or a list), `properties`, `required`,
//! `additionalProperties` (`false` or a schema), `items`, `enum`, `const`,
//! `minimum`, `minLength` and `$ref` to `#/$defs/…`; `$schema`, `$id`,
//! `$defs`, `title`, `description` and `$comment` are annotations. Any
//! other keyword is an error in the schema rather than silently ignored, so
//! the file cannot come to say more than is checked. (The `jsonschema`
//! crate would bring about 80 crates, two `syn`s and a regex engine for
//! these few keywords.)

use serde_json::Value;

/// The schema file's text.
pub const SCHEMA_JSON: &str = include_str!("../schema/report-v2.schema.json");

/// The schema file, parsed.
pub fn schema() -> Value {
    serde_json::from_str(SCHEMA_JSON).expect("report-v2.schema.json is JSON")
}

/// Validates `instance` against the report schema. Every violation, each
/// as `/json/pointer: what is wrong`.
pub fn validate(instance: &Value) -> Result<(), Vec<String>> {
    validate_with(&schema(), instance)
}

/// Validates `instance` against `schema` (of the subset above).
pub fn validate_with(schema: &Value, instance: &Value) -> Result<(), Vec<String>> {
    let mut errors = Vec::new();
    Validator { root: schema }.check(schema, instance, "", &mut errors);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

struct Validator<'a> {
    root: &'a Value,
}

/// Keywords that say nothing about the instance.
const ANNOTATIONS: [&str; 6] = [
    "$schema",
    "$id",
    "$defs",
    "title",
    "description",
    "$comment",
];

impl Validator<'_> {
    fn check(&self, schema: &Value, instance: &Value, at: &str, errors: &mut Vec<String>) {
        let Some(schema) = schema.as_object() else {
            errors.push(format!("{at}: the schema here is not an object"));
            return;
        };
        for (keyword, value) in schema {
            match keyword.as_str() {
                "$ref" => match self.resolve(value) {
                    Some(target) => self.check(target, instance, at, errors),
                    None => errors.push(format!("{at}: unresolvable $ref {value}")),
                },
                "type" => {
                    let allowed: Vec<&str> = match value {
                        Value::String(one) => vec![one.as_str()],
                        Value::Array(list) => list.iter().filter_map(Value::as_str).collect(),
                        _ => Vec::new(),
                    };
                    if !allowed.iter().any(|name| is_type(instance, name)) {
                        errors.push(format!(
                            "{at}: expected {}, found {}",
                            allowed.join(" or "),
                            type_name(instance)
                        ));
                    }
                }
                "enum" => {
                    let options = value.as_array().map(Vec::as_slice).unwrap_or_default();
                    if !options.contains(instance) {
                        errors.push(format!("{at}: {instance} is not one of {value}"));
                    }
                }
                "const" if value != instance => {
                    errors.push(format!("{at}: expected {value}, found {instance}"));
                }
                "minimum" => {
                    if let (Some(min), Some(n)) = (value.as_f64(), instance.as_f64())
                        && n < min
                    {
                        errors.push(format!("{at}: {n} is below the minimum {min}"));
                    }
                }
                "minLength" => {
                    if let (Some(min), Some(text)) = (value.as_u64(), instance.as_str())
                        && (text.chars().count() as u64) < min
                    {
                        errors.push(format!("{at}: shorter than {min} characters"));
                    }
                }
                "required" => {
                    if let Some(object) = instance.as_object() {
                        for name in value.as_array().into_iter().flatten() {
                            let name = name.as_str().unwrap_or_default();
                            if !object.contains_key(name) {
                                errors.push(format!("{at}: missing required property `{name}`"));
                            }
                        }
                    }
                }
                "properties" => {
                    if let (Some(properties), Some(object)) =
                        (value.as_object(), instance.as_object())
                    {
                        for (name, sub) in properties {
                            if let Some(item) = object.get(name) {
                                self.check(sub, item, &pointer(at, name), errors);
                            }
                        }
                    }
                }
                "additionalProperties" => {
                    let known = schema.get("properties").and_then(Value::as_object);
                    if let Some(object) = instance.as_object() {
                        for (name, item) in object {
                            if known.is_some_and(|known| known.contains_key(name)) {
                                continue;
                            }
                            match value {
                                Value::Bool(false) => errors
                                    .push(format!("{at}: property `{name}` is not in the schema")),
                                Value::Bool(true) => {}
                                sub => self.check(sub, item, &pointer(at, name), errors),
                            }
                        }
                    }
                }
                "items" => {
                    for (index, item) in instance.as_array().into_iter().flatten().enumerate() {
                        self.check(value, item, &pointer(at, &index.to_string()), errors);
                    }
                }
                "const" => {}
                other if ANNOTATIONS.contains(&other) => {}
                other => errors.push(format!(
                    "{at}: the schema uses `{other}`, which this validator does not implement"
                )),
            }
        }
    }

    /// `#/$defs/Name`.
    fn resolve(&self, reference: &Value) -> Option<&Value> {
        let name = reference.as_str()?.strip_prefix("#/$defs/")?;
        self.root.get("$defs")?.get(name)
    }
}

fn is_type(instance: &Value, name: &str) -> bool {
    match name {
        "object" => instance.is_object(),
        "array" => instance.is_array(),
        "string" => instance.is_string(),
        "boolean" => instance.is_boolean(),
        "null" => instance.is_null(),
        "number" => instance.is_number(),
        "integer" => instance.is_u64() || instance.is_i64(),
        _ => false,
    }
}

fn type_name(instance: &Value) -> &'static str {
    match instance {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `at/name`, with `~` and `/` escaped as JSON Pointer wants.
fn pointer(at: &str, name: &str) -> String {
    format!("{at}/{}", name.replace('~', "~0").replace('/', "~1"))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::json;

    use super::*;
    use crate::{
        model::{BaselineEntry, Check, Environment, Figure, Kind, Report, Row, Subject, Verdict},
        test_support::sample_report,
    };

    /// A report with every optional field filled, so that each property of
    /// the model appears in it.
    fn full_report() -> Report {
        let mut check = Check::new("eof.exit", Verdict::Fail, "needed SIGTERM");
        check.required = false;
        check.fix = Some("exit on EOF".into());
        check.description = Some("exits when stdin closes".into());
        check.rules = vec!["4.close.eof".into()];
        check.figures.insert("close".into(), Figure::ms(12));
        check.rows = vec![Row {
            id: "idle".into(),
            verdict: Verdict::Pass,
            summary: "exited".into(),
        }];
        check.notes = vec!["a note".into()];
        check.failure = Some("the whole text".into());
        check.baseline = Some(BaselineEntry {
            reason: "known".into(),
            stale: false,
        });
        check.details = json!({"any": ["thing"]});
        let subject = Subject {
            program: Some("server".into()),
            args: 2,
            name: Some("fixture".into()),
            version: Some("1.0".into()),
            era: Some("modern".into()),
            eras: vec!["modern".into(), "legacy".into()],
            protocol: Some(2),
            details: json!({"hello": true}),
        };
        let mut report = Report::new(
            Kind::Server,
            Environment::current("0.1.0"),
            subject,
            true,
            vec![check],
        );
        report.settings.insert("repeat".into(), json!(1));
        report.problems = vec!["a problem".into()];
        report
    }

    #[test]
    fn the_schema_is_of_the_subset_and_accepts_full_and_sample_reports() {
        for report in [full_report(), crate::json::model(&sample_report())] {
            let value = serde_json::to_value(&report).unwrap();
            validate(&value).unwrap_or_else(|errors| panic!("{errors:#?}\n{value:#}"));
        }
    }

    /// Every property the Rust model writes is in the schema, and every
    /// property the schema defines is one the model writes: the two agree.
    #[test]
    fn the_schema_and_the_model_name_the_same_properties() {
        fn model_paths(value: &Value, at: &str, out: &mut BTreeSet<String>) {
            match value {
                Value::Object(object) => {
                    for (name, item) in object {
                        // Free-form values: their inside is not the model's.
                        if ["details", "settings"].contains(&name.as_str()) {
                            out.insert(format!("{at}/{name}"));
                            continue;
                        }
                        // Maps keyed by a figure's name.
                        let key = if at.ends_with("/figures") { "*" } else { name };
                        let path = format!("{at}/{key}");
                        out.insert(path.clone());
                        model_paths(item, &path, out);
                    }
                }
                Value::Array(items) => {
                    for item in items {
                        model_paths(item, &format!("{at}[]"), out);
                    }
                }
                _ => {}
            }
        }
        fn schema_paths(root: &Value, schema: &Value, at: &str, out: &mut BTreeSet<String>) {
            let schema = match schema.get("$ref").and_then(Value::as_str) {
                Some(reference) => {
                    let name = reference.strip_prefix("#/$defs/").unwrap();
                    &root["$defs"][name]
                }
                None => schema,
            };
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                for (name, sub) in properties {
                    let path = format!("{at}/{name}");
                    out.insert(path.clone());
                    if !["details", "settings"].contains(&name.as_str()) {
                        schema_paths(root, sub, &path, out);
                    }
                }
            }
            if let Some(sub) = schema.get("additionalProperties").filter(|s| s.is_object()) {
                let path = format!("{at}/*");
                out.insert(path.clone());
                schema_paths(root, sub, &path, out);
            }
            if let Some(items) = schema.get("items") {
                schema_paths(root, items, &format!("{at}[]"), out);
            }
        }
        let mut model = BTreeSet::new();
        model_paths(
            &serde_json::to_value(full_report()).unwrap(),
            "",
            &mut model,
        );
        let root = schema();
        let mut schema = BTreeSet::new();
        schema_paths(&root, &root, "", &mut schema);
        assert_eq!(model, schema);
    }

    #[test]
    fn violations_are_named_by_their_place() {
        let mut value = serde_json::to_value(full_report()).unwrap();
        value["checks"][0]["verdict"] = json!("xfail");
        value["checks"][0]["hint"] = json!("old name");
        value["checks"][0]["figures"]["close"]["unit"] = json!("fortnights");
        value["totals"]
            .as_object_mut()
            .unwrap()
            .remove("checks")
            .unwrap();
        value["schema"] = json!(1);
        let errors = validate(&value).unwrap_err();
        let expected = [
            "/schema: expected 2, found 1",
            "/totals: missing required property `checks`",
            "/checks/0: property `hint` is not in the schema",
            "/checks/0/verdict: \"xfail\" is not one of",
            "/checks/0/figures/close/unit: \"fortnights\" is not one of",
        ];
        for fragment in expected {
            assert!(
                errors.iter().any(|error| error.starts_with(fragment)),
                "{fragment}: {errors:#?}"
            );
        }
        assert_eq!(errors.len(), expected.len(), "{errors:#?}");
    }

    #[test]
    fn keywords_outside_the_subset_are_errors_not_ignored() {
        let errors = validate_with(&json!({"pattern": "^a"}), &json!("b")).unwrap_err();
        assert_eq!(
            errors,
            [": the schema uses `pattern`, which this validator does not implement"]
        );
        let errors = validate_with(&json!({"type": ["integer", "null"]}), &json!(1.5)).unwrap_err();
        assert_eq!(errors, [": expected integer or null, found number"]);
        validate_with(&json!({"type": "integer", "minimum": 0}), &json!(3)).unwrap();
    }
}
