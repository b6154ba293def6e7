"""The official OpenAI and Anthropic Python SDKs against `caldrix pool --http` (driven by
tests/it/http.rs, which starts the pool and checks what this prints).

`python3 http_sdk.py CASE` with CALDRIX_URL set: each case makes its calls through the SDK and
prints one JSON line per observation ({"case": ..., ...}); the Rust test asserts on them (the
schemas are validated there). An SDK exception where none is expected fails the run.
"""

import json
import os
import sys
import time

import anthropic
import openai

URL = os.environ["CALDRIX_URL"]
MODEL = "main"
OAI = openai.OpenAI(base_url=URL + "/v1", api_key="unused", max_retries=0, timeout=300)
ANT = anthropic.Anthropic(base_url=URL, api_key="unused", max_retries=0, timeout=300)

READ = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "lines": {"type": "integer", "minimum": 1}},
    "required": ["path"],
    "additionalProperties": False,
}
# The command is bounded, as a careful client's is: a 135M model sampled hot can write one
# string until the tokens run out, and the Anthropic cases have no seed to pin it.
BASH = {
    "type": "object",
    "properties": {"command": {"type": "string", "maxLength": 120}},
    "required": ["command"],
    "additionalProperties": False,
}
CHAT_TOOLS = [
    {"type": "function", "function": {"name": "read_file", "description": "Reads a file.", "parameters": READ}},
    {"type": "function", "function": {"name": "bash", "description": "Runs a shell command.", "parameters": BASH}},
]
ASK = [
    {"role": "system", "content": "You are a coding agent. Use the tools."},
    {"role": "user", "content": "What is in src/main.rs?"},
]


def out(case, **fields):
    print(json.dumps({"case": case, **fields}), flush=True)


def models():
    out("models", ids=[m.id for m in OAI.models.list().data])


def chat():
    r = OAI.chat.completions.create(model=MODEL, messages=ASK[1:], max_tokens=12, seed=1)
    out("chat", text=r.choices[0].message.content, finish=r.choices[0].finish_reason,
        prompt=r.usage.prompt_tokens, completion=r.usage.completion_tokens)
    chunks = OAI.chat.completions.create(
        model=MODEL, messages=ASK[1:], max_tokens=12, seed=1, stream=True,
        stream_options={"include_usage": True})
    text, finish, usage, n = "", None, None, 0
    for c in chunks:
        n += 1
        if c.usage:
            usage = c.usage.completion_tokens
        for choice in c.choices:
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
    out("chat_stream", text=text, finish=finish, chunks=n, completion=usage)


SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


def json_schema():
    r = OAI.chat.completions.create(
        model=MODEL, max_tokens=96, seed=2,
        messages=[{"role": "user", "content": "Describe a person as JSON."}],
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA, "strict": True}})
    out("json_schema", schema=SCHEMA, text=r.choices[0].message.content, finish=r.choices[0].finish_reason)


def tools():
    for seed in range(20):
        r = OAI.chat.completions.create(
            model=MODEL, messages=ASK, tools=CHAT_TOOLS, tool_choice="required",
            parallel_tool_calls=False, temperature=1.0, seed=seed, max_tokens=256)
        m = r.choices[0].message
        calls = [{"name": c.function.name, "arguments": c.function.arguments, "id": c.id}
                 for c in (m.tool_calls or [])]
        out("tool_call", seed=seed, finish=r.choices[0].finish_reason, calls=calls, text=m.content)
    r = OAI.chat.completions.create(
        model=MODEL, messages=ASK, tools=CHAT_TOOLS, tool_choice="none", max_tokens=24, seed=1)
    m = r.choices[0].message
    out("tool_none", text=m.content, calls=len(m.tool_calls or []), finish=r.choices[0].finish_reason)
    # Streamed: the call arrives in chat's delta shape and reassembles.
    stream = OAI.chat.completions.create(
        model=MODEL, messages=ASK, tools=CHAT_TOOLS,
        tool_choice={"type": "function", "function": {"name": "bash"}},
        temperature=1.0, seed=7, max_tokens=256, stream=True)
    calls, finish = {}, None
    for c in stream:
        for choice in c.choices:
            finish = choice.finish_reason or finish
            for d in choice.delta.tool_calls or []:
                call = calls.setdefault(d.index, {"name": "", "arguments": ""})
                if d.function and d.function.name:
                    call["name"] += d.function.name
                if d.function and d.function.arguments:
                    call["arguments"] += d.function.arguments
    out("tool_stream", finish=finish, calls=list(calls.values()))
    # The tool's result goes back and the model answers (or calls again) under `auto`.
    first = calls[0]
    r = OAI.chat.completions.create(
        model=MODEL, tools=CHAT_TOOLS, max_tokens=24, seed=1,
        messages=ASK + [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": first["name"], "arguments": first["arguments"]}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "fn main() {}"},
        ])
    out("tool_result", finish=r.choices[0].finish_reason)


def responses():
    tool = {"type": "function", "name": "bash", "description": "Runs a shell command.", "parameters": BASH}
    r = OAI.responses.create(model=MODEL, input="List the files here.", instructions="You are a coding agent.",
                             tools=[tool], tool_choice="required", max_output_tokens=256,
                             temperature=1.0, parallel_tool_calls=False)
    out("responses", items=[{"type": i.type, "name": getattr(i, "name", None),
                             "arguments": getattr(i, "arguments", None)} for i in r.output],
        status=r.status)
    events, done = [], None
    with OAI.responses.stream(model=MODEL, input="List the files here.", tools=[tool],
                              tool_choice="required", max_output_tokens=256, temperature=1.0,
                              parallel_tool_calls=False) as s:
        for e in s:
            events.append(e.type)
        done = s.get_final_response()
    out("responses_stream", events=sorted(set(events)),
        items=[{"type": i.type, "name": getattr(i, "name", None),
                "arguments": getattr(i, "arguments", None)} for i in done.output])


ANT_TOOLS = [{"name": "bash", "description": "Runs a shell command.", "input_schema": BASH}]


def messages():
    # One call a reply: Anthropic's API has no seed, and a 135M model sampled at its default
    # temperature of 1 may repeat parallel calls until the tokens run out.
    one_call = {"type": "any", "disable_parallel_tool_use": True}
    r = ANT.messages.create(model=MODEL, max_tokens=256, system="You are a coding agent.",
                            messages=[{"role": "user", "content": "List the files here."}],
                            tools=ANT_TOOLS, tool_choice=one_call)
    blocks = [b.model_dump() for b in r.content]
    out("messages", stop=r.stop_reason, blocks=blocks)
    with ANT.messages.stream(model=MODEL, max_tokens=256, system="You are a coding agent.",
                             messages=[{"role": "user", "content": "List the files here."}],
                             tools=ANT_TOOLS, tool_choice=one_call) as s:
        types = sorted({e.type for e in s})
        final = s.get_final_message()
    out("messages_stream", stop=final.stop_reason, events=types,
        blocks=[b.model_dump() for b in final.content])
    use = next(b for b in final.content if b.type == "tool_use")
    r = ANT.messages.create(model=MODEL, max_tokens=16, system="You are a coding agent.",
                            tools=ANT_TOOLS,
                            messages=[{"role": "user", "content": "List the files here."},
                                      {"role": "assistant", "content": [use.model_dump()]},
                                      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                                                    "content": "README.md"}]}])
    out("messages_result", stop=r.stop_reason, usage=r.usage.model_dump())


def cached():
    # The test made an aerix-style request (over the socket) with this system prompt first.
    system = os.environ["CALDRIX_SHARED_SYSTEM"]
    r = OAI.chat.completions.create(model=MODEL, max_tokens=4, seed=1, messages=[
        {"role": "system", "content": system}, {"role": "user", "content": "And now?"}])
    out("cached_openai", prompt=r.usage.prompt_tokens, cached=r.usage.prompt_tokens_details.cached_tokens)
    r = ANT.messages.create(model=MODEL, max_tokens=4, system=system,
                            messages=[{"role": "user", "content": "And then?"}])
    out("cached_anthropic", usage=r.usage.model_dump())


def error(case, call):
    try:
        call()
    except (openai.APIStatusError, anthropic.APIStatusError) as e:
        out(case, status=e.status_code, body=e.body if isinstance(e.body, dict) else str(e.body))
        return
    out(case, status=200)


def bad():
    user = [{"role": "user", "content": "hi"}]
    error("unknown_model", lambda: OAI.chat.completions.create(model="nope", messages=user, max_tokens=2))
    error("unknown_model_anthropic", lambda: ANT.messages.create(model="nope", messages=user, max_tokens=2))
    error("n", lambda: OAI.chat.completions.create(model=MODEL, messages=user, n=2, max_tokens=2))
    error("over_window", lambda: OAI.chat.completions.create(
        model=MODEL, max_tokens=2, messages=[{"role": "user", "content": "word " * 6000}]))
    error("over_window_anthropic", lambda: ANT.messages.create(
        model=MODEL, max_tokens=2, messages=[{"role": "user", "content": "word " * 6000}]))
    error("max_tokens", lambda: OAI.chat.completions.create(model=MODEL, messages=user, max_tokens=100000))
    error("messages", lambda: OAI.chat.completions.create(
        model=MODEL, max_tokens=2, messages=[{"role": "user", "content": "a"}] * 4097))
    error("body", lambda: OAI.chat.completions.create(
        model=MODEL, max_tokens=2, messages=[{"role": "user", "content": "x" * (9 << 20)}]))
    error("bad_tool", lambda: OAI.chat.completions.create(
        model=MODEL, max_tokens=2, messages=user,
        tools=[{"type": "function", "function": {"name": "weird", "parameters": {
            "type": "object", "properties": {"a": {"$ref": "#/nowhere"}}}}}]))
    error("bad_field", lambda: OAI.chat.completions.create(
        model=MODEL, messages=user, max_tokens=2, temperature=9))
    # `max_connections` (the test's pool has 4, and one is this run's status client's at most):
    # hold streams open until one is refused.
    held = []
    try:
        for _ in range(6):
            held.append(OAI.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "Count to 500."}],
                max_tokens=1000, stream=True))
        out("connections", status=200)
    except openai.APIStatusError as e:
        out("connections", status=e.status_code, body=e.body, held=len(held))
    for s in held:
        s.close()
    # And the pool serves on, once the closed streams' cancellations have freed their slots.
    deadline = time.monotonic() + 30
    while True:
        try:
            r = OAI.chat.completions.create(model=MODEL, messages=user, max_tokens=2)
            break
        except openai.RateLimitError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    out("after", finish=r.choices[0].finish_reason)


def disconnect():
    stream = OAI.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Count from 1 to 1000, one per line."}],
        max_tokens=1500, temperature=1.0, seed=3, stream=True)
    seen = 0
    for c in stream:
        if c.choices and c.choices[0].delta.content:
            seen += 1
        if seen >= 4:
            break
    stream.close()
    out("closed", chunks=seen)
    sys.stdin.read()  # the test checks the member, then closes our stdin


if __name__ == "__main__":
    for name in sys.argv[1:]:
        globals()[name]()
