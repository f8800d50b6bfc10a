"""`python -m workqueue.testing.demo_gitlab`, the quickstart's GitLab: API, CI hooks, clean stop."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading

import gitlab
from harness import wait_until
from webhook_receiver import webhook_receiver


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_quickstart_gitlab_serves_the_project_and_passes_each_mr_head():
    port = _free_port()
    with webhook_receiver() as service:
        process = subprocess.Popen(
            [
                *(sys.executable, "-m", "workqueue.testing.demo_gitlab"),
                *("--port", str(port), "--hook-url", service.url, "--hook-secret", "s3cret"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        lines: list[str] = []  # each line as it comes (extend appends one at a time)
        reader = threading.Thread(target=lines.extend, args=(process.stdout,), daemon=True)
        reader.start()
        try:
            url = f"http://127.0.0.1:{port}"
            client = gitlab.Gitlab(url, private_token="simulator-token")

            def answers() -> bool:
                try:
                    client.projects.get("demo/widgets")
                except (gitlab.exceptions.GitlabError, OSError):
                    return False
                return True

            wait_until(answers, timeout=30, what="the simulated GitLab")
            project = client.projects.get("demo/widgets")
            assert project.files.raw("README.md", ref="main") == b"Widgets\n"
            project.commits.create(
                {
                    "branch": "workqueue/try",
                    "start_branch": "main",
                    "commit_message": "Try",
                    "actions": [{"action": "create", "file_path": "a.txt", "content": "a\n"}],
                }
            )
            project.mergerequests.create(
                {"source_branch": "workqueue/try", "target_branch": "main", "title": "Try"}
            )
            wait_until(lambda: service.hits() == 1, timeout=30, what="the Pipeline Hook")
            (hook,) = service.snapshot()
            assert hook.headers["x-gitlab-event"] == "Pipeline Hook"
            assert hook.headers["x-gitlab-token"] == "s3cret"
            assert hook.json["object_attributes"]["status"] == "success"
            # It says so once the hook's answer is back, a moment after the hook arrived.
            wait_until(
                lambda: any("Pipeline Hook delivered" in line for line in lines),
                timeout=30,
                what="the delivery to be reported",
            )
            process.send_signal(signal.SIGTERM)
            process.wait(30)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            reader.join(30)
            process.stdout.close()
    output = "".join(lines)
    assert process.returncode == 0, output
    assert f"simulated GitLab on {url} with project demo/widgets" in output
    assert "passed on MR !1; Pipeline Hook delivered" in output
    assert "HTTP Request" not in output
    assert "Traceback" not in output
