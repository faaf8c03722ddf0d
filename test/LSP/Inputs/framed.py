"""framed.py SERVER...: sends LSP messages with Content-Length framing (as
editors do) and prints each reply the server writes, one JSON per line.
The messages: malformed ones between valid requests; the server must answer
every request, and the malformed ones with an id, and keep serving."""
import json
import subprocess
import sys

MESSAGES = [
    {"jsonrpc": "2.0", "id": 0, "method": "initialize",
     "params": {"processId": 1, "rootPath": "rlhf", "capabilities": {}}},
    [1, 2, 3],                                            # not an object
    "str",
    {"jsonrpc": "2.0"},                                   # neither id nor method
    {"id": 5, "method": "textDocument/hover", "params": {}},  # no "jsonrpc"
    {"jsonrpc": "1.0", "id": 6, "method": "shutdown"},    # wrong version
    {"jsonrpc": "2.0", "id": 7, "method": "shutdown"},
    {"jsonrpc": "2.0", "method": "exit"},
]

body = b"".join(
    b"Content-Length: %d\r\n\r\n%s" % (len(m), m)
    for m in (json.dumps(x).encode() for x in MESSAGES))
out = subprocess.run(sys.argv[1:], input=body, capture_output=True,
                     timeout=60).stdout
while out:
    head, _, rest = out.partition(b"\r\n\r\n")
    n = int(head.split(b":")[1])
    reply = json.loads(rest[:n])
    out = rest[n:]
    if "id" in reply:
        err = reply.get("error", {})
        print("reply", reply["id"], err.get("code", "ok"), err.get("message", ""))
