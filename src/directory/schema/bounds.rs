//! The bounds a schema must stay within, checked at registration: its size ([`MAX_BYTES`]), its
//! nesting ([`MAX_DEPTH`]), and the number of subschemas a validation may visit at any one
//! place of the input ([`MAX_VISITS`]).
//!
//! The visit count follows `$ref`s and adds up the fan-out of the keywords that apply several
//! subschemas to the same place (`allOf`, `anyOf`, `oneOf`, `not`, `if`/`then`/`else`,
//! `dependentSchemas`), and carries it down into the input: the subschemas that apply to one
//! child (one property name or one array index, plus those that apply to any child) add up
//! there. A schema of 2 KB whose definitions each refer to the next twice asks for some 2^30
//! visits at one place and is refused (`schema_too_complex`), as is a `$ref` loop that never
//! descends into the input; a recursive schema that descends one level per reference (a tree)
//! costs a few visits per place and is accepted. The count is carried through 128 levels of
//! input, the deepest JSON the service parses. It also bounds what one check may cost: at most
//! that many subschemas look at each value of the input (see `super::Prepared::check`).

use std::collections::HashMap;

use serde_json::Value;

/// The largest schema accepted, serialized.
pub const MAX_BYTES: usize = 64 * 1024;
/// The deepest nesting of a schema document.
pub const MAX_DEPTH: usize = 64;
/// The most subschema visits a validation may make at one place of the input.
pub const MAX_VISITS: u64 = 1_000;
/// How deep into the input the visits are carried: the deepest JSON the service parses.
const INPUT_DEPTH: usize = 128;

/// What [`bound`] measured of an accepted schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounded {
    /// The most subschema visits at one place of the input.
    pub visits: u64,
}

/// Why a schema is refused by [`bound`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TooComplex(pub String);

/// Checks a schema against the bounds of the module docs.
pub fn bound(schema: &Value) -> Result<Bounded, TooComplex> {
    bound_size(schema)?;
    let visits = Graph::build(schema)?.visits()?;
    Ok(Bounded { visits })
}

/// The bounds that cost nothing to check: size and nesting.
pub fn bound_size(schema: &Value) -> Result<(), TooComplex> {
    let size = serde_json::to_vec(schema).map(|v| v.len()).unwrap_or(usize::MAX);
    if size > MAX_BYTES {
        return Err(TooComplex(format!("is {size} bytes; at most {MAX_BYTES} are accepted")));
    }
    let depth = depth(schema);
    if depth > MAX_DEPTH {
        return Err(TooComplex(format!("nests {depth} levels deep; at most {MAX_DEPTH} are accepted")));
    }
    Ok(())
}

fn depth(v: &Value) -> usize {
    match v {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// Keywords whose value is data, not schemas (never walked for `$id`s or anchors).
pub const DATA_KEYWORDS: [&str; 4] = ["enum", "const", "default", "examples"];
/// Keywords applying one subschema at the same place.
const IN_PLACE_ONE: [&str; 4] = ["not", "if", "then", "else"];
/// Keywords applying each of a list of subschemas at the same place.
const IN_PLACE_LIST: [&str; 3] = ["allOf", "anyOf", "oneOf"];
/// Keywords applying one subschema to any child (or to property names, or decoded content).
const ANY_CHILD_ONE: [&str; 7] = [
    "additionalProperties",
    "unevaluatedProperties",
    "additionalItems",
    "unevaluatedItems",
    "contains",
    "propertyNames",
    "contentSchema",
];

/// One subschema and the subschemas it applies, by how they apply.
#[derive(Debug, Default)]
struct Node {
    /// At the same place of the input (`allOf`, `$ref`, ...).
    in_place: Vec<usize>,
    /// To one named child each (`properties`, `prefixItems`, `items` as a list).
    named: Vec<usize>,
    /// To any child (`additionalProperties`, `items`, `patternProperties`, ...).
    any: Vec<usize>,
}

/// The subschemas of a document reachable from its root, with `$ref`s resolved.
struct Graph {
    nodes: Vec<Node>,
}

/// What `$ref`s may name: the resources (`$id`) and anchors of the document.
struct Names<'a> {
    ids: HashMap<&'a str, &'a Value>,
    anchors: HashMap<&'a str, &'a Value>,
}

impl<'a> Names<'a> {
    fn collect(root: &'a Value) -> Names<'a> {
        fn walk<'a>(v: &'a Value, names: &mut Names<'a>) {
            match v {
                Value::Object(map) => {
                    if let Some(Value::String(id)) = map.get("$id") {
                        match id.strip_prefix('#') {
                            Some(anchor) => names.anchors.insert(anchor, v),
                            None => names.ids.insert(id.trim_end_matches('#'), v),
                        };
                    }
                    for key in ["$anchor", "$dynamicAnchor"] {
                        if let Some(Value::String(a)) = map.get(key) {
                            names.anchors.insert(a, v);
                        }
                    }
                    for (k, child) in map {
                        if !DATA_KEYWORDS.contains(&k.as_str()) {
                            walk(child, names);
                        }
                    }
                }
                Value::Array(items) => items.iter().for_each(|i| walk(i, names)),
                _ => {}
            }
        }
        let mut names = Names { ids: HashMap::new(), anchors: HashMap::new() };
        walk(root, &mut names);
        names
    }

    /// The subschema `reference` names from within `resource`.
    fn resolve(&self, reference: &str, resource: &'a Value) -> Result<&'a Value, TooComplex> {
        let cannot = || {
            TooComplex(format!(
                "$ref {} cannot be followed: only references within the schema are accepted",
                crate::quote::quote(reference)
            ))
        };
        let (base, fragment) = reference.split_once('#').unwrap_or((reference, ""));
        let resource = if base.is_empty() { resource } else { *self.ids.get(base).ok_or_else(cannot)? };
        if fragment.is_empty() {
            return Ok(resource);
        }
        if fragment.starts_with('/') {
            return resource.pointer(&percent_decode(fragment)).ok_or_else(cannot);
        }
        self.anchors.get(fragment).copied().ok_or_else(cannot)
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(byte) = s.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Graph {
    fn build(root: &Value) -> Result<Graph, TooComplex> {
        #[derive(Clone, Copy)]
        enum Applies {
            InPlace,
            Named,
            Any,
        }
        let names = Names::collect(root);
        let mut ids: HashMap<*const Value, usize> = HashMap::from([(root as *const Value, 0)]);
        let mut nodes: Vec<Node> = vec![Node::default()];
        // The subschemas found (node i is entry i), with the resource their references resolve in.
        let mut found: Vec<(&Value, &Value)> = vec![(root, root)];
        let mut next = 0;
        while next < found.len() {
            let (v, inherited) = found[next];
            let node = next;
            next += 1;
            let Value::Object(map) = v else { continue };
            let resource = match map.get("$id") {
                Some(Value::String(id)) if !id.starts_with('#') => v,
                _ => inherited,
            };
            let mut children: Vec<(&Value, Applies)> = Vec::new();
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("$ref" | "$dynamicRef" | "$recursiveRef", Value::String(r)) => {
                        children.push((names.resolve(r, resource)?, Applies::InPlace));
                    }
                    (k, v) if IN_PLACE_ONE.contains(&k) => children.push((v, Applies::InPlace)),
                    (k, Value::Array(list)) if IN_PLACE_LIST.contains(&k) => {
                        children.extend(list.iter().map(|s| (s, Applies::InPlace)));
                    }
                    ("dependentSchemas" | "dependencies", Value::Object(m)) => {
                        children.extend(m.values().map(|s| (s, Applies::InPlace)));
                    }
                    ("properties", Value::Object(m)) => children.extend(m.values().map(|s| (s, Applies::Named))),
                    ("prefixItems" | "items", Value::Array(list)) => {
                        children.extend(list.iter().map(|s| (s, Applies::Named)));
                    }
                    ("patternProperties", Value::Object(m)) => children.extend(m.values().map(|s| (s, Applies::Any))),
                    ("items", v) => children.push((v, Applies::Any)),
                    (k, v) if ANY_CHILD_ONE.contains(&k) => children.push((v, Applies::Any)),
                    _ => {}
                }
            }
            for (child, applies) in children {
                if !(child.is_object() || child.is_boolean()) {
                    continue;
                }
                let id = *ids.entry(child as *const Value).or_insert_with(|| {
                    nodes.push(Node::default());
                    found.push((child, resource));
                    nodes.len() - 1
                });
                let n = &mut nodes[node];
                match applies {
                    Applies::InPlace => n.in_place.push(id),
                    Applies::Named => n.named.push(id),
                    Applies::Any => n.any.push(id),
                }
            }
        }
        Ok(Graph { nodes })
    }

    /// The subschemas ordered so that each comes after those it applies at the same place; an
    /// in-place cycle (a `$ref` loop that never descends into the input) is refused.
    fn in_place_order(&self) -> Result<Vec<usize>, TooComplex> {
        const NEW: u8 = 0;
        const OPEN: u8 = 1;
        const DONE: u8 = 2;
        let mut state = vec![NEW; self.nodes.len()];
        let mut order = Vec::with_capacity(self.nodes.len());
        for start in 0..self.nodes.len() {
            if state[start] != NEW {
                continue;
            }
            // Iterative depth-first walk: (node, index of the next child to visit).
            let mut stack = vec![(start, 0usize)];
            state[start] = OPEN;
            while let Some((node, child)) = stack.last_mut() {
                let node = *node;
                if let Some(&next) = self.nodes[node].in_place.get(*child) {
                    *child += 1;
                    match state[next] {
                        NEW => {
                            state[next] = OPEN;
                            stack.push((next, 0));
                        }
                        OPEN => {
                            return Err(TooComplex("has a $ref loop that never descends into the input".into()));
                        }
                        _ => {}
                    }
                } else {
                    state[node] = DONE;
                    order.push(node);
                    stack.pop();
                }
            }
        }
        Ok(order)
    }

    /// The most subschema visits at one place of the input (node 0 is the root).
    fn visits(&self) -> Result<u64, TooComplex> {
        let order = self.in_place_order()?;
        let over = MAX_VISITS + 1;
        let refuse = |v: u64| {
            TooComplex(format!(
                "may make {}{v} subschema visits at one place of the input (following $ref and allOf/anyOf/oneOf); at most {MAX_VISITS} are accepted",
                if v >= over { "more than " } else { "" }
            ))
        };
        // Level 0: the visits at the place a subschema is applied to.
        let mut previous = vec![0u64; self.nodes.len()];
        for &n in &order {
            let inner: u64 = self.nodes[n].in_place.iter().map(|&c| previous[c]).fold(0, u64::saturating_add);
            previous[n] = (1 + inner).min(over);
        }
        let mut most = previous[0];
        if most > MAX_VISITS {
            return Err(refuse(most));
        }
        // Level d: the visits at one place d levels below, from the level above.
        for _ in 1..=INPUT_DEPTH {
            let mut current = vec![0u64; self.nodes.len()];
            for &n in &order {
                let node = &self.nodes[n];
                let any: u64 = node.any.iter().map(|&c| previous[c]).fold(0, u64::saturating_add);
                let named = node.named.iter().map(|&c| previous[c]).max().unwrap_or(0);
                let inner: u64 = node.in_place.iter().map(|&c| current[c]).fold(0, u64::saturating_add);
                current[n] = any.saturating_add(named).saturating_add(inner).min(over);
            }
            most = most.max(current[0]);
            if most > MAX_VISITS {
                return Err(refuse(most));
            }
            if current == previous {
                break;
            }
            previous = current;
        }
        Ok(most)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Definitions `d0` .. `d{levels}`, each applying the next `fan_out` times at the same place.
    fn exponential(levels: usize, fan_out: usize) -> Value {
        let mut defs = serde_json::Map::new();
        for i in 0..levels {
            let refs: Vec<Value> = (0..fan_out).map(|_| json!({"$ref": format!("#/$defs/d{}", i + 1)})).collect();
            defs.insert(format!("d{i}"), json!({"allOf": refs}));
        }
        defs.insert(format!("d{levels}"), json!({"type": "string"}));
        json!({"$defs": defs, "not": {"$ref": "#/$defs/d0"}})
    }

    #[test]
    fn an_exponential_schema_is_refused_and_a_linear_one_accepted() {
        let bomb = exponential(30, 2);
        assert!(serde_json::to_vec(&bomb).unwrap().len() < 3_000);
        assert!(bound(&bomb).unwrap_err().0.contains("subschema visits"));
        assert!(bound(&exponential(30, 1)).is_ok());
        // Seven levels of two: some 2^9 visits (each copy of a level's node and its two
        // references), under the bound; eight levels, twice that, over it.
        assert!((500..=MAX_VISITS).contains(&bound(&exponential(7, 2)).unwrap().visits));
        assert!(bound(&exponential(8, 2)).is_err());
    }

    #[test]
    fn fan_out_carried_into_the_input_is_counted() {
        // Each level applies the next one twice to the same child: 2^n at depth n.
        let mut defs = serde_json::Map::new();
        for i in 0..20 {
            let next = json!({"properties": {"x": {"$ref": format!("#/$defs/d{}", i + 1)}}});
            defs.insert(format!("d{i}"), json!({"allOf": [next.clone(), next]}));
        }
        defs.insert("d20".into(), json!(true));
        let schema = json!({"$defs": defs, "$ref": "#/$defs/d0"});
        assert!(bound(&schema).is_err());
    }

    #[test]
    fn recursion_that_descends_is_accepted_and_a_loop_in_place_is_not() {
        let tree = json!({
            "$defs": {"node": {"type": "object", "properties": {
                "left": {"$ref": "#/$defs/node"}, "right": {"$ref": "#/$defs/node"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
            "$ref": "#/$defs/node"
        });
        let b = bound(&tree).unwrap();
        assert!(b.visits < 10, "{b:?}");
        let looped = json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"});
        assert!(bound(&looped).unwrap_err().0.contains("loop"));
        assert!(bound(&json!({"$ref": "#"})).unwrap_err().0.contains("loop"));
    }

    #[test]
    fn references_outside_the_schema_are_refused() {
        assert!(bound(&json!({"$ref": "https://example.com/schema.json"})).is_err());
        assert!(bound(&json!({"$ref": "#/$defs/missing"})).is_err());
        let by_id = json!({"$defs": {"a": {"$id": "https://x.test/a", "type": "string"}}, "$ref": "https://x.test/a"});
        assert!(bound(&by_id).is_ok());
        let anchor = json!({"$defs": {"a": {"$anchor": "name", "type": "string"}}, "$ref": "#name"});
        assert!(bound(&anchor).is_ok());
    }

    #[test]
    fn size_and_depth_are_bounded() {
        let big = json!({"description": "x".repeat(MAX_BYTES)});
        assert!(bound(&big).unwrap_err().0.contains("bytes"));
        let mut deep = json!({"type": "string"});
        for _ in 0..70 {
            deep = json!({"not": deep});
        }
        assert!(bound(&deep).unwrap_err().0.contains("levels"));
    }
}
