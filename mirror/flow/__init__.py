"""What every component of a flow reads and writes alike: the flow mark and the owner check made
after a fence, Connect source offsets, the offsets store read to its end, and the tail of a
compacted internal topic."""
