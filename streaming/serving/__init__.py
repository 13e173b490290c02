"""The Spark-free serving side: the driver's snapshot store, rendering, the HTTP API, metrics."""
