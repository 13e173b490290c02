"""Driver-side reads of the cluster through a Kafka client (no Spark): log offsets, topic names, groups.

Beside the pipeline, below the application shell: the shell schedules these reads and hands their
results to the serving side (lag, reconciliation), which never talks to Kafka itself.
"""
