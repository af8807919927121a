"""The cutover's verify step says what it compared, and fails on anything else."""

from __future__ import annotations

import pytest

from mirror.errors import MigrationStepError
from mirror.migrate.cutover import verify_outcome
from mirror.verify.compare import PartitionDiff
from mirror.verify.job import FlowReport, PartitionReport


def _report(*parts: PartitionReport) -> FlowReport:
    return FlowReport("A->B", list(parts))


def test_a_clean_copy_is_counted_in_records_and_partitions() -> None:
    report = _report(
        PartitionReport("orders", 0, "A.orders", records=10),
        PartitionReport("orders", 1, "A.orders", records=5),
    )
    assert verify_outcome(report) == "15 records in 2 partitions equal their source"


def test_records_before_the_oldest_offset_sync_are_said_not_to_be_compared() -> None:
    report = _report(
        PartitionReport("orders", 0, "A.orders", records=10, unverified=40),
        PartitionReport("orders", 1, "A.orders", records=5, unverified=2),
    )
    line = verify_outcome(report)
    assert (
        line == "15 records in 2 partitions equal their source; "
        "42 source offsets before the oldest offset sync, not compared"
    )


@pytest.mark.parametrize(
    ("part", "named"),
    [
        (
            PartitionReport("orders", 0, "A.orders", records=9, diff=PartitionDiff(compared=10, missing=1)),
            "1 missing",
        ),
        (PartitionReport("orders", 0, "A.orders", records=10, extra_after=3), "3 extra"),
        (PartitionReport("orders", 0, "A.orders", skipped="no offset sync yet"), "1 partitions not compared"),
        (PartitionReport("orders", 0, "A.orders", records=10, not_yet_copied=7), "7 not copied yet"),
    ],
)
def test_a_difference_an_uncompared_partition_or_a_record_not_yet_copied_fails_the_step(
    part: PartitionReport, named: str
) -> None:
    with pytest.raises(MigrationStepError) as failure:
        verify_outcome(_report(part))
    assert named in str(failure.value)
    assert "mirror verify --flow 'A->B'" in str(failure.value)
