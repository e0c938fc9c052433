"""The Apache Kafka fixtures of tests/kafka, declared once for the folder.

A session fixture imported into several test modules is a fixture of each module, and pytest
keeps one instance per definition: four modules importing `apache_kafka` started four brokers
per worker. Declared here, it is one broker per worker for every module below; tests keep to
topics and consumer groups of their own names.
"""

from kafka_server import apache_kafka, own_apache_kafka  # noqa: F401 - the fixtures
