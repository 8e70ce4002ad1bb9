"""Tests of memoria_cli. A package so that its test modules may share basenames with other
suites (tests/integration/test_supervisor.py) under pytest's default import mode."""
