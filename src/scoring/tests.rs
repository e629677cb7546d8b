//! Pins every step of the calculator (numbered as in [`super::calculator`]) with numbers derived by
//! hand (derivations in comments).
//!
//! Default weights 0.55/0.20/0.15/0.05/0.05 sum to exactly 1.0 in binary floating point, so
//! normalising leaves them unchanged and the weighted sums below are plain products.

use super::{assessment::RejectionReason, calculator::parse_amount, request::Weights, *};
use proptest::prelude::*;
use serde_json::{Value, json};

fn skill(v: Value) -> Skill {
    Skill::from_value(&v, "").unwrap()
}

fn req(v: Value) -> AssessmentRequest {
    parse_request(v.to_string().as_bytes()).unwrap()
}

fn run(skills: &[Skill], r: Value) -> Assessment {
    Calculator::new(skills, None).assess(&req(r), None, None)
}

fn wire(a: &Assessment) -> String {
    assessment_json(a)
}

/// Keywords {pdf, tables, processing, table, extraction}: tags pdf/tables, name pdf/processing,
/// capability key table/extraction.
fn pdf_skill() -> Skill {
    skill(json!({
        "id": "s1", "name": "PDF Processing", "tags": ["pdf", "tables"],
        "capabilities_detail": {"table_extraction": {"supported": true}}
    }))
}

fn gate_json(reason: &str, confidence: &str) -> String {
    format!(r#"{{"accepted":false,"score":0.0,"confidence":{confidence},"rejection_reason":"{reason}"}}"#)
}

// ---- step 2 and 4: no skills and the hard gates ----

#[test]
fn no_skills_is_a_gate_rejection() {
    let a = run(&[], json!({"task_summary": "anything"}));
    assert_eq!(wire(&a), gate_json("no_skills_advertised", "1.0"));
}

#[test]
fn gates_apply_in_order_and_first_failure_wins() {
    let skills = [
        skill(json!({"id": "a", "input_modes": ["text/plain"], "allowed_tools": ["search"]})),
        skill(json!({"id": "b", "output_modes": ["application/json"]})),
    ];
    let base = json!({
        "task_summary": "x", "input_mime_types": ["application/pdf"], "output_mime_types": ["image/png"],
        "required_tools": ["ocr"], "forbidden_tools": ["search"]
    });
    let mut r = base.clone();
    assert_eq!(wire(&run(&skills, r.clone())), gate_json("input_mime_unsupported", "1.0"));
    // Input from skill a, output from skill b: modes are pooled over skills.
    r["input_mime_types"] = json!(["application/pdf", "text/plain"]);
    assert_eq!(wire(&run(&skills, r.clone())), gate_json("output_mime_unsupported", "1.0"));
    r["output_mime_types"] = json!(["application/json"]);
    assert_eq!(wire(&run(&skills, r.clone())), gate_json("required_tool_missing", "1.0"));
    r["required_tools"] = json!(["search"]);
    assert_eq!(wire(&run(&skills, r.clone())), gate_json("forbidden_tool_present", "1.0"));
    r["forbidden_tools"] = json!(["web"]);
    assert!(run(&skills, r).subscores.is_some());
}

#[test]
fn empty_lists_are_no_constraint_and_a_skill_without_modes_supports_none() {
    let bare = [skill(json!({"id": "bare", "name": "pdf"}))];
    let a = run(&bare, json!({"task_summary": "pdf", "input_mime_types": [], "required_tools": []}));
    assert!(a.accepted);
    let a = run(&bare, json!({"task_summary": "pdf", "input_mime_types": ["text/plain"]}));
    assert_eq!(a.rejection_reason, Some(RejectionReason::InputMimeUnsupported));
}

// ---- steps 3, 5, 6: keywords, Jaccard, boosts, reasons, ordering ----

#[test]
fn keyword_match_end_to_end_numbers() {
    // Task tokens {extract, tables, from, pdf}; skill keywords (5, see pdf_skill).
    // Intersection {tables, pdf} = 2, union 4 + 5 - 2 = 7: 2/7 -> 0.2857.
    // Tags: both match; capability table_extraction: neither `table` nor `extraction` is a task token.
    // score = 0.55*0.2857 + 0.2*1.0 + 0.05*0.5 + 0.05*1.0 + 0.15*1.0 = 0.5821350000000001 -> 0.5821.
    // confidence = 0.5 + 0.1 (a match, not > 0.3) = 0.6. No latency constraint: estimate 5000.
    let a = run(&[pdf_skill()], json!({"task_summary": "Extract tables from PDF"}));
    assert_eq!(
        wire(&a),
        r#"{"accepted":true,"score":0.5821,"confidence":0.6,"skill_matches":[{"skill_id":"s1","skill_name":"PDF Processing","score":0.2857,"reasons":["tags: pdf, tables"]}],"matched_tags":["pdf","tables"],"latency_estimate_ms":5000,"subscores":{"skill_match":0.2857,"io_compatibility":1.0,"load":0.5,"cost":1.0,"performance":1.0}}"#
    );
}

#[test]
fn capability_keys_match_on_underscore_parts() {
    // Task tokens {table, extraction, needed}; keywords {pdf, tables, processing, table, extraction}.
    // Intersection {table, extraction} = 2, union 3 + 5 - 2 = 6 -> 0.3333; tag `tables` not matched.
    let a = run(&[pdf_skill()], json!({"task_summary": "table extraction needed"}));
    assert_eq!(a.skill_matches[0].score, 0.3333);
    assert_eq!(a.skill_matches[0].reasons, ["capabilities: table_extraction"]);
    assert_eq!(a.matched_capabilities, ["table_extraction"]);
    assert!(a.matched_tags.is_empty());
    // Top match 0.3333 > 0.3: confidence 0.5 + 0.2.
    assert_eq!(a.confidence, 0.7);
}

#[test]
fn assessment_keywords_are_lowercased_but_never_tokenized() {
    // Keywords {"machine learning", pytorch, trainer}; task tokens {fine, tune, pytorch, machine,
    // learning, model}. Only `pytorch` is shared: 1 / (6 + 3 - 1) = 0.125.
    let s = skill(json!({"id": "ml", "name": "Trainer", "assessment": {"keywords": ["Machine Learning", "PyTorch"]}}));
    let a = run(std::slice::from_ref(&s), json!({"task_summary": "Fine-tune a PyTorch machine learning model"}));
    assert_eq!(a.skill_matches[0].score, 0.125);
    // "machine learning" as a keyword can never equal a token: no match at all here.
    let a = run(&[s], json!({"task_summary": "machine learning"}));
    assert!(a.skill_matches.is_empty());
    assert_eq!(a.rejection_reason, Some(RejectionReason::ScoreBelowThreshold));
}

#[test]
fn non_ascii_letters_split_tokens() {
    // "Café orders" -> {caf, orders}; keywords {caf, coffee}: 1 / 3 -> 0.3333.
    let s = skill(json!({"id": "c", "name": "Coffee", "tags": ["caf"]}));
    let a = run(&[s], json!({"task_summary": "Café orders"}));
    assert_eq!(a.skill_matches[0].score, 0.3333);
    assert_eq!(a.skill_matches[0].reasons, ["tags: caf"]);
}

#[test]
fn tags_match_on_whitespace_words_and_keep_their_spelling() {
    // Tag "Machine Learning" tokenizes to {machine, learning}; its words match the task tokens.
    let s = skill(json!({"id": "t", "name": "x", "tags": ["Machine Learning", "C++ / Rust", "data-science"]}));
    let a = run(&[s], json!({"task_summary": "learning rust and data science"}));
    // `C++ / Rust` matches through its word `rust`; `data-science` has no whitespace word that
    // is a token (the word is `data-science`), so it does not match although `data` is shared.
    assert_eq!(a.matched_tags, ["Machine Learning", "C++ / Rust"]);
}

#[test]
fn anti_patterns_skip_the_skill_using_untruncated_summary_and_details() {
    let s = skill(
        json!({"id": "p", "name": "pdf", "tags": ["document"], "assessment": {"anti_patterns": ["PDF Editing"]}}),
    );
    let a = run(
        std::slice::from_ref(&s),
        json!({"task_summary": "Work on a document", "task_details": "includes pdf editing"}),
    );
    assert!(a.skill_matches.is_empty() && a.matched_tags.is_empty());
    // The phrase may straddle summary and details (joined by a space).
    let a = run(std::slice::from_ref(&s), json!({"task_summary": "a document about pdf", "task_details": "editing"}));
    assert!(a.skill_matches.is_empty());
    // Beyond the 10 000-character keyword window still counts.
    let details = format!("{} pdf editing", "x ".repeat(6000));
    let a = run(std::slice::from_ref(&s), json!({"task_summary": "document", "task_details": details}));
    assert!(a.skill_matches.is_empty());
    // Without the phrase the skill matches: {work, on, document} vs {pdf, document}: 1/4.
    let a = run(&[s], json!({"task_summary": "Work on a document"}));
    assert_eq!(a.skill_matches[0].score, 0.25);
    // An empty anti-pattern is a substring of everything.
    let e = skill(json!({"id": "e", "name": "pdf", "assessment": {"anti_patterns": [""]}}));
    assert!(run(&[e], json!({"task_summary": "pdf"})).skill_matches.is_empty());
}

#[test]
fn specializations_apply_to_the_summary_only_and_accumulate() {
    let s = skill(json!({
        "id": "tr", "name": "Translator", "tags": ["translation"],
        "assessment": {"specializations": [
            {"domain": "Legal", "confidence_boost": 0.3},
            {"domain": "contract law", "confidence_boost": 0.5},
            {"domain": "", "confidence_boost": 0.9},
            {"domain": "never mentioned"}
        ]}
    }));
    let score = |r: Value| run(std::slice::from_ref(&s), r).skill_matches.first().map(|m| m.score);
    // {legal, translation} vs {translator, translation}: 1/3, + 0.3 = 0.6333.
    assert_eq!(score(json!({"task_summary": "Legal translation"})), Some(0.6333));
    // 5 tokens, 1 shared: 1/6, + 0.3 + 0.5 = 0.96666 -> 0.9667 (cumulative).
    assert_eq!(score(json!({"task_summary": "Legal translation of contract law"})), Some(0.9667));
    // The domains appear in the details only: 1/6 unboosted.
    assert_eq!(score(json!({"task_summary": "translation job", "task_details": "legal contract law"})), Some(0.1667));
    // A boost alone makes a skill match, with no reasons.
    let a = run(std::slice::from_ref(&s), json!({"task_summary": "legal stuff"}));
    assert_eq!(a.skill_matches[0].score, 0.3);
    assert!(a.skill_matches[0].reasons.is_empty());
    assert!(wire(&a).contains(r#""reasons":[]"#));
    // Capped at 1.0.
    let big = skill(
        json!({"id": "b", "name": "pdf", "assessment": {"specializations": [{"domain": "pdf", "confidence_boost": 0.9}]}}),
    );
    assert_eq!(run(&[big], json!({"task_summary": "pdf"})).skill_matches[0].score, 1.0);
}

#[test]
fn matched_tags_count_even_when_the_skill_scores_zero() {
    // {pdf} vs {zz, pdf}: 0.5, boost -1.0: -0.5, so no match, but the tag did intersect.
    let s = skill(
        json!({"id": "z", "name": "zz", "tags": ["pdf"], "assessment": {"specializations": [{"domain": "pdf", "confidence_boost": -1.0}]}}),
    );
    let a = run(&[s], json!({"task_summary": "pdf"}));
    assert!(a.skill_matches.is_empty());
    assert_eq!(a.matched_tags, ["pdf"]);
    assert_eq!(a.rejection_reason, Some(RejectionReason::ScoreBelowThreshold));
    assert_eq!(a.latency_estimate_ms, None);
}

#[test]
fn ties_keep_declaration_order_and_best_first() {
    // b and a: {pdf} vs {pdf, tables}: 1/2 each; c: {pdf, tables}: 1.0.
    let skills = [
        skill(json!({"id": "b", "name": "pdf"})),
        skill(json!({"id": "a", "name": "pdf"})),
        skill(json!({"id": "c", "name": "pdf tables"})),
    ];
    let a = run(&skills, json!({"task_summary": "pdf tables"}));
    let ids: Vec<&str> = a.skill_matches.iter().map(|m| m.skill_id.as_str()).collect();
    assert_eq!(ids, ["c", "b", "a"]);
    assert_eq!(a.subscores.unwrap().skill_match, 1.0);
}

#[test]
fn missing_id_and_name_are_unknown_and_the_name_counts_as_a_token() {
    let a = run(&[skill(json!({"tags": ["zz"]}))], json!({"task_summary": "unknown thing"}));
    assert_eq!(a.skill_matches[0].skill_id, "unknown");
    assert_eq!(a.skill_matches[0].skill_name, "unknown");
    // {unknown, thing} vs {zz, unknown}: 1/3.
    assert_eq!(a.skill_matches[0].score, 0.3333);
}

#[test]
fn embeddings_blend_with_keywords_and_lead_the_reasons() {
    // cos 0.95, Jaccard {pdf} vs {pdf, tables}: 0.5 -> 0.7*0.95 + 0.3*0.5 = 0.815.
    let s = [skill(json!({"id": "e", "name": "pdf"})), skill(json!({"id": "f", "name": "pdf", "tags": ["pdf"]}))];
    let calc = Calculator::new(&s, None);
    let a = calc.assess(&req(json!({"task_summary": "pdf tables"})), None, Some(&[0.95, 0.125]));
    assert_eq!(a.skill_matches[0].score, 0.815);
    assert_eq!(a.skill_matches[0].reasons, ["semantic similarity: 0.95"]);
    // 0.125 prints as 0.12 (ties to even), and leads the tag reason.
    assert_eq!(a.skill_matches[1].reasons, ["semantic similarity: 0.12", "tags: pdf"]);
    // A non-positive cosine falls back to keywords with no similarity reason.
    let a = calc.assess(&req(json!({"task_summary": "pdf tables"})), None, Some(&[0.0, -0.5]));
    assert_eq!(a.skill_matches[0].score, 0.5);
    assert!(a.skill_matches[0].reasons.is_empty());
}

#[test]
fn empty_summary_scores_half_with_no_matches() {
    let a = Calculator::new(&[pdf_skill()], None).assess(&AssessmentRequest::new(""), None, None);
    let sub = a.subscores.unwrap();
    assert_eq!(sub.skill_match, 0.5);
    assert!(a.skill_matches.is_empty() && a.latency_estimate_ms.is_none());
    assert!(a.accepted);
}

// ---- steps 7-11: io, load, cost, latency, performance ----

#[test]
fn load_is_rounded_and_a_known_zero_queue_is_shown() {
    let calc = Calculator::new(&[pdf_skill()], None);
    let r = req(json!({"task_summary": "pdf"}));
    let a = calc.assess(&r, Some(0), None);
    assert_eq!(a.subscores.unwrap().load, 1.0);
    assert!(wire(&a).contains(r#""queue_depth":0,"#));
    assert_eq!(calc.assess(&r, Some(2), None).subscores.unwrap().load, 0.3333);
    assert_eq!(calc.assess(&r, Some(7), None).subscores.unwrap().load, 0.125);
}

#[test]
fn cost_parsing_and_the_budget_gate() {
    let cost = |price: Option<&str>, budget: Option<&str>| {
        let mut r = req(json!({"task_summary": "pdf"}));
        r.max_cost_amount = budget.map(str::to_owned);
        let a = Calculator::new(&[pdf_skill()], price.map(str::to_owned)).assess(&r, None, None);
        a.subscores.map(|s| s.cost).ok_or(a.rejection_reason)
    };
    assert_eq!(cost(None, Some("$1")), Ok(1.0)); // x402 off
    assert_eq!(cost(Some("10"), None), Ok(0.5)); // no budget
    assert_eq!(cost(Some("10"), Some("")), Ok(0.5)); // empty budget
    assert_eq!(cost(Some("10"), Some("$50.00 USD")), Ok(0.9)); // 1 - 10/50*0.5
    assert_eq!(cost(Some("1"), Some("3")), Ok(0.8333)); // 1 - (1/3)*0.5 = 0.83333
    assert_eq!(cost(Some("3"), Some("3")), Ok(0.5));
    assert_eq!(cost(Some("10"), Some("0")), Ok(0.5)); // budget <= 0
    assert_eq!(cost(Some("10"), Some("USD")), Ok(0.5)); // cleans to "" -> 0 -> <= 0
    assert_eq!(cost(Some("10"), Some("1.2.3")), Ok(0.5)); // unparseable
    assert_eq!(cost(Some("10"), Some(".")), Ok(0.5));
    assert_eq!(cost(Some("1.2.3"), Some("5")), Ok(0.5)); // unparseable price
    assert_eq!(cost(Some("free"), Some("5")), Ok(1.0)); // price cleans to 0
    assert_eq!(cost(Some("$20"), Some("$10")), Err(Some(RejectionReason::CostExceedsBudget)));
    let mut r = req(json!({"task_summary": "pdf"}));
    r.max_cost_amount = Some("10".into());
    let a = Calculator::new(&[pdf_skill()], Some("20".into())).assess(&r, Some(3), None);
    assert_eq!(wire(&a), gate_json("cost_exceeds_budget", "0.9"));
    assert_eq!(parse_amount("$50.00 USD"), Some(50.0));
    assert_eq!(parse_amount("-5"), Some(5.0));
    assert_eq!(parse_amount("1."), Some(1.0));
}

#[test]
fn latency_gate_boundary_and_performance() {
    let skills = [
        skill(json!({"id": "fast", "name": "pdf", "performance": {"avg_processing_time_ms": 100}})),
        skill(json!({"id": "slow", "name": "zzz", "performance": {"avg_processing_time_ms": 2000}})),
    ];
    // The estimate is the max over ALL skills, matched or not: 2000.
    let at = |max: f64| run(&skills, json!({"task_summary": "pdf", "max_latency_ms": max}));
    let equal = at(1000.0); // 2000 == 2 * 1000 passes; performance max(0, 1 - 2) = 0.0
    assert_eq!(equal.subscores.unwrap().performance, 0.0);
    assert_eq!(equal.latency_estimate_ms, Some(2000.into()));
    assert_eq!(
        wire(&at(999.0)),
        r#"{"accepted":false,"score":0.0,"confidence":0.9,"rejection_reason":"latency_exceeds_constraint","latency_estimate_ms":2000}"#
    );
    assert_eq!(at(4000.0).subscores.unwrap().performance, 0.5); // 1 - 2000/4000
    // 0 means no constraint: performance 1.0 and no confidence bonus.
    let none = at(0.0);
    assert_eq!(none.subscores.unwrap().performance, 1.0);
    assert_eq!(none.confidence, 0.7); // 0.5 + 0.2 (match 0.5 > 0.3)
    // No skill matched: no estimate, no gate, performance 1.0.
    let a = run(&skills, json!({"task_summary": "nothing relevant", "max_latency_ms": 1}));
    assert_eq!(a.latency_estimate_ms, None);
    assert_eq!(a.subscores.unwrap().performance, 1.0);
    // Cost is checked before latency.
    let mut r = req(json!({"task_summary": "pdf", "max_latency_ms": 1, "max_cost_amount": "1"}));
    r.min_score = 0.0;
    let a = Calculator::new(&skills, Some("2".into())).assess(&r, None, None);
    assert_eq!(a.rejection_reason, Some(RejectionReason::CostExceedsBudget));
}

#[test]
fn latency_estimate_keeps_the_declared_number_type() {
    let float = [skill(json!({"id": "f", "name": "pdf", "performance": {"avg_processing_time_ms": 1500.5}}))];
    assert!(wire(&run(&float, json!({"task_summary": "pdf"}))).contains(r#""latency_estimate_ms":1500.5"#));
    let round = [skill(json!({"id": "f", "name": "pdf", "performance": {"avg_processing_time_ms": 2000.0}}))];
    assert!(wire(&run(&round, json!({"task_summary": "pdf"}))).contains(r#""latency_estimate_ms":2000.0"#));
    // An estimate of 0 never trips the gate.
    let zero = [skill(json!({"id": "z", "name": "pdf", "performance": {"avg_processing_time_ms": 0}}))];
    assert!(run(&zero, json!({"task_summary": "pdf", "max_latency_ms": 1})).accepted);
}

// ---- steps 1, 12, 13: weights, threshold, confidence ----

#[test]
fn confidence_adds_in_order_and_caps_at_one() {
    // 0.5 + 0.2 + 0.1 + 0.1 + 0.1 = 0.9999999999999999 -> min(.., 1.0) -> round 1.0.
    let s = [skill(
        json!({"id": "p", "name": "pdf", "input_modes": ["application/pdf"], "performance": {"avg_processing_time_ms": 10}}),
    )];
    let r = req(json!({"task_summary": "pdf", "input_mime_types": ["application/pdf"], "max_latency_ms": 100}));
    let a = Calculator::new(&s, None).assess(&r, Some(1), None);
    assert_eq!(a.confidence, 1.0);
    // No match at all: 0.5 + 0.1 (mime) = 0.6.
    let r = req(json!({"task_summary": "nothing", "output_mime_types": ["x/y"]}));
    let s = [skill(json!({"id": "p", "name": "pdf", "output_modes": ["x/y"]}))];
    assert_eq!(Calculator::new(&s, None).assess(&r, None, None).confidence, 0.6);
}

#[test]
fn all_zero_weights_become_equal() {
    // 0.2 * (0.2857 + 1.0 + 0.5 + 1.0 + 1.0), added left to right = 0.7571399999999999 -> 0.7571.
    let a = run(
        &[pdf_skill()],
        json!({"task_summary": "Extract tables from PDF",
        "weights": {"skill_match": 0, "io_compatibility": 0, "performance": 0, "load": 0, "cost": 0}}),
    );
    assert_eq!(a.score, 0.7571);
}

#[test]
fn min_score_compares_the_unrounded_score() {
    // The PDF example below scores 0.48607999999999996, reported as 0.4861: a min_score of
    // 0.4861 rejects although the reported score equals it.
    let (skills, mut r) = pdf_invoice();
    r.min_score = 0.4861;
    let a = Calculator::new(&skills, None).assess(&r, Some(2), None);
    assert_eq!((a.accepted, a.score), (false, 0.4861));
    r.min_score = 0.48607;
    assert!(Calculator::new(&skills, None).assess(&r, Some(2), None).accepted);
}

#[test]
fn score_below_threshold_carries_everything_in_wire_order() {
    let s = [pdf_skill(), skill(json!({"id": "s2", "name": "Tables", "capabilities_detail": {"pdf_tables": {}}}))];
    let a =
        Calculator::new(&s, None).assess(&req(json!({"task_summary": "pdf tables", "min_score": 0.99})), Some(4), None);
    let j = wire(&a);
    let keys = [
        "\"accepted\"",
        "\"score\"",
        "\"confidence\"",
        "\"rejection_reason\"",
        "\"skill_matches\"",
        "\"matched_tags\"",
        "\"matched_capabilities\"",
        "\"latency_estimate_ms\"",
        "\"queue_depth\"",
        "\"subscores\"",
    ];
    let positions: Vec<usize> =
        keys.iter().map(|k| j.find(k).unwrap_or_else(|| panic!("{k} missing in {j}"))).collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{j}");
    let sub = j.split("\"subscores\":").nth(1).unwrap();
    assert!(
        sub.starts_with(r#"{"skill_match":"#) && sub.contains(r#""load":0.2,"cost":1.0,"performance":1.0}"#),
        "{sub}"
    );
    assert!(j.contains(r#""rejection_reason":"score_below_threshold""#));
}

// ---- end to end: a PDF skill assessed for an invoice-extraction task ----

fn pdf_invoice() -> (Vec<Skill>, AssessmentRequest) {
    let yaml = r#"
id: pdf-processing-v1
name: PDF Processing
description: Extracts tables and text from invoice and report PDFs
tags: [pdf, tables, extraction, invoice, ocr]
input_modes: [application/pdf]
output_modes: [application/json]
capabilities_detail:
  text_extraction:
    supported: true
    types: [standard, ocr]
  table_extraction:
    supported: true
allowed_tools: [pdf_parser, ocr]
performance:
  avg_processing_time_ms: 2000
assessment:
  keywords: [pdf, extract, invoice, table, document]
  specializations:
    - domain: invoice_processing
      confidence_boost: 0.3
  anti_patterns:
    - pdf editing
    - create pdf
"#;
    let skills = skill::parse_skills(yaml, false).unwrap();
    let body = br#"{
        "task_summary": "Extract tables from PDF invoices",
        "task_details": "Process invoice PDFs and extract structured data",
        "input_mime_types": ["application/pdf"],
        "output_mime_types": ["application/json"],
        "required_tools": ["pdf_parser"],
        "forbidden_tools": ["web_search"],
        "max_latency_ms": 5000,
        "max_cost_amount": "0.001",
        "min_score": 0.7,
        "weights": {"skill_match": 0.55, "io_compatibility": 0.20, "performance": 0.15, "load": 0.05, "cost": 0.05}
    }"#;
    (skills, parse_request(body).unwrap())
}

#[test]
fn pdf_invoice_example_end_to_end() {
    // Skill keywords (10): assessment {pdf, extract, invoice, table, document}; tags add
    // {tables, extraction, ocr}; name adds {processing}; capability keys add {text}.
    // Task text "extract tables from pdf invoices process invoice pdfs and extract structured
    // data" -> 11 distinct tokens. Shared: {extract, tables, pdf, invoice} = 4; union 11+10-4 = 17.
    // skill score 4/17 = 0.23529... -> 0.2353. No anti-pattern; `invoice_processing` is not in
    // the summary. Tags matched: pdf, tables, invoice (extraction/ocr are not task tokens);
    // capabilities: text/extraction/table are not task tokens (the task says `tables`).
    // Gates pass. io 1.0; queue 2 -> load round(1/3, 4) = 0.3333; x402 off -> cost 1.0.
    // Latency estimate 2000 <= 2*5000; performance = 1 - 2000/5000 = 0.6.
    // score = 0.55*0.2353 + 0.2*1.0 + 0.05*0.3333 + 0.05*1.0 + 0.15*0.6 = 0.48607999999999996
    // -> 0.4861 < min_score 0.7: score_below_threshold.
    // confidence = 0.5 + 0.1 (match <= 0.3) + 0.1 (mime) + 0.1 (latency) + 0.1 (queue) -> 0.9.
    let (skills, r) = pdf_invoice();
    let a = Calculator::new(&skills, None).assess(&r, Some(2), None);
    assert_eq!(
        wire(&a),
        r#"{"accepted":false,"score":0.4861,"confidence":0.9,"rejection_reason":"score_below_threshold","skill_matches":[{"skill_id":"pdf-processing-v1","skill_name":"PDF Processing","score":0.2353,"reasons":["tags: pdf, tables, invoice"]}],"matched_tags":["pdf","tables","invoice"],"latency_estimate_ms":2000,"queue_depth":2,"subscores":{"skill_match":0.2353,"io_compatibility":1.0,"load":0.3333,"cost":1.0,"performance":0.6}}"#
    );
    // With a summary naming the specialisation the boost applies: "invoice_processing" tokenizes
    // to {invoice, processing}, both skill keywords. Tokens {invoice, processing, for, pdfs}:
    // shared 2, union 4 + 10 - 2 = 12 -> 1/6, + 0.3 = 0.46666 -> 0.4667 (> 0.3: confidence +0.2).
    let mut r2 = r.clone();
    r2.task_summary = "invoice_processing for PDFs".into();
    r2.task_details = None;
    let a = Calculator::new(&skills, None).assess(&r2, None, None);
    assert_eq!(a.skill_matches[0].score, 0.4667);
    assert_eq!(a.confidence, 0.9); // 0.5 + 0.2 + 0.1 + 0.1
    // An anti-pattern in the details removes the only skill.
    let mut r3 = r;
    r3.task_details = Some("then create PDF summaries".into());
    let a = Calculator::new(&skills, None).assess(&r3, None, None);
    assert!(a.skill_matches.is_empty() && !a.accepted);
}

#[test]
fn default_skill_accepts_a_negotiation_task() {
    let calc = Calculator::new(&[default_skill()], None);
    let a = calc.assess(
        &req(json!({"task_summary": "Negotiate a match between two people for networking introductions"})),
        Some(0),
        None,
    );
    assert!(a.accepted, "{}", wire(&a));
    assert_eq!(a.latency_estimate_ms, Some(50.into()));
}

// ---- properties ----

const VOCAB: [&str; 10] = ["pdf", "tables", "invoice", "rust", "data", "legal", "translation", "ocr", "api", "report"];

fn arb_skill() -> impl Strategy<Value = Skill> {
    (
        proptest::collection::vec(0..VOCAB.len(), 0..4),
        proptest::collection::vec(0..VOCAB.len(), 0..3),
        proptest::option::of(0u64..20_000),
        proptest::collection::vec((0..VOCAB.len(), -1.0f64..1.0), 0..2),
        any::<bool>(),
    )
        .prop_map(|(tags, kws, perf, specs, modes)| {
            skill(json!({
                "id": "p", "name": "gen",
                "tags": tags.iter().map(|i| VOCAB[*i]).collect::<Vec<_>>(),
                "input_modes": if modes { vec!["text/plain"] } else { vec![] },
                "output_modes": ["application/json"],
                "allowed_tools": if modes { vec!["ocr"] } else { vec![] },
                "performance": perf.map(|p| json!({"avg_processing_time_ms": p})).unwrap_or(json!({})),
                "assessment": {
                    "keywords": kws.iter().map(|i| VOCAB[*i]).collect::<Vec<_>>(),
                    "specializations": specs.iter().map(|(i, b)| json!({"domain": VOCAB[*i], "confidence_boost": b})).collect::<Vec<_>>()
                }
            }))
        })
}

fn arb_request() -> impl Strategy<Value = AssessmentRequest> {
    (
        proptest::collection::vec(0..VOCAB.len(), 1..6),
        any::<bool>(),
        proptest::option::of(0u32..20_000),
        proptest::option::of(prop_oneof![Just("5"), Just("$0.5"), Just(""), Just("1.2.3"), Just("100")]),
        proptest::collection::vec(0.0f64..10.0, 5),
        0.0f64..1.0,
    )
        .prop_map(|(words, mime, latency, budget, w, min)| {
            let mut r = AssessmentRequest::new(words.iter().map(|i| VOCAB[*i]).collect::<Vec<_>>().join(" "));
            if mime {
                r.input_mime_types = vec!["text/plain".into()];
            }
            r.max_latency_ms = latency.map(f64::from);
            r.max_cost_amount = budget.map(str::to_owned);
            r.weights =
                Weights { skill_match: w[0], io_compatibility: w[1], performance: w[2], load: w[3], cost: w[4] };
            r.min_score = min;
            r
        })
}

/// A calculator of up to three skills and a price (sometimes not a number), a request, and a
/// queue depth, when known.
fn arb_assessment() -> impl Strategy<Value = (Calculator, AssessmentRequest, Option<i64>)> {
    (
        proptest::collection::vec(arb_skill(), 0..4),
        arb_request(),
        proptest::option::of(0i64..50),
        proptest::option::of(prop_oneof![Just("1"), Just("0.25"), Just("abc")]),
    )
        .prop_map(|(skills, r, q, price)| (Calculator::new(&skills, price.map(str::to_owned)), r, q))
}

proptest! {
    #[test]
    fn scores_stay_in_unit_interval_and_gates_carry_nothing((calculator, r, q) in arb_assessment()) {
        let a = calculator.assess(&r, q, None);
        let unit = |x: f64| (0.0..=1.0).contains(&x);
        prop_assert!(unit(a.score) && unit(a.confidence));
        match (a.accepted, a.rejection_reason) {
            (true, None) | (false, Some(RejectionReason::ScoreBelowThreshold)) => {
                let s = a.subscores.expect("non-gate outcomes carry subscores");
                for x in [s.skill_match, s.io_compatibility, s.load, s.cost, s.performance] {
                    prop_assert!(unit(x), "{x}");
                }
            }
            (false, Some(_)) => {
                prop_assert!(a.subscores.is_none() && a.skill_matches.is_empty() && a.queue_depth.is_none());
                prop_assert_eq!(a.score, 0.0);
            }
            other => prop_assert!(false, "inconsistent verdict {:?}", other),
        }
        for m in &a.skill_matches {
            prop_assert!(m.score > 0.0 && m.score <= 1.0);
        }
    }

    #[test]
    fn a_score_only_assessment_is_the_full_one_without_its_explanation((calculator, r, q) in arb_assessment()) {
        let task = PreparedTask::new(&r);
        let full = calculator.assess(&r, q, None);
        prop_assert_eq!(&calculator.assess_prepared(&task, q, None, Detail::Full), &full);
        let score_only = calculator.assess_prepared(&task, q, None, Detail::Score);
        let mut expected = full;
        expected.skill_matches.clear();
        expected.matched_tags.clear();
        expected.matched_capabilities.clear();
        prop_assert_eq!(score_only, expected);
    }

    #[test]
    fn weights_always_normalise_to_one(w in proptest::collection::vec(0.0f64..1e6, 5)) {
        let n = Weights { skill_match: w[0], io_compatibility: w[1], performance: w[2], load: w[3], cost: w[4] }.normalized();
        let sum = n.skill_match + n.io_compatibility + n.performance + n.load + n.cost;
        prop_assert!((sum - 1.0).abs() < 1e-9, "{sum}");
    }

    #[test]
    fn adding_a_non_matching_skill_never_changes_skill_match(
        skills in proptest::collection::vec(arb_skill(), 1..4),
        r in arb_request(),
    ) {
        let before = Calculator::new(&skills, None).assess(&r, None, None);
        let mut more = skills.clone();
        more.push(skill(json!({"id": "other", "name": "zzqq", "tags": ["xxyy"], "assessment": {"keywords": ["wwvv"]}})));
        let after = Calculator::new(&more, None).assess(&r, None, None);
        prop_assert_eq!(before.subscores.map(|s| s.skill_match), after.subscores.map(|s| s.skill_match));
        prop_assert_eq!(before.rejection_reason, after.rejection_reason);
    }
}
