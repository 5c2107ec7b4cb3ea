"""Maintenance in Lambda: the garbage collector and its delete fence."""
