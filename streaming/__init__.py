"""The process: settings, Spark session, the Kafka source, the query, sinks, metrics, HTTP API, CLI."""
