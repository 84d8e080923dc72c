//! Adversarial tests of the `HealthReport` extension request: a workload
//! reports only its own health (whatever it writes), needs no allow rule
//! for it, cannot report before its Hello, and a malformed report is
//! refused with an error (or skipped, when it is no protobuf at all)
//! while the session goes on.

use ank_common::workload::ControlInterfaceAccess;
use ank_proto::ank_base as pb;
use ank_proto::control_api::{self as ci, from_ankaios::FromAnkaiosEnum, to_ankaios::ToAnkaiosEnum};
use prost::Message;

use super::authorizer::Authorizer;
use super::session::{Action, Session};
use crate::probes::self_report::SelfReports;

fn encode(m: ToAnkaiosEnum) -> Vec<u8> {
    ci::ToAnkaios { to_ankaios_enum: Some(m) }.encode_to_vec()
}

fn hello() -> Vec<u8> {
    encode(ToAnkaiosEnum::Hello(ci::Hello { protocol_version: ank_common::PROTOCOL_VERSION.into() }))
}

fn report(healthy: bool, message: &str, id: &str) -> Vec<u8> {
    encode(ToAnkaiosEnum::HealthReport(ci::HealthReport { healthy, message: message.into(), request_id: id.into() }))
}

/// A session of `workload` without any allow rule.
fn session(workload: &str, reports: &SelfReports) -> Session {
    Session::new(workload, Authorizer::new(ControlInterfaceAccess::default())).with_self_reports(reports.clone())
}

fn error_of(actions: &[Action]) -> Option<(String, String)> {
    actions.iter().find_map(|a| match a {
        Action::Reply(m) => match &m.from_ankaios_enum {
            Some(FromAnkaiosEnum::Response(pb::Response {
                request_id,
                response_content: Some(pb::response::ResponseContent::Error(e)),
            })) => Some((request_id.clone(), e.message.clone())),
            _ => None,
        },
        _ => None,
    })
}

#[test]
fn a_workload_reports_its_own_health_without_an_allow_rule() {
    let reports = SelfReports::default();
    let mut s = session("web", &reports);
    s.on_frame(&hello());
    assert!(s.on_frame(&report(true, "ready to serve", "r1")).is_empty(), "accepted silently");
    let r = reports.latest("web").expect("recorded for its own workload");
    assert!(r.healthy);
    assert_eq!(r.message, "ready to serve");
}

#[test]
fn a_workload_cannot_report_for_another_workload() {
    let reports = SelfReports::default();
    let mut attacker = session("attacker", &reports);
    attacker.on_frame(&hello());
    // There is no field naming a workload. Adding one anyway (an unknown
    // field 4 = "victim" inside the HealthReport, and "victim@" in its
    // request id) changes nothing: the report is the writer's own.
    let inner = ci::HealthReport { healthy: false, message: "victim is down".into(), request_id: "victim@r1".into() };
    let mut inner = inner.encode_to_vec();
    inner.extend_from_slice(&[0x22, 6]);
    inner.extend_from_slice(b"victim");
    // ToAnkaios field 100, length-delimited: tag (100 << 3 | 2) = 802.
    let mut outer = vec![0xa2, 0x06];
    prost::encoding::encode_varint(inner.len() as u64, &mut outer);
    outer.extend_from_slice(&inner);
    assert!(attacker.on_frame(&outer).is_empty());
    assert_eq!(reports.latest("victim"), None, "nothing recorded for another workload");
    assert_eq!(reports.latest("attacker").map(|r| r.healthy), Some(false));
    // Nor does it reach the server as a request in another's name.
    assert!(!attacker.on_frame(&report(true, "", "victim@r2")).iter().any(|a| matches!(a, Action::Forward(_))));
}

#[test]
fn a_report_before_the_hello_closes_the_connection() {
    let reports = SelfReports::default();
    let mut s = session("web", &reports);
    let actions = s.on_frame(&report(true, "early", ""));
    assert!(actions.contains(&Action::StopReading));
    assert_eq!(reports.latest("web"), None);
}

#[test]
fn malformed_reports_are_refused_with_an_error_and_the_session_goes_on() {
    let reports = SelfReports::default();
    let mut s = session("web", &reports);
    s.on_frame(&hello());
    let (id, e) = error_of(&s.on_frame(&report(true, &"A".repeat(5000), "big"))).expect("an error reply");
    assert_eq!(id, "big");
    assert_eq!(e, "invalid health report: the message has 5000 bytes, more than 1024");
    let (_, e) = error_of(&s.on_frame(&report(true, "ok\u{7}\u{1b}[31m", "esc"))).expect("an error reply");
    assert!(e.contains("control characters"), "{e}");
    assert_eq!(reports.latest("web"), None, "nothing refused was recorded");
    // Not even protobuf (a message field that is no UTF-8): skipped, as
    // Ankaios skips undecodable frames after the Hello.
    let mut broken = report(true, "xx", "");
    let at = broken.len() - 2;
    broken[at] = 0xff;
    broken[at + 1] = 0xfe;
    assert!(s.on_frame(&broken).is_empty());
    assert!(s.on_frame(&[0xff, 0xff, 0xff]).is_empty());
    // The session is still open.
    assert!(s.is_accepted());
    assert!(s.on_frame(&report(true, "fine now", "")).is_empty());
    assert_eq!(reports.latest("web").map(|r| r.message), Some("fine now".into()));
}
