"""What every component of a flow reads and writes alike: the flow mark, Connect source offsets,
the offsets store read to its end, and the tail of a compacted internal topic."""
