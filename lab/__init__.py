"""A local, real Kafka for tests, the demo and benchmarks: jar lookup, broker launcher, scenarios."""
