"""The Spark pipeline: session, Kafka source, decode-and-pack, the stateful fold, sinks, recovery."""
