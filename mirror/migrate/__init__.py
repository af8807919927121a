"""`mirror migrate`: move consumers and producers onto a flow's target, resumably, in one command."""
