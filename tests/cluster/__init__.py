"""The cluster tier: the whole stack on a real Valkey Cluster (marker ``cluster``,
``make test-cluster``)."""
