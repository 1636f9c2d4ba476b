#!/usr/bin/env python3
"""Writes a small seed corpus for fuzz/gguf_fuzz.cpp (formats.md §2) into OUT_DIR.

Seeds are built from the fixture models' real metadata (every qwen35.* key, a few tokens, a short
chat template), so the fuzzer starts from files that pass the reader and the qwen35 config checks,
plus cut copies of the fixtures' header/metadata part. Total size stays well under 200 KB.

usage: tools/gguf_seeds.py FIXTURES_DIR OUT_DIR
"""
import os
import struct
import sys

# GGUF value types (formats.md §2.4): id -> struct format of one scalar.
SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<B", 10: "<Q", 11: "<q", 12: "<d"}
STRING, ARRAY = 8, 9


def read_gguf_meta(path):
    """(version, [(key, type, value)], [(name, ne, type)]) of a GGUF file; values as Python objects."""
    with open(path, "rb") as f:
        b = f.read()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from(fmt, b, pos)[0]
        pos += struct.calcsize(fmt)
        return v

    def string():
        nonlocal pos
        n = take("<Q")
        s = b[pos:pos + n]
        pos += n
        return s

    def value(t):
        if t == STRING:
            return string()
        if t == ARRAY:
            et, n = take("<I"), take("<Q")
            return (et, [value(et) for _ in range(n)])
        return take(SCALAR[t])

    assert take("<I") == 0x46554747
    version, n_t, n_kv = take("<I"), take("<Q"), take("<Q")
    kv = []
    for _ in range(n_kv):
        k = string().decode()
        t = take("<I")
        kv.append((k, t, value(t)))
    tensors = []
    for _ in range(n_t):
        name = string().decode()
        nd = take("<I")
        ne = [take("<Q") for _ in range(nd)]
        tensors.append((name, ne, take("<I")))
        take("<Q")
    return version, kv, tensors


BLOCK = {0: (1, 4), 1: (1, 2), 8: (32, 34), 12: (256, 144), 14: (256, 210), 30: (1, 2)}


def write_gguf(kv, tensors, version=3, alignment=32):
    """Bytes of a GGUF in ggml's layout; tensors = [(name, ne, type)], data is a byte pattern."""
    out = bytearray(struct.pack("<IIQQ", 0x46554747, version, len(tensors), len(kv)))

    def string(s):
        s = s if isinstance(s, bytes) else s.encode()
        out.extend(struct.pack("<Q", len(s)) + s)

    def value(t, v):
        if t == STRING:
            string(v)
        elif t == ARRAY:
            et, items = v
            out.extend(struct.pack("<IQ", et, len(items)))
            for x in items:
                value(et, x)
        else:
            out.extend(struct.pack(SCALAR[t], v))

    for k, t, v in kv:
        string(k)
        out.extend(struct.pack("<I", t))
        value(t, v)
    sizes, off = [], 0
    for name, ne, t in tensors:
        bs, ts = BLOCK[t]
        n = ne[0] // bs * ts
        for d in ne[1:]:
            n *= d
        sizes.append(n)
        string(name)
        out.extend(struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne))
        out.extend(struct.pack("<IQ", t, off))
        off += (n + alignment - 1) // alignment * alignment
    if tensors:
        out.extend(b"\0" * (-len(out) % alignment))
    for i, n in enumerate(sizes):
        out.extend(bytes((i * 7 + j) % 251 for j in range(n)))  # arbitrary bytes; fp16 scales may be any value
        out.extend(b"\0" * (-len(out) % alignment))
    return bytes(out)


def shrink(kv, n_vocab):
    """The fixture's metadata with arrays and the chat template cut short."""
    out = []
    for k, t, v in kv:
        if k in ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type"):
            v = (v[0], v[1][:n_vocab])
        elif k == "tokenizer.ggml.merges":
            v = (v[0], v[1][:4])
        elif k == "tokenizer.chat_template":
            v = v[:48]
        out.append((k, t, v))
    return out


def main():
    fixtures, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    seeds = {}
    nv = 8
    for model, untied in (("tiny-gqa/tiny-gqa-q4_k_m.gguf", True), ("tiny-sym/tiny-sym-bf16.gguf", False)):
        path = os.path.join(fixtures, "models", model)
        _, kv, _ = read_gguf_meta(path)
        kv = shrink(kv, nv)
        h = next(v for k, t, v in kv if k == "qwen35.embedding_length")
        tensors = [("token_embd.weight", [h, nv], 12), ("output_norm.weight", [h], 0)]
        if untied:
            tensors.append(("output.weight", [h, nv], 14))
        stem = os.path.basename(model)[:-5]
        seeds[stem + "-mini.gguf"] = write_gguf(kv, tensors)
        seeds[stem + "-mini-align64-v2.gguf"] = write_gguf(
            [("general.alignment", 4, 64)] + kv, tensors, version=2, alignment=64)
        blocks = next(v for k, t, v in kv if k == "qwen35.block_count")
        seeds[stem + "-mini-recurrent.gguf"] = write_gguf(
            kv + [("qwen35.attention.recurrent_layers", ARRAY, (7, [int((i + 1) % 4 != 0) for i in range(blocks)]))],
            tensors)
        seeds[stem + "-mini-vocab-only.gguf"] = write_gguf(kv, [])
        with open(path, "rb") as f:
            head = f.read(6000)
        seeds[stem + "-head-6000.gguf"] = head
        seeds[stem + "-head-1500.gguf"] = head[:1500]
    # formats.md §2.9 worked example, and one of every scalar value type.
    seeds["worked-example.gguf"] = write_gguf(
        [("general.architecture", STRING, "qwen35"), ("qwen35.block_count", 4, 2)], [("output_norm.weight", [4], 0)])
    seeds["all-types.gguf"] = write_gguf(
        [(f"t.{t}", t, 1) for t in SCALAR] + [("t.s", STRING, "x"), ("t.a", ARRAY, (8, ["a", "bc"])),
                                              ("t.f", ARRAY, (12, [0.5, -2.0]))],
        [("a", [32, 2], 8), ("b", [2, 3, 2, 2], 30), ("c", [64], 1)])
    total = 0
    for name, data in seeds.items():
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(data)
        total += len(data)
    print(f"{len(seeds)} seeds, {total} bytes in {out_dir}")


if __name__ == "__main__":
    main()
