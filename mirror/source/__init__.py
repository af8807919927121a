"""The source connector: copy-task assignment, the copy task, OffsetSync emission, its Spark job."""
