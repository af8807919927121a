"""bench.loop_cost drives the packing producer's loop path to the end: every batch drained,
requested, answered and reported without error, else it stops rather than report a time."""

from __future__ import annotations

import asyncio

from bench.loop_cost import _measure


def test_the_loop_cost_bench_answers_every_record_of_every_transaction() -> None:
    spent = asyncio.run(_measure(topics=3, partitions=4, transactions_count=2))
    assert len(spent) == 2
    assert all(seconds >= 0 for seconds in spent)  # records failed would have stopped it (SystemExit)
