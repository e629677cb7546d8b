//! Numbers as clients built on protobuf send them: every number a double.
//!
//! A client that builds its JSON from protobuf's `Value` (the A2A SDKs do, for a message's data
//! part) sends `20000` as `20000.0`. Where Parley reads a whole number (`timeoutMs`,
//! `maxRetries`) or checks an input against a schema that says `integer`, such a double means
//! the integer it spells, so it is read as one. A number with a fraction stays what it is, and
//! the field that needs a whole number still refuses it.

use serde_json::{Number, Value};

/// The largest magnitude a double holds every integer up to (2^53).
const EXACT: f64 = 9_007_199_254_740_992.0;

/// Rewrites, in place, every number in `value` that is a double with no fraction (and exact as
/// an integer) into that integer.
pub fn integral_doubles_to_integers(value: &mut Value) {
    match value {
        Value::Number(n) if n.is_f64() => {
            if let Some(f) = n.as_f64()
                && f.fract() == 0.0
                && f.abs() <= EXACT
            {
                *n = Number::from(f as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(integral_doubles_to_integers),
        Value::Object(map) => map.values_mut().for_each(integral_doubles_to_integers),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn whole_doubles_become_integers_and_fractions_stay() {
        let mut v =
            json!({"timeoutMs": 20000.0, "maxRetries": 3.0, "input": {"n": [1.0, 2.5, -4.0], "s": "5.0"}, "x": 1e300});
        integral_doubles_to_integers(&mut v);
        assert_eq!(v["timeoutMs"].as_i64(), Some(20000));
        assert_eq!(v["maxRetries"].as_i64(), Some(3));
        assert_eq!(v["input"]["n"], json!([1, 2.5, -4]));
        assert!(v["input"]["n"][0].is_i64());
        assert_eq!(v["input"]["s"], "5.0");
        assert!(v["x"].is_f64(), "a double past 2^53 is not an exact integer");
    }
}
