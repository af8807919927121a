"""Everything that talks to Kafka; the only package that imports confluent_kafka."""
