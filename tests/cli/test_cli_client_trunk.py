"""`trunk status`: the queues as a table (or JSON), filtered, over HTTP only."""

from __future__ import annotations

import json

from cli_client_support import run_cli
from harness import wait_until
from trunk_harness import building, deliver, land, new_simulator, push_hook, trunk_app


def test_trunk_status_shows_slots_and_last_green(database_url, sessions):
    simulator = new_simulator()
    try:
        with trunk_app(database_url, simulator) as client:
            url = str(client.base_url)
            empty = run_cli("trunk", "status", url=url)
            assert empty.returncode == 0, empty.stderr
            assert "group/app:main" in empty.stdout
            assert "0/1" in empty.stdout
            assert "none yet" in empty.stdout

            a = land(simulator)
            deliver(client, simulator, push_hook(simulator, a))
            wait_until(lambda: building(sessions, a), what="A building")
            busy = run_cli("trunk", "status", "--project", "group/app", url=url)
            assert busy.returncode == 0, busy.stderr
            assert "1/1" in busy.stdout

            as_json = run_cli("trunk", "status", "--branch", "main", "--json", url=url)
            (queue,) = json.loads(as_json.stdout)["items"]
            assert (queue["name"], queue["in_flight"]) == ("group/app:main", 1)
            none = run_cli("trunk", "status", "--branch", "develop", url=url)
            assert (none.returncode, none.stdout.strip()) == (0, "no trunk queue matches")
    finally:
        simulator.stop()
