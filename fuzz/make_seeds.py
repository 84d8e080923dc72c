#!/usr/bin/env python3
"""Writes the seed inputs of the control_interface_frames fuzz target into
seeds/control_interface_frames/ (protobuf encoded by hand, no dependencies).
Input layout: config byte, chunk-size count, chunk sizes, then the stream."""
import pathlib


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def ld(num, payload):
    """A length-delimited field."""
    if isinstance(payload, str):
        payload = payload.encode()
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def frame(message):
    return varint(len(message)) + message


HELLO = ld(1, ld(2, "1.0.0"))


def request(rid, content_field, content):
    return ld(3, ld(1, rid) + ld(content_field, content))


def complete_state(masks, subscribe=False):
    return b"".join(ld(1, m) for m in masks) + (b"\x10\x01" if subscribe else b"")


def update_config(key, value):
    item = ld(1, value)  # ConfigItem.String
    config_map = ld(1, ld(1, key) + ld(2, item))  # map entry
    state = ld(1, ld(3, config_map))  # CompleteState.desiredState.configs
    return state + ld(2, f"desiredState.configs.{key}")


def logs(*names):
    return b"".join(ld(1, ld(1, n)) for n in names)


SEEDS = {
    # rules 2 (desiredState rw, workloadStates r, logs app*), limit 4 MiB, 1-byte chunks
    "hello_read_update": (0x17, [0], [
        HELLO,
        request("r1", 3, complete_state(["workloadStates"])),
        request("r2", 3, complete_state(["desiredState.configs"], subscribe=True)),
        request("r3", 2, update_config("bench", "v1")),
        request("r4", 6, b""),
    ]),
    "logs_and_denials": (0x16, [6, 2, 200], [
        HELLO,
        request("l1", 4, logs("app_1", "app_secret")),
        request("l2", 5, b""),
        request("d1", 3, complete_state(["agents"])),
        request("d2", 3, complete_state([])),
    ]),
    "request_before_hello": (0x0D, [255], [
        request("r1", 3, complete_state(["workloadStates"])),
        HELLO,
    ]),
    "bad_version_then_more": (0x07, [3, 1], [ld(1, ld(2, "2.0.0")), HELLO]),
    "oversized_prefix": (0x03, [0, 7], [HELLO]),
    "star_rules_update": (0x0F, [31], [
        HELLO,
        request("u1", 2, update_config("x", "y")),
        request("u2", 3, complete_state([])),
    ]),
}


def main():
    out = pathlib.Path(__file__).parent / "seeds" / "control_interface_frames"
    out.mkdir(parents=True, exist_ok=True)
    for name, (config, sizes, messages) in SEEDS.items():
        stream = b"".join(frame(m) for m in messages)
        if name == "oversized_prefix":
            stream += varint(1 << 40)
        (out / name).write_bytes(bytes([config, len(sizes) - 1, *sizes]) + stream)


if __name__ == "__main__":
    main()
