"""`decode eval`: a task file run through the real pipeline and sandbox, each task's check run before
(validity) and after (resolved), and a summary; `--from-history` makes a task file from a repository's
merged pull requests. The door is bot/cli/eval.py; docs/eval.md says how to use it.

tasks (reading a task file), runner (one task), summary (results.jsonl, the table, the last lines),
history (tasks from merged pull requests, through the GitHub edge).
"""
