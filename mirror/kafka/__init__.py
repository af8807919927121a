"""The librdkafka boundary: client factories, admin and group ops, wire formats, transactions,
fencing. It holds no connector logic and imports no component (pyproject's import-linter contract)."""
