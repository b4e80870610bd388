"""`ProcessExecutor`: each attempt in a child process started with ``spawn`` (guide §7.4).

What a process gives that a thread cannot: a task that ignores the graceful
window is really ended (``terminate()``, then ``kill()``), so it ends
``stopped`` (stop request) or ``failed``/``retry_wait`` (timeout), never
``lost``; CPU-bound bodies run in parallel; and a segfault in a native extension
takes only the child down (one failed attempt, kind ``nonzero_exit``).

The price: the function, its arguments and its return value must be
picklable (the return value must also be JSON), the function must live in an
importable module, and stop/pause cross the process boundary by polling (the
child's checkpoint reads shared memory; confirmations come back through a pipe
within a few tens of milliseconds). The child is a daemon process, so a body
that needs parallelism should use threads (``subprocess`` works as usual). A
force stop ends what the body started too (read from ``/proc`` on Linux), and
the child ends with what its body started when the supervising process dies.
When the supervising interpreter exits with children still running (a script
that never closed its controller), they are terminated, then killed after
`EXIT_GRACE`: multiprocessing's own exit handler would wait for ever on a child
that ignores SIGTERM.
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import importlib.util
import logging
import multiprocessing
import multiprocessing.util  # registers its exit handler: the one below runs before it
import os
import pickle
import signal
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chongming_core import Clock, ConfigurationError, Failure, Progress, TimerHandle
from chongming_runtime.body._control import AttemptControl
from chongming_runtime.executors._attempt import AttemptResult
from chongming_runtime.executors._process_child import child_main, control_word
from chongming_runtime.executors._processes import descendants, same_process
from chongming_runtime.support._background import carry_on

if TYPE_CHECKING:
    from chongming_runtime.executors._attempt import Attempt

__all__ = ["ProcessExecutor"]

_log = logging.getLogger("chongming_task.runtime")

_ADVICE = (
    "define the task as a module-level function (decorated with @task or not) in an importable "
    "module, pass picklable arguments, and guard the calling script with "
    '`if __name__ == "__main__":` (spawn re-imports the main module); or use ThreadExecutor(), '
    "which runs lambdas, closures and local functions too"
)


def _describe(fn: Callable[..., Any]) -> str:
    module = getattr(fn, "__module__", "?")
    qualname = getattr(fn, "__qualname__", repr(fn))
    return f"{module}.{qualname}"


def describe_exit(pid: int | None, exitcode: int | None) -> str:
    """Human text for how a child process ended."""
    who = f"the child process {pid}" if pid is not None else "the child process"
    if exitcode is None:
        return f"{who} ended without an exit code"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = "an unknown signal"
        return f"{who} was killed by signal {name} ({-exitcode}) before reporting a result"
    return f"{who} exited with code {exitcode} before reporting a result"


#: Freezes a process (it cannot be caught or ignored); absent where there are no signals.
_SIGSTOP: signal.Signals | None = getattr(signal, "SIGSTOP", None)

#: Seconds the children still running at interpreter exit get between SIGTERM and SIGKILL.
EXIT_GRACE = 1.0


class _ProcessHandle:
    """The grip on one child. Its lock orders the child's start against a force stop: a
    window that passes before the child exists means it is never started (D92)."""

    def __init__(self, process: BaseProcess, kill_after: float) -> None:
        self.process = process
        self._kill_after = kill_after
        self._kill_timer: TimerHandle | None = None
        self._started: list[tuple[int, int]] = []  # what the body started, as first seen
        self._lock = threading.Lock()
        self._launched = False  # the child was started
        self._refused = False  # a force stop came first: the child is never started

    def start(self) -> bool:
        """Start the child unless a force stop came first; False: it never will be."""
        with self._lock:
            if self._refused:
                return False
            self.process.start()
            self._launched = True
        with _LIVE_LOCK:
            _LIVE.add(self)
        return True

    def force_stop(self, clock: Clock) -> bool:
        """Terminate the child (then kill it); False, and it is never started, when it was
        not started yet: no exit will then be reported, and no body ever ran."""
        with self._lock:
            if not self._launched:
                self._refused = True
                return False
        if self.process.is_alive():
            self._started = self._descendants()
            self._signal_started(signal.SIGTERM)
            self.process.terminate()
            if self._kill_timer is None:
                self._kill_timer = clock.call_later(self._kill_after, self._kill)
        return True

    def terminate_at_exit(self) -> None:
        """SIGTERM to the child and what its body started (`_end_children_at_exit`)."""
        with contextlib.suppress(Exception):  # at exit: nothing may stop the others' ends
            self._started = self._descendants()
            self._signal_started(signal.SIGTERM)
            self.process.terminate()

    def kill_at_exit(self) -> None:
        """SIGKILL to what is left of the child and its body's processes, then reap it."""
        with contextlib.suppress(Exception):
            if _running(self) or self._started:
                self._kill()
            self.process.join(1.0)

    def _kill(self) -> None:
        """SIGKILL whatever is left: what the body started (even once the child itself has
        gone: a subprocess may ignore SIGTERM), then the child. The child is frozen first so
        it starts nothing more while its tree is read, and it dies last: its exit is what
        reports the attempt ended, and nothing it started may outlive that report."""
        alive = self.process.is_alive()
        pid = self.process.pid
        if alive and pid is not None and _SIGSTOP is not None:
            with contextlib.suppress(OSError):
                os.kill(pid, _SIGSTOP)
        if alive:
            self._started += self._descendants()
        self._signal_started(signal.SIGKILL)
        if alive:
            self.process.kill()

    def _descendants(self) -> list[tuple[int, int]]:
        pid = self.process.pid
        return [] if pid is None else descendants(pid)

    def _signal_started(self, signum: signal.Signals) -> None:
        for pid, started in self._started:
            if same_process(pid, started):  # never a pid reused since
                with contextlib.suppress(OSError):
                    os.kill(pid, signum)


_LIVE: weakref.WeakSet[_ProcessHandle] = weakref.WeakSet()  # the children started here
_LIVE_LOCK = threading.Lock()


def _running(handle: _ProcessHandle) -> bool:
    try:
        return handle.process.is_alive()
    except (AssertionError, ValueError):  # not this process's child (a fork), or closed
        return False


def _end_children_at_exit() -> None:
    """At interpreter exit, end the children still running: their supervisor is going.
    SIGTERM to each (and to what its body started), `EXIT_GRACE` seconds for all of them,
    then SIGKILL to what is left; multiprocessing's exit handler, which runs after this
    one, then joins children that have ended instead of waiting for ever on one that
    ignores SIGTERM. Their tasks stay as the store last had them (``running``) until
    `reconcile()` marks them lost: nobody saw them end."""
    with _LIVE_LOCK:
        handles = [h for h in _LIVE if _running(h)]
    if not handles:
        return
    for handle in handles:
        handle.terminate_at_exit()
    deadline = time.monotonic() + EXIT_GRACE
    for handle in handles:
        handle.process.join(max(0.0, deadline - time.monotonic()))
    for handle in handles:
        handle.kill_at_exit()


atexit.register(_end_children_at_exit)


class ProcessExecutor:
    """Run each attempt in its own child process (``multiprocessing`` ``spawn`` context).

    Example::

        outcome = run_task(resize, "/data/a.png", executor=ProcessExecutor())

    Args:
        kill_after: seconds between ``terminate()`` and ``kill()`` once a graceful window ran out.
        forward_interval: seconds between heartbeat/progress forwards from the child.
    """

    name = "process"
    inline = False
    supports_pause = True

    def __init__(self, *, kill_after: float = 1.0, forward_interval: float = 0.02) -> None:
        for label, value in (("kill_after", kill_after), ("forward_interval", forward_interval)):
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ConfigurationError(f"{label} must be > 0 seconds, got {value!r}")
        self._kill_after = float(kill_after)
        self._forward_interval = float(forward_interval)
        self._mp = multiprocessing.get_context("spawn")

    # ---------------------------------------------------------------- submit-time checks
    def validate(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> None:
        """Refuse what a spawned child cannot import or unpickle, and say what to use instead."""
        where = _describe(fn)
        qualname = getattr(fn, "__qualname__", "")
        if "<lambda>" in qualname or "<locals>" in qualname:
            kind = "a lambda" if "<lambda>" in qualname else "a local function or closure"
            raise ConfigurationError(
                f"ProcessExecutor cannot run {where}: it is {kind}, which a child process cannot "
                f"import; {_ADVICE}"
            )
        try:
            pickle.dumps(fn)
        except Exception as exc:
            raise ConfigurationError(
                f"ProcessExecutor cannot run {where}: the function cannot be pickled ({exc}); "
                f"{_ADVICE}"
            ) from None
        module = getattr(fn, "__module__", None)
        if module == "__main__":
            main = sys.modules.get("__main__")
            path = getattr(main, "__file__", None)
            if path is None:
                raise ConfigurationError(
                    f"ProcessExecutor cannot run {where}: it was defined in an interactive "
                    f"session, which a child process cannot import; {_ADVICE}"
                )
            if not _defined_at_top_level(str(path), qualname):
                # spawn re-imports the script without running its `if __name__ == "__main__":`
                # block: a function defined there (or made at run time) is not found
                raise ConfigurationError(
                    f"ProcessExecutor cannot run {where}: it is not defined at the top level "
                    f'of the script (inside `if __name__ == "__main__":`, say), so a child '
                    f"process, which re-imports the script, cannot find it; {_ADVICE}"
                )
        elif isinstance(module, str) and _find_spec(module) is None:
            raise ConfigurationError(
                f"ProcessExecutor cannot run {where}: its module {module!r} cannot be imported "
                f"by a child process; {_ADVICE}"
            )
        for label, value in [
            *((f"argument {i}", a) for i, a in enumerate(args)),
            *((f"keyword argument {k!r}", v) for k, v in kwargs.items()),
        ]:
            try:
                pickle.dumps(value)
            except Exception as exc:
                raise ConfigurationError(
                    f"ProcessExecutor cannot pass {label} ({type(value).__qualname__}) to a child "
                    f"process: it cannot be pickled ({exc}); pass plain data (paths, ids, "
                    "numbers, strings) and open connections inside the task, or use "
                    "ThreadExecutor()"
                ) from None

    # ---------------------------------------------------------------- launching
    def launch(self, attempt: Attempt) -> _ProcessHandle:
        """Spawn the child and a supervising thread that relays its reports."""
        mp = self._mp
        word = mp.RawValue("q", 0)  # one aligned word: written and read whole
        wake = mp.Event()
        receiver, sender = mp.Pipe(duplex=False)
        ctx = attempt.context
        root = getattr(ctx, "_artifact_root", None)
        info = {
            "task_id": ctx.task_id,
            "task_name": ctx.task_name,
            "attempt": ctx.attempt,
            "artifact_root": None if root is None else str(root),
            "upstream": dict(ctx.upstream),
            "forward_interval": self._forward_interval,
            # the task's lines so far (its earlier attempts'): `ctx.logs` in the child holds
            # them too, as on a thread
            "logs": list(ctx.logs),
        }
        process = mp.Process(
            target=child_main,
            args=(
                attempt.fn,
                attempt.args,
                dict(attempt.kwargs),
                info,
                word,
                wake,
                sender,
            ),
            name=f"chongming-task-{ctx.task_id}-{attempt.number}",
            daemon=True,
        )

        def mirror(control: AttemptControl) -> None:
            word.value = control_word(
                stop=control.stop_requested,
                pause=control.pause_requested,
                generation=control.pause_generation,
            )
            wake.set()

        attempt.control.bind(on_change=mirror)
        handle = _ProcessHandle(process, self._kill_after)
        # an attempt ended before its child exists (a graceful window, a start timeout)
        # never gets one: it is refused here, or by the handle's force stop (D92)
        if not attempt.attach(handle) or not handle.start():
            sender.close()
            receiver.close()
            return handle
        sender.close()
        threading.Thread(
            target=_supervise,
            args=(attempt, process, receiver, handle),
            name=f"chongming-process-{ctx.task_id}-{attempt.number}",
            daemon=True,
        ).start()
        return handle

    def __repr__(self) -> str:
        return f"ProcessExecutor(kill_after={self._kill_after:g})"


def _defined_at_top_level(path: str, qualname: str) -> bool:
    """Whether the script at `path` defines `qualname` (a function, or a method of a class)
    at its top level, where a re-import finds it. True when the source cannot be read: the
    child's own error will say what went wrong."""
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return True
    scope: list[ast.stmt] = tree.body
    for part in qualname.split("."):
        statements = list(_run_on_import(scope))
        found = next(
            (
                node
                for node in statements
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                and node.name == part
            ),
            None,
        )
        if found is None:
            return any(  # assigned at the top level (`name = make()`, an import): trust it
                isinstance(node, ast.Assign | ast.AnnAssign | ast.Import | ast.ImportFrom)
                and part in _bound_names(node)
                for node in statements
            )
        scope = found.body
    return True


def _run_on_import(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of `body` that run when the script is imported: into `if`, `try` and
    `with` blocks, but not the body of `if __name__ == "__main__":`."""
    for node in body:
        yield node
        if isinstance(node, ast.If):
            if not _is_main_guard(node.test):
                yield from _run_on_import(node.body)
            yield from _run_on_import(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody):
                yield from _run_on_import(block)
            for handler in node.handlers:
                yield from _run_on_import(handler.body)
        elif isinstance(node, ast.With):
            yield from _run_on_import(node.body)


def _is_main_guard(test: ast.expr) -> bool:
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
    )


def _bound_names(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]  # type: ignore[attr-defined]
    return {t.id for t in targets if isinstance(t, ast.Name)}


def _find_spec(module: str) -> object | None:
    try:
        return importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None


def _supervise(
    attempt: Attempt, process: BaseProcess, conn: Connection, handle: _ProcessHandle
) -> None:
    """Relay the child's reports to the supervisor until it reports a result or dies."""
    result: AttemptResult | None = None
    ctx = attempt.context
    try:
        while result is None:
            ready = wait([conn, process.sentinel])
            if conn not in ready:
                while result is None and conn.poll():  # it died: read what it managed to send
                    result = _relay_one(attempt, conn.recv(), handle)
                break
            try:
                message = conn.recv()
            except EOFError:
                break
            result = _relay_one(attempt, message, handle)
    except Exception:
        _log.exception("lost contact with the child process of task %r", ctx.task_id)
    finally:
        conn.close()
    if result is None:
        process.join()
        result = AttemptResult.crashed(describe_exit(process.pid, process.exitcode))
    attempt.finish(result)
    process.join(30.0)
    if process.is_alive():  # it reported a result but does not exit
        process.kill()
        process.join()


def _relay_one(
    attempt: Attempt, message: tuple[Any, ...], handle: _ProcessHandle
) -> AttemptResult | None:
    """`_relay`, where what one report raises (a listener of its progress, say) is logged
    and the next report is read: the child's supervision goes on (D65)."""
    try:
        return _relay(attempt, message, handle)
    except BaseException as exc:
        kind = message[0] if isinstance(message, tuple) and message else message
        what = f"relaying a {kind!r} report of task {attempt.context.task_id!r}"
        carry_on(what, exc, _log, None)
        return None


def _relay(
    attempt: Attempt, message: tuple[Any, ...], handle: _ProcessHandle
) -> AttemptResult | None:
    kind = message[0]
    ctx = attempt.context
    if kind == "started":
        if not attempt.begin(int(message[1]), in_process=False):
            handle.process.terminate()
    elif kind == "beat":
        ctx.heartbeat.beat()
    elif kind == "progress":
        progress = Progress.from_dict(message[1])
        ctx.progress(
            progress.done, total=progress.total, unit=progress.unit, message=progress.message
        )
    elif kind == "log":
        ctx.emit_log(int(message[1]), str(message[2]))
    elif kind == "paused":
        attempt.confirm_pause(int(message[1]))
    elif kind == "returned":
        return AttemptResult.returned(message[1])
    elif kind == "cancelled":
        return AttemptResult.cancelled()
    elif kind == "raised":
        failure = Failure.from_dict(message[1])
        exc: BaseException | None = None
        if message[2] is not None:
            try:
                exc = pickle.loads(message[2])
            except Exception:
                exc = None
        return AttemptResult.raised(exc, failure, exception_types=tuple(message[3]))
    return None
