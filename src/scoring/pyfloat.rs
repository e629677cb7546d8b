//! Python-compatible number handling for the Bindu wire format.
//!
//! Bindu's reference answers are produced by Python: scores are `round(x, 4)` and floats are
//! printed by `json.dumps`, i.e. by `float.__repr__`. To agree with it to the last digit we
//! reproduce both here: [`round4`] is correctly-rounded decimal rounding of the exact binary value
//! with ties to even (Rust's `{:.N}` formatting does exactly that), and [`python_repr`] prints the
//! shortest round-tripping digits in Python's layout (`1.0`, `0.3333`, `5e-06`, `1e+16`).
//! [`to_python_json`] serializes any value with that float layout.

use serde::Serialize;
use std::io;

/// Rounds to `digits` decimal places like Python's `round(x, digits)`.
///
/// The decimal expansion of the exact binary value is rounded half-to-even and parsed back, which
/// is what CPython does; non-finite values are returned unchanged.
pub fn round_to(x: f64, digits: usize) -> f64 {
    if !x.is_finite() {
        return x;
    }
    if let Some(rounded) = round_scaled(x, digits) {
        return rounded;
    }
    format!("{x:.digits$}").parse::<f64>().unwrap_or(x)
}

/// [`round_to`] without formatting, for every value not within a hair of a tie.
///
/// `y = x * 10^digits` differs from the exact product by at most half an ulp of `y` (below 2^-23
/// while `|y| < 10^9`), so unless `y`'s fraction lies within 10^-6 of one half, the integer
/// nearest to `y` is the integer nearest to the exact product: the `k` whose decimal `k / 10^digits`
/// formatting would print. Dividing `k` by `10^digits` (both exact) is one correctly rounded
/// operation, so it gives the double nearest to that decimal, which is what parsing the printed
/// decimal gives. Near a tie, or for larger values, `None`: the exact path decides.
fn round_scaled(x: f64, digits: usize) -> Option<f64> {
    const POWERS: [f64; 9] = [1.0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8];
    let scale = *POWERS.get(digits)?;
    let y = x * scale;
    if y.abs() >= 1e9 || ((y - y.trunc()).abs() - 0.5).abs() < 1e-6 {
        return None;
    }
    Some(y.round() / scale)
}

/// `round(x, 4)`, the precision of every score Bindu reports.
pub fn round4(x: f64) -> f64 {
    round_to(x, 4)
}

/// Formats a float as Python's `repr(float)` does (and so `json.dumps`).
///
/// Shortest round-trip digits; positional notation when the decimal exponent `e` of the leading
/// digit satisfies `-5 <= e < 16`, scientific otherwise, with a signed exponent of at least two
/// digits. Integral values keep a `.0`. Non-finite values print as Python's `json` module
/// prints them (`NaN`, `Infinity`), although the scoring engine never produces them.
pub fn python_repr(x: f64) -> String {
    if x.is_nan() {
        return "NaN".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity".to_owned() } else { "-Infinity".to_owned() };
    }
    // `{:e}` gives the shortest round-trip digits as `[-]d[.ddd]e<exp>`.
    let sci = format!("{x:e}");
    let (mantissa, exp) = match sci.split_once('e') {
        Some((m, e)) => (m, e.parse::<i32>().unwrap_or(0)),
        None => (sci.as_str(), 0),
    };
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    // Position of the decimal point relative to the digit string (Python's `decpt`).
    let decpt = exp + 1;
    let mut out = String::with_capacity(digits.len() + 8);
    out.push_str(sign);
    if decpt <= -4 || decpt > 16 {
        let (first, rest) = digits.split_at(1);
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        let abs = exp.unsigned_abs();
        if abs < 10 {
            out.push('0');
        }
        out.push_str(&abs.to_string());
    } else if decpt <= 0 {
        out.push_str("0.");
        for _ in 0..(-decpt) {
            out.push('0');
        }
        out.push_str(&digits);
    } else {
        let point = decpt as usize;
        if point >= digits.len() {
            out.push_str(&digits);
            for _ in digits.len()..point {
                out.push('0');
            }
            out.push_str(".0");
        } else {
            out.push_str(&digits[..point]);
            out.push('.');
            out.push_str(&digits[point..]);
        }
    }
    out
}

/// A `serde_json` formatter that prints floats with [`python_repr`] (compact layout otherwise,
/// like Starlette's `JSONResponse`).
#[derive(Debug, Clone, Copy, Default)]
pub struct PythonFormatter;

impl serde_json::ser::Formatter for PythonFormatter {
    fn write_f64<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        writer.write_all(python_repr(value).as_bytes())
    }

    fn write_f32<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f32) -> io::Result<()> {
        writer.write_all(python_repr(f64::from(value)).as_bytes())
    }
}

/// Serializes `value` as compact JSON with Python's float layout.
pub fn to_python_json<T: Serialize + ?Sized>(value: &T) -> Result<String, serde_json::Error> {
    let mut buf = Vec::with_capacity(256);
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, PythonFormatter);
    value.serialize(&mut ser)?;
    // serde_json only ever writes UTF-8.
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// The formatting path alone, which [`round_to`] must agree with.
    fn round_by_formatting(x: f64, digits: usize) -> f64 {
        format!("{x:.digits$}").parse::<f64>().unwrap_or(x)
    }

    proptest! {
        #[test]
        fn rounding_without_formatting_agrees_with_formatting(
            x in prop_oneof![
                -2.0f64..2.0,
                -1e6f64..1e6,
                proptest::num::f64::NORMAL | proptest::num::f64::SUBNORMAL | proptest::num::f64::ZERO,
                // Decimals at and next to ties: k/10^5 with k odd ends in 5 at the fifth place.
                (-200_000i64..200_000).prop_map(|k| k as f64 / 1e5),
                (-200_000i64..200_000, -3i64..=3).prop_map(|(k, ulps)| f64::from_bits((k as f64 / 1e5).to_bits().wrapping_add_signed(ulps))),
            ],
            digits in 0usize..9,
        ) {
            let (fast, exact) = (round_to(x, digits), round_by_formatting(x, digits));
            prop_assert!(fast.to_bits() == exact.to_bits(), "round({x:e}, {digits}): {fast:e} vs {exact:e}");
        }
    }

    #[test]
    fn rust_precision_formatting_rounds_exact_ties_to_even() {
        // The premise round4 rests on: exact binary ties go to the even digit.
        assert_eq!(format!("{:.2}", 0.125), "0.12");
        assert_eq!(format!("{:.2}", 0.375), "0.38");
        assert_eq!(format!("{:.0}", 2.5), "2");
        assert_eq!(format!("{:.0}", 3.5), "4");
        assert_eq!(format!("{:.1}", 0.25), "0.2");
    }

    #[test]
    fn round4_matches_python_round() {
        // Values checked against CPython's round(x, 4) / round(x, 2).
        assert_eq!(round4(0.00005), 0.0001); // binary value lies just above the tie
        assert_eq!(round4(0.12345), 0.1235);
        assert_eq!(round4(1.0 / 3.0), 0.3333);
        assert_eq!(round4(0.5), 0.5);
        assert_eq!(round_to(2.675, 2), 2.67); // 2.675 is 2.67499999... in binary
        assert_eq!(round4(0.0), 0.0);
    }

    #[test]
    fn python_repr_layouts() {
        let cases = [
            (1e16, "1e+16"),
            (9999999999999998.0, "9999999999999998.0"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (0.00012345, "0.00012345"),
            (1.5e-7, "1.5e-07"),
            (1e100, "1e+100"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (0.1, "0.1"),
            (1.0, "1.0"),
            (2000.0, "2000.0"),
            (5e-6, "5e-06"),
            (1e22, "1e+22"),
            (f64::MAX, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
            (0.3333, "0.3333"),
            (-0.0, "-0.0"),
            (0.0, "0.0"),
            (-2.5, "-2.5"),
            (12.5, "12.5"),
        ];
        for (x, want) in cases {
            assert_eq!(python_repr(x), want, "repr of {x:?}");
        }
    }

    #[test]
    fn json_uses_python_floats_and_keeps_integers() {
        let v = serde_json::json!({"a": 1.0, "b": 2000, "c": 5e-6, "d": [0.3333, 1e16], "e": "é"});
        assert_eq!(to_python_json(&v).unwrap(), r#"{"a":1.0,"b":2000,"c":5e-06,"d":[0.3333,1e+16],"e":"é"}"#);
    }
}
