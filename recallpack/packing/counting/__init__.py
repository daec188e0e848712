"""Counting in tokens (beside tokenizers/ and encodings/): token windows, budget_for."""
