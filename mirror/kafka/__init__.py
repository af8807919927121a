"""The client boundary: client factories, admin ops, wire formats, offsets store, transactions."""
