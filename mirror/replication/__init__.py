"""The source component: what to copy, how a range is planned, and the Spark job that copies it."""
