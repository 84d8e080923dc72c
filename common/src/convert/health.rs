//! Wire <-> model of a workload's health fields (probes, restartBackoff,
//! update).

use ank_proto::ank_base as pb;

use super::ConvertError;
use crate::health_spec::{
    ExecAction, HttpGetAction, Probe, RestartBackoff, SelfReportAction, TcpSocketAction, UpdateGate,
};

pub(crate) fn probe_from_pb(p: pb::Probe) -> Result<Probe, ConvertError> {
    let port = |port: u32, what: &str| {
        u16::try_from(port).map_err(|_| ConvertError(format!("{what}.port {port} is not a port number")))
    };
    Ok(Probe {
        exec: p.exec.map(|e| ExecAction { command: e.command }),
        http_get: p
            .http_get
            .map(|h| {
                Ok::<_, ConvertError>(HttpGetAction { path: h.path, port: port(h.port, "httpGet")?, host: h.host })
            })
            .transpose()?,
        tcp_socket: p
            .tcp_socket
            .map(|t| Ok::<_, ConvertError>(TcpSocketAction { port: port(t.port, "tcpSocket")?, host: t.host }))
            .transpose()?,
        self_report: p.self_report.map(|_| SelfReportAction {}),
        initial_delay_seconds: p.initial_delay_seconds,
        period_seconds: p.period_seconds,
        timeout_seconds: p.timeout_seconds,
        success_threshold: p.success_threshold,
        failure_threshold: p.failure_threshold,
    })
}

pub(crate) fn probe_to_pb(p: Probe) -> pb::Probe {
    pb::Probe {
        exec: p.exec.map(|e| pb::ExecAction { command: e.command }),
        http_get: p.http_get.map(|h| pb::HttpGetAction { path: h.path, port: h.port.into(), host: h.host }),
        tcp_socket: p.tcp_socket.map(|t| pb::TcpSocketAction { port: t.port.into(), host: t.host }),
        self_report: p.self_report.map(|_| pb::SelfReportAction {}),
        initial_delay_seconds: p.initial_delay_seconds,
        period_seconds: p.period_seconds,
        timeout_seconds: p.timeout_seconds,
        success_threshold: p.success_threshold,
        failure_threshold: p.failure_threshold,
    }
}

pub(crate) fn backoff_from_pb(b: pb::RestartBackoff) -> RestartBackoff {
    RestartBackoff {
        initial_delay: b.initial_delay,
        max_delay: b.max_delay,
        reset_after: b.reset_after,
        attempts: b.attempts,
        interval: b.interval,
    }
}

pub(crate) fn backoff_to_pb(b: RestartBackoff) -> pb::RestartBackoff {
    pb::RestartBackoff {
        initial_delay: b.initial_delay,
        max_delay: b.max_delay,
        reset_after: b.reset_after,
        attempts: b.attempts,
        interval: b.interval,
    }
}

pub(crate) fn gate_from_pb(g: pb::UpdateGate) -> UpdateGate {
    UpdateGate {
        healthy_deadline: g.healthy_deadline,
        min_healthy_time: g.min_healthy_time,
        auto_revert: g.auto_revert,
    }
}

pub(crate) fn gate_to_pb(g: UpdateGate) -> pb::UpdateGate {
    pb::UpdateGate {
        healthy_deadline: g.healthy_deadline,
        min_healthy_time: g.min_healthy_time,
        auto_revert: g.auto_revert,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_goes_over_the_wire_and_back_unchanged() {
        let p: Probe = serde_saphyr::from_str(
            "httpGet: {path: /ready, port: 8080, host: 10.0.0.2}\ninitialDelaySeconds: 1\nperiodSeconds: 2\nfailureThreshold: 4",
        )
        .unwrap();
        assert_eq!(probe_from_pb(probe_to_pb(p.clone())).unwrap(), p);
        let bad = pb::Probe { tcp_socket: Some(pb::TcpSocketAction { port: 70000, host: None }), ..Default::default() };
        assert!(probe_from_pb(bad).unwrap_err().to_string().contains("70000"));
    }
}
