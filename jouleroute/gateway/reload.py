"""Hot reload: a promoted policy is served without a restart, and no request fails or hangs on the way.

``LiveGateway`` holds the gateway the app serves. A reload builds the new one off the event loop (``rebuild``: the
deployed policy read again from the workspace, gateway/build.py, reusing the running upstreams, keys and capture),
then swaps the reference in one assignment: a request takes the gateway current when it arrives and finishes on
it, so requests in flight finish on the policy they started with, and every response's
``X-Jouleroute-Policy-Version`` names the one that answered. A reload is asked for by ``SIGHUP`` (`kill -HUP`), or
found by the file watch (``gateway.reload_poll_s`` > 0: the deployed record's content is checked that often, so
an atomic swap of the champion folder, as the loop's promotion does, is picked up). A rebuild that fails keeps the
serving policy and logs why. Counters in ``/metrics`` restart with the new gateway, as at a restart.

A swapped-out gateway is retired: kept while requests that started on it are in flight (``hold`` / ``release``, by
the app), then let go, its own routing worker and drift thread stopped (``Gateway.retire``), so reloads never pile up
old gateways.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import signal
import time
from pathlib import Path
from typing import Callable

logger = logging.getLogger(__name__)


class LiveGateway:
    def __init__(self, gateway, rebuild: Callable | None = None, watch: Path | None = None,
                 poll_s: float = 0.0) -> None:
        self.current = gateway
        self.rebuild, self.watch, self.poll_s = rebuild, watch, poll_s
        self.reloads: list[dict] = []  # each reload's outcome: from, to, error
        self._retired: list = []  # swapped out, with requests still in flight on them
        self._lock = asyncio.Lock()
        self._seen = self._fingerprint()
        self._task: asyncio.Task | None = None
        self.loop: asyncio.AbstractEventLoop | None = None  # the app's, once started
        self.swapped_at: float | None = None

    def start(self) -> None:
        """Listen for SIGHUP and start the file watch (in the running event loop; a no-op off the main thread)."""
        loop = self.loop = asyncio.get_running_loop()
        if self.rebuild is None:
            return
        try:
            loop.add_signal_handler(signal.SIGHUP, lambda: asyncio.ensure_future(self.reload("SIGHUP")))
        except (ValueError, RuntimeError, NotImplementedError):  # not the main thread (tests) or no signals here
            pass
        if self.watch is not None and self.poll_s > 0:
            self._task = loop.create_task(self._watch())

    async def reload(self, why: str = "asked") -> dict:
        """Build the deployed policy again and swap it in (module doc); returns what happened."""
        async with self._lock:
            old = self.current
            try:
                new = await asyncio.to_thread(self.rebuild, old)
            except Exception as error:  # keep serving what serves; say why in one line
                logger.error("reload (%s) failed, still serving %s: %s", why, old.version, error)
                outcome = {"why": why, "from": old.version, "to": None, "error": str(error)}
            else:
                self.current = new
                self.swapped_at = time.monotonic()  # a request that arrives later is answered by ``new``
                self._retired.append(old)
                self._let_go_if_idle(old)
                logger.info("reload (%s): serving %s (was %s)", why, new.version, old.version)
                outcome = {"why": why, "from": old.version, "to": new.version, "error": None}
            self._seen = self._fingerprint()
            self.reloads.append(outcome)
            return outcome

    def hold(self):
        """The gateway a request starts on (the current one), counted until ``release``."""
        gateway = self.current
        gateway.in_flight += 1
        return gateway

    def release(self, gateway) -> None:
        """A request held on ``gateway`` finished; a retired gateway is let go with its last request."""
        gateway.in_flight -= 1
        self._let_go_if_idle(gateway)

    def _let_go_if_idle(self, gateway) -> None:
        if gateway.in_flight <= 0 and any(g is gateway for g in self._retired):
            self._retired = [g for g in self._retired if g is not gateway]
            gateway.retire()
            logger.info("reload: retired %s (its requests are done)", gateway.version)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.poll_s)
            if self._fingerprint() != self._seen:
                await self.reload("file watch")

    def _fingerprint(self) -> str | None:
        if self.watch is None or not self.watch.is_file():
            return None
        return hashlib.sha256(self.watch.read_bytes()).hexdigest()

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
        await self.current.aclose()  # the upstreams and the capture are shared: closed once, with the current one
