//! The emitter against Ankaios' exact output and against serde_yaml 0.9,
//! the library Ankaios' `ank` prints with.

use super::*;

fn s(text: &str) -> Node {
    Node::String(text.to_owned())
}

fn map(entries: Vec<(&str, Node)>) -> Node {
    Node::Map(entries.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

#[test]
fn yaml_complete_state_as_ankaios_prints_it() {
    let state = map(vec![
        (
            "desiredState",
            map(vec![
                ("apiVersion", s("v1")),
                (
                    "workloads",
                    map(vec![(
                        "nginx",
                        map(vec![
                            ("agent", s("agent_A")),
                            ("restartPolicy", s("NEVER")),
                            ("tags", map(vec![("owner", s("Ankaios team"))])),
                            ("runtime", s("podman")),
                            (
                                "runtimeConfig",
                                s("image: docker.io/nginx:latest\ncommandOptions: [\"-p\", \"8081:80\"]"),
                            ),
                        ]),
                    )]),
                ),
            ]),
        ),
        ("workloadStates", map(vec![])),
        ("agents", map(vec![])),
    ]);
    let expected = "desiredState:
  apiVersion: v1
  workloads:
    nginx:
      agent: agent_A
      restartPolicy: NEVER
      tags:
        owner: Ankaios team
      runtime: podman
      runtimeConfig: |-
        image: docker.io/nginx:latest
        commandOptions: [\"-p\", \"8081:80\"]
workloadStates: {}
agents: {}
";
    assert_eq!(to_string(&state), expected);
}

#[test]
fn yaml_sequences_in_mappings_are_not_indented() {
    let event = map(vec![
        ("timestamp", s("2026-11-24T10:00:00.123456789+00:00")),
        ("addedFields", Node::Seq(vec![s("desiredState.workloads.nginx")])),
        ("list", Node::Seq(vec![map(vec![("a", s("1")), ("b", Node::Seq(vec![s("x"), Node::Seq(vec![])]))])])),
    ]);
    assert_eq!(
        to_string(&event),
        "timestamp: 2026-11-24T10:00:00.123456789+00:00\naddedFields:\n- desiredState.workloads.nginx\nlist:\n- a: '1'\n  b:\n  - x\n  - []\n"
    );
    assert_eq!(to_string(&map(vec![])), "{}\n");
}

/// Every tricky scalar and layout, rendered by us and by serde_yaml.
#[test]
fn yaml_matches_serde_yaml_byte_for_byte() {
    let strings = [
        "",
        " ",
        "plain",
        "with space",
        " leading",
        "trailing ",
        "true",
        "False",
        "null",
        "~",
        "NULL",
        "yes",
        "no",
        "on",
        "123",
        "-5",
        "+5",
        "0123",
        "0x1F",
        "0o17",
        "0b101",
        "1.5",
        "1e5",
        ".5",
        "5.",
        ".inf",
        "-.inf",
        ".nan",
        "inf",
        "NaN",
        "1_000",
        "a: b",
        "a:b",
        "a:",
        ":a",
        "- a",
        "-a",
        "-",
        "? x",
        "#x",
        "a #b",
        "a#b",
        "@x",
        "`x",
        "'quoted'",
        "\"dq\"",
        "it's",
        "back\\slash",
        "tab\there",
        "cr\rhere",
        "bell\u{7}",
        "nel\u{85}",
        "nbsp\u{a0}x",
        "emoji 😀",
        "ümlaut",
        "bom\u{feff}",
        "---",
        "--- x",
        "...",
        "a\nb",
        "a\nb\n",
        "a\nb\n\n",
        "\nlead",
        " lead\nx",
        "x\n",
        "\n",
        "\n\n",
        "a \nb",
        "a\n b",
        "a\n\nb",
        "trail \n",
        "line\n  indented\n",
        "{x}",
        "[x]",
        "x,y",
        "*a",
        "&a",
        "!tag",
        "|",
        ">",
        "%x",
        "2026-11-24T10:00:00Z",
        "Running(Ok)",
        "Pending(Initial)",
        "docker.io/nginx:latest",
        "key: |\n  nested\n",
        "8081:80",
        "1:2",
        "0",
        "00",
        "-0",
        "+-5",
        "1e400",
    ];
    for text in strings {
        for node in [
            s(text),
            map(vec![(text, s("v"))]),
            map(vec![("k", s(text)), ("n", map(vec![("m", s(text))]))]),
            Node::Seq(vec![s(text), Node::Seq(vec![s(text)]), map(vec![("k", s(text))])]),
            map(vec![("k", Node::Seq(vec![s(text), map(vec![("k", s(text)), ("j", s(text))])]))]),
        ] {
            let reference = serde_yaml::to_string(&node).unwrap();
            assert_eq!(to_string(&node), reference, "{text:?} in {node:?}");
        }
    }
}

#[test]
fn yaml_numbers_bools_and_null_match_serde_yaml() {
    let node = map(vec![
        ("u", Node::Number(7u64.into())),
        ("i", Node::Number((-7i64).into())),
        ("f", Node::Number(serde_json::Number::from_f64(2.5).unwrap())),
        ("g", Node::Number(serde_json::Number::from_f64(3.0).unwrap())),
        ("b", Node::Bool(false)),
        ("n", Node::Null),
        ("e", Node::Seq(vec![])),
    ]);
    assert_eq!(to_string(&node), serde_yaml::to_string(&node).unwrap());
}
