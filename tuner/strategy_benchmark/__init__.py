"""Strategy benchmark: replay recorded landscapes through the optimizer contract, score the runs."""
