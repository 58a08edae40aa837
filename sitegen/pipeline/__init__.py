"""The build: a plan of what to reuse and what to draw, the stages that carry it out in order,
the jobs the executors run, and the no-change fast path (:mod:`sitegen.pipeline.stamp`)."""
