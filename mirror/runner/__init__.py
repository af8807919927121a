"""`mirror run`: start every enabled flow's connectors on one Spark session, supervise them, stop cleanly."""
