"""`mirror verify`: compare what a flow copied with its source, record by record, in bounded memory."""
