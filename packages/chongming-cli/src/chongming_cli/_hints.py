"""The commands the console suggests ("check it with: ..."), ready to paste.

A hint names the store and the buckets of the command line that printed it,
wherever they came from (options or the environment), so it reaches the same
tasks when pasted into another terminal; see `store_words` for DSNs that hold a
password.
"""

from __future__ import annotations

from chongming_cli._encoding import shell_word
from chongming_cli._session import NodeOptions
from chongming_cli._stores import store_words

__all__ = ["PROG", "suggest"]

PROG = "chongming-task"


def suggest(node: NodeOptions, *words: str) -> str:
    """``chongming-task <store and bucket options> WORDS``, every word quoted for a POSIX
    shell (`shell_word`: a task id is stored text, maybe with bytes no printable form carries)."""
    options = store_words(node.location)
    if node.num_buckets is not None:
        options += ["--num-buckets", str(node.num_buckets)]
    if node.owned_spec is not None:
        options += ["--owned-buckets", shell_word(node.owned_spec)]
    return " ".join([PROG, *options, *(shell_word(w) for w in words)])
