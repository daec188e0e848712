"""Choosing what is kept: scores, cuts, the policies, the ledger, the walk."""
