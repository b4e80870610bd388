"""11 — A multi-node deployment you can copy (guide §8.14).

Two nodes share one store and split the buckets between them. Each node:
reconciles at startup, submits only into its own buckets, controls tasks held
by the other node through the store's command channel, and closes cleanly.

    python examples/11_best_practice.py                 # SQLite file (one machine)
    CHONGMING_EXAMPLE_DSN=postgresql://postgres@127.0.0.1/test \\
        python examples/11_best_practice.py             # PostgreSQL (many machines)

In production each node is its own process (or machine) running `build_node()`
with its own name; here both run in one process so the example can check the
whole story with asserts.
"""

from __future__ import annotations

import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from chongming_task import (
    BucketPolicy,
    Controller,
    SqliteTaskStore,
    TaskStatus,
    TaskStore,
    buckets_for_node,
    render_table,
    task,
)

# 1. Deployment parameters: fixed for the life of the deployment. Changing NUM_BUCKETS
#    moves almost every key to another bucket, so choose it once (tasks keep their
#    bucket_key, which is what a future re-bucketing would need).
NUM_BUCKETS = 64
NODES = ("node-a", "node-b")
LEASE_TTL = 30.0  # a crashed node's tasks are detectable this long after the crash


# 2. The bucket split: contiguous, disjoint, covering every bucket exactly once.
def owned_buckets(node: str) -> range:
    """The buckets `node` is responsible for."""
    return buckets_for_node(NODES.index(node), len(NODES), NUM_BUCKETS)


def node_for_key(bucket_key: str) -> str:
    """Which node runs tasks of `bucket_key` (route submissions there)."""
    bucket = BucketPolicy(NUM_BUCKETS).bucket_for(bucket_key)
    return next(node for node in NODES if bucket in owned_buckets(node))


# 3. Task definitions: module-level functions (so the process executor can use them
#    too), JSON results, a checkpoint in every loop.
@task(tags={"io"})
def sync_tenant(ctx: Any, tenant: str, batches: int = 1_000_000) -> int:
    """Synchronise one tenant, batch by batch, until done or asked to stop."""
    done = 0
    while done < batches:
        ctx.checkpoint()  # stop -> TaskCancelled here; pause -> waits here
        done += 1
        ctx.progress(done, unit="batch", message=tenant)
        time.sleep(0.005)
    return done


@task
def tenant_report(ctx: Any, tenant: str) -> dict[str, str]:
    """A short task: its result is kept in the store."""
    ctx.checkpoint()
    return {"tenant": tenant, "status": "ok"}


# 4. Wiring one node.
def open_store(location: str) -> TaskStore:
    """One store handle per node (each process opens its own)."""
    if location.startswith(("postgresql://", "postgres://")):
        from chongming_task import PostgresTaskStore

        schema = os.environ.get("CHONGMING_EXAMPLE_SCHEMA", "chongming")
        return PostgresTaskStore(location, schema=schema)
    return SqliteTaskStore(location)


def build_node(node: str, location: str) -> Controller:
    """A controller for `node`: its store, its name, its buckets, its task definitions."""
    controller = Controller(
        store=open_store(location),
        owner=node,
        num_buckets=NUM_BUCKETS,
        owned_buckets=owned_buckets(node),  # polls for commands from construction on
        max_parallel=8,
        max_parallel_per_bucket=2,
        lease_ttl=LEASE_TTL,
        graceful_stop=5.0,
        poll_interval=0.02,
    )
    controller.register_all(sync_tenant, tenant_report)
    return controller


def wait_for(predicate: Any, what: str, timeout: float = 10.0) -> None:
    """Poll `predicate` until it holds (cross-node effects are observed, not assumed)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def status_of(controller: Controller, task_id: str) -> TaskStatus | None:
    """The status the store shows (None until the holder's first write lands)."""
    snapshot = controller.get(task_id)
    return None if snapshot is None else snapshot.status


def main() -> None:
    """Run the whole story and check it."""
    dsn = os.environ.get("CHONGMING_EXAMPLE_DSN")
    folder = Path(os.environ.get("CHONGMING_EXAMPLE_TMP") or tempfile.mkdtemp())
    location = dsn or str(folder / f"best-practice-{uuid.uuid4().hex[:6]}.db")

    nodes = {name: build_node(name, location) for name in NODES}
    try:
        # 5. Startup reconcile: each node cleans up only its own buckets.
        for name, controller in nodes.items():
            report = controller.reconcile()
            print(f"{name}: reconcile lost={len(report.lost)} adoptable={len(report.adoptable)}")
            assert report.lost == ()

        # 6. Submit by bucket: route each tenant to the node that owns its bucket.
        tenants = [f"tenant-{i}" for i in range(6)]
        workers: dict[str, str] = {}
        for tenant in tenants:
            node = node_for_key(tenant)
            run = nodes[node].submit(
                "sync_tenant", tenant, task_id=f"sync-{tenant}", bucket_key=tenant
            )
            workers[tenant] = node
            nodes[node].submit(
                "tenant_report", tenant, task_id=f"report-{tenant}", bucket_key=tenant
            )
            assert run.snapshot.bucket in owned_buckets(node)
        assert set(workers.values()) == set(NODES), "both nodes got work"

        # A node refuses keys of another node's buckets: no task is left queued forever.
        foreign = next(t for t in tenants if workers[t] == "node-b")
        try:
            nodes["node-a"].submit("tenant_report", foreign, bucket_key=foreign)
        except Exception as refused:  # ConfigurationError
            print(f"node-a refused {foreign!r}: {refused}")
        else:
            raise AssertionError("node-a accepted a task for node-b's bucket")

        # 7. Cross-node stop: node-a stops a worker held by node-b via the command channel.
        target = f"sync-{foreign}"
        wait_for(lambda: status_of(nodes["node-a"], target) is TaskStatus.RUNNING, "the worker")
        assert nodes["node-a"].stop(target, reason="release window") is True
        outcome = nodes["node-a"].wait(target, timeout=10)
        print(f"{target}: {outcome.status.value} by node-a's command")
        assert outcome.status is TaskStatus.STOPPED
        command = nodes["node-a"].store.commands(task_id=target)[-1]
        assert command.issued_by == "node-a"
        assert command.result == "applied"

        # Every node stops its own remaining workers; reports have finished.
        for controller in nodes.values():
            controller.stop_all(reason="end of example")
            controller.wait_all(timeout=10)
            controller.flush()

        # 8. Final checks: every task is terminal, reports succeeded with their results,
        #    workers were stopped, every history is contiguous.
        observer = nodes["node-a"]
        every = observer.list_tasks(buckets=range(NUM_BUCKETS))
        print(render_table(every))
        assert len(every) == 2 * len(tenants)
        assert all(s.is_terminal for s in every)
        reports = [s for s in every if s.name == "tenant_report"]
        assert all(s.status is TaskStatus.SUCCEEDED for s in reports)
        assert {s.outcome["tenant"] for s in reports} == set(tenants)
        assert all(s.status is TaskStatus.STOPPED for s in every if s.name == "sync_tenant")
        for snapshot in every:
            versions = [t.status_version for t in observer.history(snapshot.task_id)]
            assert versions == list(range(1, len(versions) + 1)), snapshot.task_id
        assert observer.stats().unfinished == 0
        print("all checks passed")
    finally:
        for controller in nodes.values():
            controller.close(timeout=10, close_store=True)


if __name__ == "__main__":
    main()
