"""One command's session: the store, the node options and the `Controller` built from them."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from chongming_cli._exit import CliError
from chongming_cli._numbers import whole_number
from chongming_cli._stores import StoreLocation, open_store, resolve_location
from chongming_core import parse_bucket_spec
from chongming_runtime import Controller

__all__ = ["NodeOptions", "make_controller", "open_controller", "resolve_node"]


@dataclass(frozen=True, slots=True)
class NodeOptions:
    """The node options of a command line, after the environment filled the gaps.

    `owned_spec` keeps the text of the owned buckets, so that a suggested command can
    pass them on as the user wrote them.
    """

    location: StoreLocation
    num_buckets: int | None
    owned_buckets: frozenset[int] | None
    owner: str | None
    owned_spec: str | None = None


def _option(args: argparse.Namespace, name: str, env: Mapping[str, str], var: str) -> str | None:
    value = getattr(args, name, None)
    if value is not None:
        return str(value)
    return env.get(var) or None


def resolve_node(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> NodeOptions:
    """Options first, then ``CHONGMING_*`` environment variables, then the defaults."""
    env = os.environ if environ is None else environ
    location = resolve_location(getattr(args, "db", None), getattr(args, "dsn", None), env)
    num_text = _option(args, "num_buckets", env, "CHONGMING_NUM_BUCKETS")
    num_buckets = None
    if num_text is not None:
        try:
            num_buckets = whole_number(num_text)
        except ValueError:
            raise CliError(
                f"--num-buckets (or CHONGMING_NUM_BUCKETS) must be a whole number, got {num_text!r}"
            ) from None
        if num_buckets > 2**63:  # stores keep a bucket as a 64-bit integer
            raise CliError(
                f"--num-buckets (or CHONGMING_NUM_BUCKETS) {num_buckets} is too large: stores "
                f"keep a bucket as a 64-bit integer, so at most {2**63} (the default, 64, "
                "suits most deployments)"
            )
    owned_text = _option(args, "owned_buckets", env, "CHONGMING_OWNED_BUCKETS")
    owned = None if owned_text is None else parse_bucket_spec(owned_text)
    owner = _option(args, "owner", env, "CHONGMING_OWNER")
    return NodeOptions(location, num_buckets, owned, owner, owned_text)


def make_controller(
    node: NodeOptions, *, create: bool = False, noted: Callable[[str], None] | None = None
) -> Controller:
    """A `Controller` on the node's store (the store is closed again if that fails); with
    `noted`, a store it had to create is named there (see `open_store`)."""
    store = open_store(node.location, create=create, noted=noted)
    try:
        return Controller(
            store=store,
            owner=node.owner,
            num_buckets=node.num_buckets,
            owned_buckets=node.owned_buckets,
        )
    except BaseException:
        store.close()
        raise


@contextmanager
def open_controller(
    node: NodeOptions, *, create: bool = False, noted: Callable[[str], None] | None = None
) -> Iterator[Controller]:
    """`make_controller`, closed (with its store) on the way out."""
    controller = make_controller(node, create=create, noted=noted)
    try:
        yield controller
    finally:
        controller.close(close_store=True)
