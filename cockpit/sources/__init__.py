"""I/O only: each source reads one kind of ledger and returns frozen totals."""
