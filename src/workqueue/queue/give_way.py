"""Workers give way to the request path when it falls behind.

One process serves HTTP on its event loop and runs steps on worker threads,
and the GIL is theirs to share. Under more events than the process can step,
the workers would take the interpreter from the event loop and webhook
answers would wait seconds (GitLab gives up on a hook after 10 s, and
disables hooks that keep failing). The service measures how late its event
loop wakes while requests are in flight (`api.loop_lag`: no request, no lag
to give way to); while that lag is over a threshold, a worker
about to start a batch sleeps first, up to a bound per batch, so processing
slows but never stops. Events wait meanwhile and coalesce: fewer, larger
steps, which is what an overloaded process needs.
"""

from __future__ import annotations

import time
from collections.abc import Callable

# Lag of the event loop (seconds) above which workers wait before a batch: twice
# the interpreter's switch interval (5 ms), which a loop waits anyway whenever a
# worker holds the interpreter.
LAG_THRESHOLD_SECONDS = 0.01
# One wait, and the most a worker waits before one batch.
WAIT_SECONDS = 0.01
MAX_WAIT_PER_BATCH_SECONDS = 0.5


def wait_seconds(lag: float, waited: float) -> float:
    """How long a worker waits now, the loop being `lag` behind and the worker having
    waited `waited` before this batch already; 0: go on."""
    if lag <= LAG_THRESHOLD_SECONDS or waited >= MAX_WAIT_PER_BATCH_SECONDS:
        return 0.0
    return min(WAIT_SECONDS, MAX_WAIT_PER_BATCH_SECONDS - waited)


def give_way(
    lag: Callable[[], float] | None,
    should_stop: Callable[[], bool],
    sleep: Callable[[float], None] = time.sleep,
) -> float:
    """Wait while the request path reports falling behind (see `wait_seconds`); returns
    the seconds waited."""
    waited = 0.0
    if lag is None:
        return waited
    while not should_stop() and (seconds := wait_seconds(lag(), waited)) > 0:
        sleep(seconds)
        waited += seconds
    return waited
