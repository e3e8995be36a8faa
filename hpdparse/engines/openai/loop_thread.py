"""An asyncio event loop in a daemon thread: the openai engine's HTTP requests run on it while
`Engine.run` is a plain iterator in the caller's thread."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """An asyncio event loop running in a daemon thread, fed from other threads."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="hpdparse-openai")
        self.thread.daemon = True
        self.thread.start()

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def stop(self, last: Callable[[], Awaitable[Any]] | None = None) -> None:
        """Cancel every task, await `last()` (to close the client), stop the loop, join."""
        try:
            self.submit(self._shutdown(last)).result(timeout=30)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join()
            self.loop.close()

    async def _shutdown(self, last: Callable[[], Awaitable[Any]] | None) -> None:
        current = asyncio.current_task()
        tasks = [task for task in asyncio.all_tasks() if task is not current]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if last is not None:
            await last()
