"""Runtime benchmarks: every figure is a ratio against a baseline measured in the same run.

Run: python benchmarks/bench_runtime.py
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from chongming_runtime import (
    InlineExecutor,
    ProcessExecutor,
    RuntimeContext,
    TaskContext,
    TaskRun,
    run_task,
)
from chongming_runtime.body._control import AttemptControl


class _Empty:
    def method(self) -> None:
        pass


def _per_call(fn: Callable[[], Any], calls: int) -> float:
    """Best-of-5 seconds per call of `fn`."""
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def bench_checkpoint(calls: int = 300_000) -> dict[str, float]:
    """`checkpoint()` with nothing requested vs an empty method call."""
    ctx = RuntimeContext(
        task_id="bench",
        task_name="bench",
        attempt=1,
        control=AttemptControl(),
        monotonic=time.monotonic,
    )
    empty = _Empty()
    baseline = _per_call(empty.method, calls)
    checkpoint = _per_call(ctx.checkpoint, calls)
    return {
        "empty_ns": baseline * 1e9,
        "checkpoint_ns": checkpoint * 1e9,
        "ratio": checkpoint / baseline,
    }


def _noop(ctx: TaskContext) -> None:
    return None


def _noop_plain() -> None:
    return None


def bench_run_task(calls: int = 2_000) -> dict[str, float]:
    """`run_task` of a no-op on inline and thread executors vs a direct call and a pool."""
    direct = _per_call(_noop_plain, calls)
    with ThreadPoolExecutor(max_workers=1) as pool:
        pooled = _per_call(lambda: pool.submit(_noop_plain).result(), calls)
    inline = InlineExecutor()
    on_inline = _per_call(lambda: run_task(_noop, executor=inline), calls)
    on_thread = _per_call(lambda: run_task(_noop), calls // 2)
    return {
        "direct_us": direct * 1e6,
        "pool_us": pooled * 1e6,
        "inline_us": on_inline * 1e6,
        "thread_us": on_thread * 1e6,
        "inline_vs_direct": on_inline / direct,
        "inline_vs_pool": on_inline / pooled,
        "thread_vs_direct": on_thread / direct,
        "thread_vs_pool": on_thread / pooled,
    }


def _spin(ctx: TaskContext) -> None:
    ctx.progress(1)
    while True:
        ctx.checkpoint()
        time.sleep(0.0002)  # a slice of work between checkpoints (releases the GIL)


def bench_stop_latency(samples: int, executor_factory: Callable[[], Any]) -> dict[str, float]:
    """Seconds from `stop()` to the terminal status of a cooperative task."""
    latencies: list[float] = []
    for _ in range(samples):
        started = threading.Event()
        run = TaskRun(_spin, executor=executor_factory(), listeners=[_Started(started)])
        run.start()
        if not started.wait(60):
            raise RuntimeError("the task did not start")
        while run.snapshot.last_heartbeat_at is None or run.snapshot.progress is None:
            time.sleep(0.001)
        begin = time.perf_counter()
        run.stop()
        run.wait(60)
        latencies.append(time.perf_counter() - begin)
    latencies.sort()
    return {
        "p50_ms": statistics.median(latencies) * 1e3,
        "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1e3,
        "samples": float(len(latencies)),
    }


class _Started:
    def __init__(self, event: threading.Event) -> None:
        self._event = event

    def on_transition(self, run: TaskRun, transition: Any, snapshot: Any) -> None:
        if transition.to_status.value == "running":
            self._event.set()

    def on_side_update(self, run: TaskRun, snapshot: Any) -> None:
        pass


def main() -> None:
    """Measure and print every figure."""
    cp = bench_checkpoint()
    print(
        f"checkpoint(): {cp['checkpoint_ns']:.0f} ns vs empty method {cp['empty_ns']:.0f} ns "
        f"-> {cp['ratio']:.2f}x (goal <= 3x)"
    )
    rt = bench_run_task()
    print(
        f"run_task no-op: direct call {rt['direct_us']:.2f} us, "
        f"ThreadPoolExecutor.submit().result() {rt['pool_us']:.1f} us"
    )
    print(
        f"  inline {rt['inline_us']:.1f} us = {rt['inline_vs_direct']:.0f}x direct, "
        f"{rt['inline_vs_pool']:.2f}x pool"
    )
    print(
        f"  thread {rt['thread_us']:.1f} us = {rt['thread_vs_direct']:.0f}x direct, "
        f"{rt['thread_vs_pool']:.2f}x pool"
    )
    thread_stop = bench_stop_latency(200, lambda: None)
    print(
        f"stop latency, thread executor: p50 {thread_stop['p50_ms']:.2f} ms, "
        f"p99 {thread_stop['p99_ms']:.2f} ms over {thread_stop['samples']:.0f} runs "
        "(goal p50 <= 2 ms; the body checkpoints every ~0.2 ms)"
    )
    process_stop = bench_stop_latency(15, ProcessExecutor)
    print(
        f"stop latency, process executor: p50 {process_stop['p50_ms']:.2f} ms, "
        f"p99 {process_stop['p99_ms']:.2f} ms over {process_stop['samples']:.0f} runs"
    )


if __name__ == "__main__":
    main()
