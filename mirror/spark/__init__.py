"""Spark wiring: the session, the ticks source and round query the connectors share, the daemon."""
