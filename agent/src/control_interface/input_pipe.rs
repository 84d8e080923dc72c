//! [`InputPipe`]: the agent's writing end of a workload's `input` FIFO.
//! A write the workload does not take within [`WRITE_TIMEOUT`] gives up, so
//! a workload that does not read cannot block the agent; the part of a
//! frame already in the pipe is finished before anything else is written,
//! so what the workload reads later is still whole frames.

use std::time::Duration;

use ank_proto::control_api as ci;
use prost::Message;
use tokio::io::AsyncWriteExt;
use tokio::net::unix::pipe;
use tokio::time::Instant;

use super::framing::encode_frame;

/// How long a write to a workload's `input` may block.
pub const WRITE_TIMEOUT: Duration = Duration::from_millis(500);

/// The writing end of one workload's `input` pipe.
pub struct InputPipe {
    writer: pipe::Sender,
    /// The rest of a frame whose beginning is already in the pipe.
    pending: Vec<u8>,
    workload: String,
}

impl InputPipe {
    pub fn new(writer: pipe::Sender, workload: &str) -> Self {
        Self { writer, pending: Vec::new(), workload: workload.to_owned() }
    }

    /// Writes one message; false if the workload did not take it within
    /// [`WRITE_TIMEOUT`] (the message is dropped: the workload counts as gone).
    // [impl->swdd~agent-forward-responses-to-control-interface-pipe~1]
    // [impl->swdd~agent-handles-control-interface-input-pipe-not-read~1]
    pub async fn send(&mut self, message: &ci::FromAnkaios) -> bool {
        let deadline = Instant::now() + WRITE_TIMEOUT;
        if !self.pending.is_empty() {
            let pending = std::mem::take(&mut self.pending);
            if let Err(rest) = self.write_until(&pending, deadline).await {
                self.pending = rest;
                self.gone(message.encoded_len());
                return false;
            }
        }
        let bytes = encode_frame(&message.encode_to_vec());
        match self.write_until(&bytes, deadline).await {
            Ok(()) => true,
            Err(rest) => {
                if rest.len() < bytes.len() {
                    self.pending = rest;
                }
                self.gone(bytes.len());
                false
            }
        }
    }

    /// Writes `bytes` until `deadline`; the unwritten rest on failure.
    async fn write_until(&mut self, bytes: &[u8], deadline: Instant) -> Result<(), Vec<u8>> {
        let mut written = 0;
        while written < bytes.len() {
            match tokio::time::timeout_at(deadline, self.writer.write(&bytes[written..])).await {
                Ok(Ok(n)) => written += n,
                Ok(Err(e)) => {
                    tracing::warn!("workload '{}': cannot write to its control interface: {e}", self.workload);
                    return Err(bytes[written..].to_vec());
                }
                Err(_) => return Err(bytes[written..].to_vec()),
            }
        }
        Ok(())
    }

    fn gone(&self, size: usize) {
        tracing::warn!(
            "workload '{}' does not read its control interface; a message of {size} bytes was dropped",
            self.workload
        );
    }
}

#[cfg(test)]
mod tests {
    use ank_proto::control_api::from_ankaios::FromAnkaiosEnum;
    use tokio::io::AsyncReadExt;

    use super::super::framing::FrameDecoder;
    use super::*;

    fn error_message(size: usize) -> ci::FromAnkaios {
        let response = ank_proto::ank_base::Response {
            request_id: "r".into(),
            response_content: Some(ank_proto::ank_base::response::ResponseContent::Error(ank_proto::ank_base::Error {
                message: "x".repeat(size),
            })),
        };
        ci::FromAnkaios { from_ankaios_enum: Some(FromAnkaiosEnum::Response(response)) }
    }

    #[tokio::test(start_paused = true)]
    // [utest->swdd~agent-handles-control-interface-input-pipe-not-read~1]
    async fn a_frame_cut_by_the_timeout_is_finished_before_the_next_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("input");
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let writer = pipe::OpenOptions::new().read_write(true).open_sender(&path).unwrap();
        let mut reader = pipe::OpenOptions::new().read_write(true).open_receiver(&path).unwrap();
        let mut input = InputPipe::new(writer, "app");
        // Bigger than the pipe: its start goes in, then the write times out.
        assert!(!input.send(&error_message(200 * 1024)).await);
        assert!(!input.pending.is_empty(), "the cut frame's rest is kept");
        // The workload starts reading; the next message completes the cut frame first.
        let read_all = tokio::spawn(async move {
            let mut decoder = FrameDecoder::default();
            let mut frames = Vec::new();
            let mut buf = vec![0u8; 64 * 1024];
            while frames.len() < 2 {
                let n = reader.read(&mut buf).await.unwrap();
                decoder.push(&buf[..n]);
                while let Some(frame) = decoder.next_frame().unwrap() {
                    frames.push(ci::FromAnkaios::decode(frame.as_slice()).unwrap());
                }
            }
            frames
        });
        assert!(input.send(&error_message(10)).await);
        let frames = read_all.await.unwrap();
        assert_eq!(frames, vec![error_message(200 * 1024), error_message(10)]);
    }
}
