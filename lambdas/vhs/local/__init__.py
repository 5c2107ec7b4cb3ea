"""The local stack: VHS on moto's server on 127.0.0.1, never in the Lambda asset."""
