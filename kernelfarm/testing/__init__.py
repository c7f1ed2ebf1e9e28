"""Test harness shared by the test suite and the benchmarks (in the spirit of ``celery.contrib.testing``).

It starts farms of real processes on servers it owns (:mod:`kernelfarm.testing.chaos_farm`), installs an
independent witness of trial state changes (:mod:`kernelfarm.testing.audit`), runs the chaos job
(:mod:`kernelfarm.testing.chaos`), names the shipped recordings and the fast clocks the tests use
(:mod:`kernelfarm.testing.recordings`, :mod:`kernelfarm.testing.clocks`), and writes decoy packages that
prove components ignore their working directory (:mod:`kernelfarm.testing.decoys`).

The runtime (API, coordinator, workers, CLI) never imports this package; it ships in the wheel so that
tests and benchmarks import it like any other installed module, never from the repository's folders.
"""
