"""Running one spec over many processes, GPUs and machines (docs/scale-out.md).

``units.py`` cuts a plan into work units (model, item shard) and runs one unit into its own
journal (no Ray needed, so it is what every worker runs); ``rayexec.py`` is the Ray driver:
schedules units as Ray tasks, merges their journals as they finish, runs the cross stage and
judge models after them, then scores and reports like a local run; ``progress.py`` prints the
driver's progress lines.
"""
