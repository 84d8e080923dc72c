//! Length-delimited protobuf frames on the control-interface pipes: a
//! varint byte count, then that many bytes. [`FrameDecoder`] takes bytes
//! in whatever pieces the pipe delivers and yields whole frames; a length
//! prefix that is no u64 varint (longer than ten bytes or beyond 64 bits),
//! or a frame larger than the limit, is an error (the pipe is then closed,
//! never buffered without bound).

use thiserror::Error;

/// Largest frame accepted from a workload by default.
pub const MAX_FRAME_LEN: usize = 4 * 1024 * 1024;
/// A u64 varint has at most 10 bytes.
pub const MAX_VARINT_LEN: usize = 10;

/// Why the byte stream cannot be framed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FrameError {
    #[error("length prefix longer than {MAX_VARINT_LEN} bytes")]
    PrefixTooLong,
    #[error("length prefix beyond 64 bits")]
    PrefixOverflow,
    #[error("frame of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge { len: u64, max: usize },
}

/// Splits a byte stream into frames.
// [impl->swdd~agent-uses-length-delimited-protobuf-for-pipes~1]
#[derive(Debug)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    max: usize,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        Self::new(MAX_FRAME_LEN)
    }
}

impl FrameDecoder {
    /// A decoder that refuses frames larger than `max` bytes.
    pub fn new(max: usize) -> Self {
        Self { buf: Vec::new(), max }
    }

    /// Adds bytes read from the pipe.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes held that are not part of a returned frame yet. Once
    /// [`FrameDecoder::next_frame`] has returned `Ok(None)` this is below
    /// the limit plus [`MAX_VARINT_LEN`] (the fuzz target checks it).
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The next whole frame, `None` until enough bytes arrived. The size is
    /// checked as soon as the prefix is complete, before the body arrives.
    pub fn next_frame(&mut self) -> Result<Option<Vec<u8>>, FrameError> {
        let Some((len, prefix)) = read_varint(&self.buf)? else { return Ok(None) };
        if len > self.max as u64 {
            return Err(FrameError::TooLarge { len, max: self.max });
        }
        let end = prefix + len as usize;
        if self.buf.len() < end {
            return Ok(None);
        }
        let frame = self.buf[prefix..end].to_vec();
        self.buf.drain(..end);
        Ok(Some(frame))
    }
}

/// `(value, bytes used)`, `None` if the varint is not complete yet.
fn read_varint(buf: &[u8]) -> Result<Option<(u64, usize)>, FrameError> {
    let mut value: u64 = 0;
    for (i, byte) in buf.iter().enumerate() {
        if i >= MAX_VARINT_LEN {
            return Err(FrameError::PrefixTooLong);
        }
        // A last (tenth) byte holds only bit 63; more would be cut off
        // silently and frame the stream at a wrong length (prost rejects it too).
        if i == MAX_VARINT_LEN - 1 && byte & 0x80 == 0 && *byte > 1 {
            return Err(FrameError::PrefixOverflow);
        }
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(Some((value, i + 1)));
        }
    }
    if buf.len() >= MAX_VARINT_LEN {
        return Err(FrameError::PrefixTooLong);
    }
    Ok(None)
}

/// A message as one frame: varint length, then the bytes.
pub fn encode_frame(message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len() + MAX_VARINT_LEN);
    let mut len = message.len() as u64;
    loop {
        let byte = (len & 0x7f) as u8;
        len >>= 7;
        if len == 0 {
            out.push(byte);
            break;
        }
        out.push(byte | 0x80);
    }
    out.extend_from_slice(message);
    out
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;

    #[test]
    // [utest->swdd~agent-uses-length-delimited-protobuf-for-pipes~1]
    fn frames_match_prost_length_delimited_and_survive_any_split() {
        let hello = crate::control_api::ToAnkaios {
            to_ankaios_enum: Some(crate::control_api::to_ankaios::ToAnkaiosEnum::Hello(crate::control_api::Hello {
                protocol_version: "1.0.0".into(),
            })),
        };
        let body = vec![7u8; 300]; // a two-byte prefix
        let mut stream = hello.encode_length_delimited_to_vec();
        assert_eq!(encode_frame(&hello.encode_to_vec()), stream);
        stream.extend(encode_frame(&body));
        stream.extend(encode_frame(&[]));
        for split in 0..=stream.len() {
            let mut d = FrameDecoder::default();
            let mut frames = Vec::new();
            for part in [&stream[..split], &stream[split..]] {
                for byte in part {
                    d.push(std::slice::from_ref(byte));
                    while let Some(f) = d.next_frame().unwrap() {
                        frames.push(f);
                    }
                }
            }
            assert_eq!(frames.len(), 3, "split at {split}");
            assert_eq!(crate::control_api::ToAnkaios::decode(frames[0].as_slice()).unwrap(), hello);
            assert_eq!(frames[1], body);
            assert!(frames[2].is_empty());
        }
    }

    #[test]
    fn oversized_and_overlong_prefixes_are_errors() {
        let mut d = FrameDecoder::new(1024);
        d.push(&encode_frame(&vec![0u8; 10 * 1024 * 1024])[..4]);
        assert_eq!(d.next_frame(), Err(FrameError::TooLarge { len: 10 * 1024 * 1024, max: 1024 }));
        let mut d = FrameDecoder::default();
        d.push(&[0xff; 11]);
        assert_eq!(d.next_frame(), Err(FrameError::PrefixTooLong));
        let mut d = FrameDecoder::default();
        d.push(&[0x80, 0x80]);
        assert_eq!(d.next_frame(), Ok(None), "an incomplete prefix waits");
    }

    #[test]
    // Found by fuzz/fuzz_targets/control_interface_frames.rs: a ten-byte
    // prefix whose last byte has more than bit 63 was truncated, e.g. to 0
    // (an empty frame) for nine 0x80 and a 0x02.
    fn ten_byte_prefixes_beyond_64_bits_are_errors_as_in_prost() {
        for last in [0x02u8, 0x05, 0x7f] {
            let mut prefix = vec![0x80u8; 9];
            prefix.push(last);
            assert!(prost::decode_length_delimiter(prefix.as_slice()).is_err());
            let mut d = FrameDecoder::default();
            d.push(&prefix);
            d.push(&[0u8; 16]);
            assert_eq!(d.next_frame(), Err(FrameError::PrefixOverflow), "last byte {last:#x}");
        }
        // Bit 63 alone still decodes (as the too large length it is).
        let mut d = FrameDecoder::default();
        d.push(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]);
        assert_eq!(d.next_frame(), Err(FrameError::TooLarge { len: 1 << 63, max: MAX_FRAME_LEN }));
    }
}
