"""Contract cases: `query`, `status_counts` and `bucket_counts` with every `TaskQuery` filter."""

from __future__ import annotations

from datetime import timedelta, timezone

from chongming_core import TaskQuery, TaskSnapshot, TaskStatus
from chongming_store_contract._base import ContractBase
from chongming_store_contract._builders import BASE_TIME
from chongming_store_contract._checks import expect_equal

__all__ = ["QueriesContract"]

_S = TaskStatus


def _ids(snapshots: list[TaskSnapshot]) -> list[str]:
    return [s.task_id for s in snapshots]


class QueriesContract(ContractBase):
    """`query` (filters, order, paging) and the two counting queries."""

    def ids(self, query: TaskQuery | None = None) -> list[str]:
        """The ids `query` returns, in the store's order."""
        return _ids(self.store.query(query))

    def populate(self) -> None:
        """Six tasks inserted in an order that differs from both id order and creation time."""
        built = {
            "m-extract": self.task("m-extract", _S.RUNNING, name="etl.extract", bucket=0),
            "b-load": self.task(
                "b-load", _S.QUEUED, name="etl.load", tags={"io", "数据"}, bucket=1
            ),
            "z-report": self.task(
                "z-report", _S.SUCCEEDED, name="report", label="Daily REPORT", bucket=1
            ),
            "a-sync": self.task("a-sync", _S.FAILED, name="sync", tags={"io-heavy"}),
            "k-node": self.task(
                "k-node", _S.BLOCKED, name="etl.node", pipeline_id="p1", node_id="n1", bucket=2
            ),
            "c-同步": self.task("c-同步", _S.QUEUED, name="同步任务", label="租户A 同步"),
        }
        # Insert newest-built first: creation order in the store is this order, not created_at.
        for task_id in self.population_order():
            self.store.create(*built[task_id])

    @staticmethod
    def population_order() -> list[str]:
        """The order in which `populate` creates its tasks."""
        return ["c-同步", "k-node", "a-sync", "z-report", "b-load", "m-extract"]

    # ------------------------------------------------------------------ order and paging
    def test_query_on_an_empty_store_returns_nothing(self) -> None:
        expect_equal(self.store.query(), [], "query() of an empty store")
        expect_equal(self.store.status_counts(), {}, "status_counts() of an empty store")
        expect_equal(self.store.bucket_counts(), {}, "bucket_counts() of an empty store")

    def test_query_returns_every_task_in_creation_order(self) -> None:
        self.populate()
        expect_equal(self.ids(), self.population_order(), "query() order (creation order)")
        expect_equal(self.ids(TaskQuery()), self.population_order(), "query(TaskQuery())")

    def test_query_returns_full_snapshots(self) -> None:
        a, _ = self.stored("a", _S.RUNNING, label="x", tags={"io"}, bucket=3)
        expect_equal(self.store.query(), [a], "query() snapshots")

    def test_query_newest_first_reverses_creation_order(self) -> None:
        self.populate()
        expect_equal(
            self.ids(TaskQuery(newest_first=True)),
            list(reversed(self.population_order())),
            "query(newest_first=True)",
        )

    def test_query_limit_and_offset(self) -> None:
        self.populate()
        order = self.population_order()
        expect_equal(self.ids(TaskQuery(limit=2)), order[:2], "limit=2")
        expect_equal(self.ids(TaskQuery(offset=2)), order[2:], "offset=2")
        expect_equal(self.ids(TaskQuery(limit=3, offset=2)), order[2:5], "limit=3, offset=2")
        expect_equal(self.ids(TaskQuery(limit=0)), [], "limit=0")
        expect_equal(self.ids(TaskQuery(offset=6)), [], "offset at the end")
        expect_equal(self.ids(TaskQuery(offset=60, limit=5)), [], "offset past the end")
        expect_equal(self.ids(TaskQuery(limit=100)), order, "limit larger than the result")
        expect_equal(
            self.ids(TaskQuery(limit=2, offset=1, newest_first=True)),
            list(reversed(order))[1:3],
            "limit=2, offset=1, newest_first=True",
        )

    def test_query_paging_applies_after_filtering(self) -> None:
        self.populate()
        expect_equal(
            self.ids(TaskQuery(statuses=frozenset({_S.QUEUED, _S.BLOCKED}), limit=1, offset=1)),
            ["k-node"],
            "second queued-or-blocked task",
        )

    # ------------------------------------------------------------------ filters
    def test_query_by_statuses(self) -> None:
        self.populate()
        expect_equal(
            self.ids(TaskQuery(statuses=frozenset({_S.QUEUED}))),
            ["c-同步", "b-load"],
            "statuses={queued}",
        )
        expect_equal(
            self.ids(TaskQuery(statuses=frozenset({_S.SUCCEEDED, _S.FAILED, _S.RUNNING}))),
            ["a-sync", "z-report", "m-extract"],
            "statuses={succeeded, failed, running}",
        )
        expect_equal(
            self.ids(TaskQuery(statuses=frozenset({_S.LOST}))), [], "statuses={lost} (none)"
        )

    def test_query_with_empty_collections_matches_nothing(self) -> None:
        self.populate()
        expect_equal(self.ids(TaskQuery(statuses=frozenset())), [], "statuses=frozenset()")
        expect_equal(self.ids(TaskQuery(buckets=frozenset())), [], "buckets=frozenset()")
        expect_equal(self.ids(TaskQuery(task_ids=frozenset())), [], "task_ids=frozenset()")
        expect_equal(
            self.store.status_counts(TaskQuery(task_ids=frozenset())),
            {},
            "status_counts(task_ids=frozenset())",
        )

    def test_query_by_name_prefix(self) -> None:
        self.populate()
        expect_equal(
            self.ids(TaskQuery(name_prefix="etl.")),
            ["k-node", "b-load", "m-extract"],
            "name_prefix='etl.'",
        )
        expect_equal(self.ids(TaskQuery(name_prefix="同步")), ["c-同步"], "name_prefix='同步'")
        expect_equal(self.ids(TaskQuery(name_prefix="ETL.")), [], "name_prefix is case-sensitive")
        expect_equal(self.ids(TaskQuery(name_prefix="load")), [], "a prefix, not a substring")

    def test_query_name_prefix_treats_wildcards_literally(self) -> None:
        for task_id, name in [("a", "etl_x"), ("b", "etlXx"), ("c", "100%done"), ("d", "100xdone")]:
            self.stored(task_id, name=name)
        expect_equal(self.ids(TaskQuery(name_prefix="etl_")), ["a"], "name_prefix='etl_'")
        expect_equal(self.ids(TaskQuery(name_prefix="100%")), ["c"], "name_prefix='100%'")
        expect_equal(self.ids(TaskQuery(name_prefix="%")), [], "name_prefix='%'")
        expect_equal(self.ids(TaskQuery(name_prefix="_")), [], "name_prefix='_'")

    def test_query_by_tag_matches_whole_tags(self) -> None:
        self.populate()
        expect_equal(self.ids(TaskQuery(tag="io")), ["b-load"], "tag='io' (not 'io-heavy')")
        expect_equal(self.ids(TaskQuery(tag="io-heavy")), ["a-sync"], "tag='io-heavy'")
        expect_equal(self.ids(TaskQuery(tag="数据")), ["b-load"], "tag='数据'")
        expect_equal(self.ids(TaskQuery(tag="i")), [], "tag='i' (a fragment)")

    def test_query_by_bucket_and_buckets(self) -> None:
        self.populate()
        expect_equal(self.ids(TaskQuery(bucket=0)), ["m-extract"], "bucket=0 (zero is a bucket)")
        expect_equal(self.ids(TaskQuery(bucket=1)), ["z-report", "b-load"], "bucket=1")
        expect_equal(self.ids(TaskQuery(bucket=9)), [], "bucket=9")
        expect_equal(
            self.ids(TaskQuery(buckets=frozenset({0, 2}))),
            ["k-node", "m-extract"],
            "buckets={0, 2}",
        )

    def test_query_by_task_ids(self) -> None:
        self.populate()
        expect_equal(
            self.ids(TaskQuery(task_ids=frozenset({"m-extract", "c-同步", "unknown"}))),
            ["c-同步", "m-extract"],
            "task_ids (in creation order, unknown ids ignored)",
        )

    def test_query_by_pipeline_id(self) -> None:
        self.populate()
        expect_equal(self.ids(TaskQuery(pipeline_id="p1")), ["k-node"], "pipeline_id='p1'")
        expect_equal(self.ids(TaskQuery(pipeline_id="p2")), [], "pipeline_id='p2'")

    def test_query_by_lease_owner(self) -> None:
        for task_id in ("a", "b", "c"):
            self.stored(task_id, _S.RUNNING)
        until = BASE_TIME + timedelta(minutes=5)
        self.store.touch("a", lease_owner="node-1", lease_until=until)
        self.store.touch("c", lease_owner="node-2", lease_until=until)
        expect_equal(self.ids(TaskQuery(lease_owner="node-1")), ["a"], "lease_owner='node-1'")
        expect_equal(self.ids(TaskQuery(lease_owner="node")), [], "lease_owner is exact")

    def test_query_lease_expired_before_includes_tasks_without_a_lease(self) -> None:
        for task_id in ("none", "early", "exact", "late"):
            self.stored(task_id, _S.RUNNING)
        cutoff = BASE_TIME + timedelta(minutes=10)
        self.store.touch("early", lease_owner="n", lease_until=cutoff - timedelta(seconds=1))
        self.store.touch("exact", lease_owner="n", lease_until=cutoff)
        self.store.touch("late", lease_owner="n", lease_until=cutoff + timedelta(seconds=1))
        expect_equal(
            self.ids(TaskQuery(lease_expired_before=cutoff)),
            ["none", "early"],
            "lease_expired_before (no lease, or a lease ending strictly before)",
        )

    def test_query_lease_expired_before_compares_instants_across_offsets(self) -> None:
        self.stored("east", _S.RUNNING)
        self.stored("west", _S.RUNNING)
        east = timezone(timedelta(hours=8))
        west = timezone(timedelta(hours=-5))
        # 09:00+08:00 is 01:00Z; 22:00-05:00 (previous day) is 03:00Z.
        self.store.touch(
            "east", lease_owner="n", lease_until=BASE_TIME.replace(hour=9, tzinfo=east)
        )
        self.store.touch(
            "west",
            lease_owner="n",
            lease_until=(BASE_TIME - timedelta(days=1)).replace(hour=22, tzinfo=west),
        )
        cutoff = BASE_TIME.replace(hour=2)
        expect_equal(
            self.ids(TaskQuery(lease_expired_before=cutoff)),
            ["east"],
            "lease_expired_before=02:00Z against leases at 01:00Z (+08:00) and 03:00Z (-05:00)",
        )

    def test_query_search_is_case_insensitive_over_id_name_and_label(self) -> None:
        self.populate()
        expect_equal(self.ids(TaskQuery(search="REPORT")), ["z-report"], "search='REPORT'")
        expect_equal(self.ids(TaskQuery(search="daily")), ["z-report"], "search='daily' (label)")
        expect_equal(
            self.ids(TaskQuery(search="Etl")),
            ["k-node", "b-load", "m-extract"],
            "search='Etl' (name)",
        )
        expect_equal(self.ids(TaskQuery(search="-SYNC")), ["a-sync"], "search='-SYNC' (id)")
        expect_equal(self.ids(TaskQuery(search="同步")), ["c-同步"], "search='同步' (CJK)")
        expect_equal(self.ids(TaskQuery(search="租户a")), ["c-同步"], "search='租户a' (label)")
        expect_equal(self.ids(TaskQuery(search="nothing")), [], "search='nothing'")

    def test_query_search_treats_wildcards_literally(self) -> None:
        self.stored("a", name="job", label="50% done")
        self.stored("b", name="job", label="500 done")
        self.stored("c", name="snake_case")
        self.stored("d", name="snakeXcase")
        expect_equal(self.ids(TaskQuery(search="0%")), ["a"], "search='0%'")
        expect_equal(self.ids(TaskQuery(search="e_c")), ["c"], "search='e_c'")
        expect_equal(self.ids(TaskQuery(search="%")), ["a"], "search='%'")

    def test_query_search_folds_non_ascii_case(self) -> None:
        self.stored("a", name="job", label="ÄRGER über Ölpreise")
        self.stored("b", name="ΣΟΦΙΑ")
        expect_equal(self.ids(TaskQuery(search="ärger")), ["a"], "search='ärger'")
        expect_equal(self.ids(TaskQuery(search="ÜBER")), ["a"], "search='ÜBER'")
        expect_equal(self.ids(TaskQuery(search="σοφ")), ["b"], "search='σοφ'")

    def test_query_combines_filters(self) -> None:
        self.populate()
        query = TaskQuery(
            statuses=frozenset({_S.QUEUED, _S.RUNNING, _S.BLOCKED}),
            name_prefix="etl.",
            buckets=frozenset({1, 2}),
        )
        expect_equal(self.ids(query), ["k-node", "b-load"], "statuses + name_prefix + buckets")
        expect_equal(
            self.ids(TaskQuery(tag="io", bucket=2)), [], "tag='io' and bucket=2 (no such task)"
        )

    # ------------------------------------------------------------------ counts
    def test_status_counts(self) -> None:
        self.populate()
        expect_equal(
            self.store.status_counts(),
            {_S.RUNNING: 1, _S.QUEUED: 2, _S.SUCCEEDED: 1, _S.FAILED: 1, _S.BLOCKED: 1},
            "status_counts() (statuses with no task absent)",
        )
        counts = self.store.status_counts(TaskQuery(name_prefix="etl."))
        expect_equal(
            counts,
            {_S.RUNNING: 1, _S.QUEUED: 1, _S.BLOCKED: 1},
            "status_counts(name_prefix='etl.')",
        )
        expect_equal(
            {type(k) for k in counts}, {TaskStatus}, "status_counts() keys are TaskStatus members"
        )

    def test_status_counts_ignore_limit_and_offset(self) -> None:
        self.populate()
        expect_equal(
            sum(self.store.status_counts(TaskQuery(limit=1, offset=2)).values()),
            6,
            "tasks counted by status_counts(limit=1, offset=2)",
        )

    def test_bucket_counts(self) -> None:
        self.populate()
        expect_equal(
            self.store.bucket_counts(),
            {0: 1, 1: 2, 2: 1},
            "bucket_counts() (tasks without a bucket not counted)",
        )
        expect_equal(
            self.store.bucket_counts(TaskQuery(statuses=frozenset({_S.QUEUED}))),
            {1: 1},
            "bucket_counts(statuses={queued})",
        )
        expect_equal(
            self.store.bucket_counts(TaskQuery(limit=1, offset=5)),
            {0: 1, 1: 2, 2: 1},
            "bucket_counts() ignores limit and offset",
        )
        expect_equal(
            self.store.bucket_counts(TaskQuery(bucket=7)), {}, "bucket_counts(bucket=7) (empty)"
        )
