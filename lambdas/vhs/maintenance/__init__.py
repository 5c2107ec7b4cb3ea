"""Maintenance: gc.py (collect bodies nothing references) and verify.py (check every retained
pointer; findings.py is what it reports)."""
