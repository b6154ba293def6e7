"""The peer a local user would run, driven one request at a time: llama-cpp-python's `Llama`,
which reuses the longest common prefix with its previous prompt. `cargo bench -p caldrix --bench
pool -- MODEL --peer PYTHON` starts it as a child and, for each request, runs the pool and then
this peer (or the other way round) on the same prompt ids, so that both sides of a pair see the
machine in the same minute.

Reads JSON lines on stdin, writes one JSON line per request on stdout:
    {"reset": {"model": PATH, "threads": N}}  -> {"ready": true}       (a fresh, cold Llama)
    {"ids": [TOKEN, ...]}                     -> {"recomputed": ROWS, "ttft_ms": MS}
"""

import json
import sys
import time

from llama_cpp import Llama


def main():
    llm = None
    previous = []
    for line in sys.stdin:
        request = json.loads(line)
        if "reset" in request:
            spec = request["reset"]
            llm = None  # free the previous context before loading the next
            llm = Llama(model_path=spec["model"], n_ctx=8192, n_batch=512, n_ubatch=512,
                        n_threads=spec["threads"], n_threads_batch=spec["threads"],
                        flash_attn=True, verbose=False)
            previous = []
            reply = {"ready": True}
        else:
            ids = request["ids"]
            # What Llama.generate(reset=True) reuses: the common prefix with the previous
            # prompt, short of the last token.
            prefix = 0
            for a, b in zip(previous, ids[:-1]):
                if a != b:
                    break
                prefix += 1
            started = time.perf_counter()
            next(llm.generate(ids, temp=0.0, reset=True))
            reply = {"recomputed": len(ids) - prefix,
                     "ttft_ms": (time.perf_counter() - started) * 1e3}
            previous = ids
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    sys.exit(main())
