"""The local stack: VHS on moto's server on 127.0.0.1, the embedded default.

stack.py (the stack and its environments), motoserver.py (moto with atomic DynamoDB requests),
event_source.py (what the emulated event sources share), sqs_source.py and stream_source.py
(Lambda's SQS and DynamoDB Streams pollers, and the local pipeline and change feed),
stream_failures.py, function_logs.py, alarms.py (the DLQ alarm, evaluated), invoke.py
(`vhs invoke`), demo.py (`make demo`), metering.py (request counts). None of it ships to Lambda.
"""
