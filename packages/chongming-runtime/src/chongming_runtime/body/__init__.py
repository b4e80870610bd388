"""What a task body sees: its context (`RuntimeContext`), its cooperative control flags, the
artifact folder of its attempt, `run_command`, and the checks on what it returns.

Internal: import the public names from `chongming_runtime`.
"""
