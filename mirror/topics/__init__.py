"""Topic, partition and config sync: compute a plan (pure), then apply it."""
