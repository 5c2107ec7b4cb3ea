"""The six Lambda handlers: Powertools wiring of the functions onto the vhs package."""
