"""The heartbeat connector: heartbeat emission and reading, and its Spark job."""
