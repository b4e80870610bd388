"""Which buckets a node owns (guide §8.8, §8.14), and the submit-time check that follows from it."""

from __future__ import annotations

from collections.abc import Iterable

from chongming_core import BucketPolicy, ConfigurationError

__all__ = ["BucketOwnership", "describe_buckets"]


def describe_buckets(buckets: Iterable[int]) -> str:
    """``[0, 1, ..., 15]`` for one long run, else runs like ``[0-15, 32]``."""
    ordered = sorted(set(buckets))
    if not ordered:
        return "[]"
    runs: list[tuple[int, int]] = []
    start = prev = ordered[0]
    for b in ordered[1:]:
        if b == prev + 1:
            prev = b
            continue
        runs.append((start, prev))
        start = prev = b
    runs.append((start, prev))
    if len(runs) == 1:
        low, high = runs[0]
        if high - low >= 3:
            return f"[{low}, {low + 1}, ..., {high}]"
        return "[" + ", ".join(str(b) for b in range(low, high + 1)) + "]"
    return "[" + ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs) + "]"


class BucketOwnership:
    """The buckets this node is responsible for; None means "not restricted"."""

    def __init__(self, policy: BucketPolicy, owned: Iterable[int] | None) -> None:
        self.policy = policy
        if owned is None:
            self.owned: frozenset[int] | None = None
        else:
            if isinstance(owned, str | bytes):
                raise ConfigurationError(
                    f"owned_buckets takes bucket numbers (e.g. range(0, 16)), got {owned!r}; "
                    "parse a spec like '0-15,32' with parse_bucket_spec()"
                )
            buckets = frozenset(owned)
            if not buckets:
                raise ConfigurationError(
                    "owned_buckets is empty: this node would own nothing and run nothing; "
                    "pass None to own every bucket"
                )
            for bucket in buckets:
                if isinstance(bucket, bool) or not isinstance(bucket, int):
                    raise ConfigurationError(f"owned_buckets holds a non-integer: {bucket!r}")
                if not 0 <= bucket < policy.num_buckets:
                    raise ConfigurationError(
                        f"owned bucket {bucket} is out of range: with num_buckets="
                        f"{policy.num_buckets} buckets are 0..{policy.num_buckets - 1}; a task "
                        "in a bucket nobody can own would queue forever"
                    )
            self.owned = buckets

    @property
    def owns_all_buckets(self) -> bool:
        """True when ownership is not a partition: unrestricted, or every bucket listed."""
        return self.owned is None or len(self.owned) == self.policy.num_buckets

    @property
    def is_partial(self) -> bool:
        """True when some buckets belong to other nodes."""
        return not self.owns_all_buckets

    def owns_bucket(self, bucket: int | None) -> bool:
        """Whether `bucket` is this node's (a task without a bucket is, when not partial)."""
        if bucket is None:
            return self.owns_all_buckets
        return self.owned is None or bucket in self.owned

    def query_buckets(self) -> frozenset[int] | None:
        """The bucket filter for queries about "my tasks" (None: no filter)."""
        return None if self.owns_all_buckets else self.owned

    def bucket_for_submit(self, bucket_key: str | None) -> int | None:
        """The bucket of a new task, refusing keys that land in another node's bucket (R13)."""
        if bucket_key is None:
            if self.is_partial:
                raise ConfigurationError(
                    "bucket_key is required on this node: it owns only buckets "
                    f"{describe_buckets(self.owned or ())}, and a task without a bucket is "
                    "claimed by no node, so it would stay queued forever; pass bucket_key=..."
                )
            return None
        bucket = self.policy.bucket_for(bucket_key)
        if not self.owns_bucket(bucket):
            raise ConfigurationError(
                f"bucket {bucket} (from bucket_key={bucket_key!r}) does not belong to this node; "
                f"this node owns {describe_buckets(self.owned or ())}. A task written into "
                "another node's bucket is run by no node: submit it on the node that owns "
                f"bucket {bucket}"
            )
        return bucket
