"""framed.py SERVER...: sends LSP messages with Content-Length framing (as
editors do) and prints each reply the server writes, one JSON per line.
The messages: malformed ones between valid requests; the server must answer
every request, and the malformed ones with an id, and keep serving."""
import json
import subprocess
import sys

INIT = {"processId": 1, "rootPath": "rlhf", "capabilities": {}}
MESSAGES = [
    # Before initialize: a request is refused, a notification dropped.
    {"jsonrpc": "2.0", "id": 1, "method": "textDocument/hover",
     "params": {"textDocument": {"uri": "file:///a.rlhf"},
                "position": {"line": 0, "character": 0}}},
    {"jsonrpc": "2.0", "method": "textDocument/didOpen",
     "params": {"textDocument": {"uri": "file:///a.rlhf", "languageId": "rlhf",
                                 "version": 1, "text": "arch a : nope { }\n"}}},
    {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT},
    {"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": INIT},
    [1, 2, 3],                                            # not an object
    "str",
    {"jsonrpc": "2.0"},                                   # neither id nor method
    {"id": 5, "method": "textDocument/hover", "params": {}},  # no "jsonrpc"
    {"jsonrpc": "1.0", "id": 6, "method": "shutdown"},    # wrong version
    {"jsonrpc": "2.0", "id": 7, "method": "shutdown"},
    # After shutdown only exit.
    {"jsonrpc": "2.0", "id": 8, "method": "textDocument/documentSymbol",
     "params": {"textDocument": {"uri": "file:///a.rlhf"}}},
    {"jsonrpc": "2.0", "method": "exit"},
]

body = b"".join(
    b"Content-Length: %d\r\n\r\n%s" % (len(m), m)
    for m in (json.dumps(x).encode() for x in MESSAGES))
done = subprocess.run(sys.argv[1:], input=body, capture_output=True,
                      timeout=60)
out = done.stdout
while out:
    head, _, rest = out.partition(b"\r\n\r\n")
    n = int(head.split(b":")[1])
    reply = json.loads(rest[:n])
    out = rest[n:]
    if "id" in reply:
        err = reply.get("error", {})
        print("reply", reply["id"], err.get("code", "ok"), err.get("message", ""))
    else:
        print("notification", reply.get("method"))
print("exit", done.returncode)
