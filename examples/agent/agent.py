"""A compute-only agent for the `agent` item type (docs/howto/agent.md), standard library only.

Run: WORKQUEUE_AGENT_TOKEN=... python examples/agent/agent.py   (listens on $PORT, default 8000)
"""

import hmac
import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

EXPECTED = f"Bearer {os.environ['WORKQUEUE_AGENT_TOKEN']}".encode()


class Tasks(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        if self.path != "/v1/tasks":
            return self.answer(404, {"error": "only POST /v1/tasks"})
        if not hmac.compare_digest(self.headers.get("Authorization", "").encode(), EXPECTED):
            return self.answer(401, {"error": "wrong token"})  # the service fails the task
        task = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        note, turn = task["note"], len(task["history"]) + 1
        reply = f"Turn {turn} of this thread. {note['author']} asked: {note['body']}"
        # To propose a commit, answer an `mr` submission's fields instead of None:
        # "changes": {"title": "Bump kernel to 2", "commit_message": "Bump kernel to 2",
        #             "file_actions": [{"action": "update", "file_path": "kernel.spec",
        #                               "content": "Version: 2\n"}]}
        return self.answer(200, {"reply": reply, "changes": None})

    def answer(self, status: int, body: dict[str, object]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


ThreadingHTTPServer(("", int(os.environ.get("PORT", "8000"))), Tasks).serve_forever()
