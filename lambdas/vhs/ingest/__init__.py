"""Ingest: what producers put on the queue, and how it becomes a store write or a dead letter.

contract.py (the message, read and validated once), strict_json.py (I-JSON), staging.py (staged
bodies and claim checks), ingestor.py (one message to one write, or one dead letter),
deadletter.py (the reason on a dead letter, written and read), producer.py (sending), dlq.py
(reading and redriving the dead-letter queue).
"""
