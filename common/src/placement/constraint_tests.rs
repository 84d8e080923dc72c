//! Table tests of the constraint grammar (feature S2).

use std::collections::BTreeMap;

use super::*;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

// [utest of feature S2]
#[test]
fn every_label_operator_matches_and_mismatches() {
    let arm = labels(&[("arch", "arm64"), ("ecu", "hpc1")]);
    let x86 = labels(&[("arch", "x86_64"), ("ecu", "zone")]);
    let none = labels(&[]);
    // (expression, matches arm, matches x86, matches an agent without the key)
    let cases = [
        ("arch = arm64", true, false, false),
        ("arch == arm64", true, false, false),
        ("arch is arm64", true, false, false),
        ("arch != arm64", false, true, true),
        ("arch is not arm64", false, true, true),
        ("ecu in (hpc1, hpc2)", true, false, false),
        ("ecu in (hpc1,)", true, false, false),
        ("ecu not in (hpc1, hpc2)", false, true, true),
        ("ecu not in (hpc1,hpc2,)", false, true, true),
    ];
    for (text, on_arm, on_x86, without) in cases {
        let c = LabelConstraint::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(c.matches(&arm), on_arm, "{text} on arm");
        assert_eq!(c.matches(&x86), on_x86, "{text} on x86");
        assert_eq!(c.matches(&none), without, "{text} without the label");
    }
    assert!(!LabelConstraint::parse("Arch = arm64").unwrap().matches(&arm), "keys are case-sensitive");
}

#[test]
fn label_parse_errors_name_the_token_and_column() {
    let cases = [
        ("arch === x", "unexpected '=', expected a value at column 8"),
        ("arch", "expected an operator at column 5"),
        ("arch = ", "expected a value at column 8"),
        ("arch = a b", "unexpected 'b' at column 10"),
        ("ecu in hpc1", "unexpected 'hpc1', expected '(' at column 8"),
        ("ecu in ()", "empty list at column 9"),
        ("ecu in (a b)", "unexpected 'b', expected ',' or ')' at column 11"),
        ("ecu not (a)", "unexpected '(', expected 'in' after 'not' at column 9"),
        ("= a", "unexpected '=', expected a label key at column 1"),
        ("a ! b", "unexpected '!' at column 3"),
    ];
    for (text, error) in cases {
        assert_eq!(LabelConstraint::parse(text).unwrap_err().to_string(), error, "{text}");
    }
}

#[test]
fn every_metric_comparison_and_a_missing_metric() {
    let metrics: BTreeMap<String, f64> = [("free_memory_mb".to_owned(), 512.0)].into();
    let cases = [
        ("free_memory_mb > 511", true),
        ("free_memory_mb > 512", false),
        ("free_memory_mb >= 512", true),
        ("free_memory_mb => 513", false),
        ("free_memory_mb gte 512", true),
        ("free_memory_mb < 513", true),
        ("free_memory_mb <= 511", false),
        ("free_memory_mb =< 512", true),
        ("free_memory_mb lte 512", true),
        ("free_memory_mb == 512", true),
        ("free_memory_mb = 512.0", true),
        ("free_memory_mb is 1", false),
        ("free_memory_mb != 512", false),
        ("free_memory_mb is not 1", true),
        ("cpu_usage < 80", false),
        ("cpu_usage != 80", false),
    ];
    for (text, expected) in cases {
        let c = MetricConstraint::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(c.matches(&metrics), expected, "{text}");
    }
    assert_eq!(
        MetricConstraint::parse("cpu_usage < lots").unwrap_err().to_string(),
        "expected a number, found 'lots' at column 13"
    );
    assert_eq!(
        MetricConstraint::parse("cpu_usage in (1)").unwrap_err().to_string(),
        "unexpected 'in', expected a comparison at column 11"
    );
}
