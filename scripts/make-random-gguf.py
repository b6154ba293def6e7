#!/usr/bin/env python3
"""Writes a GGUF of a llama-shaped model with random Q4_0 weights (issue 46): the GPU check runs
where no model can be fetched and little can be carried, and speed does not depend on the
weights. Standard library only.

    scripts/make-random-gguf.py SIZE OUT.gguf      SIZE: tiny, 1b or 8b

`1b` is Llama 3.2 1B's shape, `8b` Llama 3.1 8B's (a 32,000-token vocabulary for both, so the
embedding and output matrices are smaller than theirs), `tiny` a few MiB for checking the
writer. The tokenizer is a byte-level SentencePiece vocabulary (every byte is a token) and the
chat template ChatML, so caldrix can render and tokenize against it.
"""

import os
import struct
import sys

SHAPES = {
    # n_embd, layers, heads, kv heads, ffn, vocab, context
    "tiny": (256, 2, 4, 2, 512, 512, 8192),
    "1b": (2048, 16, 32, 8, 8192, 32000, 8192),
    "8b": (4096, 32, 32, 8, 14336, 32000, 8192),
}

ALIGN = 32
F32, Q4_0 = 0, 2
T_U32, T_F32, T_STR, T_ARR, T_I32 = 4, 6, 8, 9, 5
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def s(text):
    b = text.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, kind, value):
    out = s(key) + struct.pack("<I", kind)
    if kind == T_U32:
        return out + struct.pack("<I", value)
    if kind == T_F32:
        return out + struct.pack("<f", value)
    if kind == T_STR:
        return out + s(value)
    raise ValueError(kind)


def arr(key, kind, values):
    out = s(key) + struct.pack("<I", T_ARR) + struct.pack("<IQ", kind, len(values))
    if kind == T_STR:
        return out + b"".join(s(v) for v in values)
    if kind == T_F32:
        return out + b"".join(struct.pack("<f", v) for v in values)
    if kind == T_I32:
        return out + b"".join(struct.pack("<i", v) for v in values)
    raise ValueError(kind)


def vocabulary(n):
    tokens, types = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"], [2, 3, 3, 3, 3]
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types += [6] * 256
    i = 0
    while len(tokens) < n:
        tokens.append(f"\u2581t{i}")
        types.append(1)
        i += 1
    return tokens[:n], types[:n]


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in SHAPES:
        sys.exit(__doc__)
    size, out = sys.argv[1], sys.argv[2]
    embd, layers, heads, kv_heads, ffn, vocab, ctx = SHAPES[size]
    head = embd // heads
    kv_embd = head * kv_heads
    tensors = [("token_embd.weight", Q4_0, (embd, vocab))]
    for i in range(layers):
        p = f"blk.{i}."
        tensors += [
            (p + "attn_norm.weight", F32, (embd,)),
            (p + "attn_q.weight", Q4_0, (embd, embd)),
            (p + "attn_k.weight", Q4_0, (embd, kv_embd)),
            (p + "attn_v.weight", Q4_0, (embd, kv_embd)),
            (p + "attn_output.weight", Q4_0, (embd, embd)),
            (p + "ffn_norm.weight", F32, (embd,)),
            (p + "ffn_gate.weight", Q4_0, (embd, ffn)),
            (p + "ffn_up.weight", Q4_0, (embd, ffn)),
            (p + "ffn_down.weight", Q4_0, (ffn, embd)),
        ]
    tensors += [("output_norm.weight", F32, (embd,)), ("output.weight", Q4_0, (embd, vocab))]

    tokens, types = vocabulary(vocab)
    meta = [
        kv("general.architecture", T_STR, "llama"),
        kv("general.name", T_STR, f"random-llama-{size}"),
        kv("general.alignment", T_U32, ALIGN),
        kv("general.file_type", T_U32, 2),
        kv("llama.context_length", T_U32, ctx),
        kv("llama.embedding_length", T_U32, embd),
        kv("llama.block_count", T_U32, layers),
        kv("llama.feed_forward_length", T_U32, ffn),
        kv("llama.attention.head_count", T_U32, heads),
        kv("llama.attention.head_count_kv", T_U32, kv_heads),
        kv("llama.rope.dimension_count", T_U32, head),
        kv("llama.rope.freq_base", T_F32, 500000.0),
        kv("llama.attention.layer_norm_rms_epsilon", T_F32, 1e-5),
        kv("llama.vocab_size", T_U32, vocab),
        kv("tokenizer.ggml.model", T_STR, "llama"),
        arr("tokenizer.ggml.tokens", T_STR, tokens),
        arr("tokenizer.ggml.scores", T_F32, [0.0 if t != 1 else -float(i) for i, t in enumerate(types)]),
        arr("tokenizer.ggml.token_type", T_I32, types),
        kv("tokenizer.ggml.bos_token_id", T_U32, 1),
        kv("tokenizer.ggml.eos_token_id", T_U32, 4),
        kv("tokenizer.ggml.unknown_token_id", T_U32, 0),
        kv("tokenizer.chat_template", T_STR, CHATML),
    ]

    def nbytes(kind, dims):
        n = 1
        for d in dims:
            n *= d
        return n * 4 if kind == F32 else n // 32 * 18

    infos, offset = [], 0
    for name, kind, dims in tensors:
        infos.append(s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
                     + struct.pack("<IQ", kind, offset))
        offset += nbytes(kind, dims)
        offset += -offset % ALIGN

    # One random chunk of Q4_0 blocks, reused: each block a small fixed scale (f16 1/64, so the
    # values stay finite through the layers) and random 4-bit weights.
    scale = struct.pack("<e", 1.0 / 64)
    chunk = b"".join(scale + os.urandom(16) for _ in range(1 << 16))
    ones = struct.pack("<f", 1.0)
    with open(out, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(meta)))
        for m in meta:
            f.write(m)
        for i in infos:
            f.write(i)
        f.write(b"\0" * (-f.tell() % ALIGN))
        base = f.tell()
        for name, kind, dims in tensors:
            n = nbytes(kind, dims)
            if kind == F32:
                f.write(ones * (n // 4))
            else:
                while n > 0:
                    piece = chunk[: min(n, len(chunk))]
                    f.write(piece)
                    n -= len(piece)
            f.write(b"\0" * (-(f.tell() - base) % ALIGN))
    print(f"make-random-gguf: wrote {out} ({os.path.getsize(out) >> 20} MiB, {size})")


if __name__ == "__main__":
    main()
