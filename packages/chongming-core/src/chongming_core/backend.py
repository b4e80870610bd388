"""The parts every `TaskStore` backend shares, for authors of a new one.

A backend (`SqliteTaskStore`, `PostgresTaskStore`, `InMemoryTaskStore`, or one of
your own) lays records out in its own way, but what it must agree on with the
others lives here, so that every store behaves and words its answers alike:

Archive and prune
    `write_jsonl` appends transitions to an archive file (JSON Lines, fsynced, a
    new file owner-only); `validate_keep_terminal` checks `prune`'s argument.

Times
    `format_time` and `parse_time`: a timezone-aware datetime to ISO-8601 text
    and back, to the microsecond, offset included.

Conflicts
    `version_conflict` builds the `ConcurrencyConflict` of a create or save that
    was not applied, with the message every store gives.

Command rows
    `COMMAND_COLUMNS` names a command row's columns in order; `read_command_row`
    and `read_command` decode one whatever it holds (a bad row becomes a
    `Command` whose ``problem`` says what is wrong); a value the driver could not
    load at all is passed as an `Undecodable`.

Task and history rows
    `decode_row` turns one row into its record or an `UnreadableRow` naming the
    task and what is wrong; a listing returns `Listing` (and a count `Counts`)
    carrying those rows. The field readers (`read_choice`, `read_list`,
    `read_text_set`, `read_failure`, `read_attempts`, `read_progress`) check a
    stored value and raise `ValueError` naming the field; `shown` quotes a bad
    value in a message, cut short; `stored_id` renders a stored task id that may
    not be text.

Values a store can keep
    `portable_json` refuses (or converts) an outcome not every store can keep and
    every reader get back; `progress_problem` and `number_problem` do the same for
    progress; `MAX_DEPTH` and `MAX_INT_DIGITS` are the limits they apply;
    `safe_repr` renders any value for a message without failing.

Durable work
    `choose_claims` applies a `ClaimRequest`'s room to the candidates a store found
    (`claimable`), `claim_writes` the write that leases (or starts) each chosen task,
    and `claim_tags` the tags a claimed task holds (the claimant's
    registered tags when it was enqueued with none: the store writes them with the
    lease), `holds_fleet_slot` says which tasks count against a fleet limit,
    `FLEET_STATUSES` the statuses that always do, `lease_is_live` when a lease holds,
    `wakes_workers` which writes wake waiting workers, `arguments_problem` why a
    store cannot keep a task's arguments; `WakeUp` and `ChangeSignals` are the
    in-process wake-ups of a store without a notification channel.

Everything here is public and stable; the private modules behind it are not.
"""

from __future__ import annotations

from chongming_core._arguments import arguments_problem as arguments_problem
from chongming_core._command_row import COMMAND_COLUMNS as COMMAND_COLUMNS
from chongming_core._command_row import Undecodable as Undecodable
from chongming_core._command_row import read_command as read_command
from chongming_core._command_row import read_command_row as read_command_row
from chongming_core._conflicts import version_conflict as version_conflict
from chongming_core._decoding import read_choice as read_choice
from chongming_core._decoding import read_list as read_list
from chongming_core._decoding import read_text_set as read_text_set
from chongming_core._decoding import shown as shown
from chongming_core._failure import read_failure as read_failure
from chongming_core._json import MAX_DEPTH as MAX_DEPTH
from chongming_core._json import MAX_INT_DIGITS as MAX_INT_DIGITS
from chongming_core._json import number_problem as number_problem
from chongming_core._json import portable_json as portable_json
from chongming_core._json import progress_problem as progress_problem
from chongming_core._json import safe_repr as safe_repr
from chongming_core._records import format_time as format_time
from chongming_core._records import parse_time as parse_time
from chongming_core._records import read_attempts as read_attempts
from chongming_core._records import read_progress as read_progress
from chongming_core._store import validate_keep_terminal as validate_keep_terminal
from chongming_core._store import write_jsonl as write_jsonl
from chongming_core._unreadable import Counts as Counts
from chongming_core._unreadable import Listing as Listing
from chongming_core._unreadable import UnreadableRow as UnreadableRow
from chongming_core._unreadable import decode_row as decode_row
from chongming_core._unreadable import stored_id as stored_id
from chongming_core._work import FLEET_STATUSES as FLEET_STATUSES
from chongming_core._work import ChangeSignals as ChangeSignals
from chongming_core._work import WakeUp as WakeUp
from chongming_core._work import choose_claims as choose_claims
from chongming_core._work import claim_tags as claim_tags
from chongming_core._work import claim_writes as claim_writes
from chongming_core._work import claimable as claimable
from chongming_core._work import holds_fleet_slot as holds_fleet_slot
from chongming_core._work import lease_is_live as lease_is_live
from chongming_core._work import wakes_workers as wakes_workers

__all__ = [
    "COMMAND_COLUMNS",
    "FLEET_STATUSES",
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "ChangeSignals",
    "Counts",
    "Listing",
    "Undecodable",
    "UnreadableRow",
    "WakeUp",
    "arguments_problem",
    "choose_claims",
    "claim_tags",
    "claim_writes",
    "claimable",
    "decode_row",
    "format_time",
    "holds_fleet_slot",
    "lease_is_live",
    "number_problem",
    "parse_time",
    "portable_json",
    "progress_problem",
    "read_attempts",
    "read_choice",
    "read_command",
    "read_command_row",
    "read_failure",
    "read_list",
    "read_progress",
    "read_text_set",
    "safe_repr",
    "shown",
    "stored_id",
    "validate_keep_terminal",
    "version_conflict",
    "wakes_workers",
    "write_jsonl",
]
