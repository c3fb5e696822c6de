#!/usr/bin/env python3
"""A scripted model server for the real-agent tests, on loopback: the Anthropic Messages API
(`POST /v1/messages`, Claude Code) and the OpenAI Responses API (`POST /v1/responses`, Codex),
both with SSE streaming.

It answers each turn of the agent's main conversation with the next tool call of a script, and
keeps its own record of what it was sent (every request, every tool_result) as the ground truth
the tests compare sandbox-watch's report with. Standard library only.

    model_server.py --script SCRIPT.json --log LOG.json --port-file PORT

SCRIPT.json: {"steps": [{"tool": "Bash", "input": {"command": "..."}}, ...], "final": "text"}.
The main conversation is a request whose tools include the script's tools; its step is the
number of this server's tool calls already in its messages (so a retried request gets the same
answer). Other requests (titles, summaries, side questions) get a short text answer.

LOG.json is rewritten whole after every request: {"port", "requests": [...], "tool_results":
[{"step", "tool_use_id", "tool", "is_error", "content"}...], "sent": steps answered, "finished":
true once the final text went out}. The API key is never written.
"""

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ID_PREFIX = "toolu_sw_"
CALL_PREFIX = "call_sw_"


class State:
    def __init__(self, script, log_path):
        self.script = script
        self.log_path = log_path
        self.lock = threading.Lock()
        self.log = {
            "port": None,
            "requests": [],
            "tool_results": [],
            "sent": 0,
            "finished": False,
        }
        self.seen_results = set()

    def write(self):
        tmp = self.log_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.log, f, indent=1)
        os.replace(tmp, self.log_path)


def text_of(content):
    """A tool_result's content as text (a string, or a list of text blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict))
    return ""


def our_calls(messages):
    """This server's tool calls already in the conversation, in order."""
    calls = []
    for m in messages:
        if m.get("role") != "assistant" or not isinstance(m.get("content"), list):
            continue
        for b in m["content"]:
            if b.get("type") == "tool_use" and str(b.get("id", "")).startswith(ID_PREFIX):
                calls.append(b)
    return calls


def tool_results(messages):
    for m in messages:
        if m.get("role") != "user" or not isinstance(m.get("content"), list):
            continue
        for b in m["content"]:
            if b.get("type") == "tool_result":
                yield b


def message(model, blocks, stop_reason):
    return {
        "id": "msg_sw_%d" % int(time.time() * 1e6),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 100, "output_tokens": 20},
    }


def sse_events(msg):
    """The streaming form of a complete message, one content block at a time."""
    start = dict(msg, content=[], stop_reason=None)
    start["usage"] = {"input_tokens": 100, "output_tokens": 1}
    yield "message_start", {"type": "message_start", "message": start}
    for i, b in enumerate(msg["content"]):
        if b["type"] == "tool_use":
            yield "content_block_start", {
                "type": "content_block_start",
                "index": i,
                "content_block": dict(b, input={}),
            }
            delta = {"type": "input_json_delta", "partial_json": json.dumps(b["input"])}
        else:
            yield "content_block_start", {
                "type": "content_block_start",
                "index": i,
                "content_block": {"type": "text", "text": ""},
            }
            delta = {"type": "text_delta", "text": b["text"]}
        yield "content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": i}
    yield "message_delta", {
        "type": "message_delta",
        "delta": {"stop_reason": msg["stop_reason"], "stop_sequence": None},
        "usage": {"output_tokens": 20},
    }
    yield "message_stop", {"type": "message_stop"}


def responses_calls(items):
    """This server's function calls already in a Responses API input, in order."""
    return [
        i for i in items
        if isinstance(i, dict) and i.get("type") == "function_call" and str(i.get("call_id", "")).startswith(CALL_PREFIX)
    ]


def responses_events(model, item):
    """The streaming form of a response with one output item."""
    rid = "resp_sw_%d" % int(time.time() * 1e6)
    base = {"id": rid, "object": "response", "created_at": int(time.time()), "model": model, "output": []}
    yield "response.created", {"type": "response.created", "response": dict(base, status="in_progress")}
    yield "response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": item}
    if item["type"] == "message":
        text = item["content"][0]["text"]
        yield "response.output_text.delta", {
            "type": "response.output_text.delta", "item_id": item["id"], "output_index": 0, "content_index": 0, "delta": text
        }
    yield "response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}
    usage = {
        "input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 20, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 120,
    }
    done = dict(base, status="completed", output=[item], usage=usage)
    yield "response.completed", {"type": "response.completed", "response": done}


def make_handler(state):
    tools_needed = {s["tool"] for s in state.script["steps"]}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def reply_json(self, code, obj):
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def handle_any(self):
            n = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(n) if n else b""
            entry = {
                "at": time.time(),
                "method": self.command,
                "path": self.path,
                "user_agent": self.headers.get("user-agent"),
                "bytes": len(raw),
            }
            path = self.path.split("?")[0]
            if self.command == "POST" and path == "/v1/responses":
                return self.responses_api(raw, entry)
            if self.command == "POST" and path == "/v1/messages/count_tokens":
                entry["role"] = "count_tokens"
                with state.lock:
                    state.log["requests"].append(entry)
                    state.write()
                return self.reply_json(200, {"input_tokens": 100})
            if self.command != "POST" or path != "/v1/messages":
                entry["role"] = "other"
                with state.lock:
                    state.log["requests"].append(entry)
                    state.write()
                return self.reply_json(
                    404, {"type": "error", "error": {"type": "not_found_error", "message": "no such endpoint"}}
                )
            try:
                req = json.loads(raw)
            except ValueError:
                entry["role"] = "bad"
                with state.lock:
                    state.log["requests"].append(entry)
                    state.write()
                return self.reply_json(400, {"type": "error", "error": {"type": "invalid_request_error", "message": "not JSON"}})
            model = req.get("model", "model")
            messages = req.get("messages") or []
            tool_names = {t.get("name") for t in req.get("tools") or []}
            entry["model"] = model
            entry["stream"] = bool(req.get("stream"))
            with state.lock:
                if tools_needed <= tool_names:
                    calls = our_calls(messages)
                    step = len(calls)
                    entry["role"] = "main"
                    entry["step"] = step
                    names = {c["id"]: c["name"] for c in calls}
                    for r in tool_results(messages):
                        rid = r.get("tool_use_id")
                        if rid in names and rid not in state.seen_results:
                            state.seen_results.add(rid)
                            state.log["tool_results"].append(
                                {
                                    "step": int(rid[len(ID_PREFIX):]),
                                    "tool_use_id": rid,
                                    "tool": names[rid],
                                    "is_error": bool(r.get("is_error")),
                                    "content": text_of(r.get("content")),
                                }
                            )
                    steps = state.script["steps"]
                    if step < len(steps):
                        s = steps[step]
                        block = {
                            "type": "tool_use",
                            "id": "%s%02d" % (ID_PREFIX, step),
                            "name": s["tool"],
                            "input": s["input"],
                        }
                        msg = message(model, [block], "tool_use")
                        state.log["sent"] = max(state.log["sent"], step + 1)
                    else:
                        final = state.script.get("final", "Done.")
                        msg = message(model, [{"type": "text", "text": final}], "end_turn")
                        state.log["finished"] = True
                else:
                    entry["role"] = "side"
                    msg = message(model, [{"type": "text", "text": "Scripted session"}], "end_turn")
                state.log["requests"].append(entry)
                state.write()
            if not req.get("stream"):
                return self.reply_json(200, msg)
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            self.end_headers()
            for event, data in sse_events(msg):
                self.wfile.write(("event: %s\ndata: %s\n\n" % (event, json.dumps(data))).encode())
                self.wfile.flush()
            self.close_connection = True

        def responses_api(self, raw, entry):
            """The OpenAI Responses API: one output item a turn."""
            try:
                req = json.loads(raw)
            except ValueError:
                return self.reply_json(400, {"error": {"message": "not JSON"}})
            model = req.get("model", "model")
            items = req.get("input") if isinstance(req.get("input"), list) else []
            names = {t.get("name") for t in req.get("tools") or [] if isinstance(t, dict)}
            entry["model"] = model
            entry["stream"] = bool(req.get("stream"))
            with state.lock:
                if tools_needed <= names:
                    calls = responses_calls(items)
                    step = len(calls)
                    entry["role"] = "main"
                    entry["step"] = step
                    by_id = {c["call_id"]: c["name"] for c in calls}
                    for i in items:
                        if not isinstance(i, dict) or i.get("type") != "function_call_output":
                            continue
                        cid = i.get("call_id")
                        if cid in by_id and cid not in state.seen_results:
                            state.seen_results.add(cid)
                            out = i.get("output")
                            state.log["tool_results"].append(
                                {
                                    "step": int(cid[len(CALL_PREFIX):]),
                                    "tool_use_id": cid,
                                    "tool": by_id[cid],
                                    "is_error": False,
                                    "content": out if isinstance(out, str) else json.dumps(out),
                                }
                            )
                    steps = state.script["steps"]
                    if step < len(steps):
                        s = steps[step]
                        item = {
                            "type": "function_call",
                            "id": "fc_sw_%02d" % step,
                            "call_id": "%s%02d" % (CALL_PREFIX, step),
                            "name": s["tool"],
                            "arguments": json.dumps(s["input"]),
                            "status": "completed",
                        }
                        state.log["sent"] = max(state.log["sent"], step + 1)
                    else:
                        item = {
                            "type": "message",
                            "id": "msg_sw_final",
                            "role": "assistant",
                            "status": "completed",
                            "content": [{"type": "output_text", "text": state.script.get("final", "Done."), "annotations": []}],
                        }
                        state.log["finished"] = True
                else:
                    entry["role"] = "side"
                    item = {
                        "type": "message",
                        "id": "msg_sw_side",
                        "role": "assistant",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": "Scripted session", "annotations": []}],
                    }
                state.log["requests"].append(entry)
                state.write()
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            self.end_headers()
            for event, data in responses_events(model, item):
                self.wfile.write(("event: %s\ndata: %s\n\n" % (event, json.dumps(data))).encode())
                self.wfile.flush()
            self.close_connection = True

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = handle_any

    return Handler


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--script", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    with open(args.script) as f:
        script = json.load(f)
    state = State(script, args.log)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(state))
    server.daemon_threads = True
    state.log["port"] = server.server_address[1]
    state.write()
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(tmp, args.port_file)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
