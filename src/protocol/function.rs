//! Client function definitions (REGISTER / REQUEST `function_calling`) and their JSON Schema form.
//!
//! The spec shows parameters as a list `[{name, type}]`; docs/protocol.md also allows a JSON Schema
//! object. Both are kept exactly as the client sent them (SESSION_INFO echoes them back) and are
//! turned into JSON Schema for the LLM by [`FunctionDef::json_schema`].

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// One function the client can execute (a *client tool*).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionDef {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
}

/// Parameter types accepted in the list form (JSON Schema primitive types).
const PARAM_TYPES: [&str; 6] = ["string", "number", "integer", "boolean", "array", "object"];

impl FunctionDef {
    /// Checks the definition; `path` is the field path used in error messages
    /// (e.g. `function_calling[2]`). Returns the offending field path and reason.
    pub fn validate(&self, path: &str) -> Result<(), (String, String)> {
        let name_ok = !self.name.is_empty()
            && self.name.len() <= 64
            && self
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !name_ok {
            return Err((
                format!("{path}.name"),
                "must be 1-64 characters of A-Z, a-z, 0-9, '_' or '-'".into(),
            ));
        }
        match &self.parameters {
            None | Some(Value::Null) => Ok(()),
            Some(Value::Array(items)) => {
                let mut seen = std::collections::HashSet::new();
                for (i, item) in items.iter().enumerate() {
                    let p = format!("{path}.parameters[{i}]");
                    let obj = item
                        .as_object()
                        .ok_or_else(|| (p.clone(), "expected an object".to_string()))?;
                    let name = obj.get("name").and_then(Value::as_str).ok_or_else(|| {
                        (format!("{p}.name"), "missing or not a string".to_string())
                    })?;
                    if name.is_empty() || !seen.insert(name.to_string()) {
                        return Err((format!("{p}.name"), "empty or duplicate name".into()));
                    }
                    let ty = obj.get("type").and_then(Value::as_str).ok_or_else(|| {
                        (format!("{p}.type"), "missing or not a string".to_string())
                    })?;
                    if !PARAM_TYPES.contains(&ty) {
                        return Err((
                            format!("{p}.type"),
                            format!("unknown type {ty:?}; expected one of {PARAM_TYPES:?}"),
                        ));
                    }
                    if let Some(d) = obj.get("description")
                        && !d.is_string()
                    {
                        return Err((format!("{p}.description"), "expected a string".into()));
                    }
                    if let Some(r) = obj.get("required")
                        && !r.is_boolean()
                    {
                        return Err((format!("{p}.required"), "expected a boolean".into()));
                    }
                }
                Ok(())
            }
            Some(Value::Object(schema)) => match schema.get("type") {
                None => Ok(()),
                Some(Value::String(t)) if t == "object" => Ok(()),
                Some(_) => Err((
                    format!("{path}.parameters.type"),
                    "a JSON Schema for parameters must have type \"object\"".into(),
                )),
            },
            Some(_) => Err((
                format!("{path}.parameters"),
                "expected a list of parameters or a JSON Schema object".into(),
            )),
        }
    }

    /// The parameters as a JSON Schema object, the form every LLM vendor takes.
    /// List entries are required only when they say `required: true`.
    pub fn json_schema(&self) -> Value {
        match &self.parameters {
            Some(Value::Object(schema)) => {
                let mut s = schema.clone();
                s.entry("type").or_insert_with(|| json!("object"));
                s.entry("properties").or_insert_with(|| json!({}));
                Value::Object(s)
            }
            Some(Value::Array(items)) => {
                let mut props = Map::new();
                let mut required = Vec::new();
                for item in items.iter().filter_map(Value::as_object) {
                    let Some(name) = item.get("name").and_then(Value::as_str) else {
                        continue;
                    };
                    let mut prop = Map::new();
                    for (k, v) in item {
                        match k.as_str() {
                            "name" | "required" => {}
                            _ => {
                                prop.insert(k.clone(), v.clone());
                            }
                        }
                    }
                    if item.get("required").and_then(Value::as_bool) == Some(true) {
                        required.push(json!(name));
                    }
                    props.insert(name.to_string(), Value::Object(prop));
                }
                let mut s = Map::new();
                s.insert("type".into(), json!("object"));
                s.insert("properties".into(), Value::Object(props));
                if !required.is_empty() {
                    s.insert("required".into(), Value::Array(required));
                }
                Value::Object(s)
            }
            _ => json!({"type": "object", "properties": {}}),
        }
    }
}

/// Validates a whole list (names unique too).
pub fn validate_list(list: &[FunctionDef], field: &str) -> Result<(), (String, String)> {
    let mut seen = std::collections::HashSet::new();
    for (i, f) in list.iter().enumerate() {
        let path = format!("{field}[{i}]");
        f.validate(&path)?;
        if !seen.insert(f.name.as_str()) {
            return Err((
                format!("{path}.name"),
                format!("duplicate function name {:?}", f.name),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(v: Value) -> FunctionDef {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn list_form_becomes_json_schema() {
        let f = def(json!({
            "name": "get_exhibit_info", "description": "查询文物详情",
            "parameters": [
                {"name": "exhibit_id", "type": "string", "required": true, "description": "id"},
                {"name": "lang", "type": "string", "enum": ["zh", "en"]}
            ]
        }));
        f.validate("f").unwrap();
        assert_eq!(
            f.json_schema(),
            json!({"type": "object", "properties": {
                "exhibit_id": {"type": "string", "description": "id"},
                "lang": {"type": "string", "enum": ["zh", "en"]}
            }, "required": ["exhibit_id"]})
        );
    }

    #[test]
    fn schema_form_kept() {
        let f = def(
            json!({"name": "a", "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}),
        );
        f.validate("f").unwrap();
        assert_eq!(f.json_schema()["properties"]["x"]["type"], "integer");
        let none = def(json!({"name": "b"}));
        assert_eq!(
            none.json_schema(),
            json!({"type": "object", "properties": {}})
        );
    }

    #[test]
    fn bad_definitions_name_the_field() {
        let cases = [
            (json!({"name": ""}), "f.name"),
            (json!({"name": "has space"}), "f.name"),
            (
                json!({"name": "a", "parameters": [{"name": "x", "type": "str"}]}),
                "f.parameters[0].type",
            ),
            (
                json!({"name": "a", "parameters": [{"type": "string"}]}),
                "f.parameters[0].name",
            ),
            (
                json!({"name": "a", "parameters": [{"name": "x", "type": "string"}, {"name": "x", "type": "string"}]}),
                "f.parameters[1].name",
            ),
            (json!({"name": "a", "parameters": 5}), "f.parameters"),
            (
                json!({"name": "a", "parameters": {"type": "array"}}),
                "f.parameters.type",
            ),
        ];
        for (v, field) in cases {
            let err = def(v.clone()).validate("f").unwrap_err();
            assert_eq!(err.0, field, "{v}");
        }
    }

    #[test]
    fn duplicate_names_in_list() {
        let l = vec![def(json!({"name": "a"})), def(json!({"name": "a"}))];
        assert_eq!(validate_list(&l, "fc").unwrap_err().0, "fc[1].name");
    }
}
