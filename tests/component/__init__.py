"""Tests on real Valkey, milvus-lite, SQLite and short-lived processes, without the service
stack. A package so that its subpackages (cli, runtime, ...) do not clash with the same-named
packages of tests/unit under pytest's default import mode."""
