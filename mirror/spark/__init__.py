"""Spark wiring: the session, the Python data source that plans offset ranges."""
