"""A small MCP server over stdio (newline-delimited JSON-RPC), with no dependency: the tests'
peer for what a real server may do (constrained arguments, an error result, a big reply, a
slow call, a crash mid-call, a schema the constraint refuses). Like the SDK's servers, it runs
each call on a thread of its own (a slow call does not hold up the next) and honours
`notifications/cancelled` (a cancelled call stops and gets no reply). It logs every call's name
and arguments, and each cancellation, to $MCP_LOG and its pid to $MCP_PID."""

import json
import os
import sys
import threading

TOOLS = [
    {"name": "echo", "description": "Echoes a short text back.",
     "inputSchema": {"type": "object", "$schema": "http://json-schema.org/draft-07/schema#",
                     "properties": {"text": {"type": "string", "maxLength": 40,
                                             "description": "what to echo"},
                                    "times": {"type": "integer", "minimum": 1, "maximum": 3}},
                     "required": ["text"], "additionalProperties": False}},
    {"name": "big", "description": "A long reply.",
     "inputSchema": {"type": "object", "properties": {}}},
    {"name": "fail", "description": "Always an error result.",
     "inputSchema": {"type": "object", "properties": {}}},
    {"name": "slow", "description": "Answers after some seconds.",
     "inputSchema": {"type": "object", "properties": {"secs": {"type": "integer"}},
                     "required": ["secs"]}},
    {"name": "crash", "description": "Exits in the middle of the call.",
     "inputSchema": {"type": "object", "properties": {}}},
    {"name": "negated", "description": "A schema the constraint refuses.",
     "inputSchema": {"type": "object", "properties": {"x": {"not": {"type": "null"}}}}},
]


LOCK = threading.Lock()
# The calls under way: request id -> (tool, the event their cancellation sets).
RUNNING = {}


def send(message):
    with LOCK:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def log(line):
    path = os.environ.get("MCP_LOG")
    if path:
        with LOCK, open(path, "a") as f:
            f.write(line + "\n")


def call(name, args, cancelled):
    """The call's result, or None for an unknown tool, or False when it was cancelled."""
    log(json.dumps({"tool": name, "arguments": args}))
    if name == "echo":
        text = " ".join([args["text"]] * args.get("times", 1))
        return {"content": [{"type": "text", "text": "echo: " + text}],
                "structuredContent": {"echoed": text}}
    if name == "big":
        return {"content": [{"type": "text", "text": "".join(str(i % 10) for i in range(5000))}]}
    if name == "fail":
        return {"content": [{"type": "text", "text": "the widget is broken"}], "isError": True}
    if name == "slow":
        if cancelled.wait(args["secs"]):
            return False
        return {"content": [{"type": "text", "text": "slept"}]}
    if name == "crash":
        sys.stderr.write("crashing on purpose\n")
        sys.stderr.flush()
        os._exit(3)
    return None


def run(mid, name, args, cancelled):
    result = call(name, args, cancelled)
    with LOCK:
        RUNNING.pop(mid, None)
    if result is None:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32602, "message": "unknown tool"}})
    elif result is not False:
        send({"jsonrpc": "2.0", "id": mid, "result": result})


def main():
    pid = os.environ.get("MCP_PID")
    if pid:
        with open(pid, "w") as f:
            f.write(str(os.getpid()))
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        method, mid = msg.get("method"), msg.get("id")
        if method == "notifications/cancelled":
            params = msg.get("params") or {}
            with LOCK:
                running = RUNNING.get(params.get("requestId"))
            if running:
                log(json.dumps({"cancelled": running[0], "reason": params.get("reason")}))
                running[1].set()
            continue
        if mid is None:
            continue
        if method == "initialize":
            version = msg["params"].get("protocolVersion", "2025-06-18")
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "protocolVersion": version, "capabilities": {"tools": {}},
                "serverInfo": {"name": os.environ.get("MCP_NAME", "test"), "version": "1"}}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": mid, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            name = msg["params"]["name"]
            cancelled = threading.Event()
            with LOCK:
                RUNNING[mid] = (name, cancelled)
            args = msg["params"].get("arguments") or {}
            threading.Thread(target=run, args=(mid, name, args, cancelled), daemon=True).start()
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": mid, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": mid,
                  "error": {"code": -32601, "message": "no method " + method}})


main()
