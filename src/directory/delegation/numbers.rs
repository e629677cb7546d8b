//! Numbers as clients send them. A client built on protobuf's `Value` (A2A SDKs among them) sends
//! every number as a double, so `"timeoutMs": 20000.0` means 20 000 and an input's `"count": 5.0`
//! means 5. An integral double is read as the integer it is: in a delegation's own fields
//! ([`whole_field`], for the bodies that carry them) and anywhere inside its input
//! ([`integral_doubles_as_integers`], which [`super::Request::parse`] applies before the input
//! is checked against any schema, stored, or compared with a retry's). A double with a fraction
//! stays what it is: a field that must be whole refuses it, naming the field.

use serde::{Deserialize, Deserializer, de::Error as _};
use serde_json::{Number, Value};

/// The integer `n` stands for: an integer, or a double with no fraction within the 64-bit range.
pub fn whole(n: &Number) -> Option<i64> {
    if let Some(i) = n.as_i64() {
        return Some(i);
    }
    if n.is_u64() {
        return None; // past i64
    }
    let f = n.as_f64()?;
    // The range is [-2^63, 2^63): both bounds are exact doubles.
    (f.fract() == 0.0 && (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&f)).then_some(f as i64)
}

/// `value` with every integral double (`5.0`, `-3.0`, `1e3`) made the integer it stands for, at
/// any depth; other numbers, and doubles past the 64-bit range, are left as they are.
pub fn integral_doubles_as_integers(value: Value) -> Value {
    match value {
        Value::Number(n) if n.is_f64() => match whole(&n) {
            Some(i) => Value::Number(i.into()),
            None => Value::Number(n),
        },
        Value::Array(items) => Value::Array(items.into_iter().map(integral_doubles_as_integers).collect()),
        Value::Object(fields) => {
            Value::Object(fields.into_iter().map(|(k, v)| (k, integral_doubles_as_integers(v))).collect())
        }
        other => other,
    }
}

/// Reads an optional whole-number field named `field` (as the API names it), taking an integral
/// double as its integer: `20000.0` is 20 000; `20000.5` is refused as "`field` must be a whole
/// number, not 20000.5". For `#[serde(deserialize_with)]`, through a function per field
/// ([`whole_timeout_ms`], [`whole_max_retries`]).
pub fn whole_field<'de, D: Deserializer<'de>>(d: D, field: &str) -> Result<Option<i64>, D::Error> {
    let Some(n) = Option::<Number>::deserialize(d)? else { return Ok(None) };
    match whole(&n) {
        Some(i) => Ok(Some(i)),
        None if n.is_f64() && n.as_f64().is_some_and(|f| f.fract() != 0.0) => {
            Err(D::Error::custom(format!("{field} must be a whole number, not {n}")))
        }
        None => Err(D::Error::custom(format!("{field} {n} is out of range"))),
    }
}

/// `timeoutMs` as a whole number ([`whole_field`]): for a delegate body's
/// `#[serde(default, deserialize_with = "...")]`.
pub fn whole_timeout_ms<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    whole_field(d, "timeoutMs")
}

/// `maxRetries` as a whole number ([`whole_field`]): for a delegate body's
/// `#[serde(default, deserialize_with = "...")]`.
pub fn whole_max_retries<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    whole_field(d, "maxRetries")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn integral_doubles_are_integers_and_others_stay() {
        let whole_of = |v: Value| match v {
            Value::Number(n) => whole(&n),
            _ => unreachable!(),
        };
        assert_eq!(whole_of(json!(20000)), Some(20000));
        assert_eq!(whole_of(json!(20000.0)), Some(20000));
        assert_eq!(whole_of(json!(-3.0)), Some(-3));
        assert_eq!(whole_of(json!(-0.0)), Some(0));
        assert_eq!(whole_of(json!(20000.5)), None);
        assert_eq!(whole_of(json!(1e300)), None, "past i64");
        assert_eq!(whole_of(json!(u64::MAX)), None, "past i64");
        assert_eq!(whole_of(json!(-9_223_372_036_854_775_808.0)), Some(i64::MIN));
        assert_eq!(whole_of(json!(9_223_372_036_854_775_808.0)), None, "2^63 is past i64");
    }

    #[test]
    fn an_inputs_integral_doubles_become_integers_at_any_depth() {
        let input: Value = serde_json::from_str(
            r#"{"count": 5.0, "ratio": 0.5, "items": [1.0, 2.5, {"n": 1e3}], "big": 1e300, "s": "5.0"}"#,
        )
        .unwrap();
        let read = integral_doubles_as_integers(input);
        assert_eq!(read, json!({"count": 5, "ratio": 0.5, "items": [1, 2.5, {"n": 1000}], "big": 1e300, "s": "5.0"}));
        assert!(read["count"].is_i64() && read["items"][2]["n"].is_i64());
        // The order of an object's fields is kept.
        let keys: Vec<&String> = read.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["count", "ratio", "items", "big", "s"]);
    }

    /// What the schema checker makes of an integral double by itself: JSON Schema's `integer`
    /// is a number with no fraction, so `5.0` passes `{"type": "integer"}` even unread. The
    /// reading still matters: the input is stored, compared with a retry's and handed to the
    /// target as the integer it is, whatever the target parses it with.
    #[test]
    fn the_schema_checker_takes_an_integral_double_as_an_integer_and_a_fraction_as_none() {
        let schema = crate::directory::schema::Prepared::compile(&json!({"type": "integer"})).unwrap();
        let double: Value = serde_json::from_str("5.0").unwrap();
        assert!(double.is_f64());
        assert_eq!(schema.check(&double, "input"), Ok(()));
        assert_eq!(schema.check(&integral_doubles_as_integers(double), "input"), Ok(()));
        let fraction: Value = serde_json::from_str("5.5").unwrap();
        assert!(schema.check(&fraction, "input").is_err());
        assert!(schema.check(&integral_doubles_as_integers(fraction), "input").is_err());
    }

    #[derive(Debug, serde::Deserialize)]
    struct Body {
        #[serde(default, deserialize_with = "whole_timeout_ms")]
        timeout_ms: Option<i64>,
    }

    #[test]
    fn a_whole_field_takes_integral_doubles_and_names_itself_when_refusing() {
        let read = |text: &str| serde_json::from_str::<Body>(text).map(|b| b.timeout_ms).map_err(|e| e.to_string());
        assert_eq!(read(r#"{"timeout_ms": 20000}"#), Ok(Some(20000)));
        assert_eq!(read(r#"{"timeout_ms": 20000.0}"#), Ok(Some(20000)));
        assert_eq!(read(r#"{"timeout_ms": null}"#), Ok(None));
        assert_eq!(read(r#"{}"#), Ok(None));
        let fraction = read(r#"{"timeout_ms": 20000.5}"#).unwrap_err();
        assert!(fraction.starts_with("timeoutMs must be a whole number, not 20000.5"), "{fraction}");
        let huge = read(r#"{"timeout_ms": 1e300}"#).unwrap_err();
        assert!(huge.starts_with("timeoutMs 1e+300 is out of range"), "{huge}");
        let text = read(r#"{"timeout_ms": "20000"}"#).unwrap_err();
        assert!(text.contains("expected a JSON number"), "{text}");
    }
}
