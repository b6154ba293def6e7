"""The peer a local user would run, driven one request at a time: llama-cpp-python's `Llama`,
which reuses the longest common prefix with its previous prompt. `cargo bench -p caldrix --bench
pool -- MODEL --peer PYTHON` starts one per workload (so each starts cold) and runs each request
on the pool and on this peer back to back, so that both sides of a pair see the machine in the
same minute.

    peer-llama.py MODEL THREADS

Reads one JSON array of token ids per line on stdin; writes one JSON line per prompt on stdout:
{"recomputed": ROWS, "ttft_ms": MS}.
"""

import json
import sys
import time

from llama_cpp import Llama


def main():
    model, threads = sys.argv[1], int(sys.argv[2])
    llm = Llama(model_path=model, n_ctx=8192, n_batch=512, n_ubatch=512, n_threads=threads,
                n_threads_batch=threads, flash_attn=True, verbose=False)
    previous = []
    for line in sys.stdin:
        ids = json.loads(line)
        # What Llama.generate(reset=True) reuses: the common prefix with the previous prompt,
        # short of the last token.
        prefix = 0
        for a, b in zip(previous, ids[:-1]):
            if a != b:
                break
            prefix += 1
        started = time.perf_counter()
        next(llm.generate(ids, temp=0.0, reset=True))
        reply = {"recomputed": len(ids) - prefix, "ttft_ms": (time.perf_counter() - started) * 1e3}
        print(json.dumps(reply), flush=True)
        previous = ids


if __name__ == "__main__":
    sys.exit(main())
